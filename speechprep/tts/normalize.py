"""The normalise job of a shard (rule ``tts_normalize``): each transcript's ``text`` (the
light :class:`~speechprep.text.normalize.TextNormalizer` clean-up, as the features
index has it) and ``text_normalized`` (its spoken form, :mod:`speechprep.text.spoken`:
what the tokenizer is trained on and the text ids are computed from)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.language import declared_language, segment_language
from ..errors import UsageError
from ..io.jsonio import read_jsonl, write_jsonl
from ..text.normalize import TextNormalizer
from ..text.spoken import SpokenNormalizer
from .params import TextParams

log = logging.getLogger("speechprep.tts")


def grammar_dirs(p: TextParams, dirs: Iterable[str]) -> dict[str, str]:
    """Language -> its cache directory (named after the language), for ``tts.normalize_languages``."""
    by_name = {Path(d).name: d for d in dirs}
    if not p.normalize:
        return {}
    missing = [lang for lang in p.normalize_languages if lang not in by_name]
    if missing:
        raise UsageError(f"no grammar directory given for {', '.join(missing)} (tts.normalize_languages)")
    return {lang: by_name[lang] for lang in p.normalize_languages}


def run_normalize(segments_path: str, out_path: str, p: TextParams, grammars: Iterable[str] = ()) -> dict[str, Any]:
    """A shard's normalised text: per segment with a transcript, ``id``, ``text`` (cleaned
    as the features job cleans it, by its declared language: the same segments have text),
    ``text_normalized``, ``text_normalization`` (how) and ``language`` (the grammars', as
    ASR picks it: :func:`~speechprep.core.language.segment_language`). A segment without
    text has no line (the features job rejects it ``no_text``). Returns the counts."""
    clean = TextNormalizer(p.languages)
    spoken = SpokenNormalizer(grammar_dirs(p, grammars))
    lines = []
    for s in read_jsonl(segments_path):
        text = clean(s.get("text") or "", declared_language(s, p.dataset_language))  # as the features job
        if not text:
            continue
        lang = segment_language(s, p.dataset_language, p.default_language)
        if p.normalize:  # NeMo reads the cleaned transcript; the options (lowercase, strip_punct) come after
            said, how = spoken(clean.clean(s["text"]), lang, s["id"])
            said = clean(said, lang) or text
        else:
            said, how = text, "off"
        line = {"id": s["id"], "text": text, "text_normalized": said, "text_normalization": how}
        if lang:
            line["language"] = lang
        lines.append(line)
    write_jsonl(out_path, lines)
    counts = spoken.summary() if p.normalize else {"off": len(lines)}
    log.info("text normalisation of %d segments from %s: %s", len(lines), segments_path, counts)
    return counts
