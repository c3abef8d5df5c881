"""Duplicates across a dataset: exact (same 16 kHz int16 PCM), acoustic (the same
recording through a codec, a resample, a gain change or another cut) and near (the
same S2S units).

* :func:`minhash_signature`: a segment's MinHash (datasketch) over the n-grams
  of its deduplicated HuBERT units (per shard, in the measure job); the acoustic
  fingerprint is :mod:`speechprep.curate.fingerprint`'s;
* :func:`speechprep.curate.dupsearch.find_duplicates`: exact groups by PCM sha256; acoustic pairs by LSH over
  fingerprint anchors, verified by :func:`speechprep.curate.fingerprint.compare`;
  near pairs by MinHash LSH (the banding datasketch's ``MinHashLSH`` picks)
  whose estimated Jaccard similarity reaches the threshold; groups are the
  connected components of all three (:mod:`speechprep.curate.dupsearch`, which
  the job runs over files, in bounded memory). One segment is
  kept per group (:func:`better`): a copy clearly less noisy (WADA SNR) or else
  clearly wider-band than another wins, then the best DNSMOS OVRL, then the
  smallest id (deterministic, whatever the shard order); every other one is a
  duplicate of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .measures import dedup_units

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

    grams = unit_ngrams(units, ngram)
    if not grams:
        return None
    m = MinHash(num_perm=num_perm, seed=MINHASH_SEED, scheme=MINHASH_SCHEME)
    m.update_batch(sorted(grams))
    return m.hashvalues.astype(np.uint64)


def unit_ngrams(units: Sequence[int] | None, ngram: int) -> set[bytes]:
    """The set of ``ngram``-grams of the deduplicated units (what :func:`minhash_signature`
    hashes); empty without units or with fewer than ``ngram`` of them."""
    u = dedup_units(list(units or ()))
    return {" ".join(map(str, u[i : i + ngram])).encode("ascii") for i in range(len(u) - ngram + 1)}


def unit_jaccard(a: Sequence[int], b: Sequence[int], ngram: int) -> float:
    """The exact Jaccard similarity of two unit sequences' n-gram sets (what the MinHash
    of :func:`minhash_signature` estimates); 0 where either has none."""
    x, y = unit_ngrams(a, ngram), unit_ngrams(b, ngram)
    return len(x & y) / len(x | y) if x and y else 0.0


@dataclass(frozen=True)
class Candidate:
    """What the duplicate search knows of a segment."""

    id: str
    pcm_sha256: str
    quality: float | None  # DNSMOS OVRL
    signature: np.ndarray | None  # MinHash values, or None
    snr_db: float | None = None
    bandwidth_hz: float | None = None
    fingerprint: np.ndarray | None = None  # a speechprep.curate.fingerprint row, or None


@dataclass(frozen=True)
class Duplicate:
    id: str
    duplicate_of: str
    kind: str  # "exact" | "acoustic" (fingerprint) | "near" (units) | "linked" (through other copies)
    similarity: (
        float  # 1.0 exact; else the fingerprint score or the units' estimated Jaccard similarity to the kept one
    )


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
