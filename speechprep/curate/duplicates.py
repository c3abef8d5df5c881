"""Duplicates across a dataset: exact (same 16 kHz int16 PCM) and near (the same
speech in other samples: a re-encode, another gain), found from S2S units.

* :func:`minhash_signature`: a segment's MinHash (datasketch) over the n-grams
  of its deduplicated HuBERT units (per shard, in the measure job);
* :func:`find_duplicates`: exact groups by PCM sha256, near pairs by MinHash
  LSH (``MinHashLSH``) whose estimated Jaccard similarity reaches the
  threshold; groups are the connected components of both. One segment is
  kept per group (:func:`better`): a copy clearly less noisy (WADA SNR) or else
  clearly wider-band than another wins, then the best DNSMOS OVRL, then the
  smallest id (deterministic, whatever the shard order); every other one is a
  duplicate of it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .measures import dedup_units

log = logging.getLogger("speechprep.curate")
MINHASH_SEED = 1
MINHASH_SCHEME = "affine32"  # datasketch's permutation scheme (stored signatures are only comparable within one)
# Which copy of a group is kept: DNSMOS OVRL alone ranks near copies by noise of its own
# (on the demo a copy with 30 dB of added noise, or an MP3, scores 0.01-0.13 above its
# source), so these signal measures decide first where they differ clearly.
KEEP_SNR_MARGIN_DB = 10.0  # a copy this much noisier (WADA SNR) is not kept over the other
KEEP_BANDWIDTH_MARGIN_HZ = 250.0  # nor one with this much less bandwidth (band-limited, lossy-coded)


def minhash_signature(units: Sequence[int] | None, ngram: int, num_perm: int) -> np.ndarray | None:
    """uint64 MinHash values (``num_perm``) of the set of ``ngram``-grams of the
    deduplicated units; ``None`` without units or with fewer than ``ngram`` of them."""
    from datasketch import MinHash

    if not units:
        return None
    u = dedup_units(list(units))
    if len(u) < ngram:
        return None
    grams = {" ".join(map(str, u[i : i + ngram])).encode("ascii") for i in range(len(u) - ngram + 1)}
    m = MinHash(num_perm=num_perm, seed=MINHASH_SEED, scheme=MINHASH_SCHEME)
    m.update_batch(sorted(grams))
    return m.hashvalues.astype(np.uint64)


@dataclass(frozen=True)
class Candidate:
    """What the duplicate search knows of a segment."""

    id: str
    pcm_sha256: str
    quality: float | None  # DNSMOS OVRL
    signature: np.ndarray | None  # MinHash values, or None
    snr_db: float | None = None
    bandwidth_hz: float | None = None


@dataclass(frozen=True)
class Duplicate:
    id: str
    duplicate_of: str
    kind: str  # "exact" | "near"
    similarity: float  # 1.0 for exact; the estimated Jaccard similarity to the kept one for near


class _Groups:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity of two MinHash signatures."""
    return float(np.count_nonzero(a == b)) / len(a)


def better(a: Candidate, b: Candidate) -> bool:
    """Whether copy ``a`` is kept rather than copy ``b``: the one at least
    :data:`KEEP_SNR_MARGIN_DB` less noisy, else the one at least
    :data:`KEEP_BANDWIDTH_MARGIN_HZ` wider-band, else the higher DNSMOS OVRL, else
    the smaller id (a measure missing on either side is skipped)."""
    for x, y, margin in (
        (a.snr_db, b.snr_db, KEEP_SNR_MARGIN_DB),
        (a.bandwidth_hz, b.bandwidth_hz, KEEP_BANDWIDTH_MARGIN_HZ),
    ):
        if x is not None and y is not None and abs(x - y) >= margin:
            return x > y
    qa = a.quality if a.quality is not None else -np.inf
    qb = b.quality if b.quality is not None else -np.inf
    return qa > qb if qa != qb else a.id < b.id


def _kept_copies(cands: list[Candidate], groups: _Groups) -> dict[int, int]:
    """Each member of a group of copies -> the copy kept (:func:`better`)."""
    members: dict[int, list[int]] = {}
    for i in range(len(cands)):
        members.setdefault(groups.find(i), []).append(i)
    keep_of: dict[int, int] = {}
    for m in members.values():
        if len(m) > 1:
            by_id = sorted(m, key=lambda i: cands[i].id)  # the margins are not transitive: a fixed order
            k = by_id[0]
            for i in by_id[1:]:
                if better(cands[i], cands[k]):
                    k = i
            for i in m:
                keep_of[i] = k
    return keep_of


def find_duplicates(cands: list[Candidate], threshold: float, num_perm: int) -> list[Duplicate]:
    """Every segment that duplicates a kept one (exactly or near), in input order."""
    from datasketch import LeanMinHash, MinHashLSH

    groups = _Groups(len(cands))
    exact: dict[str, int] = {}
    for i, c in enumerate(cands):
        j = exact.setdefault(c.pcm_sha256, i)
        if j != i:
            groups.union(i, j)
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    signed = [i for i, c in enumerate(cands) if c.signature is not None]

    def lean(i: int):
        return LeanMinHash(seed=MINHASH_SEED, hashvalues=cands[i].signature, scheme=MINHASH_SCHEME)

    for i in signed:
        lsh.insert(i, lean(i), check_duplication=False)
    near = 0
    for i in signed:
        for j in lsh.query(lean(i)):
            if j > i and jaccard(cands[i].signature, cands[j].signature) >= threshold:
                groups.union(i, j)
                near += 1
    keep_of = _kept_copies(cands, groups)
    out = []
    for i, c in enumerate(cands):
        k = keep_of.get(i)
        if k is None or k == i:
            continue
        if c.pcm_sha256 == cands[k].pcm_sha256:
            out.append(Duplicate(c.id, cands[k].id, "exact", 1.0))
        else:
            sim = (
                jaccard(c.signature, cands[k].signature)
                if c.signature is not None and cands[k].signature is not None
                else 0.0
            )
            out.append(Duplicate(c.id, cands[k].id, "near", sim))
    log.info(
        "duplicates: %d segments, %d exact copies, %d near pairs (MinHash Jaccard >= %.2f): "
        "%d duplicates of a kept segment",
        len(cands),
        len(cands) - len(exact),
        near,
        threshold,
        len(out),
    )
    return out
