"""Pseudo speakers from per-segment speaker embeddings (L2-normalised, e.g. Resemblyzer's 256-d).

Scales to millions of segments with bounded memory:

1. a random sample (``speaker_sample`` segments, fixed seed) is clustered
   agglomeratively on cosine distance (``speaker_linkage``; with ``average`` two
   clusters merge while the mean distance between their members is under
   ``speaker_threshold``), and the number of speakers follows from the cut;
2. clusters with fewer than ``speaker_min_size`` sample members are dissolved
   (their segments go to the nearest remaining speaker, where the distance
   check of the decide job can drop them as outliers);
3. every segment is assigned to the nearest centroid (cosine), in chunks of
   ``speaker_chunk`` rows read from the embeddings (memory-mapped ``.npy``);
4. each centroid becomes the normalised mean of all its segments (one more
   chunked pass), and each segment's ``speaker_distance`` is its cosine distance
   to its speaker's centroid.

A segment whose input line names its ``speaker`` keeps it: such speakers'
centroids are the normalised means of their segments, and only unnamed
segments are clustered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .params import SpeakerParams

log = logging.getLogger("speechprep.curate")
CLUSTER_PREFIX = "cluster_"

Rows = Callable[[np.ndarray], np.ndarray]  # global row indices (sorted) -> (n, dim) float32


@dataclass
class Speakers:
    names: list[str]  # speaker of each centroid row
    centroids: np.ndarray  # (speakers, dim) float32, unit norm
    label: np.ndarray  # (segments,) index into names
    distance: np.ndarray  # (segments,) float32 cosine distance to its centroid
    sample_clusters: int  # clusters found in the sample (before dissolving small ones)


def _normalise(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.maximum(n, 1e-12)).astype(np.float32)


def _chunks(idx: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for a in range(0, len(idx), size):
        yield idx[a : a + size]


def cluster_sample(x: np.ndarray, threshold: float, method: str, min_size: int) -> tuple[np.ndarray, int]:
    """Centroids (unit norm) of the agglomerative clusters of ``x`` (scipy's ``method``:
    ``average``, ``complete``, ...) cut at cosine distance ``threshold``, largest first,
    those under ``min_size`` members left out (unless none reaches it: then all are
    kept); and how many clusters there were."""
    from scipy.cluster.hierarchy import fcluster, linkage

    if len(x) == 1:
        return _normalise(x), 1
    lab = fcluster(linkage(x.astype(np.float64), method=method, metric="cosine"), threshold, "distance")
    ids, first, counts = np.unique(lab, return_index=True, return_counts=True)
    order = sorted(range(len(ids)), key=lambda k: (-counts[k], first[k]))  # deterministic
    keep = [k for k in order if counts[k] >= min_size] or order
    return _normalise(np.stack([x[lab == ids[k]].mean(axis=0) for k in keep])), len(ids)


def purity(truth: Sequence, got: Sequence) -> tuple[float, float]:
    """``(purity, inverse purity)`` of clusters ``got`` against true classes ``truth``
    (one label each per item): the share of items in their cluster's majority class,
    and the share in their class's majority cluster. Splitting a speaker lowers the
    second, merging two the first."""
    from collections import Counter

    pairs = Counter(zip(truth, got, strict=True))
    by_cluster: dict = {}
    by_class: dict = {}
    for (t, g), c in pairs.items():
        by_cluster[g] = max(by_cluster.get(g, 0), c)
        by_class[t] = max(by_class.get(t, 0), c)
    n = max(len(truth), 1)
    return sum(by_cluster.values()) / n, sum(by_class.values()) / n


def nearest(rows: Rows, idx: np.ndarray, centroids: np.ndarray, chunk: int) -> np.ndarray:
    """Index of the nearest centroid (cosine) of each row in ``idx``."""
    out = np.empty(len(idx), np.int32)
    pos = 0
    for part in _chunks(idx, chunk):
        out[pos : pos + len(part)] = np.argmax(rows(part) @ centroids.T, axis=1)
        pos += len(part)
    return out


def _means(
    rows: Rows, idx: np.ndarray, label: np.ndarray, k: int, chunk: int, dim: int, dtype=np.float64
) -> np.ndarray:
    """Normalised mean of the rows of each label: per chunk, the rows sorted by label and
    summed per run (memory: the ``k`` sums in ``dtype``, one chunk of rows)."""
    sums = np.zeros((k, dim), dtype)
    pos = 0
    for part in _chunks(idx, chunk):
        lab = label[pos : pos + len(part)]
        order = np.argsort(lab, kind="stable")
        present, start = np.unique(lab[order], return_index=True)
        sums[present] += np.add.reduceat(rows(part)[order].astype(dtype), start, axis=0)
        pos += len(part)
    return _normalise(sums)


def _rows_any(rows: Rows, idx: np.ndarray) -> np.ndarray:
    """``rows`` of indices in any order (``rows`` itself wants them sorted)."""
    order = np.argsort(idx, kind="stable")
    got = rows(idx[order])
    out = np.empty_like(got)
    out[order] = got
    return out


def _distances(rows: Rows, idx: np.ndarray, label: np.ndarray, centroids: np.ndarray, chunk: int) -> np.ndarray:
    out = np.empty(len(idx), np.float32)
    pos = 0
    for part in _chunks(idx, chunk):
        lab = label[pos : pos + len(part)]
        out[pos : pos + len(part)] = 1.0 - np.einsum("ij,ij->i", rows(part), centroids[lab])
        pos += len(part)
    return np.maximum(out, 0.0)


def assign_speakers(
    rows: Rows,
    n: int,
    dim: int,
    given: Sequence[str | None],
    p: SpeakerParams,
) -> Speakers:
    """Speakers of ``n`` segments whose embeddings ``rows(indices)`` returns;
    ``given[i]`` is segment i's speaker from its input line, or None."""
    chunk = p.speaker_chunk
    given_a = np.asarray([g if g is not None else "" for g in given], dtype=object)
    named = np.flatnonzero(given_a != "")
    unnamed = np.flatnonzero(given_a == "")
    label = np.empty(n, np.int32)
    names: list[str] = []
    parts = []
    sample_clusters = 0
    if len(named):
        given_names = sorted(set(given_a[named]))
        index = {s: k for k, s in enumerate(given_names)}
        label[named] = [index[s] for s in given_a[named]]
        names += given_names
        parts.append(_means(rows, named, label[named], len(given_names), chunk, dim))
    if len(unnamed):
        rng = np.random.default_rng(p.speaker_seed)
        pick = np.sort(rng.choice(unnamed, size=min(p.speaker_sample, len(unnamed)), replace=False))
        c, sample_clusters = cluster_sample(rows(pick), p.speaker_threshold, p.speaker_linkage, p.speaker_min_size)
        log.info(
            "speakers: %d of %d unnamed segments sampled: %d clusters at %s-linkage cosine "
            "distance %.3f, %d with at least %d members",
            *(len(pick), len(unnamed), sample_clusters, p.speaker_linkage, p.speaker_threshold),
            *(len(c), p.speaker_min_size),
        )
        lab = nearest(rows, unnamed, c, chunk)
        means = _means(rows, unnamed, lab, len(c), chunk, dim)
        used = np.flatnonzero(np.bincount(lab, minlength=len(c)) > 0)  # a centroid may win no segment
        remap = np.full(len(c), -1, np.int32)
        remap[used] = np.arange(len(used))
        label[unnamed] = len(names) + remap[lab]
        names += [f"{CLUSTER_PREFIX}{k:04d}" for k in range(len(used))]
        parts.append(means[used])
    centroids = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
    everyone = np.arange(n)
    distance = _distances(rows, everyone, label, centroids, chunk) if n else np.zeros(0, np.float32)
    return Speakers(names, centroids, label, distance, sample_clusters)


def assign_speakers_by_file(
    rows: Rows,
    files: Sequence[str],
    dim: int,
    given: Sequence[str | None],
    p: SpeakerParams,
) -> Speakers:
    """:func:`assign_speakers` over source files instead of segments: the segments
    of a file without a given speaker are pooled (their mean embedding,
    normalised), files are clustered, and every such segment gets its file's
    speaker; a segment with a given speaker keeps it. Each segment's distance is
    its own, to its speaker's centroid. One speaker per file (audiobooks, read
    speech, most TTS corpora): pooled, two short phrases of one voice are far
    more alike than they are alone."""
    n, chunk = len(files), p.speaker_chunk
    unnamed = np.flatnonzero([g is None for g in given])
    named = np.flatnonzero([g is not None for g in given])
    names, file_of, counts = np.unique(
        np.asarray([files[i] for i in unnamed], dtype=object), return_inverse=True, return_counts=True
    )
    # a file of one segment is that segment's row; only files of several are pooled
    # (at 10^6 one-segment files nothing is copied; sums in float32: a file has few segments)
    several = counts > 1
    lone = np.full(len(names), -1, np.int64)  # the one segment of a one-segment file
    single = ~several[file_of]
    lone[file_of[single]] = unnamed[single]
    multi = np.cumsum(several) - 1  # a pooled file's row in `pooled`
    pooled = _means(rows, unnamed[~single], multi[file_of[~single]], int(several.sum()), chunk, dim, np.float32)
    # the items clustered: each named segment alone, then each file
    item_given = [given[i] for i in named] + [None] * len(names)

    def item_rows(idx: np.ndarray) -> np.ndarray:
        out = np.empty((len(idx), dim), np.float32)
        seg = idx < len(named)
        if seg.any():
            out[seg] = rows(named[idx[seg]])
        f = idx[~seg] - len(named)
        at = np.flatnonzero(~seg)
        one = ~several[f]
        if one.any():
            out[at[one]] = _rows_any(rows, lone[f[one]])
        out[at[~one]] = pooled[multi[f[~one]]]
        return out

    spk = assign_speakers(item_rows, len(item_given), dim, item_given, p)
    label = np.empty(n, np.int32)
    label[named] = spk.label[: len(named)]
    label[unnamed] = spk.label[len(named) + file_of]
    distance = _distances(rows, np.arange(n), label, spk.centroids, chunk) if n else np.zeros(0, np.float32)
    return Speakers(spk.names, spk.centroids, label, distance, spk.sample_clusters)
