"""The non-speech of each source file that VAD found, read back for the SNR's noise.

The segments of one source file are always in the same shard (sharding is by
file), so a shard's segments give, per file, every stretch VAD called speech:
the VAD bounds of each line (``vad_offset``/``vad_duration`` where ASR trimmed
the line, else ``offset``/``duration``). What lies between them, and before the
first and after the last, is the file's non-speech. For a segment,
:meth:`NonSpeech.read` decodes the non-speech next to it: at most ``seconds``
before the start and after the end of the speech stretch that holds it (the
union of overlapping VAD bounds), up to the neighbouring speech or the file's
ends. A segment read from a file with no pause gets nothing, and the SNR then
estimates its noise from the segment itself (:func:`speechprep.curate.measures.snr_db`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import numpy as np

from ..io.audio import SAMPLE_RATE, AudioError, stream_mono


def vad_bounds(seg: dict) -> tuple[float, float]:
    """``(start, end)`` in seconds of what VAD called speech for ``seg`` (end ``inf``: to the file's end)."""
    start = float(seg["vad_offset"] if seg.get("vad_offset") is not None else seg.get("offset") or 0.0)
    d = seg["vad_duration"] if seg.get("vad_duration") is not None else seg.get("duration")
    return start, start + float(d) if d is not None else float("inf")


class NonSpeech:
    """Per source file, the merged speech stretches of a shard's segments."""

    def __init__(self, segments: Iterable[dict], seconds: float):
        self.seconds = float(seconds)
        spans: dict[str, list[tuple[float, float]]] = {}
        for s in segments:
            spans.setdefault(s["audio_filepath"], []).append(vad_bounds(s))
        self.files: dict[str, tuple[list[float], list[float]]] = {}
        for path, ss in spans.items():
            starts: list[float] = []
            ends: list[float] = []
            for a, b in sorted(ss):
                if starts and a <= ends[-1]:
                    ends[-1] = max(ends[-1], b)
                else:
                    starts.append(a)
                    ends.append(b)
            self.files[path] = (starts, ends)

    def pieces(self, seg: dict) -> list[tuple[float, float]]:
        """``[(start, end)]`` (s) of the non-speech to read for ``seg``: before and after
        its speech stretch, ``seconds`` at most each, never into other speech
        (reads past the file's end come back short)."""
        if self.seconds <= 0 or seg["audio_filepath"] not in self.files:
            return []
        starts, ends = self.files[seg["audio_filepath"]]
        a, _ = vad_bounds(seg)
        k = bisect.bisect_right(starts, a) - 1  # the merged stretch that holds the segment
        if k < 0:
            return []
        before = (max(ends[k - 1] if k else 0.0, starts[k] - self.seconds), starts[k])
        after = (ends[k], min(starts[k + 1] if k + 1 < len(starts) else float("inf"), ends[k] + self.seconds))
        return [(x, y) for x, y in (before, after) if y > x and np.isfinite(x)]

    def read(self, seg: dict, rate: int = SAMPLE_RATE) -> list[np.ndarray]:
        """The pieces' audio (float32 mono at ``rate``), each on its own (never joined:
        a splice would add a click). A piece that does not decode is left out: the
        segment's own read reports what is wrong with the file."""
        out = []
        for a, b in self.pieces(seg):
            try:
                blocks = list(
                    stream_mono(
                        seg["audio_filepath"],
                        rate,
                        block_seconds=b - a + 1.0,
                        offset=a,
                        duration=b - a,
                        channel=seg.get("channel"),  # the source's channel, as the segment is read
                    )
                )
            except AudioError:
                continue
            if blocks:
                out.append(np.concatenate(blocks))
        return out
