"""A NeMo model's CTC output over a long recording, in chunks, with bounded memory.

* :class:`CtcHead`: the CTC output of a CTC model (``EncDecCTCModel`` and its
  BPE subclass) or of a hybrid RNNT-CTC model (its ``ctc_decoder``); any other
  class (RNNT/TDT alone, multitask AED such as Canary) is refused naming it.
  It also spells text in the model's vocabulary (:meth:`CtcHead.encode`):
  characters for a character model (lower-cased when its vocabulary has no
  capitals; characters it lacks are dropped), SentencePiece pieces for a BPE
  one, word by word so that word starts are known.
* :func:`log_probs`: the recording decoded as a stream (``audio.stream_mono``)
  and run through the model in chunks of ``chunk_seconds`` with
  ``context_seconds`` of audio either side; each chunk keeps the frames of its
  core, so the stitched output has one frame per ``frame_seconds`` of audio and
  no frame from a chunk's edge. What is kept is the log-probabilities of the
  blank and of the tokens the text uses (the aligner reads no other column):
  ``frames x (used tokens + 1)`` float32, plus the greedy token of each frame
  (int32) to find speech the text lacks. Audio is never held whole. A stretch of a
  file (``offset``, ``duration``: a source's utterance) is read alone, on its
  ``channel`` where the source names one; its frames count from the stretch's start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..io.audio import SAMPLE_RATE, stream_mono

log = logging.getLogger("speechprep.asr")


@dataclass
class LogProbs:
    """``lpz[t, k]``: log-probability of column k (``columns[k]``, a model token id; the
    blank is ``blank_column``) at frame t; ``greedy[t]``: the model's most likely token
    (``blank_id`` for the blank)."""

    lpz: np.ndarray
    columns: np.ndarray
    blank_column: int
    greedy: np.ndarray
    blank_id: int
    frame_seconds: float
    duration: float


class CtcHead:
    """The CTC output of a loaded NeMo ASR model (module docstring)."""

    def __init__(self, model, device: str = "cpu"):
        from nemo.collections.asr.models import EncDecCTCModel, EncDecHybridRNNTCTCModel

        if isinstance(model, EncDecHybridRNNTCTCModel):
            self.decoder = model.ctc_decoder
        elif isinstance(model, EncDecCTCModel):
            self.decoder = model.decoder
        else:
            raise UsageError(
                f"long-form alignment needs a CTC output, and {type(model).__name__} has none "
                "(use a CTC model, EncDecCTCModel(BPE), or a hybrid RNNT-CTC one, EncDecHybridRNNTCTC(BPE)Model)"
            )
        self.model = model
        self.device = device
        self.model_class = type(model).__name__
        self.tokenizer = getattr(model, "tokenizer", None)
        if self.tokenizer is not None:
            self.blank_id = int(self.tokenizer.vocab_size)
            self.labels = None
        else:
            self.labels = list(self.decoder.vocabulary)
            self.blank_id = len(self.labels)
            self._index = {c: i for i, c in enumerate(self.labels)}
            self._lower = not any(c.isupper() for c in self.labels)
        self.space = None if self.labels is None else self._index.get(" ")
        cfg = model.cfg.preprocessor
        self.sample_rate = int(cfg.get("sample_rate", SAMPLE_RATE))
        self.hop = int(round(float(cfg.window_stride) * self.sample_rate))
        self.frame_samples = self.hop * self._subsampling()

    def _subsampling(self) -> int:
        """Audio frames per output frame, measured on 4 s of silence."""
        n = 4 * self.sample_rate
        feats = n // self.hop + 1
        out = self._run(np.zeros(n, np.float32)).shape[0]
        return max(1, int(round(feats / out)))

    def _run(self, wave: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(wave, dtype=np.float32))[None].to(self.device)
            n = torch.tensor([x.shape[1]], device=self.device)
            feats, flen = self.model.preprocessor(input_signal=x, length=n)
            enc, elen = self.model.encoder(audio_signal=feats, length=flen)
            lp = torch.log_softmax(self.decoder(encoder_output=enc).float(), dim=-1)
            return lp[0, : int(elen[0])].cpu().numpy()

    def encode_word(self, word: str) -> list[int]:
        if self.tokenizer is not None:
            return [int(i) for i in self.tokenizer.text_to_ids(word)]
        w = word.lower() if self._lower else word
        return [self._index[c] for c in w if c in self._index and c != " "]

    def encode(self, text: str) -> tuple[list[int], list[int]]:
        """``(token ids, index in ids where each word starts)`` of ``text`` (spoken form)."""
        ids: list[int] = []
        starts: list[int] = []
        for word in text.split():
            w = self.encode_word(word)
            if not w:
                continue
            if ids and self.space is not None:
                ids.append(self.space)
            starts.append(len(ids))
            ids += w
        return ids, starts

    def decode(self, ids) -> str:
        """Text of token ids (the greedy output of a stretch, for a reject's detail)."""
        ids = [int(i) for i in ids if i != self.blank_id]
        if self.tokenizer is not None:
            return self.tokenizer.ids_to_text(ids) if ids else ""
        return " ".join("".join(self.labels[i] for i in ids).split())

    def log_probs(
        self,
        path: str,
        used_ids,
        chunk_seconds: float,
        context_seconds: float,
        offset: float = 0.0,
        duration: float | None = None,
        channel: int | None = None,
    ) -> LogProbs:
        """The recording's kept log-probabilities and greedy tokens (module docstring); ``offset``,
        ``duration``, ``channel``: the stretch of the file read, and its channel."""
        columns = np.array(sorted({int(i) for i in used_ids} | {self.blank_id}), dtype=np.int64)
        core = max(1, int(round(chunk_seconds * self.sample_rate / self.frame_samples))) * self.frame_samples
        ctx = int(round(context_seconds * self.sample_rate / self.frame_samples)) * self.frame_samples
        lpz, greedy, total = [], [], 0
        read = {"offset": offset, "duration": duration, "channel": channel}
        for wave, left, n_core in _windows(path, self.sample_rate, core, ctx, read):
            lp = self._run(wave)
            skip = left // self.frame_samples
            keep = -(-n_core // self.frame_samples)  # frames covering the core's samples
            part = lp[skip : skip + keep]
            lpz.append(part[:, columns].astype(np.float32))
            greedy.append(part.argmax(axis=1).astype(np.int32))
            total += n_core
        if not lpz:
            raise UsageError(f"{path}: no audio")
        return LogProbs(
            lpz=np.concatenate(lpz),
            columns=columns,
            blank_column=int(np.searchsorted(columns, self.blank_id)),
            greedy=np.concatenate(greedy),
            blank_id=self.blank_id,
            frame_seconds=self.frame_samples / self.sample_rate,
            duration=total / self.sample_rate,
        )


def _windows(
    path: str, sr: int, core: int, ctx: int, read: dict | None = None
) -> Iterator[tuple[np.ndarray, int, int]]:
    """``(audio, samples of left context, samples of core)`` chunks of a stream: each core
    of ``core`` samples (the last shorter) with up to ``ctx`` samples either side; ``read``:
    :func:`~speechprep.io.audio.stream_mono`'s ``offset``, ``duration`` and ``channel`` (none: the file whole)."""
    buf = np.zeros(0, np.float32)
    start = 0  # buf[0] is sample `start` of the recording
    pos = 0  # the next core starts at sample pos
    done = False
    stream = stream_mono(path, sr, block_seconds=max(1.0, (core + ctx) / sr), **(read or {}))
    while True:
        while not done and len(buf) - (pos - start) < core + ctx:
            try:
                buf = np.concatenate([buf, next(stream)])
            except StopIteration:
                done = True
        avail = len(buf) - (pos - start)
        if avail <= 0:
            return
        n_core = min(core, avail)
        lo = max(start, pos - ctx)
        hi = min(start + len(buf), pos + n_core + ctx)
        yield buf[lo - start : hi - start], pos - lo, n_core
        pos += n_core
        cut = max(0, (pos - ctx) - start)
        buf, start = buf[cut:], start + cut
