#!/usr/bin/env python3
"""Candidate pairs of one fingerprint LSH band as the segments grow, against chance, with and
without the sketch check.

    .venvs/curate/bin/python bench/curate/duplicates_band_pairs.py DIR [--band 1] [--sizes 100000 1000000 10000000]

``DIR`` holds ``shard-*.fingerprint.npy`` files (``bench/curate/duplicates_scale.py --keep DIR``
leaves them). For the first N rows of each size, the band's items (one key per anchor, as
the duplicates job makes them: :func:`speechprep.curate.fingerprint.anchor_keys` with the
config's ``fingerprint_band_bits``) are paired as the job pairs them
(:func:`speechprep.curate.dupsearch.run_pairs_packed`, ``duplicate_max_run``). Prints the
items, the candidate pairs without the sketch check, the pairs that keys drawn at random
would give (items^2 / 2 / 2^bits: where the two meet, the band's candidates are chance
collisions, whose number grows with the square of the segments) and the candidate pairs
the job verifies: those whose anchors' sketches differ in at most
``fingerprint_sketch_max_diff`` bits. With ``--keys BITSxBANDS ...`` (e.g. ``24x42 32x32``),
also for each: the share of the real codec copies of bench/curate/duplicates_scale.py's pool (710
copies through GSM, G.722, Opus, MP3, 8 kHz, and their sources) that become candidates
(:func:`speechprep.curate.fingerprint.lsh_candidates`, without and with the sketch check),
and the chance pairs a band at the largest size. Figures:
docs/benchmarks/curate.md, "Duplicates at scale".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from speechprep.curate import dupsearch as D  # noqa: E402
from speechprep.curate import fingerprint as FP  # noqa: E402
from tests.support import config  # noqa: E402


def copies_found(P: dict, bits: int, bands: int, sketch_max: int) -> float:
    """The share of pool ``P``'s real codec copies that the LSH makes candidates with their source."""
    return float(FP.lsh_candidates(P["rows"][P["copy_of"]], P["copy_rows"], bits, bands, sketch_max).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--band", type=int, default=1)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    ap.add_argument("--keys", nargs="*", default=[], metavar="BITSxBANDS")
    a = ap.parse_args()
    cur = config()["curate"]
    bits, max_run, sketch_max = (
        cur["fingerprint_band_bits"], cur["duplicate_max_run"], cur["fingerprint_sketch_max_diff"]
    )  # fmt: skip
    rows = D.Rows([str(p) for p in sorted(a.dir.glob("shard-*.fingerprint.npy"))])
    top = min(max(a.sizes), int(rows.offsets[-1]))
    parts, sketches = [], []
    for start, block in rows.blocks():
        if start >= top:
            break
        keys, valid = FP.anchor_keys(block, a.band, bits)
        owner = np.broadcast_to(np.arange(start, start + len(block), dtype=np.uint64)[:, None], valid.shape)
        parts.append(keys[valid] << np.uint64(D.OWNER_BITS) | owner[valid])
        sketches.append(FP.anchor_sketches(block, a.band, bits)[valid])
    items, sketch = np.concatenate(parts), np.concatenate(sketches)
    row = items & np.uint64((1 << D.OWNER_BITS) - 1)
    print(f"band {a.band} of {bits} bits, duplicate_max_run {max_run}, fingerprint_sketch_max_diff {sketch_max}")
    for n in a.sizes:
        if n > top:
            break
        sub = row < n
        pairs, capped = D.run_pairs_packed(items[sub], n, max_run)  # (a copy: sorted in place)
        checked, _ = D.run_pairs_packed(items[sub], n, max_run, sketch[sub], sketch_max)
        chance = sub.sum() ** 2 / 2 / 2**bits
        print(
            f"{n:>12,} segments: {sub.sum():>12,} items, {len(pairs):>12,} candidate pairs "
            f"({capped} runs capped; by chance {chance:>14,.0f}), {len(checked):>10,} after the sketch check",
            flush=True,
        )
    if a.keys:
        from duplicates_scale import pool

        P = pool()  # read once for every BITSxBANDS
    for spec in a.keys:
        kb, nb = (int(x) for x in spec.split("x"))
        chance = sub.sum() ** 2 / 2 / 2**kb
        print(
            f"{kb} bits x {nb} bands: real codec copies candidates {copies_found(P, kb, nb, 64):.3f}, "
            f"{copies_found(P, kb, nb, sketch_max):.3f} with the sketch check; "
            f"{chance:,.0f} chance pairs a band at {n:,} segments",
            flush=True,
        )


if __name__ == "__main__":
    main()
