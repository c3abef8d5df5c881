#!/usr/bin/env python3
"""Duplicates at scale: the ``curate duplicates`` job on synthetic MinHash signatures.

    .venvs/curate/bin/python bench/duplicates_scale.py [--sizes 100000 1000000]

Per size, shards of 10,000 segments as the measure job writes them: measurement
lines (id, pcm_sha256, dnsmos_ovrl, minhash flag) and a uint64 ``(rows, num_perm)``
MinHash array (``num_perm`` from the config). Signatures are random (no two alike)
except the planted duplicates: 1% exact copies (same PCM hash) and 1% near copies
(another segment's signature with a quarter of its values replaced: estimated
Jaccard about 0.75, above the config's ``near_duplicate_jaccard``), each of a
random earlier segment, in any shard. The job
(:func:`speechprep.curate.stage.run_duplicates`: read every shard, LSH over every
signature, groups, one kept per group, per-shard output) runs in a fresh process
per size; prints its wall time, peak RSS and the duplicates found against those
planted. Figures: docs/benchmarks.md, "Duplicates at scale".
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

import numpy as np
from curate_jobs import in_fresh_process

SHARD = 10_000


def make(root: Path, n: int, num_perm: int, seed: int = 0) -> int:
    """Write the shards; return how many duplicates were planted."""
    from speechprep.core.jsonio import write_jsonl

    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, 2**32, (n, num_perm), dtype=np.uint64)  # datasketch's values are < 2^32
    sha = [hashlib.sha256(f"pcm{i}".encode("ascii")).hexdigest() for i in range(n)]
    kind = rng.random(n)
    planted = 0
    for i in range(1, n):
        src = int(rng.integers(0, i))
        if kind[i] < 0.01:  # exact: the same PCM (and so the same units)
            sha[i], sigs[i] = sha[src], sigs[src]
            planted += 1
        elif kind[i] < 0.02:  # near: three quarters of the MinHash values shared
            sigs[i] = sigs[src]
            swap = rng.choice(num_perm, num_perm // 4, replace=False)
            sigs[i, swap] = rng.integers(0, 2**32, len(swap), dtype=np.uint64)
            planted += 1
    ovrl = rng.uniform(1.5, 3.5, n)
    for k, a in enumerate(range(0, n, SHARD)):
        b = min(a + SHARD, n)
        np.save(root / f"shard-{k:04d}.minhash.npy", sigs[a:b])
        write_jsonl(
            root / f"shard-{k:04d}.measures.jsonl",
            (
                {"id": f"s{i:07d}", "duration": 3.0, "pcm_sha256": sha[i], "dnsmos_ovrl": ovrl[i], "minhash": True}
                for i in range(a, b)
            ),
        )
    return planted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    a = ap.parse_args()
    from speechprep.core.jsonio import read_jsonl
    from speechprep.curate.params import job_section
    from tests.support import config

    cfg = config()
    params = job_section("duplicates", cfg)
    num_perm = cfg["curate"]["minhash_perm"]
    print(f"duplicates job params: {params}; {num_perm} MinHash values per segment")
    for n in a.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            t = time.perf_counter()
            planted = make(root, n, num_perm)
            made = time.perf_counter() - t
            m = in_fresh_process("duplicates", root, params)
            found = sum(1 for s in sorted(root.glob("shard-*.duplicates.jsonl")) for _ in read_jsonl(s))
            print(
                f"{n:>9,} segments (made in {made:.0f} s): {m['seconds']:.1f} s, peak RSS {m['peak_rss_mb']:.0f} MB; "
                f"{found:,} duplicates found ({m['exact']:,} exact, {m['near']:,} near), {planted:,} planted",
                flush=True,
            )


if __name__ == "__main__":
    main()
