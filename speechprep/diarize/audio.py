"""A file's speech, read where it is needed: what the diarization of an hour-long file holds.

:func:`~speechprep.diarize.core.diarize_file` indexes its audio on the file's clock
(``audio[a:b]``, sample positions at 16 kHz): the windows of each VAD segment, and
around each speaker change the frames where a pause may lie. :class:`SpanAudio` is
such an array without the whole file in memory: the file's VAD segments, each
widened by ``pad`` seconds (a change's pause search reaches 0.7 s past its
estimate), joined into chunks where they touch (at most ``max_chunk`` seconds of
segments per chunk); a slice is served from the one chunk that holds it, decoded
on first use (:func:`speechprep.io.audio.stream_mono`: any rate, any channel
count, resampled to 16 kHz; ``channel``: the one channel the source names, else the
channels' mean) and kept until a slice needs another chunk; its
length is the file's (from its header). A file damaged mid-stream is read as VAD
reads it: what decodes before the damage, silence after (``truncated_at``). The
diarization walks the segments in time order twice (windows, then cuts), so each
chunk is decoded about twice and the job holds one chunk, whatever the file's
length. Samples no chunk covers read as silence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..io.audio import SAMPLE_RATE, probe, stream_mono

PAD = 1.0  # s read around each segment
MAX_CHUNK = 120.0  # s of padded segments joined into one chunk at most


def chunks(segments: Sequence[tuple[float, float]], pad: float, max_chunk: float) -> list[tuple[int, int]]:
    """``[a, b)`` sample ranges: each segment widened by ``pad`` (not before 0), touching ones
    joined while the chunk stays within ``max_chunk`` s (chunks may then overlap by the pads)."""
    out: list[list[int]] = []
    for s, e in sorted(segments):
        a, b = int(max(0.0, s - pad) * SAMPLE_RATE), int(np.ceil((e + pad) * SAMPLE_RATE))
        if out and a <= out[-1][1] and max(b, out[-1][1]) - out[-1][0] <= max_chunk * SAMPLE_RATE:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


class SpanAudio:
    """A 16 kHz mono float32 file, sliced like a numpy array (``x[a:b]``, ``len(x)``), decoded
    chunk by chunk around ``segments`` (``(start, end)`` s); ``channel``: that channel alone
    (0-based), else every channel's mean."""

    def __init__(
        self,
        path: str,
        segments: Sequence[tuple[float, float]],
        pad: float = PAD,
        max_chunk: float = MAX_CHUNK,
        channel: int | None = None,
    ):
        info = probe(path)  # the file's length (and a missing or unreadable file's reason) from its header
        self.channel = channel
        self.path, self.length = path, int(round(info.frames * SAMPLE_RATE / info.sample_rate))
        self.chunks = [(a, min(b, self.length)) for a, b in chunks(segments, pad, max_chunk) if a < self.length]
        self._held: tuple[int, np.ndarray] | None = None  # (chunk index, its samples)
        self.decoded = 0  # samples decoded so far (the tests read it)
        self.truncated_at: float | None = None  # s: where the file is damaged, once a chunk reached it

    def __len__(self) -> int:
        return self.length

    def _chunk(self, k: int) -> np.ndarray:
        if self._held is None or self._held[0] != k:
            self._held = None  # the chunk held before is let go first
            a, b = self.chunks[k]
            x = np.zeros(0, np.float32)
            if self.truncated_at is None or a < self.truncated_at * SAMPLE_RATE:
                parts = list(
                    stream_mono(
                        self.path,
                        SAMPLE_RATE,
                        offset=a / SAMPLE_RATE,
                        duration=(b - a) / SAMPLE_RATE,
                        on_damage=lambda t, _: self._damaged(a / SAMPLE_RATE + t),
                        channel=self.channel,
                    )
                )
                x = np.concatenate(parts) if parts else x
            x = np.pad(x[: b - a], (0, max(0, b - a - len(x))))  # past the damage or the file's end: silence
            self.decoded += len(x)
            self._held = (k, x.astype(np.float32, copy=False))
        return self._held[1]

    def _damaged(self, at: float) -> None:
        self.truncated_at = at if self.truncated_at is None else min(self.truncated_at, at)

    def __getitem__(self, key: slice) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("SpanAudio takes plain slices")
        a, b, _ = key.indices(self.length)
        b = max(a, b)
        for k, (ca, cb) in enumerate(self.chunks):
            if ca <= a and b <= cb:
                return self._chunk(k)[a - ca : b - ca]
        out = np.zeros(b - a, np.float32)  # across chunks or outside them: what the chunks hold
        for k, (ca, cb) in enumerate(self.chunks):
            lo, hi = max(a, ca), min(b, cb)
            if lo < hi:
                out[lo - a : hi - a] = self._chunk(k)[lo - ca : hi - ca]
        return out
