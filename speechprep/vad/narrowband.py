"""The narrowband path of VAD: files recorded at ``vad.narrowband_rate`` or less.

TEN-VAD, trained on wideband speech, gives telephone-band speech lower
probabilities, so such files are segmented with hysteresis from a lower onset
(:func:`hysteresis_flags`). Music through the same band gets about the same
probabilities (0.3-0.5), so a frame only counts as speech where its window
also looks like speech (:func:`music_gate`): speech moves its spectrum from
syllable to syllable (vowels, fricatives, pauses), a sustained note or chord
does not, so a window whose spectral centroid barely moves needs a higher peak
probability. The gate's two numbers were fitted on real calibration voices
and music and are reported on held-apart ones (bench/vad/narrowband.py,
docs/stages/vad.md "VAD").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .params import SAMPLE_RATE, VadParams

FFT = 512  # a frame's spectrum: 32 ms from the frame's first sample
BAND_HZ = (250.0, 3500.0)  # what every telephone codec passes
REF_SPREAD_HZ = 300.0  # the spread at which a window needs `narrowband_music_prob`


def narrowband(entry: dict[str, Any], p: VadParams) -> bool:
    """A file recorded at ``narrowband_rate`` or less (telephone, radio)."""
    rate = entry.get("sample_rate")
    return rate is not None and int(rate) <= p.narrowband_rate


def hysteresis_flags(probs: np.ndarray, onset: float, release: float) -> np.ndarray:
    """Speech flags from probabilities: speech starts at ``onset`` and lasts while ``release`` holds."""
    flags = np.zeros(len(probs), np.uint8)
    on = False
    for i, q in enumerate(probs.tolist()):
        on = q >= onset or (on and q >= release)
        flags[i] = on
    return flags


class Centroids:
    """The spectral centroid (Hz, within ``BAND_HZ``) of each VAD frame of a stream of
    16 kHz chunks: frame ``i`` is the ``FFT`` samples from ``i * hop``, zero-padded past
    the end, so there is one value per TEN-VAD frame."""

    def __init__(self, hop: int):
        self.hop = hop
        self.buf = np.zeros(0, np.float32)
        self.n = 0
        self.out: list[np.ndarray] = []
        freqs = np.fft.rfftfreq(FFT, 1 / SAMPLE_RATE)
        self.band = (freqs >= BAND_HZ[0]) & (freqs <= BAND_HZ[1])
        self.freqs = freqs[self.band]
        self.window = np.hanning(FFT).astype(np.float32)

    def feed(self, chunk: np.ndarray) -> None:
        self.n += len(chunk)
        self.buf = np.concatenate([self.buf, np.asarray(chunk, np.float32)])
        full = (len(self.buf) - FFT) // self.hop + 1 if len(self.buf) >= FFT else 0
        if full:
            self._frames(full)

    def _frames(self, count: int) -> None:
        idx = np.arange(count)[:, None] * self.hop + np.arange(FFT)[None, :]
        power = np.abs(np.fft.rfft(self.buf[idx] * self.window, axis=1))[:, self.band] ** 2 + 1e-12
        self.out.append((power @ self.freqs / power.sum(axis=1)).astype(np.float32))
        self.buf = self.buf[count * self.hop :]

    def finish(self) -> np.ndarray:
        frames = -(-self.n // self.hop)
        left = frames - sum(len(o) for o in self.out)
        if left > 0:
            self.buf = np.concatenate([self.buf, np.zeros(left * self.hop + FFT - len(self.buf), np.float32)])
            self._frames(left)
        return np.concatenate(self.out) if self.out else np.zeros(0, np.float32)


def moving_stats(v: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of ``v`` over a centred window of ``width`` values
    (fewer at the ends)."""
    x = np.asarray(v, np.float64)
    c1 = np.concatenate([[0.0], np.cumsum(x)])
    c2 = np.concatenate([[0.0], np.cumsum(x * x)])
    i = np.arange(len(x))
    lo, hi = np.maximum(0, i - width // 2), np.minimum(len(x), i + width - width // 2)
    k = hi - lo
    mean = (c1[hi] - c1[lo]) / k
    return mean, np.sqrt(np.maximum(0.0, (c2[hi] - c2[lo]) / k - mean * mean))


def moving_max(v: np.ndarray, width: int) -> np.ndarray:
    """The largest of ``v`` (non-negative) over a centred window of ``width`` values."""
    if len(v) == 0:
        return np.zeros(0, np.float32)
    padded = np.pad(np.asarray(v, np.float32), (width // 2, width - width // 2 - 1))
    return np.lib.stride_tricks.sliding_window_view(padded, width).max(axis=1)


def music_gate(probs: np.ndarray, centroids: np.ndarray, p: VadParams) -> np.ndarray:
    """1 where a frame's window (``narrowband_window`` s, centred) looks like speech: its
    peak probability is at least ``narrowband_music_prob`` where the window's spectral
    centroid spreads ``REF_SPREAD_HZ`` (standard deviation), ``narrowband_music_slope``
    less per doubling of that spread and more per halving, never more than
    ``narrowband_music_cap`` (a one-syllable word's spectrum hardly moves either)."""
    width = max(1, round(p.narrowband_window / p.hop_s))
    _, spread = moving_stats(centroids[: len(probs)], width)
    needed = p.narrowband_music_prob - p.narrowband_music_slope * np.log2((1 + spread) / (1 + REF_SPREAD_HZ))
    return (moving_max(probs, width) >= np.minimum(needed, p.narrowband_music_cap)).astype(np.uint8)


def narrowband_flags(probs: np.ndarray, centroids: np.ndarray, p: VadParams) -> tuple[np.ndarray, float]:
    """The narrowband path's speech flags, and the seconds TEN-VAD's hysteresis took for
    speech that the music gate turned down."""
    flags = hysteresis_flags(probs, p.narrowband_threshold, p.narrowband_release)
    gated = flags & music_gate(probs, centroids, p)
    return gated, float((flags.sum() - gated.sum()) * p.hop_s)
