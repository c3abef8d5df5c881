#!/usr/bin/env python3
"""Files and bytes at scale: synthetic segments through both layouts and every export format.

    .venvs/export/bin/python bench/export/scale.py [--segments 100000] [--shards 20]
        [--mean-seconds 1.0] [--layouts files packed]
        [--formats webdataset parquet lhotse_shar nemo_tarred] [--dir DIR]

Per shard, a speech-like synthetic source (harmonics with a drifting pitch, a
syllable-rate envelope, a little noise; 16 kHz, 16 bit) is cut into segments of
0.5x-1.5x ``--mean-seconds``. Per layout (``tts.layout``), two phases, each in
its own process (its peak RSS is its own):

* the layout: per segment four arrays (text ids, codes at 50 Hz, a 256-d
  condition vector, an 88-d emotion vector) and one resynthesised WAV, written
  to a scratch directory as the TTS and S2S jobs do, then placed per shard by
  the stages' own writer (``speechprep.core.artifacts.Scratch.place``) (``files``: one file per
  segment; ``packed``: one per shard and kind); a features index per shard and
  the dataset's manifests.
* ``export``: ``speechprep.export.stage.run_lines`` then ``run_shard`` per shard, every format of
  ``--formats`` from those manifests and arrays (what the export stage runs).

Prints, per layout, phase and format: wall time, peak RSS, files, bytes, and per
audio hour; then the projection to 10^4 hours at 450 segments per hour (the
4.5 million segments of 8 s on average of a 10^4-hour corpus).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from speechprep.core.artifacts import WAV, Kind, Scratch
from speechprep.export import stage as export
from speechprep.export.params import ExportParams
from speechprep.io.jsonio import write_jsonl
from speechprep.io.npyio import LAYOUTS
from speechprep.tts.features import DTYPES

SR = 16000
SOURCE_SECONDS = 600  # per shard; segments wrap around it
HOURS_10K = 1e4
SEGMENTS_PER_HOUR_10K = 450  # 4.5e6 segments in 1e4 h
# The arrays written per segment: text ids and the features job's (tts.features.DTYPES); no
# phoneme_ids, which the TTS text job writes only with tts.phonemes
ARRAYS = tuple(DTYPES)


def speechlike(seconds: float, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    f0 = 150 + 60 * np.sin(2 * np.pi * 0.3 * t + rng.uniform(0, 6))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    x = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 * (1 + np.sin(2 * np.pi * 4 * t)) ** 2
    x = 0.2 * x * envelope + 0.003 * rng.standard_normal(len(t))
    return np.clip(x, -1, 1).astype(np.float32)


def tree(path: Path) -> tuple[int, int]:
    """(files, bytes) under ``path``."""
    files = size = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            files += 1
            size += os.path.getsize(os.path.join(root, n))
    return files, size


def in_child(fn, *args):
    """Run ``fn(*args)`` in a forked process: (its result, wall seconds, its peak RSS in MB)."""
    parent, child = mp.Pipe(duplex=False)

    def target():
        t, out = time.perf_counter(), None
        try:
            out = fn(*args)
        finally:  # a failing child still answers, so the parent never waits forever
            child.send((out, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))

    p = mp.get_context("fork").Process(target=target)
    p.start()
    result = parent.recv()
    p.join()
    if p.exitcode:
        raise SystemExit(f"{fn.__name__} failed (exit {p.exitcode})")
    return result


def write_layout(root: Path, segments: int, shards: int, mean: float, layout: str) -> float:
    """Sources, then the arrays and WAVs in ``layout``; returns the audio seconds."""
    rng = np.random.default_rng(0)
    lines, total = [], 0.0
    per_shard = -(-segments // shards)
    for s in range(shards):
        shard = f"shard-{s:04d}"
        src = root / "audio" / f"source_{s:04d}.wav"
        src.parent.mkdir(parents=True, exist_ok=True)
        sf.write(src, speechlike(SOURCE_SECONDS, rng), SR, subtype="PCM_16")
        offset, index, shard_lines, wav_lines = 0.0, [], [], []
        tts_scratch = Scratch(root / "scratch" / shard / "tts", [Kind(k, DTYPES[k]) for k in ARRAYS])
        s2s_scratch = Scratch(root / "scratch" / shard / "s2s", [Kind("wav", WAV)])
        for k in range(min(per_shard, segments - s * per_shard)):
            dur = round(float(rng.uniform(0.5, 1.5) * mean), 3)
            if offset + dur > SOURCE_SECONDS:
                offset = 0.0
            id_ = f"{shard}_{k:06d}"
            arrays = {
                "text_ids": rng.integers(0, 256, int(12 * dur) + 1, dtype=np.int32),
                "codes": rng.integers(0, 500, int(50 * dur), dtype=np.int32),
                "condition": rng.standard_normal(256).astype(np.float32),
                "emo_vec": rng.standard_normal(88).astype(np.float32),
            }
            line = {
                "id": id_,
                "dataset": "bench",
                "text": "synthetic words " * int(2 * dur + 1),
                "audio_filepath": str(src),
                "offset": round(offset, 3),
                "duration": dur,
                "speaker": f"spk{k % 50}",
            }
            for kind, a in arrays.items():
                tts_scratch.save(kind, id_, a)
            x = 0.5 * speechlike(dur, rng)  # the unit vocoder's resynthesis
            s2s_scratch.save("wav", id_, x)
            shard_lines.append(line)
            wav_lines.append({"id": id_, "wav_samples": len(x)})
            index.append({"id": id_})
            offset += dur
            total += dur
        tts_scratch.place(shard_lines, {k: root / "tts" / shard / k for k in ARRAYS}, layout)
        s2s_scratch.place(wav_lines, {"wav": root / "s2s" / shard}, layout)
        shutil.rmtree(root / "scratch" / shard)
        lines += shard_lines
        write_jsonl(root / "tts" / f"{shard}.features.jsonl", index)
    write_jsonl(root / "tts" / "train_manifest.jsonl", lines[len(lines) // 50 :])
    write_jsonl(root / "tts" / "val_manifest.jsonl", lines[: len(lines) // 50])
    return total


def export_all(root: Path, shards: int, formats: list[str]) -> None:
    params = ExportParams(list(formats), SR, None)
    manifests = [str(root / "tts" / "train_manifest.jsonl"), str(root / "tts" / "val_manifest.jsonl")]
    names = [f"shard-{s:04d}" for s in range(shards)]
    lines = root / "export" / ".lines"
    features = [str(root / "tts" / f"{shard}.features.jsonl") for shard in names]
    export.run_lines(
        manifests, features, [str(lines / f"{shard}.jsonl") for shard in names], str(lines / "columns.json")
    )
    for shard in names:
        export.run_shard(
            str(lines / f"{shard}.jsonl"),
            str(lines / "columns.json"),
            str(root / "export"),
            str(root / "export" / f"{shard}.rejects.jsonl"),
            params,
            str(root / "export" / ".partial" / f"{shard}.jsonl"),
        )


def parse_args() -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=20)
    ap.add_argument("--mean-seconds", type=float, default=1.0)
    ap.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    ap.add_argument("--formats", nargs="+", default=list(export.FORMATS))
    ap.add_argument("--dir", help="work here and keep it (default: a temp dir, removed)")
    return ap.parse_args()


def measure_layout(a: argparse.Namespace, root: Path, layout: str, first: bool) -> dict:
    """Write ``layout`` and export from it, each in its own process; print their rows, return its report."""
    audio_s, wall_l, rss_l = in_child(write_layout, root, a.segments, a.shards, a.mean_seconds, layout)
    _, wall_e, rss_e = in_child(export_all, root, a.shards, a.formats)
    hours = audio_s / 3600
    if first:
        print(
            f"export scale: {a.segments} segments ({a.mean_seconds:g} s mean), {a.shards} shards, "
            f"{hours:.2f} h of audio; {os.cpu_count()} CPUs"
        )
        print(f"\n{'':40} {'wall':>8} {'peak RSS':>9} {'files':>9} {'GB':>8} {'files/seg':>9} {'GB/h':>7}")
    (f_tts, b_tts), (f_s2s, b_s2s) = tree(root / "tts"), tree(root / "s2s")
    files_l, bytes_l = f_tts + f_s2s, b_tts + b_s2s
    print(
        f"{layout + ' layout (S2S WAVs + TTS arrays)':40} {wall_l:7.1f}s {rss_l:7.0f}MB {files_l:9d} "
        f"{bytes_l / 1e9:8.3f} {files_l / a.segments:9.4f} {bytes_l / 1e9 / hours:7.3f}"
    )
    print(f"{'  export from it (all formats)':40} {wall_e:7.1f}s {rss_e:7.0f}MB")
    per_format = {}
    for fmt in a.formats:
        n, b = tree(root / "export" / fmt)
        per_format[fmt] = (n, b)
        print(f"{'    ' + fmt:40} {'':8} {'':9} {n:9d} {b / 1e9:8.3f} {n / a.segments:9.4f} {b / 1e9 / hours:7.3f}")
    return {
        "hours": hours,
        "layout": [files_l, bytes_l, wall_l, rss_l],
        "export": [wall_e, rss_e],
        "formats": per_format,
    }


def print_projection(a: argparse.Namespace, report: dict, segs_10k: float, shards_10k: float) -> None:
    """Files and terabytes of every layout and export format, scaled to ``HOURS_10K``."""
    print(f"\nprojection to {HOURS_10K:.0f} h ({segs_10k:.2e} segments of 8 s mean, {shards_10k:.0f} shards):")
    for layout, r in report.items():
        files_l, bytes_l = r["layout"][:2]
        # files: one per segment and kind; packed: one per shard and kind (+ the shard's directories)
        per = segs_10k / a.segments if layout == "files" else shards_10k / a.shards
        print(f"  {layout} layout: {files_l * per:.2e} files, {bytes_l / r['hours'] * HOURS_10K / 1e12:.2f} TB")
    r = next(iter(report.values()))
    for fmt, (n, b) in r["formats"].items():
        print(
            f"  export {fmt}: {n / a.shards * shards_10k:.2e} files at {a.segments // a.shards} segments "
            f"per shard, {b / r['hours'] * HOURS_10K / 1e12:.2f} TB"
        )


def main() -> None:
    a = parse_args()
    base = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="export_scale_"))
    segs_10k = HOURS_10K * SEGMENTS_PER_HOUR_10K
    shards_10k = segs_10k / (a.segments / a.shards)
    report: dict = {}
    try:
        for layout in a.layouts:
            report[layout] = measure_layout(a, base / layout, layout, first=not report)
        print_projection(a, report, segs_10k, shards_10k)
        print(json.dumps(report))
    finally:
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
