"""Spoken-form text normalisation (``tts.normalize``), with nemo-text-processing.

Written forms (numbers, years, money, units, ordinals, times, dates,
abbreviations) become what a speaker says ("3 km" -> "three kilometers")
before the text is tokenized. NeMo's WFST grammars (pynini) do it, in their
deterministic mode (one verbalisation, the top rewrite): the same text gives
the same spoken form every time.

* :func:`build_grammars` (rule ``tts_grammars``): compiles a language's grammars
  once into ``resources/text_normalization/<lang>/`` (NeMo's ``.far`` cache).
* :class:`SpokenNormalizer`: loads them from there (never builds: a missing
  cache is an error, so a shard job does not spend half a minute compiling)
  and normalises a segment by its language. Languages without grammars pass
  through unchanged, counted per language; a segment whose normalisation raises
  (or gives nothing) keeps its text, counted as ``failed`` and logged with the
  exception: one odd transcript does not stop the shard.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.language import base_language
from ..errors import UsageError
from ..io.jsonio import write_json

log = logging.getLogger("speechprep.text")

# The languages nemo-text-processing 1.2.0 has text-normalisation grammars for.
SUPPORTED = ("ar", "de", "en", "es", "fr", "hi", "hu", "hy", "it", "ja", "ko", "pt", "ru", "rw", "sv", "vi", "zh")
INPUT_CASE = "cased"
INFO = "grammars.json"  # written last by build_grammars: the cache is complete


def _normalizer(lang: str, cache_dir: str | os.PathLike):
    from nemo_text_processing.text_normalization.normalize import Normalizer

    # its logger (set to INFO on import) notes every sentence it skips post-processing for
    logging.getLogger("NeMo-text-processing").setLevel(logging.WARNING)

    return Normalizer(
        input_case=INPUT_CASE, lang=lang, deterministic=True, cache_dir=str(cache_dir), overwrite_cache=False
    )


def build_grammars(lang: str, out_dir: str | os.PathLike) -> dict[str, Any]:
    """Compile ``lang``'s grammars into ``out_dir`` (emptied first) and write its ``grammars.json``."""
    if lang not in SUPPORTED:
        raise UsageError(f"nemo-text-processing has no text-normalisation grammars for {lang!r}")
    out = Path(out_dir)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    _normalizer(lang, out)
    seconds = round(time.perf_counter() - t0, 1)
    info = {
        "language": lang,
        "input_case": INPUT_CASE,
        "deterministic": True,
        "nemo_text_processing": importlib.metadata.version("nemo-text-processing"),
        "pynini": importlib.metadata.version("pynini"),
        "build_seconds": seconds,
        "files": sorted(p.name for p in out.glob("*.far")),
    }
    if not info["files"]:
        raise UsageError(f"building the {lang} grammars wrote no .far file into {out}")
    write_json(out / INFO, info, indent=2)
    log.info("%s grammars built in %.1f s into %s", lang, seconds, out)
    return info


def grammar_stamps(grammars: dict[str, str]) -> dict[str, str]:
    """Each language's built grammars as a stamp (:func:`~speechprep.io.modelfiles.tree_stamp`):
    a job's fingerprint changes when they are built again."""
    from ..io.modelfiles import tree_stamp

    return {lang: tree_stamp(d) for lang, d in sorted(grammars.items())}


@dataclass
class SpokenNormalizer:
    """Spoken form of a text by its language; ``grammars``: language -> built cache directory."""

    grammars: dict[str, str]
    counts: Counter = field(default_factory=Counter)
    passed_through: Counter = field(default_factory=Counter)  # language -> segments
    _loaded: dict[str, Any] = field(default_factory=dict)

    def normalizer(self, lang: str):
        if lang not in self._loaded:
            d = Path(self.grammars[lang])
            if not (d / INFO).is_file():
                raise UsageError(f"no built {lang} grammars in {d} (rule tts_grammars builds them)")
            t0 = time.perf_counter()
            self._loaded[lang] = _normalizer(lang, d)
            log.info("%s grammars loaded from %s in %.2f s", lang, d, time.perf_counter() - t0)
        return self._loaded[lang]

    def __call__(self, text: str, language: str | None, seg_id: str = "") -> tuple[str, str]:
        """``(spoken text, how)``: how is ``spoken``, ``passed_through`` (a language
        without grammars) or ``failed`` (the text unchanged)."""
        lang = base_language(language)
        if lang not in self.grammars:
            self.passed_through[lang or "unknown"] += 1
            self.counts["passed_through"] += 1
            return text, "passed_through"
        normalizer = self.normalizer(lang)
        if not text.strip():
            self.counts["spoken"] += 1
            return text, "spoken"
        try:
            out = normalizer.normalize(text, verbose=False, punct_post_process=True)
            if not isinstance(out, str) or not out.strip():
                raise ValueError(f"normalised to {out!r}")
        except Exception as e:  # noqa: BLE001 - any grammar failure: keep the text, count it
            self.counts["failed"] += 1
            log.warning("%s: text normalisation failed (%s: %s); kept the text %r", seg_id, type(e).__name__, e, text)
            return text, "failed"
        self.counts["spoken"] += 1
        return " ".join(out.split()), "spoken"

    def summary(self) -> dict[str, Any]:
        return {
            "spoken": self.counts["spoken"],
            "passed_through": self.counts["passed_through"],
            "failed": self.counts["failed"],
            "passed_through_by_language": dict(sorted(self.passed_through.items())),
        }
