#!/usr/bin/env python3
"""The duplicates job's record of the ids it searched, at corpus scale.

    .venvs/curate/bin/python bench/curate/duplicates_seen.py [--ids 1000000 10000000] [--shards 1000]

A corpus grown once: the record of ``N`` ids an earlier run searched is read, the
grown run's ids (those ``N`` and 2 % more, in ``--shards`` shards; ids like a manifest's:
a speaker folder and an utterance name, 30 characters) are added and it is written
again, as the job does
after its search (:class:`speechprep.curate.dupsearch.Seen`: sorted 16-byte digests, each
id's run and its MinHash and fingerprint rows' 8-byte digests),
against the record as text (a set of the ids' text, saved as a NumPy text array, as the
job kept it before). Each way runs in its own process: its wall, peak RSS above the
process's start (``ru_maxrss``, with the ids' table the job holds anyway) and the file's
size.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def ids_of(n: int, shards: int, start: int = 0) -> list[np.ndarray]:
    per = -(-n // shards)
    return [
        np.array([f"spk{i % 5000:04d}/utt{i:09d}_0000".encode() for i in range(a, min(a + per, start + n))])
        for a in range(start, start + n, per)
    ]


def one(way: str, n: int, shards: int, work: Path) -> dict:
    from speechprep.curate.dupsearch import Seen, Table

    ids = ids_of(n + n // 50, shards)  # the grown run's: the N searched before and 2 % new ones
    table = Table(ids, np.cumsum([0] + [len(x) for x in ids]), *([None] * 6))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    path = str(work / f"{way}.npy")
    t = time.perf_counter()
    if way == "digests":
        Seen.load(path).save_with(path, table)
    else:  # as before: the ids' text in a set, then a sorted NumPy text array
        seen = frozenset(np.load(path, allow_pickle=False).tolist())
        ours = {x.decode("utf-8") for a in table.ids for x in a.tolist()}
        np.save(path, np.asarray(sorted(seen | ours), dtype=str), allow_pickle=False)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "wall_s": round(wall, 1),
        "peak_mb_above_start": round(peak - base),
        "file_mb": round(Path(path).stat().st_size / 2**20),
    }


def earlier_record(way: str, n: int, shards: int, work: Path) -> None:
    from speechprep.curate.dupsearch import Seen

    ids = ids_of(n, shards)
    if way == "digests":
        np.save(work / "digests.npy", np.unique(np.concatenate([Seen.of(a.tolist()) for a in ids])))
    else:
        np.save(work / "text.npy", np.asarray(sorted(x.decode() for a in ids for x in a.tolist()), dtype=str))


def step_cmd(step: str, way: str, n: int, shards: int, work: str) -> list[str]:
    return [sys.executable, __file__, "--shards", str(shards), "--one", step, way, str(n), work]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--shards", type=int, default=1000)
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # STEP WAY N DIR, in a process of its own
    a = ap.parse_args()
    if a.one:
        step, way, n, work = a.one[0], a.one[1], int(a.one[2]), Path(a.one[3])
        if step == "write":
            earlier_record(way, n, a.shards, work)
        else:
            print(json.dumps(one(way, n, a.shards, work)))
        return
    print("ids searched before | ids of the grown run | record | wall (s) | peak RSS above start (MB) | file (MB)")
    for n in a.ids:
        for way in ("text", "digests"):
            with tempfile.TemporaryDirectory() as tmp:
                subprocess.run(step_cmd("write", way, n, a.shards, tmp), check=True)
                out = subprocess.run(step_cmd("measure", way, n, a.shards, tmp), capture_output=True, text=True)
                r = json.loads(out.stdout)
            print(f"{n:,} | {n + n // 50:,} | {way} | {r['wall_s']} | {r['peak_mb_above_start']} | {r['file_mb']}")


if __name__ == "__main__":
    main()
