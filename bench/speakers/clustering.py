#!/usr/bin/env python3
"""Speaker clustering at scale: the ``curate speakers`` job on synthetic embeddings.

    .venvs/curate/bin/python bench/speakers/clustering.py [--sizes 100000 1000000] [--speakers 200]
        [--per-file 1] [--linkage complete --threshold 0.26]

Synthetic speakers: ``--speakers`` centres uniform on the 256-d unit sphere,
each segment its centre plus Gaussian noise (``--spread``, relative to the
unit norm), normalised, in shard files of 10,000 rows (float32 ``.npy``, what
the measure job writes) with minimal measurement lines (id, duration, and with
``--per-file N`` > 1 a ``file_id`` shared by N consecutive segments of one
speaker; with 1 every segment is its own file, the worst case of the default
``speaker_unit: file``). The job
(:func:`speechprep.curate.stage.run_speakers`: sample, clustering with the
config's linkage, chunked nearest-centroid assignment, centroid refinement, per-shard
assignment files) runs in a fresh process per size; prints its wall time, peak
RSS, the speakers found and the purity and inverse purity of the assignment
against the truth.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "curate"))
from fresh_process import in_fresh_process

SHARD = 10_000


def make(root: Path, n: int, speakers: int, spread: float, per_file: int = 1, dim: int = 256, seed: int = 0) -> None:
    from speechprep.io.jsonio import write_jsonl

    rng = np.random.default_rng(seed)
    c = rng.standard_normal((speakers, dim))
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    truth = []
    for k, a in enumerate(range(0, n, SHARD)):
        m = min(SHARD, n - a)
        who = np.repeat(rng.integers(0, speakers, -(-m // per_file)), per_file)[:m]
        x = c[who] + spread * rng.standard_normal((m, dim)) / np.sqrt(dim)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        np.save(root / f"shard-{k:04d}.embeddings.npy", x.astype(np.float32))
        lines = [{"id": f"s{k:04d}_{i:05d}", "duration": 3.0} for i in range(m)]
        if per_file > 1:
            for i, line in enumerate(lines):
                line["file_id"] = f"f{k:04d}_{i // per_file:05d}"
        write_jsonl(root / f"shard-{k:04d}.measures.jsonl", lines)
        truth.append(who)
    np.save(root / "truth.npy", np.concatenate(truth))


def purity(root: Path) -> tuple[float, float]:
    """(purity, inverse purity) of the assignment against the true speakers."""
    from speechprep.curate.speakers import purity
    from speechprep.io.jsonio import read_jsonl

    truth = np.load(root / "truth.npy")
    got = [a["speaker"] for s in sorted(root.glob("shard-*.speakers.jsonl")) for a in read_jsonl(s)]
    return purity(truth.tolist(), got)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--speakers", type=int, default=200)
    ap.add_argument("--spread", type=float, default=0.3)
    ap.add_argument("--per-file", type=int, default=1, help="segments per source file (1: each its own)")
    ap.add_argument("--linkage", help="speaker_linkage instead of the config's (to compare in one session)")
    ap.add_argument("--threshold", type=float, help="speaker_threshold instead of the config's")
    a = ap.parse_args()
    from dataclasses import asdict

    from speechprep.curate.params import SpeakerParams
    from tests.support import params as config_params

    params = asdict(config_params(SpeakerParams))
    params.update({k: v for k, v in (("speaker_linkage", a.linkage), ("speaker_threshold", a.threshold)) if v})
    print(f"speakers job params: {params}")
    for n in a.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            t = time.perf_counter()
            make(root, n, a.speakers, a.spread, a.per_file)
            made = time.perf_counter() - t
            m = in_fresh_process("speakers", root, params)
            pure, inverse = purity(root)
            print(
                f"{n:>9,} embeddings ({a.speakers} speakers, {a.per_file} per file, made in {made:.0f} s): "
                f"{m['seconds']:.1f} s, "
                f"peak RSS {m['peak_rss_mb']:.0f} MB, {m['speakers']} speakers found "
                f"({m['sample_clusters']} clusters in the sample), purity {pure:.4f}, inverse purity "
                f"{inverse:.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
