"""TTS text: a SentencePiece tokenizer and the text-id job of a shard.

* :func:`train_tokenizer`: the real SentencePiece trainer (BPE) on the corpus'
  normalised transcripts (rule ``tts_tokenizer``: :func:`train_normalized_tokenizer`,
  on the spoken forms of :mod:`.normalize`).
* :func:`run_text` (rule ``tts_text``): int32 ids of each accepted segment's
  ``text_normalized`` (the spoken form when ``tts.normalize`` is on), and with
  ``tts.phonemes`` its phonemes and Piper's phoneme ids (:mod:`.phonemes`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..core.artifacts import Kind, Scratch
from ..core.language import segment_language
from ..core.shardjob import Accepted, Rejected, ShardJob
from ..errors import UsageError
from ..io.jsonio import read_jsonl
from ..io.npyio import check_layout
from .params import TextIdsParams
from .phonemes import Phonemizer

log = logging.getLogger("speechprep.tts")
STAGE = "tts"


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
    rejects_out: str,
    dirs: dict[str, str],
    p: TextIdsParams,
    normalized: Iterable[str] = (),
) -> dict[str, Any]:
    """int32 SentencePiece ids of every segment of a shard's features index, of its
    ``text_normalized``: from the shard's normalised text (``normalized``, rule
    ``tts_normalize``), else its ``text``; with ``p.phonemes``, its phonemes and Piper's
    phoneme ids too (:mod:`.phonemes`). The arrays go to ``dirs[kind]`` (``text_ids``,
    ``phoneme_ids``; ``<id>.npy`` each or all in ``packed.npy``: ``p.layout``). A segment
    the tokenizer gives no ids for is rejected ``no_text_ids``, one without phonemes
    ``no_phonemes`` (``rejects_out``)."""
    check_layout(p.layout)
    sp = load_tokenizer(tokenizer)
    normalized = list(normalized)
    spoken = {n["id"]: n for path in normalized for n in read_jsonl(path)}
    job = ShardJob(STAGE, index_path, None, {"tokenizer": tokenizer, **p.identity()}, "2")
    kinds = [Kind("text_ids", "int32"), *([Kind("phoneme_ids", "int32")] if p.phonemes else [])]
    scratch = Scratch(Path(dirs["text_ids"]).parent / f".{job.name}.text_ids", kinds)
    phonemizer = Phonemizer(p.phoneme_voices) if p.phonemes else None
    lengths: dict[str, dict[str, int]] = {}
    with job.running(job.todo()):
        for seg in job.items:
            n = spoken.get(seg["id"]) if normalized else {"text_normalized": seg["text"], "text_normalization": "off"}
            if n is None:
                raise UsageError(f"{seg['id']}: no normalised text in {', '.join(normalized)}: rerun tts_normalize")
            outcome = _text_arrays(seg, n, sp, phonemizer, p)
            if isinstance(outcome, Rejected):
                job.emit(seg, outcome)
                continue
            arrays, data = outcome
            for kind, a in arrays.items():
                scratch.save(kind, seg["id"], a)
            lengths[seg["id"]] = {f"{kind}_len": len(a) for kind, a in arrays.items()}
            job.emit(seg, Accepted(data))
    lines = [{"id": s["id"], **data, **dict.fromkeys(scratch.kinds), **lengths[s["id"]]} for s, data in job.accepted()]
    scratch.place(lines, {k: dirs[k] for k in scratch.kinds}, p.layout)
    for d in dirs.values():
        Path(d).mkdir(parents=True, exist_ok=True)  # the rule's outputs, with phonemes off too
    log.info("text ids of %d segments of %s (%s, %d pieces)", len(lines), index_path, tokenizer, sp.get_piece_size())
    counts = job.commit({index_out: lines}, rejects_out)
    scratch.clear()
    return counts


def _text_arrays(seg: dict, n: dict, sp, phonemizer: Phonemizer | None, p: TextIdsParams):
    """``(arrays by kind, line fields)`` of one segment's normalised text ``n``, or why it
    is :class:`Rejected`."""
    text = n["text_normalized"]
    ids = text_ids(sp, text)
    if len(ids) == 0:
        return Rejected("no_text_ids", f"the tokenizer gives no ids for {text!r}")
    data = {k: n[k] for k in ("text_normalized", "text_normalization")}
    if phonemizer is None:
        return {"text_ids": ids}, data
    language = segment_language(seg, p.dataset_language, p.default_language)
    phonemes = phonemizer.phonemes(text, language)
    if not "".join(phonemes).strip():
        return Rejected("no_phonemes", f"espeak-ng ({phonemizer.voice(language)}) gives no phonemes for {text!r}")
    return {"text_ids": ids, "phoneme_ids": phonemizer.ids(phonemes)}, {**data, "phonemes": "".join(phonemes)}


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
