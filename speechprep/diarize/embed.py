"""Windowed speaker embeddings inside a file: Resemblyzer's 1.6 s partials, batched; or the
same windows embedded by a speaker model a lab brings (:class:`EncoderWindows`).

Resemblyzer's ``VoiceEncoder`` embeds a fixed 160-frame (1.6 s) mel window: its
``embed_utterance`` cuts an utterance into such partials and averages them. Here
every VAD segment of a file is turned into a mel spectrogram once, sliced into
windows ``hop`` seconds apart (the last one flush with the segment's end; a
segment shorter than a window is one window, zero-padded, as Resemblyzer pads
its last partial), each window's mel scaled as Resemblyzer's volume
normalisation would scale its audio (to -30 dBFS, louder windows left alone:
the model reads mel power, not log-mel), and all windows go through the LSTM in
batches. :func:`window_loop` is the plain alternative, one ``embed_utterance``
call per window (the benchmark's baseline; the same vectors to within the
mel's edge frames).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.batching import seconds_budget
from ..core.config import BatchBudget
from ..io.audio import SAMPLE_RATE

FRAME = 160  # samples per mel frame (10 ms)
WINDOW_FRAMES = 160  # Resemblyzer's partial: 1.6 s
WINDOW_S = WINDOW_FRAMES * FRAME / SAMPLE_RATE
TARGET_DBFS = -30.0  # Resemblyzer's audio_norm_target_dBFS
INT16_MAX = 2**15 - 1
FLUSH_BATCHES = 8  # windows' mels held before the LSTM runs: 8 x batch (64: 13 MB), not the file's


def windows_per_batch(model, batch: BatchBudget) -> int:
    """Windows per LSTM forward: the stage's batch budget (audio seconds on ``model``'s
    device) over a window's 1.6 s."""
    return _windows_per_call(str(model.device), batch)


def _windows_per_call(device: str, batch: BatchBudget) -> int:
    return max(1, int(seconds_budget(device, batch) / WINDOW_S + 1e-9))


@dataclass
class Windows:
    """The embedding windows of one file, in time order."""

    start: np.ndarray  # (n,) float64 seconds on the file's clock
    end: np.ndarray  # (n,) float64
    segment: np.ndarray  # (n,) int: index of the VAD segment the window lies in
    emb: np.ndarray  # (n, dim) float32, unit norm
    rms: np.ndarray  # (n,) float32: the window's RMS before normalisation

    @property
    def centre(self) -> np.ndarray:
        return (self.start + self.end) / 2

    def __len__(self) -> int:
        return len(self.start)

    def take(self, idx: np.ndarray) -> Windows:
        return Windows(self.start[idx], self.end[idx], self.segment[idx], self.emb[idx], self.rms[idx])


def window_starts(n_samples: int, hop_frames: int) -> np.ndarray:
    """Start frames of the windows of a stretch of ``n_samples``: every ``hop_frames``, the
    last one flush with the end; one window (at 0) when the stretch is shorter than a window."""
    n_frames = n_samples // FRAME + 1  # librosa's centred frames
    if n_frames <= WINDOW_FRAMES:
        return np.zeros(1, np.int64)
    starts = np.arange(0, n_frames - WINDOW_FRAMES + 1, hop_frames)
    if starts[-1] != n_frames - WINDOW_FRAMES:
        starts = np.append(starts, n_frames - WINDOW_FRAMES)
    return starts


def _gains(x: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per window: the power gain Resemblyzer's volume normalisation (increase only) would
    apply to its samples, and its RMS."""
    c = np.concatenate([[0.0], np.cumsum(x.astype(np.float64) ** 2)])
    a = np.minimum(starts * FRAME, len(x))
    b = np.minimum((starts + WINDOW_FRAMES) * FRAME, len(x))
    rms = np.sqrt((c[b] - c[a]) / np.maximum(b - a, 1))
    dbfs = 20 * np.log10(np.maximum(rms, 1e-9))
    gain_db = np.maximum(TARGET_DBFS - dbfs, 0.0)
    return 10 ** (gain_db / 10), rms.astype(np.float32)  # on power: the amplitude gain squared


def segment_mels(x: np.ndarray, hop_frames: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mels (n, 160, 40) float32, start frames, rms)`` of the windows of one stretch of audio."""
    from ..encoders import resemblyzer_mel

    mel = resemblyzer_mel(x)
    starts = window_starts(len(x), hop_frames)
    if len(mel) < WINDOW_FRAMES:
        mel = np.pad(mel, ((0, WINDOW_FRAMES - len(mel)), (0, 0)))
    gain, rms = _gains(x, starts)
    mels = np.stack([mel[s : s + WINDOW_FRAMES] for s in starts])
    mels *= gain.astype(np.float32)[:, None, None]
    return mels, starts, rms


def _forward(model, mels: np.ndarray, batch: int) -> np.ndarray:
    import torch

    out = []
    with torch.no_grad():
        for a in range(0, len(mels), batch):
            t = torch.from_numpy(np.ascontiguousarray(mels[a : a + batch])).to(model.device)
            out.append(model(t).cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 256), np.float32)


def window_embeddings(
    model, audio: np.ndarray, segments: Sequence[tuple[float, float]], hop: float, batch: int = 64
) -> Windows:
    """The windows of every segment ``(start, end)`` (seconds) of ``audio`` (16 kHz mono
    float32 on the file's clock: an array or :class:`~speechprep.diarize.audio.SpanAudio`),
    embedded by ``model`` (Resemblyzer's ``VoiceEncoder``); the LSTM runs every
    ``FLUSH_BATCHES`` batches of windows, so mels of a long file are not all held at once."""
    hop_frames = max(1, int(round(hop * SAMPLE_RATE / FRAME)))
    mels, embs, starts, ends, seg, rms = [], [], [], [], [], []
    held = 0  # windows whose mels wait for the LSTM: forwarded every FLUSH_BATCHES batches
    for k, (s, e) in enumerate(segments):
        a, b = int(round(s * SAMPLE_RATE)), int(round(e * SAMPLE_RATE))
        m, st, r = segment_mels(audio[a:b], hop_frames)
        t0 = a / SAMPLE_RATE + st * FRAME / SAMPLE_RATE
        mels.append(m)
        starts.append(t0)
        ends.append(np.minimum(t0 + WINDOW_S, b / SAMPLE_RATE))
        seg.append(np.full(len(st), k))
        rms.append(r)
        held += len(m)
        if held >= FLUSH_BATCHES * batch:
            embs.append(_forward(model, np.concatenate(mels), batch))
            mels, held = [], 0
    if mels:
        embs.append(_forward(model, np.concatenate(mels), batch))
    if not embs:
        return empty_windows(256)
    emb = np.concatenate(embs)
    return Windows(np.concatenate(starts), np.concatenate(ends), np.concatenate(seg), emb, np.concatenate(rms))


def empty_windows(dim: int) -> Windows:
    z = np.zeros(0)
    return Windows(z, z, z.astype(int), np.zeros((0, dim), np.float32), z.astype(np.float32))


class EncoderWindows:
    """The same windows (:func:`window_starts`: 1.6 s, ``hop`` apart, the last flush with its
    segment's end) embedded by a speaker model a lab brings (``encoder``: an
    :class:`~speechprep.encoders.Encoder`, e.g. a NeMo TitaNet or a WeSpeaker ONNX model), each
    window's own samples as one clip; ``batch`` seconds of windows a call. A window the model
    cannot embed takes its segment's nearest embedded window's vector; a segment with none
    raises the encoder's error."""

    def __init__(self, encoder, device: str):
        self.encoder, self.device = encoder, device

    def window_embeddings(
        self, audio, segments: Sequence[tuple[float, float]], hop: float, batch: BatchBudget
    ) -> Windows:
        from ..io.audio import AudioError

        hop_frames = max(1, int(round(hop * SAMPLE_RATE / FRAME)))
        per_call = _windows_per_call(self.device, batch)
        starts, ends, seg, rms, embs = [], [], [], [], []
        for k, (s, e) in enumerate(segments):
            a, b = int(round(s * SAMPLE_RATE)), int(round(e * SAMPLE_RATE))
            x = np.asarray(audio[a:b], np.float32)
            st = window_starts(len(x), hop_frames)
            clips = [x[i * FRAME : (i + WINDOW_FRAMES) * FRAME] for i in st]
            vecs = [v for c in range(0, len(clips), per_call) for v in self.encoder(clips[c : c + per_call])]
            good = np.array([i for i, v in enumerate(vecs) if not isinstance(v, AudioError)])
            if not len(good):
                raise vecs[0]
            vecs = [vecs[good[np.abs(good - i).argmin()]] for i in range(len(vecs))]
            t0 = a / SAMPLE_RATE + st * FRAME / SAMPLE_RATE
            starts.append(t0)
            ends.append(np.minimum(t0 + WINDOW_S, b / SAMPLE_RATE))
            seg.append(np.full(len(st), k))
            rms.append(_gains(x, st)[1])
            embs.append(np.stack(vecs).astype(np.float32))
        if not embs:
            return empty_windows(getattr(self.encoder, "dim", 0))
        return Windows(*map(np.concatenate, (starts, ends, seg, embs, rms)))


def window_loop(model, audio: np.ndarray, windows: Windows) -> np.ndarray:
    """The plain way: one ``embed_utterance`` per window, on the window's own samples
    (volume-normalised as above; a window shorter than 1.6 s zero-padded by Resemblyzer)."""
    out = np.empty((len(windows), 256), np.float32)
    for i in range(len(windows)):
        a, b = int(round(windows.start[i] * SAMPLE_RATE)), int(round(windows.end[i] * SAMPLE_RATE))
        x = audio[a:b].astype(np.float32)
        gain, _ = _gains(x, np.zeros(1, np.int64))
        out[i] = model.embed_utterance(x * np.float32(np.sqrt(gain[0])))
    return out
