"""Audio probing and decoding with soundfile + soxr (no torchaudio).

Errors are :class:`AudioError` with a stable ``reason`` code (the rejects
``reason``) and a human ``detail``; callers turn them into reject lines.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import soundfile as sf

SAMPLE_RATE = 16000


class AudioError(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class AudioInfo:
    frames: int
    sample_rate: int
    channels: int
    format: str
    subtype: str

    @property
    def duration(self) -> float:
        return self.frames / self.sample_rate


def probe(path: str) -> AudioInfo:
    """Read only the header: frames, rate, channels. Raises AudioError."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        raise AudioError("missing", "file does not exist") from None
    except OSError as e:
        raise AudioError("unreadable", f"cannot stat: {e}") from None
    if size == 0:
        raise AudioError("empty", "zero-length file (0 bytes)")
    try:
        info = sf.info(path)
    except Exception as e:  # noqa: BLE001 (soundfile raises LibsndfileError/RuntimeError/TypeError)
        raise AudioError("unreadable", f"not a readable audio file ({type(e).__name__}: {e})") from None
    if info.samplerate <= 0 or info.channels <= 0:
        raise AudioError("unreadable", f"invalid header: rate={info.samplerate} channels={info.channels}")
    if info.frames <= 0:
        raise AudioError("empty", f"{info.format}/{info.subtype} header but no samples")
    return AudioInfo(int(info.frames), int(info.samplerate), int(info.channels), info.format, info.subtype)


def stream_mono(
    path: str,
    target_sr: int = SAMPLE_RATE,
    block_seconds: float = 60.0,
    offset: float = 0.0,
    duration: float | None = None,
    on_damage: Callable[[float, str], None] | None = None,
    channel: int | None = None,
) -> Iterator[np.ndarray]:
    """Decode ``path`` once, block by block: float32 mono at ``target_sr``.

    Multichannel audio is averaged to mono (``channel``: that channel alone, 0-based,
    AudioError ``bad_channel`` when the file has no such channel), other rates are resampled with a
    streaming soxr resampler, so memory stays bounded for hours-long files.
    Raises AudioError ``unreadable`` (decode failure) or ``non_finite`` (NaN/Inf
    sample, with its time).

    With ``on_damage``, a file damaged mid-stream (a truncated download, bytes
    lost in an archive) yields the audio that decodes before the damage, then
    calls ``on_damage(seconds decoded, detail)`` and ends; it still raises
    ``unreadable`` when nothing decodes.
    """
    try:
        f = sf.SoundFile(path)
    except Exception as e:  # noqa: BLE001 (as above)
        probe(path)  # raises the precise reason (missing, empty, unreadable)
        raise AudioError("unreadable", f"cannot open ({type(e).__name__}: {e})") from None
    with f:
        if channel is not None and not 0 <= channel < f.channels:
            raise AudioError("bad_channel", f"channel {channel} named, the file has {f.channels}")
        sr = f.samplerate
        start = int(round(offset * sr))
        stop = f.frames if duration is None else min(f.frames, start + int(round(duration * sr)))
        if start:
            f.seek(min(start, f.frames))
        resampler = None if sr == target_sr else _resampler(sr, target_sr)
        block = max(1, int(block_seconds * sr))
        pos, damage, flushed = start, None, False
        while pos < stop:
            x, damage = _read_block(f, path, (start, pos, stop), block, on_damage is not None)
            if len(x) == 0:
                if damage is None and on_damage is not None and duration is None:
                    damage = f"the file ends there; its header says {f.frames / sr:.3f} s"
                break  # header promised more frames than the file holds
            _check_finite(x, pos, sr)
            pos += len(x)
            mono = _mono(x, channel)
            if resampler is not None:
                flushed = pos >= stop or damage is not None
                mono = resampler.resample_chunk(mono, last=flushed)
            if len(mono):
                yield mono
            if damage is not None:
                break
        if resampler is not None and not flushed:
            tail = resampler.resample_chunk(np.zeros(0, np.float32), last=True)
            if len(tail):
                yield tail
        if damage is not None:
            on_damage((pos - start) / sr, f"decodes up to {pos / sr:.3f} s, then {damage}")


def _mono(x: np.ndarray, channel: int | None) -> np.ndarray:
    """A ``(frames, channels)`` block as one channel: the one named, else their mean."""
    if channel is not None:
        return np.ascontiguousarray(x[:, channel])
    return x[:, 0] if x.shape[1] == 1 else x.mean(axis=1, dtype=np.float32)


def _resampler(sr: int, target_sr: int):
    import soxr

    return soxr.ResampleStream(sr, target_sr, 1, dtype="float32")


def _read_block(
    f, path: str, span: tuple[int, int, int], block: int, keep_damaged: bool
) -> tuple[np.ndarray, str | None]:
    """The next block of ``f`` (``span``: the stream's start, this block's position, its
    stop) and, when the decoder fails on it, what the damage is: with ``keep_damaged``
    the frames before the damage come back with it (``unreadable`` when the stream's first
    block has none), else ``unreadable`` at once."""
    start, pos, stop = span
    try:
        return f.read(min(block, stop - pos), dtype="float32", always_2d=True), None
    except Exception as e:  # noqa: BLE001 (any decoder error: the damage)
        error = f"decode failed at {pos / f.samplerate:.3f} s ({type(e).__name__}: {e})"
        if not keep_damaged:
            raise AudioError("unreadable", error) from None
        x = _decodable_part(path, start, pos, stop)  # what the failed block held before the damage
        if pos == start and len(x) == 0:
            raise AudioError("unreadable", error) from None
        return x, f"{type(e).__name__}: {e}"


def _check_finite(x: np.ndarray, pos: int, sr: int) -> None:
    finite = np.isfinite(x)
    if not finite.all():
        bad = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise AudioError("non_finite", f"NaN/Inf sample at {(pos + bad) / sr:.3f} s")


def _decodable_part(path: str, start: int, pos: int, stop: int, step: int = 1024) -> np.ndarray:
    """Frames ``[pos, damage)`` of a file whose read failed at ``pos``: decoded again
    from ``start`` in small steps (seeking into a damaged stream is not reliable)."""
    parts = []
    with sf.SoundFile(path) as g:
        if start:
            g.seek(start)
        at = start
        while at < stop:
            try:
                y = g.read(min(step, stop - at), dtype="float32", always_2d=True)
            except Exception:  # noqa: BLE001 (the damage: stop before it)
                break
            if len(y) == 0:
                break
            if at + len(y) > pos:
                parts.append(y[max(0, pos - at) :])
            at += len(y)
    return np.concatenate(parts) if parts else np.zeros((0, 1), np.float32)


def read_segment(
    seg: dict, target_sr: int = SAMPLE_RATE, min_duration: float = 0.0, setting: str = "min_duration"
) -> np.ndarray:
    """A segment (``audio_filepath``, ``offset``, ``duration``, ``channel`` where the source
    names one) as float32 mono at ``target_sr``, decoded in one block. AudioError when it is unusable, including
    ``empty`` and ``too_short`` (below ``min_duration``, the config key ``setting``).
    """
    d = seg.get("duration")
    blocks = list(
        stream_mono(
            seg["audio_filepath"],
            target_sr,
            block_seconds=float(d) + 1.0 if d else 60.0,
            offset=float(seg.get("offset") or 0.0),
            duration=d,
            channel=seg.get("channel"),
        )
    )
    x = np.concatenate(blocks) if blocks else np.zeros(0, np.float32)
    if len(x) == 0:
        raise AudioError("empty", "no samples at this offset/duration")
    if len(x) < min_duration * target_sr:
        raise AudioError("too_short", f"{len(x) / target_sr:.3f} s is below {setting} ({min_duration} s)")
    return x


GRID_S = 0.01  # s: segment bounds are whole 10 ms frames (see grid_span)


def grid_span(start: float, end: float, within: tuple[float, float] | None = None) -> tuple[float, float]:
    """``(offset, duration)`` of ``[start, end]`` (s) with both bounds rounded to the nearest
    whole 10 ms, never outside ``within`` (a file's or a segment's bounds: a bound that
    rounds past one is that bound, whole 10 ms or not: a file's end, or the bounds of a
    segment the pipeline did not cut). Every stage that writes a segment's bounds (VAD,
    diarization's cuts, ASR's trim, alignment) writes them so: a segment is a whole
    number of 10 ms frames, the hop of the models that read it, and two segments that
    meet still meet. DNSMOS scores a short clip repeated to 9 s; a clip of whole
    160-sample hops repeats frame for frame, so its frames are computed once per clip
    rather than once per 9 s (docs/benchmarks/curate.md, "Curation on short clips")."""
    a, b = round(round(start / GRID_S) * GRID_S, 2), round(round(end / GRID_S) * GRID_S, 2)
    if within is not None:
        a, b = max(a, within[0]), min(b, within[1])
    return a, round(b - a, 4)


def grid_floor(t: float) -> float:
    """The last whole 10 ms at or before ``t`` (s): where VAD ends a segment that reaches the
    end of a file whose duration is not a whole 10 ms (its last partial 10 ms left out)."""
    return round(math.floor(t / GRID_S + 1e-9) * GRID_S, 2)


def to_int16(x: np.ndarray) -> np.ndarray:
    """float32 in [-1, 1] -> contiguous int16 (clipped)."""
    return np.ascontiguousarray(np.round(np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16))
