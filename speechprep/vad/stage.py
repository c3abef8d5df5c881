"""VAD stage: TEN-VAD speech/silence analysis, segments and per-file statistics.

The pure parts (:func:`speech_runs`, :func:`make_segments`, :func:`file_stats`)
work on frame flags and are unit-tested without audio. :func:`analyze_file`
runs one file; :func:`run_shard` runs a shard's files in a process pool on a
:class:`~speechprep.core.shardjob.ShardJob` (resumable per file).
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.rejects import count_reasons
from ..core.shardjob import Accepted, Outcome, Rejected, ShardJob
from ..errors import UsageError, WorkerKilled
from ..io.audio import SAMPLE_RATE, AudioError, grid_floor, grid_span, stream_mono, to_int16
from ..io.jsonio import atomic_open, read_jsonl, write_json
from .narrowband import Centroids, narrowband, narrowband_flags
from .params import VadParams
from .utterances import utterance_lines

log = logging.getLogger("speechprep.vad")
STAGE = "vad"
# Bump when a change to this module changes results, so stale checkpoints are not reused.
ALGORITHM_VERSION = "3"  # 3: bounds on the 10 ms grid
STATS_FIELDS = (
    "id",
    "duration",
    "speech_ratio",
    "n_segments",
    "max_speech",
    "min_speech",
    "avg_speech",
    "max_silence",
    "min_silence",
    "avg_silence",
)
PASSTHROUGH = ("speaker", "language", "gender", "source_id", "channel")
SEGMENT_END_SLACK = 0.05  # s an utterance's decoded audio may fall short of its duration (resampling)


# --------------------------------------------------------------------------
# TEN-VAD
# --------------------------------------------------------------------------
def speech_flags(
    chunks: Iterable[np.ndarray], params: VadParams, on_chunk: Callable[[np.ndarray], None] | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Run a fresh TEN-VAD over 16 kHz float chunks (each also given to ``on_chunk``).

    Returns per-frame probabilities, per-frame speech flags (0/1) and the number
    of samples seen. A TenVad instance carries state across calls, so one is
    made per file (about 0.3 ms); the last partial frame is zero-padded.
    """
    from ten_vad import TenVad

    vad = TenVad(params.hop_size, params.threshold)
    hop = params.hop_size
    probs: list[float] = []
    flags: list[int] = []
    carry = np.zeros(0, np.int16)
    n = 0
    for chunk in chunks:
        n += len(chunk)
        if on_chunk is not None:
            on_chunk(chunk)
        a = to_int16(chunk)
        if len(carry):
            a = np.concatenate([carry, a])
        full = len(a) // hop
        process = vad.process
        for i in range(full):
            p, f = process(a[i * hop : (i + 1) * hop])
            probs.append(p)
            flags.append(f)
        carry = a[full * hop :]
    if len(carry):
        last = np.zeros(hop, np.int16)
        last[: len(carry)] = carry
        p, f = vad.process(last)
        probs.append(p)
        flags.append(f)
    return np.asarray(probs, np.float32), np.asarray(flags, np.uint8), n


def check_ten_vad(params: VadParams) -> None:
    """Fail fast, in the main process, if TEN-VAD cannot load (e.g. libc++ missing)."""
    try:
        speech_flags([np.zeros(params.hop_size, np.float32)], params)
    except OSError as e:
        raise UsageError(
            f"TEN-VAD's library cannot be loaded: {e}. Debian: apt-get install libc++1; conda: libcxx (envs/vad.yaml)"
        ) from None


# --------------------------------------------------------------------------
# segmentation (pure)
# --------------------------------------------------------------------------
def speech_runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` frame ranges where ``flags`` is set."""
    f = np.concatenate([[0], np.asarray(flags, np.int8) != 0, [0]]).astype(np.int8)
    d = np.diff(f)
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


@dataclass
class _Seg:
    start: float
    end: float
    gaps: list[tuple[float, float]]  # internal silences merged away

    @property
    def length(self) -> float:
        return self.end - self.start


def _split(seg: _Seg, limit: float, min_piece: float, probs: np.ndarray, hop_s: float, notes: list[str]) -> list[_Seg]:
    """Cut ``seg`` until no piece exceeds ``limit``: at its longest internal silence
    that leaves ``min_piece`` on both sides, or, without one, at its least
    speech-like frame in the middle half, again ``min_piece`` from either end.
    Only a segment shorter than two ``min_piece`` (possible when ``limit`` is) is
    cut in its middle, which keeps both parts longest; ``notes`` says so."""
    if seg.length <= limit:
        return [seg]
    usable = [g for g in seg.gaps if g[0] - seg.start >= min_piece and seg.end - g[1] >= min_piece]
    if usable:
        g = max(usable, key=lambda g: (g[1] - g[0], -abs((g[0] + g[1]) / 2 - (seg.start + seg.end) / 2)))
        cut = g
    else:
        lo_t = seg.start + max(seg.length / 4, min_piece)
        hi_t = seg.end - max(seg.length / 4, min_piece)
        if hi_t < lo_t:
            t = (seg.start + seg.end) / 2
            notes.append(
                f"{seg.length:.2f} s of speech at {seg.start:.2f} s cut in the middle: no cut point "
                f"leaves min_speech ({min_piece} s) on both sides within max_segment"
            )
        else:
            lo, hi = int(np.ceil(lo_t / hop_s)), min(int(hi_t / hop_s), len(probs) - 1)
            t = (lo + int(np.argmin(probs[lo : hi + 1]))) * hop_s if lo <= hi else (lo_t + hi_t) / 2
        cut = (t, t)
    left = _Seg(seg.start, cut[0], [x for x in seg.gaps if x[1] <= cut[0]])
    right = _Seg(cut[1], seg.end, [x for x in seg.gaps if x[0] >= cut[1]])
    return _split(left, limit, min_piece, probs, hop_s, notes) + _split(right, limit, min_piece, probs, hop_s, notes)


def make_segments(
    flags: np.ndarray, probs: np.ndarray, duration: float, p: VadParams, notes: list[str] | None = None
) -> list[tuple[float, float]]:
    """Speech segments ``(start, end)`` in seconds.

    Gaps shorter than ``min_silence`` are merged, speech shorter than
    ``min_speech`` dropped, segments longer than ``max_segment`` cut at their
    longest internal silences (see :func:`_split`), then each end padded by
    ``pad`` (never beyond the file, never into a neighbour: neighbours meet half
    way), both bounds on the 10 ms grid (:func:`~speechprep.io.audio.grid_span`; a segment
    that reaches the file's end ends at its last whole 10 ms). ``notes`` collects what the
    log should say about unusual cuts.
    """
    hop_s = p.hop_s
    segs: list[_Seg] = []
    for a, b in speech_runs(flags):
        s, e = a * hop_s, min(b * hop_s, duration)
        if segs and s - segs[-1].end < p.min_silence:
            segs[-1].gaps.append((segs[-1].end, s))
            segs[-1].end = e
        else:
            segs.append(_Seg(s, e, []))
    segs = [s for s in segs if s.length >= p.min_speech]
    limit = max(p.max_segment - 2 * p.pad, hop_s * 2)
    notes = [] if notes is None else notes
    pieces = [x for s in segs for x in _split(s, limit, p.min_speech, probs, hop_s, notes)]
    out = []
    for i, s in enumerate(pieces):
        lo = 0.0 if i == 0 else (pieces[i - 1].end + s.start) / 2
        hi = duration if i == len(pieces) - 1 else (s.end + pieces[i + 1].start) / 2
        a, d = grid_span(max(lo, s.start - p.pad), min(hi, s.end + p.pad), (0.0, grid_floor(duration)))
        if d > 0:
            out.append((a, round(a + d, 4)))
    return out


def file_stats(file_id: str, duration: float, segments: list[tuple[float, float]]) -> dict[str, Any]:
    """Per-file statistics (CONTRACT ``vad/<shard>.stats.jsonl``).

    Speech intervals are the segments as written (padded); silences are the
    intervals between them, including leading and trailing silence.
    """
    speech = [e - s for s, e in segments]
    bounds = [0.0] + [x for s, e in segments for x in (s, e)] + [duration]
    silence = [b - a for a, b in zip(bounds[::2], bounds[1::2]) if b - a > 1e-6]

    def r(x):
        return round(float(x), 4)

    return {
        "id": file_id,
        "duration": r(duration),
        "speech_ratio": r(sum(speech) / duration) if duration > 0 else 0.0,
        "n_segments": len(segments),
        "max_speech": r(max(speech, default=0)),
        "min_speech": r(min(speech, default=0)),
        "avg_speech": r(sum(speech) / len(speech)) if speech else 0.0,
        "max_silence": r(max(silence, default=0)),
        "min_silence": r(min(silence, default=0)),
        "avg_silence": r(sum(silence) / len(silence)) if silence else 0.0,
    }


# --------------------------------------------------------------------------
# one file
# --------------------------------------------------------------------------
def _segment_lines(entry: dict[str, Any], segments: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """The segments lines of a file (``text: asr``): one per speech segment."""
    fid, path = entry["id"], entry["audio_filepath"]
    seg_lines = []
    for k, (s, e) in enumerate(segments):
        line = {
            "id": f"{fid}_{k:04d}",
            "file_id": fid,
            "audio_filepath": path,
            "offset": round(s, 4),
            "duration": round(e - s, 4),
        }
        for key in PASSTHROUGH:
            if entry.get(key) is not None:
                line[key] = entry[key]
        seg_lines.append(line)
    return seg_lines


def _read_flags(entry: dict[str, Any], p: VadParams, spectrum, damage: list) -> tuple | Rejected:
    """Stream the entry's audio (an utterance of a source's recording: its own span and channel)
    through TEN-VAD: ``(probs, flags, samples)``, or why it cannot be read."""
    base = float(entry.get("offset") or 0.0)
    span = entry.get("duration") if entry.get("offset") is not None else None
    try:
        stream = stream_mono(
            entry["audio_filepath"],
            SAMPLE_RATE,
            p.block_seconds,
            offset=base,
            duration=span,
            on_damage=lambda t, d: damage.append((t, d)),
            channel=entry.get("channel"),
        )
        probs, flags, n = speech_flags(stream, p, spectrum.feed if spectrum else None)
    except AudioError as e:
        return Rejected(e.reason, e.detail)
    except FileNotFoundError:
        return Rejected("missing", "file does not exist")
    except Exception as e:  # noqa: BLE001 (never let one file abort the shard)
        return Rejected("error", f"{type(e).__name__}: {e}")
    if span is not None and n / SAMPLE_RATE < span - SEGMENT_END_SLACK:
        end = base + n / SAMPLE_RATE
        return Rejected("segment_out_of_range", f"ends at {base + span:.3f} s, the file's audio at {end:.3f} s")
    if n == 0:
        return Rejected("empty", "no samples decoded")
    if n < p.hop_size:
        return Rejected(
            "too_short",
            f"{n / SAMPLE_RATE * 1000:.1f} ms is shorter than one VAD frame ({p.hop_size / SAMPLE_RATE * 1000:.0f} ms)",
        )
    return probs, flags, n


def analyze_file(entry: dict[str, Any], p: VadParams) -> Outcome:
    """VAD for one manifest entry: accepted with its ``stats`` and ``segments``
    (and ``notes`` for the log), or rejected."""
    damage: list[tuple[float, str]] = []
    spectrum = Centroids(p.hop_size) if narrowband(entry, p) else None
    read = _read_flags(entry, p, spectrum, damage)
    if isinstance(read, Rejected):
        return read
    probs, flags, n = read
    duration = n / SAMPLE_RATE
    threshold, notes = p.threshold, []
    if spectrum is not None:
        threshold = p.narrowband_threshold
        flags, music_s = narrowband_flags(probs, spectrum.finish(), p)
        if music_s > 0:
            notes.append(f"{music_s:.2f} s over narrowband_threshold whose spectrum does not move like speech (music?)")
    segments = make_segments(flags, probs, duration, p, notes if p.text == "asr" else [])  # an utterance is not cut
    if not segments:
        why = f"max speech probability {float(probs.max()):.2f}, threshold {threshold}"
        return Rejected("no_speech", f"no speech in {duration:.2f} s ({'; '.join([why, *notes])})")
    if damage:
        notes.append(f"damaged: {damage[0][1]}; the {duration:.3f} s before the damage are used")
    if p.text == "asr":
        seg_lines = _segment_lines(entry, segments)
    else:  # one utterance per line, trimmed, never cut
        seg_lines = utterance_lines(entry, segments, duration, p)
    base = float(entry.get("offset") or 0.0)
    if base:  # times on the file's clock, as every stage reads them
        for line in seg_lines:
            for key in ("offset", "vad_offset"):
                if key in line:
                    line[key] = round(line[key] + base, 4)
    stats = file_stats(entry["id"], duration, segments)
    if damage:
        stats["truncated_at"] = round(damage[0][0], 4)
    data = {"stats": stats, "segments": seg_lines}
    if notes:
        data["notes"] = notes
    return Accepted(data)


# --------------------------------------------------------------------------
# a shard, in a process pool, resumable
# --------------------------------------------------------------------------
_WORKER_PARAMS: VadParams | None = None


def _init_worker(params: VadParams) -> None:
    """Per-worker setup: the TEN-VAD library is loaded here, never pickled."""
    global _WORKER_PARAMS
    _WORKER_PARAMS = params
    import ten_vad  # noqa: F401  (loads the shared library once per worker)


def _work(entry: dict[str, Any]) -> Outcome:
    return analyze_file(entry, _WORKER_PARAMS)


Emit = Callable[[dict, Outcome], None]


def _run_pool(items: list[dict], params: VadParams, workers: int, emit: Emit) -> tuple[list[dict], list[dict]]:
    """Run ``items``; returns ``(in flight when a worker died, not yet started)``."""
    queue = deque(items)
    with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(params,)) as pool:
        inflight: dict = {}
        while queue or inflight:
            while queue and len(inflight) < 4 * workers:
                e = queue.popleft()
                inflight[pool.submit(_work, e)] = e
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for fut in done:
                e = inflight.pop(fut)
                try:
                    emit(e, fut.result())
                except BrokenProcessPool:
                    return [e, *inflight.values()], list(queue)
    return [], []


def _alone_main(entry: dict[str, Any], params: VadParams, conn) -> None:
    _init_worker(params)
    try:
        conn.send((True, _work(entry)))
    except Exception as e:  # noqa: BLE001 (raised again in the parent, as the pool would)
        conn.send((False, e))


def _run_alone(entry: dict[str, Any], params: VadParams) -> Outcome | int:
    """Analyse one file in a process of its own: its outcome, or the exit code of
    the process when it died (negative: the signal that killed it)."""
    ctx = multiprocessing.get_context("fork")  # as the pool's workers: inherit the module state
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_alone_main, args=(entry, params, send), daemon=True)
    proc.start()
    send.close()
    try:
        ok, result = recv.recv()
    except EOFError:  # died before sending
        proc.join()
        return proc.exitcode
    finally:
        recv.close()
    proc.join()
    if not ok:
        raise result
    return result


def execute(todo: list[dict], params: VadParams, workers: int, emit: Emit) -> None:
    """Analyse every entry, emitting one outcome each, whatever crashes.

    A worker that dies (a segfault in native code, the OOM killer) breaks the
    pool; the files in flight then are rerun one at a time in a process of
    their own. One that crashes it again is rejected ``worker_crash``; one
    whose process is killed with SIGKILL (the kernel's or SLURM's out-of-memory
    killer) is not the file's fault: the job fails with :class:`WorkerKilled`,
    keeping its resume file, so that a retry with more memory resumes there.
    """
    rest = list(todo)
    while rest:
        suspects, rest = _run_pool(rest, params, workers, emit)
        if suspects:
            log.warning("a worker died with %d files in flight; rerunning them one at a time", len(suspects))
        for e in suspects:
            outcome = _run_alone(e, params)
            if isinstance(outcome, int) and outcome == -signal.SIGKILL:
                raise WorkerKilled(
                    f"the VAD process analysing {e['id']} alone was killed (SIGKILL): out of memory? "
                    "Not rejected: the job fails, and a retry with more memory resumes from its resume file"
                )
            if isinstance(outcome, int):
                log.warning("%s kills its worker (exit code %d): rejected", e["id"], outcome)
                outcome = Rejected("worker_crash", "the VAD worker process died while analysing this file")
            emit(e, outcome)


def job_identity(params: VadParams) -> dict[str, Any]:
    """What a VAD job's outcomes depend on besides its files: the parameters, TEN-VAD's version."""
    import importlib.metadata

    return {**params.identity(), "ten_vad": importlib.metadata.version("ten_vad")}


def run_shard(
    shard_path: str, segments_out: str, stats_out: str, rejects_out: str, params: VadParams, workers: int, resume: str
) -> dict[str, Any]:
    """VAD over every file of a shard; returns counts. Resumes from ``resume``."""
    check_ten_vad(params)
    job = ShardJob(STAGE, shard_path, resume, job_identity(params), ALGORITHM_VERSION, unit="files", reuse=True)
    todo = job.todo()

    def emit(entry: dict, outcome: Outcome) -> None:
        if isinstance(outcome, Accepted):
            for note in outcome.data.get("notes", ()):
                log.info("%s: %s", entry["id"], note)
        job.emit(
            entry, outcome, audio_seconds=outcome.data["stats"]["duration"] if isinstance(outcome, Accepted) else 0.0
        )

    with job.running(todo):
        log.info("%d files to analyse with %d workers", len(todo), workers)
        execute(todo, params, workers, emit)
    done = list(job.accepted())
    return job.commit(
        {stats_out: [d["stats"] for _, d in done], segments_out: [s for _, d in done for s in d["segments"]]},
        rejects_out,
        segments=sum(len(d["segments"]) for _, d in done),
    )


def merge(
    stats_files: list[str], rejects_files: list[str], segments_files: list[str], csv_out: str, summary_out: str
) -> dict[str, Any]:
    """``vad/stats.csv`` (every shard's per-file stats) and ``vad/summary.json``."""
    import csv

    n_files = 0
    audio = speech = 0.0
    n_segments = truncated = 0
    with atomic_open(csv_out) as f:
        w = csv.DictWriter(f, fieldnames=list(STATS_FIELDS), extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for path in stats_files:
            for r in read_jsonl(path):
                w.writerow(r)
                n_files += 1
                truncated += "truncated_at" in r
                audio += r["duration"]
                speech += r["duration"] * r["speech_ratio"]
    for path in segments_files:
        with open(path, encoding="utf-8") as f:
            n_segments += sum(1 for line in f if line.strip())
    reasons = count_reasons(rejects_files)
    summary = {
        "stage": STAGE,
        "shards": len(stats_files),
        "files": n_files,
        "rejected": sum(reasons.values()),
        "rejects_by_reason": reasons,
        "segments": n_segments,
        "truncated_files": truncated,
        "audio_hours": round(audio / 3600, 4),
        "speech_hours": round(speech / 3600, 4),
    }
    write_json(summary_out, summary)
    return summary
