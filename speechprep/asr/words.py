"""Transcribing with NeMo's own ``transcribe()``, with word timestamps and confidences.

With ``asr.timestamps`` each result gets NeMo's word timestamps and entropy-based word
confidences (``words``) and a segment ``confidence`` (the mean of its words'); a model
class that gives none (multitask AED models without a separate timestamp model, or a
model whose timestamps NeMo cannot compute) gets ``null`` for both, said once in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.batching import is_oom
from ..errors import describe
from ..io.audio import grid_span
from .model import multitask_prompt, repair_char_tdt_decoding

log = logging.getLogger("speechprep.asr")

# ``(audios, language) -> results``, one per audio: its text, or a dict with
# ``text`` and, with timestamps, ``words`` (seconds from the audio's start) and ``confidence``
Transcriber = Callable[[list[np.ndarray], str], list[Any]]

# NeMo's confidence settings for word confidences: per-frame Tsallis entropy
# (alpha 0.5, exponential normalisation, the setting NeMo's confidence tutorial
# found best calibrated), blank frames excluded, a word's confidence the
# minimum over its tokens.
CONFIDENCE_CFG = {
    "preserve_word_confidence": True,
    "preserve_token_confidence": True,
    "exclude_blank": True,
    "aggregation": "min",
    "method_cfg": {"name": "entropy", "entropy_type": "tsallis", "alpha": 0.5, "entropy_norm": "exp"},
}


def enable_word_timestamps(model) -> bool:
    """Turn on word timestamps and word confidences in the model's decoding; False (and one
    log line saying why) for a model class that cannot give them."""
    from omegaconf import ListConfig, OmegaConf, open_dict

    name = type(model).__name__
    if multitask_prompt(model) is not None:
        log.info("%s gives no word timestamps here (an AED model needs its own timestamp model): words: null", name)
        return False
    confidence = dict(CONFIDENCE_CFG)
    if "BPE" not in type(getattr(model, "decoding", None)).__name__:
        # character models: NeMo 3.0's CTCDecoding fails aggregating word confidences (it joins
        # token ids as strings); token confidences are aggregated here instead (hypothesis_words)
        confidence["preserve_word_confidence"] = False
    try:
        with open_dict(model.cfg.decoding):
            model.cfg.decoding.compute_timestamps = True
            model.cfg.decoding.confidence_cfg = OmegaConf.create(confidence)
        model.change_decoding_strategy(model.cfg.decoding, verbose=False)
    except Exception as e:  # noqa: BLE001 (whatever a model class's decoding set-up raises)
        log.info("%s cannot give word timestamps and confidences (%s): words: null", name, describe(e))
        return False
    repair_char_tdt_decoding(model)
    for decoding in (getattr(model, "decoding", None), getattr(model, "ctc_decoding", None)):
        # OmegaConf lists, which NeMo's word offsets test membership in once per character
        for attr, plain in (("supported_punctuation", set), ("segment_seperators", list)):
            if isinstance(getattr(decoding, attr, None), ListConfig):
                setattr(decoding, attr, plain(getattr(decoding, attr)))
    return True


def chars_to_words(text: str, token_confidence) -> list[float] | None:
    """Word confidences of a character model: the minimum over each word's characters (one
    token each, spaces included), as NeMo aggregates them; None where tokens and characters
    do not line up."""
    if token_confidence is None or len(token_confidence) != len(text):
        return None
    words: list[float] = []
    current: list[float] = []
    for ch, c in zip(text + " ", [*token_confidence, 1.0]):
        if ch == " ":
            if current:
                words.append(min(current))
            current = []
        else:
            current.append(float(c))
    return words


def hypothesis_words(h) -> dict[str, Any]:
    """``text``, ``words`` (``{word, start, end, confidence}``, seconds from the audio's start)
    and ``confidence`` (mean word confidence; None without words) of a NeMo hypothesis."""
    stamps = getattr(h, "timestamp", None)
    words = stamps.get("word") if isinstance(stamps, dict) else None
    if words is None:
        return {"text": h.text, "words": None, "confidence": None}
    confs = getattr(h, "word_confidence", None) or chars_to_words(h.text, getattr(h, "token_confidence", None))
    if confs is None or len(confs) != len(words):
        confs = [None] * len(words)
    out = [
        {
            "word": str(w["word"]),
            "start": float(w["start"]),
            "end": float(w["end"]),
            "confidence": None if c is None else min(1.0, max(0.0, float(c))),
        }
        for w, c in zip(words, confs)
    ]
    known = [x["confidence"] for x in out if x["confidence"] is not None]
    return {"text": h.text, "words": out, "confidence": sum(known) / len(known) if known else None}


def disable_word_timestamps(model) -> None:
    """The model's decoding without timestamps (as loaded, the character TDT repair kept)."""
    from omegaconf import open_dict

    with open_dict(model.cfg.decoding):
        model.cfg.decoding.compute_timestamps = False
    model.change_decoding_strategy(model.cfg.decoding, verbose=False)
    repair_char_tdt_decoding(model)


class NemoTranscriber:
    """``(audios, language) -> results`` with NeMo's own ``transcribe()`` (every model class
    has it); a multitask model gets the prompt for ``language``, the others ignore it. With
    ``timestamps``, each result is a :func:`hypothesis_words` dict (``words`` None where the
    model class gives none), else the text.

    Whether the model gives words is decided once per model: where NeMo's timestamp
    computation fails on a batch that transcribes without it, words are off from then on
    (``null``, said once in the log); a batch that fails either way is the model's error."""

    def __init__(self, model, timestamps: bool = False):
        self.model, self.timestamps = model, timestamps
        self.prompt = multitask_prompt(model)
        self.words = timestamps and enable_word_timestamps(model)
        self.tried_without = False

    def _transcribe(self, audios: list[np.ndarray], language: str, words: bool) -> list[Any]:
        import torch
        from nemo.collections.asr.parts.utils.timestamp_utils import process_timestamp_outputs

        kwargs = self.prompt(language) if self.prompt else {}
        if words:
            # not ``timestamps=True``: with it every call rebuilds the decoding (NeMo's
            # change_decoding_strategy, a quarter of the demo model's time); the decoding set up
            # once by enable_word_timestamps is kept and its frame offsets turned into seconds here
            kwargs["return_hypotheses"] = True
        with torch.inference_mode():
            out = self.model.transcribe(audios, batch_size=len(audios), verbose=False, num_workers=0, **kwargs)
        if isinstance(out, tuple):  # some RNNT versions return (best, all)
            out = out[0]
        if words:
            stride = self.model.cfg.preprocessor.window_stride
            out = process_timestamp_outputs(out, self.model.encoder.subsampling_factor, stride)
        return out

    def _without_timestamps(self, audios: list[np.ndarray], language: str, error: Exception) -> list[Any]:
        """The batch again without timestamps; words stay off if that works, else ``error``."""
        self.tried_without = True
        disable_word_timestamps(self.model)
        try:
            out = self._transcribe(audios, language, False)
        except Exception:  # noqa: BLE001 (the model fails either way: its first error is the one to report)
            enable_word_timestamps(self.model)
            raise error from None
        self.words = False
        log.warning(
            "%s: NeMo cannot compute word timestamps for this model (%s), which transcribes without them: "
            "words: null from here on",
            type(self.model).__name__,
            describe(error),
        )
        return out

    def __call__(self, audios: list[np.ndarray], language: str) -> list[Any]:
        words = self.words
        try:
            out = self._transcribe(audios, language, words)
        except Exception as e:
            if not words or is_oom(e) or self.tried_without:
                raise
            out = self._without_timestamps(audios, language, e)
        texts = [h.text if hasattr(h, "text") else str(h) for h in out]
        if not self.timestamps:
            return texts
        if not self.words:
            return [{"text": t, "words": None, "confidence": None} for t in texts]
        return [hypothesis_words(h) for h in out]


def on_source_clock(result: dict[str, Any], seg: dict[str, Any]) -> dict[str, Any]:
    """``result``'s word times moved onto the source file's clock (the segment's offset added),
    clipped to the segment, rounded to ms, made monotonic."""
    if not result.get("words"):
        return result
    offset, duration = float(seg.get("offset") or 0.0), float(seg["duration"])
    words, last = [], offset
    for w in result["words"]:
        start = max(last, round(offset + min(max(w["start"], 0.0), duration), 3))
        end = max(start, round(offset + min(max(w["end"], 0.0), duration), 3))
        words.append({**w, "start": start, "end": end})
        last = start
    return {**result, "words": words}


def trimmed(line: dict[str, Any], pad: float) -> dict[str, Any]:
    """``line`` cut to ``[first word start - pad, last word end + pad]`` within its VAD bounds
    (on the 10 ms grid: :func:`~speechprep.io.audio.grid_span`), which are kept as
    ``vad_offset``/``vad_duration``; a line without words keeps its bounds."""
    offset, duration = float(line.get("offset") or 0.0), float(line["duration"])
    out = {**line, "vad_offset": offset, "vad_duration": duration}
    if line.get("words"):
        start = max(offset, line["words"][0]["start"] - pad)
        end = min(offset + duration, line["words"][-1]["end"] + pad)
        a, d = grid_span(start, end, (offset, offset + duration))
        if d > 0:
            out["offset"], out["duration"] = a, d
    return out
