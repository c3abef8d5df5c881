"""TTS text: a SentencePiece tokenizer and the text-id job of a shard.

* :func:`train_tokenizer`: the real SentencePiece trainer (BPE) on the corpus'
  normalised transcripts (rule ``tts_tokenizer``: :func:`train_normalized_tokenizer`,
  on the spoken forms of :mod:`.normalize`).
* :func:`run_text` (rule ``tts_text``): int32 ids of each accepted segment's
  ``text_normalized`` (the spoken form when ``tts.normalize`` is on), and with
  ``tts.phonemes`` its phonemes and Piper's phoneme ids (:mod:`.phonemes`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
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
from ..io.jsonio import atomic_open, read_jsonl
from ..io.modelfiles import sha256_file
from ..io.npyio import check_layout, load_npy, save_npy
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
    ``no_phonemes`` (``rejects_out``), or kept with empty phonemes (``p.no_phonemes``)."""
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
    if without := sum(line.get("phonemes") == "" for line in lines):
        log.warning("%d segments kept without phonemes (tts.no_phonemes: keep)", without)
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
        if p.no_phonemes == "keep":
            return {"text_ids": ids, "phoneme_ids": np.zeros(0, np.int32)}, {**data, "phonemes": ""}
        return Rejected("no_phonemes", f"espeak-ng ({phonemizer.voice(language)}) gives no phonemes for {text!r}")
    return {"text_ids": ids, "phoneme_ids": phonemizer.ids(phonemes)}, {**data, "phonemes": "".join(phonemes)}


def train_normalized_tokenizer(
    normalized: list[str],
    vocab_size: int,
    model_out: str,
    kept: str | os.PathLike | None = None,
    retrain: bool = False,
) -> None:
    """Train the tokenizer on the ``text_normalized`` of every shard of every dataset
    (rule ``tts_tokenizer``; the lines of rule ``tts_normalize``). With ``kept`` (a folder
    that outlives the job's reruns), a tokenizer trained earlier with the same ``vocab_size``
    is written again, byte for byte, while every shard it was trained on that is still an
    input is unchanged: a grown corpus keeps its text ids (:func:`kept_tokenizer`), unless
    ``retrain``. What is trained is kept for the next run."""
    digests = {str(path): sha256_file(path) for path in normalized}
    if kept is not None and not retrain and kept_tokenizer(Path(kept), vocab_size, digests, model_out):
        return
    texts = [t for path in normalized for t in shard_texts(path)]
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
    if kept is not None:
        keep_tokenizer(Path(kept), vocab_size, digests, model_out, texts)


KEPT_STATE = "state.json"  # in the kept folder: what the kept tokenizer was trained on
KEPT_TEXTS = "texts.npy"  # in the kept folder: the hashes of the texts it was trained on


def shard_texts(path: str | os.PathLike) -> list[str]:
    """The normalised texts of a shard the tokenizer trains on (its lines' non-empty ones)."""
    return [t for n in read_jsonl(path) if (t := n["text_normalized"])]


def text_hashes(texts: Iterable[str]) -> np.ndarray:
    """Each text's 64-bit hash (BLAKE2b of its UTF-8), sorted, each once."""
    digest = lambda t: hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return np.unique(np.frombuffer(b"".join(map(digest, texts)), dtype="<u8"))


def _write_bytes(files: dict[Path, bytes]) -> None:
    """Each file's bytes, written atomically, in order."""
    for path, data in files.items():
        with atomic_open(path, "wb") as f:
            f.write(data)


def keep_tokenizer(
    kept: Path, vocab_size: int, digests: dict[str, str], model: str | os.PathLike, texts: Iterable[str]
) -> None:
    """Copy the trained ``model`` (and its ``.vocab``) into ``kept``, with what it was trained
    on: ``vocab_size``, each input shard's sha256 and the hashes of its ``texts``. The state is
    written last, so a job killed half way keeps nothing."""
    model = Path(model)
    kept.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (kept / KEPT_STATE).unlink()
    _write_bytes({kept / f"tokenizer{src.suffix}": src.read_bytes() for src in (model, model.with_suffix(".vocab"))})
    save_npy(kept / KEPT_TEXTS, text_hashes(texts))
    state = {"vocab_size": vocab_size, "model_sha256": sha256_file(model), "shards": digests}
    with atomic_open(kept / KEPT_STATE) as f:
        json.dump(state, f, indent=1, sort_keys=True)


def _only_known(path: str, known: np.ndarray | None) -> bool:
    """Whether every text of shard ``path`` is among the ``known`` hashes (None: none is)."""
    return known is not None and bool(np.isin(text_hashes(shard_texts(path)), known, assume_unique=True).all())


def kept_tokenizer(kept: Path, vocab_size: int, digests: dict[str, str], model_out: str | os.PathLike) -> bool:
    """Write the tokenizer :func:`keep_tokenizer` kept to ``model_out`` (and its ``.vocab``), if
    it was trained with ``vocab_size`` and every shard it was trained on that is still among
    ``digests`` has the sha256 it had or only texts it was trained on (a removed shard, or
    files removed from one, change nothing; a new shard is tokenized with it); at least one
    must be. False (and nothing written): train anew."""
    try:
        state = json.loads((kept / KEPT_STATE).read_text(encoding="utf-8"))
        model_bytes = (kept / "tokenizer.model").read_bytes()
        vocab_bytes = (kept / "tokenizer.vocab").read_bytes()
    except (OSError, ValueError):
        return False
    trained = state.get("shards", {})
    still = [s for s in trained if s in digests]
    known = load_npy(kept / KEPT_TEXTS, dtype="<u8", ndim=1)
    changed = [s for s in still if trained[s] != digests[s] and not _only_known(s, known)]
    if state.get("vocab_size") != vocab_size or not still or changed:
        log.info(
            "tokenizer: trained anew (kept: vocab_size %s, %d of its %d shards still inputs, %d changed)",
            state.get("vocab_size"),
            len(still),
            len(trained),
            len(changed),
        )
        return False
    if hashlib.sha256(model_bytes).hexdigest() != state.get("model_sha256"):
        log.warning("tokenizer: %s does not match its state: trained anew", kept / "tokenizer.model")
        return False
    model_out = Path(model_out)
    _write_bytes({model_out.with_suffix(".vocab"): vocab_bytes, model_out: model_bytes})
    new = [s for s in digests if s not in trained]
    log.info(
        "tokenizer: kept the one trained on %d shards (%d of them still inputs; %d new shards are "
        "tokenized with it; tts.retrain_tokenizer: true trains anew)",
        *(len(trained), len(still), len(new)),
    )
    return True
