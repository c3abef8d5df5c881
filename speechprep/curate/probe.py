"""Synthetic inputs of the run-wide curation jobs, for the plan's memory probe
(:mod:`speechprep.workflow.probe`): ``n`` segments' measurement files as the measure job
writes them, in shards of :data:`SHARD` rows, written one shard at a time.

A pilot of a few hundred segments cannot show how these jobs grow; the same job on these
files at two sizes does. What is synthetic: the speakers job's embeddings (200 Gaussian
speakers on the unit sphere, every segment its own file, the default unit's worst case)
and the duplicates job's MinHash signatures (random) and fingerprints.

The duplicates job's memory grows with how many of its band keys collide, and a corpus's
keys collide mostly between one speaker's utterances. So its fingerprints are the pilot's
own real rows (their anchors, frames and speech as the corpus has them) in groups of
:data:`GROUP` segments, as bench/curate/duplicates_scale.py makes its background: a group is one
real row under one random word XORed into every anchor and one into every frame; each
member flips a further :data:`MEMBER_FLIP` of those words' bits (two members then differ in
28 % of their anchor bits, the median of real same-speaker pairs in
bench/curate/duplicates_calibration.py) and each of its frames :data:`FRAME_FLIP` of its own. No
copies are planted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..encoders import ResemblyzerEncoder
from ..io.jsonio import write_jsonl
from . import fingerprint as FP

SHARD = 10_000
SPEAKERS = 200
GROUP = 50  # segments that meet in the LSH as one speaker's utterances do (a divisor of SHARD)
MEMBER_FLIP = 0.17
FRAME_FLIP = 0.2


def _shards(n: int):
    """``(k, first, rows)`` of each shard of ``n`` rows."""
    for k, a in enumerate(range(0, n, SHARD)):
        yield k, a, min(SHARD, n - a)


def speakers(root: Path, n: int, like: dict, p):
    """The ``curate speakers`` job's files for ``n`` segments of one dataset, and ``p``."""
    rng = np.random.default_rng(0)
    dim = ResemblyzerEncoder.dim
    centres = rng.standard_normal((SPEAKERS, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    files: dict[str, list] = {"measures": [], "embeddings": [], "assign": []}
    for k, a, m in _shards(n):
        x = centres[rng.integers(0, SPEAKERS, m)] + 0.3 * rng.standard_normal((m, dim)) / np.sqrt(dim)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        files["embeddings"].append(str(root / f"shard-{k:04d}.embeddings.npy"))
        np.save(files["embeddings"][-1], x.astype(np.float32))
        files["measures"].append(str(root / f"shard-{k:04d}.measures.jsonl"))
        write_jsonl(files["measures"][-1], ({"id": f"s{a + i:09d}", "duration": 3.0} for i in range(m)))
        files["assign"].append(str(root / f"shard-{k:04d}.speakers.jsonl"))
    return {
        **files,
        "datasets": ["probe"],
        "shard_counts": [len(files["measures"])],
        "dataset_clusters": [str(root / "speaker_clusters.json")],
        "centroids_dir": str(root / "speakers"),
        "clusters": str(root / "run_speaker_clusters.json"),
        "centroids": str(root / "speaker_centroids.npy"),
    }, p


def _pool(where: str | None) -> np.ndarray | None:
    """The real fingerprint rows under ``where`` (the pilot's ``curate`` folder), if any."""
    found = sorted(Path(where).glob("*.fingerprint.npy")) if where else []
    rows = [r for r in (np.load(p) for p in found) if r.dtype == FP.DTYPE and len(r)]
    return np.concatenate(rows) if rows else None


def flips(rng: np.random.Generator, shape: tuple[int, ...], p: float, dtype) -> np.ndarray:
    """Random masks of ``dtype`` words whose bits are each set with probability ``p``."""
    bits = np.dtype(dtype).itemsize * 8
    if p == 0.5:
        return rng.integers(0, 2**bits, shape, dtype=np.uint64).astype(dtype)
    b = rng.integers(0, 1 << 16, (*shape, bits), dtype=np.uint16) < int(p * (1 << 16))
    return (b.astype(np.uint64) << np.arange(bits, dtype=np.uint64)).sum(axis=-1).astype(dtype)


def masked(rows: np.ndarray, anchor_mask: np.ndarray, frame_mask: np.ndarray) -> np.ndarray:
    """``rows`` with every anchor XORed with its ``anchor_mask`` row and every frame with its ``frame_mask`` word."""
    out = rows.copy()
    out["anchor_bits"] ^= anchor_mask[:, None, :]
    out["frame_bits"] ^= frame_mask[:, None]
    return out


def _fingerprints(rng: np.random.Generator, m: int, pool: np.ndarray | None) -> np.ndarray:
    """``m`` fingerprint rows (a whole number of groups but for the last), grouped on the real
    rows of ``pool``. Without a pool, random bits in every anchor and frame."""
    if pool is None:
        rows = np.zeros(m, FP.DTYPE)
        raw = rows.view(np.uint8).reshape(m, -1)
        raw[:] = rng.integers(0, 256, raw.shape, dtype=np.uint8)
        rows["n_anchors"], rows["n_frames"], rows["n_active"], rows["frame0"] = FP.ANCHORS, FP.FRAMES, FP.FRAMES, 0
        return rows
    g = np.arange(m) // GROUP
    groups = int(g[-1]) + 1 if m else 0
    base = pool[rng.integers(0, len(pool), groups)]
    anchor = flips(rng, (groups, FP.ANCHOR_BITS // 8), 0.5, np.uint8)[g]
    anchor ^= flips(rng, (m, FP.ANCHOR_BITS // 8), MEMBER_FLIP, np.uint8)
    frame = flips(rng, (groups,), 0.5, np.uint32)[g] ^ flips(rng, (m,), MEMBER_FLIP, np.uint32)
    rows = masked(base[g], anchor, frame)
    rows["frame_bits"] ^= flips(rng, (m, FP.FRAMES), FRAME_FLIP, np.uint32)
    return rows


def duplicates(root: Path, n: int, like: dict, p):
    """The ``curate duplicates`` job's files for ``n`` segments, and ``p``. ``like``: the
    signatures' width as the measure job writes them (``minhash_perm``) and a folder of real
    fingerprints to shape the rows on (``fingerprints``: the pilot's)."""
    rng = np.random.default_rng(0)
    perm = int(like.get("minhash_perm", 128))
    pool = _pool(like.get("fingerprints"))
    files: dict[str, list] = {"measures": [], "minhash": [], "fingerprint": [], "out": []}
    for k, a, m in _shards(n):
        stem = root / f"shard-{k:04d}"
        np.save(f"{stem}.fingerprint.npy", _fingerprints(rng, m, pool))
        np.save(f"{stem}.minhash.npy", rng.integers(0, 2**32, (m, perm), dtype=np.uint64))
        lines = (
            {
                "id": f"s{a + i:09d}",
                "duration": 3.0,
                "pcm_sha256": f"{a + i:064x}",
                "dnsmos_ovrl": 3.0,
                "snr_db": 40.0,
                "bandwidth_hz": 7000.0,
                "minhash": True,
                "fingerprint": True,
            }
            for i in range(m)
        )
        write_jsonl(f"{stem}.measures.jsonl", lines)
        for key, suffix in (("measures", "measures.jsonl"), ("minhash", "minhash.npy")):
            files[key].append(f"{stem}.{suffix}")
        files["fingerprint"].append(f"{stem}.fingerprint.npy")
        files["out"].append(f"{stem}.duplicates.jsonl")
    return {**files, "seen": str(root / "duplicates_seen.npy")}, p
