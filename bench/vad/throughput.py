#!/usr/bin/env python3
"""VAD throughput: the stage (run_shard) vs the bare TEN-VAD loop, same audio, same run.

    .venvs/vad/bin/python bench/vad/throughput.py [--files 40] [--seconds 30] [--repeats 3]

Baseline: one process reads each file as 16 kHz int16 and calls
``TenVad.process`` over its frames (what a hand-written script does).
Stage: ``speechprep.vad.stage.run_shard`` on a shard of the same files, with 1 and
with 2 worker processes (decode, resample check, segments, stats, checkpoint,
outputs included). Prints audio-seconds per second, medians over repeats,
and the ratios: per worker (target >= 0.95) and 2 workers vs 1 (target >= 1.8
on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from speechprep.demo.corpus import demo_audio
from speechprep.io.jsonio import write_jsonl
from speechprep.vad.stage import VadParams, run_shard
from tests.support import params

REPO = Path(__file__).resolve().parents[2]


def make_corpus(root: Path, n: int, seconds: float) -> list[dict]:
    pool = np.concatenate(demo_audio(REPO / "resources/demo/truth.json"))
    sr = 16000
    reps = int(np.ceil(seconds * sr / len(pool))) + 1
    pool = np.tile(pool, reps)
    entries = []
    for i in range(n):
        start = (i * 104729) % (len(pool) - int(seconds * sr))
        p = root / f"f{i:04d}.wav"
        sf.write(p, pool[start : start + int(seconds * sr)], sr, subtype="PCM_16")
        entries.append({"id": f"f{i:04d}", "audio_filepath": str(p)})
    return entries


def bare_loop(entries: list[dict], hop: int = 256, threshold: float = 0.5) -> float:
    from ten_vad import TenVad

    t = time.perf_counter()
    for e in entries:
        x, _ = sf.read(e["audio_filepath"], dtype="int16")
        vad = TenVad(hop, threshold)
        for i in range(len(x) // hop):
            vad.process(x[i * hop : (i + 1) * hop])
    return time.perf_counter() - t


def stage(entries: list[dict], shard: Path, out: Path, workers: int) -> float:
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    run_shard(
        str(shard),
        str(out / "seg.jsonl"),
        str(out / "stats.jsonl"),
        str(out / "rej.jsonl"),
        params(VadParams),
        workers,
        str(out / "resume.jsonl"),
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        entries = make_corpus(tmp, a.files, a.seconds)
        shard = tmp / "shard-0000.jsonl"
        write_jsonl(shard, entries)
        audio = a.files * a.seconds
        times = {"bare loop (1 process)": [], "stage, 1 worker": [], "stage, 2 workers": []}
        for r in range(a.repeats):  # interleaved, so drift hits all alike
            times["bare loop (1 process)"].append(bare_loop(entries))
            times["stage, 1 worker"].append(stage(entries, shard, tmp / f"o1-{r}", 1))
            times["stage, 2 workers"].append(stage(entries, shard, tmp / f"o2-{r}", 2))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"VAD throughput on {a.files} files x {a.seconds:.0f} s = {audio / 60:.1f} min of audio, "
        f"median of {a.repeats} runs"
    )
    for k, v in med.items():
        print(
            f"  {k:24s} {v:7.2f} s  {audio / v:8.1f} audio-s/s   (runs: "
            + ", ".join(f"{x:.2f}" for x in times[k])
            + ")"
        )
    per_worker = med["bare loop (1 process)"] / med["stage, 1 worker"]
    scaling = med["stage, 1 worker"] / med["stage, 2 workers"]
    print(f"stage per worker / bare loop: {per_worker:.3f}x   (target >= 0.95)")
    print(f"2 workers / 1 worker:         {scaling:.3f}x   (target >= 1.8 on an idle 2-core machine)")


if __name__ == "__main__":
    main()
