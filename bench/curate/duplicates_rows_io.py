#!/usr/bin/env python3
"""Scattered fingerprint rows: bytes read from disk and time, with and without read-ahead.

    .venvs/curate/bin/python bench/curate/duplicates_rows_io.py DIR [--rows 100000] [--runs 2]

``DIR`` holds ``shard-*.fingerprint.npy`` files as the curation measure job writes them
(``bench/curate/duplicates_scale.py --keep DIR`` leaves them). Each run reads ``--rows`` random rows
(sorted, as the duplicates job's verification asks for them) through
:class:`speechprep.curate.dupsearch.Rows`, which maps the files without read-ahead, and
through the same class with the files mapped plainly (read-ahead on), the two interleaved,
each run with other rows. It prints each run's wall time and the bytes the process read
from disk (``read_bytes`` of ``/proc/self/io``). The difference shows once the files
outgrow the page cache (10^7 segments: 26 GB of fingerprints); below that both read
nothing after the first runs. Figures: docs/benchmarks/curate.md, "Duplicates at scale".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from speechprep.curate.dupsearch import Rows  # noqa: E402


class PlainRows(Rows):
    """:class:`Rows` with its files mapped plainly (the kernel's read-ahead on)."""

    @staticmethod
    def _open(s, scattered: bool = False) -> np.ndarray:
        return Rows._open(s)


def read_bytes() -> int:
    for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    raise RuntimeError("no read_bytes in /proc/self/io")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    files = [str(p) for p in sorted(a.dir.glob("shard-*.fingerprint.npy"))]
    variants = {"without read-ahead (Rows)": Rows(files), "plain mapping": PlainRows(files)}
    n = int(variants["plain mapping"].offsets[-1])
    print(f"{len(files)} shards, {n:,} rows; {a.rows:,} random rows a run")
    rng = np.random.default_rng(0)
    got: dict[str, list[tuple[float, int]]] = {k: [] for k in variants}
    for _ in range(a.runs):
        for name, rows in variants.items():
            idx = np.unique(rng.integers(0, n, a.rows))
            t, r = time.perf_counter(), read_bytes()
            rows(idx)
            got[name].append((time.perf_counter() - t, read_bytes() - r))
            print(f"  {name}: {got[name][-1][0]:.1f} s, {got[name][-1][1] / 1e9:.2f} GB read", flush=True)
    for name, runs in got.items():
        secs, read = statistics.median(x[0] for x in runs), statistics.median(x[1] for x in runs)
        print(f"{name}: median {secs:.1f} s, {read / 1e9:.2f} GB read ({read / a.rows / 1e3:.1f} KB a row)")


if __name__ == "__main__":
    main()
