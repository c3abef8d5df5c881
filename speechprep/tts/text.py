"""TTS text: normalisation, a SentencePiece tokenizer, the text-id job of a shard.

* :class:`TextNormalizer`: Unicode NFKC, typographic punctuation mapped to
  ASCII, whitespace collapsed, then per-language options (config
  ``tts.languages``): ``lowercase``, ``space_before_punct`` (French
  typography keeps a space before ``; : ! ?``), ``strip_punct``.
* :func:`train_tokenizer`: the real SentencePiece trainer (BPE) on the corpus'
  normalised transcripts (rule ``tts_tokenizer``: :func:`train_normalized_tokenizer`,
  on the spoken forms of :mod:`.spoken`).
* :func:`run_text` (rule ``tts_text``): int32 ids of each accepted segment's
  ``text_normalized`` (the spoken form when ``tts.normalize`` is on).
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..jsonio import read_jsonl, write_jsonl
from ..names import file_stem
from ..npyio import PACKED, check_layout, pack_npy, save_npy

log = logging.getLogger("speechprep.tts")

PUNCT_MAP = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u2032": "'",
        "\u00b4": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u2026": "...",
        "\u00a0": " ",
        "\u202f": " ",
        "\u2009": " ",
        "\u200b": "",
    }
)
_SPACE_BEFORE = re.compile(r"\s+([,.!?;:])")
_REPEAT = re.compile(r"([,!?;:])\1+")
_PUNCT = re.compile(r"[^\w\s']", re.UNICODE)

# Defaults per language (base code); anything else gets DEFAULT.
DEFAULT = {"lowercase": False, "space_before_punct": False, "strip_punct": False}
LANGUAGE_DEFAULTS = {"fr": {"space_before_punct": True}}


def base_language(language: str | None) -> str:
    return (language or "").split("-")[0].split("_")[0].lower()


@dataclass
class TextNormalizer:
    languages: dict[str, dict[str, Any]] = field(default_factory=dict)  # config tts.languages

    def options(self, language: str | None) -> dict[str, Any]:
        lang = base_language(language)
        return {**DEFAULT, **LANGUAGE_DEFAULTS.get(lang, {}), **self.languages.get(lang, {})}

    @staticmethod
    def clean(text: str) -> str:
        """The language-independent part: NFKC, ASCII punctuation, whitespace."""
        t = unicodedata.normalize("NFKC", text).translate(PUNCT_MAP)
        t = "".join(c for c in t if unicodedata.category(c)[0] != "C" or c in "\t\n")
        t = re.sub(r"\s+", " ", t).strip()
        return _REPEAT.sub(r"\1", t)

    def __call__(self, text: str, language: str | None = None) -> str:
        o = self.options(language)
        t = self.clean(text)
        if o["strip_punct"]:
            t = re.sub(r"\s+", " ", _PUNCT.sub(" ", t)).strip()
        elif not o["space_before_punct"]:
            t = _SPACE_BEFORE.sub(r"\1", t)
        if o["lowercase"]:
            t = t.lower()
        return t


def train_tokenizer(
    texts: Iterable[str], model_path: str | os.PathLike, vocab_size: int, model_type: str = "bpe"
) -> Path:
    """Train SentencePiece on ``texts`` (already normalised); writes ``model_path`` (+ ``.vocab``).

    Deterministic: the same texts give the same file, byte for byte (one training
    thread, a fixed sampling seed, and a fixed training prefix next to the model,
    which the model file records), so retraining on unchanged transcripts changes
    nothing downstream.
    """
    import sentencepiece as spm

    model_path = Path(model_path)
    model_path.parent.mkdir(parents=True, exist_ok=True)
    texts = [t for t in texts if t]
    if not texts:
        raise ValueError("no text to train a tokenizer on")
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(0)
    prefix = str(model_path) + ".training"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_prefix=prefix,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=1.0,
        hard_vocab_limit=False,
        input_sentence_size=2_000_000,
        shuffle_input_sentence=True,
        normalization_rule_name="identity",  # normalised by TextNormalizer already
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    os.replace(prefix + ".vocab", str(model_path.with_suffix(".vocab")))
    os.replace(prefix + ".model", str(model_path))
    return model_path


def load_tokenizer(model_path: str | os.PathLike):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(model_path))


def text_ids(sp, text: str) -> np.ndarray:
    return np.asarray(sp.encode(text, out_type=int), dtype=np.int32)


def run_text(
    index_path: str,
    tokenizer: str,
    index_out: str,
    ids_dir: str,
    normalized: Iterable[str] = (),
    layout: str = "files",
) -> int:
    """int32 SentencePiece ids of every accepted segment's ``text_normalized``: from the
    shard's normalised text (``normalized``, rule ``tts_normalize``), else its ``text``;
    ``ids_dir/<id>.npy`` each (``layout`` ``files``) or all in ``ids_dir/packed.npy``."""
    check_layout(layout)
    sp = load_tokenizer(tokenizer)
    normalized = list(normalized)
    spoken = {n["id"]: n for path in normalized for n in read_jsonl(path)}
    out = Path(ids_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    lines, arrays = [], []
    for seg in read_jsonl(index_path):
        n = spoken.get(seg["id"]) if normalized else {"text_normalized": seg["text"], "text_normalization": "off"}
        if n is None:
            raise UsageError(f"{seg['id']}: no normalised text in {', '.join(normalized)}: rerun tts_normalize")
        said = n["text_normalized"]
        ids = text_ids(sp, said)
        if len(ids) == 0:
            raise UsageError(f"{seg['id']}: tokenizer {tokenizer} gives no ids for {said!r}")
        dest = None  # packed below
        if layout == "files":
            dest = str(out / f"{file_stem(seg['id'])}.npy")
            save_npy(dest, ids)
        else:
            arrays.append(ids)
        lines.append(
            {
                "id": seg["id"],
                "text_normalized": said,
                "text_normalization": n["text_normalization"],
                "text_ids": dest,
                "text_ids_len": len(ids),
            }
        )
    if layout == "packed":
        for line, where in zip(lines, pack_npy(out / f"{PACKED}.npy", arrays, np.int32)):
            line["text_ids"] = where
    write_jsonl(index_out, lines)
    log.info(
        "text ids: %d segments from %s with %s (%d pieces)", len(lines), index_path, tokenizer, sp.get_piece_size()
    )
    return len(lines)


def train_normalized_tokenizer(normalized: list[str], vocab_size: int, model_out: str) -> None:
    """Train the tokenizer on the ``text_normalized`` of every shard of every dataset
    (rule ``tts_tokenizer``; the lines of rule ``tts_normalize``)."""
    texts = [t for path in normalized for n in read_jsonl(path) if (t := n["text_normalized"])]
    if not texts:
        raise UsageError(
            "no transcript has text: nothing to train the tokenizer on "
            "(set tts.tokenizer to an existing SentencePiece model)"
        )
    train_tokenizer(texts, model_out, vocab_size)
    sp = load_tokenizer(model_out)
    log.info(
        "tokenizer: %s (%d pieces, asked %d) from %d normalised transcripts",
        model_out,
        sp.get_piece_size(),
        vocab_size,
        len(texts),
    )
