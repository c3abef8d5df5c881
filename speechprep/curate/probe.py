"""Synthetic inputs of the run-wide curation jobs, for the plan's memory probe
(:mod:`speechprep.workflow.probe`): ``n`` segments' measurement files as the measure job
writes them, in shards of :data:`SHARD` rows, written one shard at a time.

A pilot of a few hundred segments cannot show how these jobs grow; the same job on these
files at two sizes does. What is synthetic: the speakers job's embeddings (200 Gaussian
speakers on the unit sphere, every segment its own file, the default unit's worst case)
and the duplicates job's MinHash signatures (random) and fingerprints (the pilot's own real
rows, XORed with random bits: their anchors and frames as the corpus has them, no copies;
how many of a corpus's keys collide in a band, which is what its memory grows with, is
that of random bits).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..encoders import ResemblyzerEncoder
from ..io.jsonio import write_jsonl
from . import fingerprint as FP

SHARD = 10_000
SPEAKERS = 200


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
    }, p


def _pool(where: str | None) -> np.ndarray | None:
    """The real fingerprint rows under ``where`` (the pilot's ``curate`` folder), if any."""
    found = sorted(Path(where).glob("*.fingerprint.npy")) if where else []
    rows = [r for r in (np.load(p) for p in found) if r.dtype == FP.DTYPE and len(r)]
    return np.concatenate(rows) if rows else None


def _fingerprints(rng: np.random.Generator, m: int, pool: np.ndarray | None) -> np.ndarray:
    """``m`` fingerprint rows, each a real one (``pool``) whose anchors and frames are XORed
    with random bits: the real rows' anchors, frames and speech, no two alike. Without a
    pool, random bits in every anchor and frame."""
    if pool is None:
        rows = np.zeros(m, FP.DTYPE)
        raw = rows.view(np.uint8).reshape(m, -1)
        raw[:] = rng.integers(0, 256, raw.shape, dtype=np.uint8)
        rows["n_anchors"], rows["n_frames"], rows["n_active"], rows["frame0"] = FP.ANCHORS, FP.FRAMES, FP.FRAMES, 0
        return rows
    rows = pool[rng.integers(0, len(pool), m)].copy()
    rows["anchor_bits"] ^= rng.integers(0, 256, rows["anchor_bits"].shape, dtype=np.uint8)
    rows["frame_bits"] ^= rng.integers(0, 2**32, rows["frame_bits"].shape, dtype=np.uint32)
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
