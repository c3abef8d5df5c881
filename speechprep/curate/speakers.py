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

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .params import SpeakerParams

log = logging.getLogger("speechprep.curate")
CLUSTER_PREFIX = "cluster_"
MEMBERS = 16  # items of each speaker a later run clusters its new items with

Rows = Callable[[np.ndarray], np.ndarray]  # global row indices (sorted) -> (n, dim) float32


@dataclass
class Speakers:
    names: list[str]  # speaker of each centroid row
    centroids: np.ndarray  # (speakers, dim) float32, unit norm
    label: np.ndarray  # (segments,) index into names
    distance: np.ndarray  # (segments,) float32 cosine distance to its centroid
    sample_clusters: int  # clusters found in the sample (before dissolving small ones)
    keys: Sequence[str | None] = ()  # the items clustered, by key (a file's: assign_speakers_by_file)
    item_label: np.ndarray | None = None  # each item's index into names (None: the items are the segments)
    members: tuple = ()  # (vectors, index into names): up to MEMBERS items of each cluster speaker


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


@dataclass
class Prior:
    """The cluster speakers of an earlier run (``speaker_state.npz``): each item's speaker by
    its key (a file's, or a segment's), and each speaker's centroid, both kept as they were."""

    speaker_of: dict[str, str]
    names: list[str]
    centroids: np.ndarray  # (speakers, dim) float32, unit norm
    members: np.ndarray  # (m, dim) float32: up to MEMBERS items of each speaker, as clustered
    member_of: np.ndarray  # (m,) index into names


def clustering(p: SpeakerParams) -> str:
    """The settings a run's clusters were made with, and the speaker model whose embeddings they
    cluster when it is not the built-in one: another makes them anew."""
    keys = (
        "speaker_unit",
        "speaker_sample",
        "speaker_linkage",
        "speaker_threshold",
        "speaker_min_size",
        "speaker_seed",
    )
    settings = {k: getattr(p, k) for k in keys}
    if p.speaker_model != "resemblyzer":
        settings["speaker_model"] = p.speaker_model_sha256 or p.speaker_model
    return json.dumps(settings, sort_keys=True)


def load_prior(path: str | Path, p: SpeakerParams) -> Prior | None:
    """The state :func:`save_prior` wrote with the same clustering settings, or None (none
    yet, another setting, or ``speaker_recluster``: clustered anew)."""
    if p.speaker_recluster:
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["clustering"]) != clustering(p):
                log.info("speakers: the clustering settings changed since %s: clustered anew", path)
                return None
            keys, of, names, centroids = z["item_keys"], z["item_speaker"], z["names"], z["centroids"]
            members, member_of = z["members"], z["member_of"]
    except (OSError, KeyError, ValueError):
        return None
    speaker_of = dict(zip(keys.tolist(), of.tolist(), strict=True))
    return Prior(speaker_of, names.tolist(), centroids.astype(np.float32), members.astype(np.float32), member_of)


def save_prior(path: str | Path, spk: Speakers, p: SpeakerParams) -> None:
    """Each keyed item's cluster speaker and every cluster speaker's centroid, for the next run."""
    from ..io.npyio import save_npz

    keys, items_label = spk.keys, spk.label if spk.item_label is None else spk.item_label
    cluster = np.asarray([n.startswith(CLUSTER_PREFIX) for n in spk.names], dtype=bool)
    keep = [i for i, k in enumerate(keys) if k is not None and cluster[items_label[i]]]
    save_npz(
        path,
        item_keys=np.asarray([keys[i] for i in keep], dtype=str),
        item_speaker=np.asarray([spk.names[items_label[i]] for i in keep], dtype=str),
        names=np.asarray([n for n, c in zip(spk.names, cluster, strict=True) if c], dtype=str),
        centroids=spk.centroids[cluster].astype(np.float32),
        members=spk.members[0],
        member_of=np.cumsum(cluster)[spk.members[1]] - 1,  # into the cluster speakers' names
        clustering=np.asarray(clustering(p)),
    )


def _cluster_unnamed(rows: Rows, unnamed: np.ndarray, dim: int, p: SpeakerParams, first: int):
    """Clusters of ``unnamed`` items from a sample: their labels (0..k-1), names (from
    ``cluster_<first>``), centroids (the normalised means), and the sample's cluster count."""
    chunk = p.speaker_chunk
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
    names = [f"{CLUSTER_PREFIX}{first + k:04d}" for k in range(len(used))]
    return remap[lab], names, means[used], sample_clusters


def _new_voices(rows: Rows, new: np.ndarray, prior: Prior, p: SpeakerParams) -> np.ndarray:
    """Centroids of the voices among ``new`` items that none of ``prior``'s speakers has: a
    sample of them clustered with the earlier speakers' members, as the first run clustered
    its sample (``speaker_linkage`` cut at ``speaker_threshold``); a cluster holding a member
    is that speaker's, one of new items alone (of ``speaker_min_size`` at least) a new voice."""
    from scipy.cluster.hierarchy import fcluster, linkage

    rng = np.random.default_rng(p.speaker_seed)
    pick = np.sort(rng.choice(new, size=min(p.speaker_sample, len(new)), replace=False))
    sampled = rows(pick)
    members = prior.members.reshape(-1, sampled.shape[1])  # none: (0, dim)
    x = np.concatenate([members, sampled]).astype(np.float64)
    if len(x) < 2:
        return _normalise(x[len(members) :])
    lab = fcluster(linkage(x, method=p.speaker_linkage, metric="cosine"), p.speaker_threshold, "distance")
    owned = set(lab[: len(members)].tolist())
    ids, first, counts = np.unique(lab[len(members) :], return_index=True, return_counts=True)
    order = sorted(range(len(ids)), key=lambda k: (-counts[k], first[k]))  # deterministic, as cluster_sample
    keep = [ids[k] for k in order if ids[k] not in owned and counts[k] >= p.speaker_min_size]
    sample = x[len(members) :]
    return (
        _normalise(np.stack([sample[lab[len(members) :] == c].mean(axis=0) for c in keep]))
        if keep
        else np.zeros((0, x.shape[1]), np.float32)
    )


def _join_prior(rows: Rows, unnamed: np.ndarray, keys: Sequence[str | None], prior: Prior, p: SpeakerParams):
    """Items an earlier run clustered keep their speaker; each new one goes to the nearest of
    the earlier speakers and the new voices (:func:`_new_voices`): ``(labels, new)``, labels
    into ``prior.names`` (or past them: a new voice, ``label - len(prior.names)``)."""
    index = {n: k for k, n in enumerate(prior.names)}
    lab = np.asarray([index.get(prior.speaker_of.get(keys[i]), -1) for i in unnamed], np.int32)
    new = np.flatnonzero(lab < 0)
    if len(new):
        voices = _new_voices(rows, unnamed[new], prior, p)
        lab[new] = nearest(rows, unnamed[new], np.concatenate([prior.centroids, voices]), p.speaker_chunk)
    return lab


def _members(rows: Rows, label: np.ndarray, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Up to MEMBERS items of each cluster speaker (its first ones): what a later run clusters
    its new items with (:class:`Prior`). One sort of the labels, whatever the speaker count."""
    order = np.argsort(label, kind="stable")
    ranked = label[order]
    rank = np.arange(len(order)) - np.searchsorted(ranked, ranked)  # place among its speaker's items
    cluster = np.asarray([n.startswith(CLUSTER_PREFIX) for n in names], dtype=bool)
    idx = np.sort(order[(rank < MEMBERS) & cluster[ranked]]) if len(order) else np.zeros(0, np.int64)
    return (rows(idx) if len(idx) else np.zeros((0, 0), np.float32)), label[idx]


def assign_speakers(
    rows: Rows,
    n: int,
    dim: int,
    given: Sequence[str | None],
    p: SpeakerParams,
    keys: Sequence[str | None] | None = None,
    prior: Prior | None = None,
) -> Speakers:
    """Speakers of ``n`` segments whose embeddings ``rows(indices)`` returns;
    ``given[i]`` is segment i's speaker from its input line, or None. With ``prior`` (an
    earlier run's, items named by ``keys``), its speakers stay as they were and only the
    items that join none of them are clustered, as new speakers."""
    given_a = np.asarray([g if g is not None else "" for g in given], dtype=object)
    named, unnamed = np.flatnonzero(given_a != ""), np.flatnonzero(given_a == "")
    label = np.empty(n, np.int32)
    names: list[str] = []
    parts = []
    sample_clusters = 0
    if len(named):
        given_names = sorted(set(given_a[named]))
        index = {s: k for k, s in enumerate(given_names)}
        label[named] = [index[s] for s in given_a[named]]
        names += given_names
        parts.append(_means(rows, named, label[named], len(given_names), p.speaker_chunk, dim))
    first = 0
    if prior is not None and len(unnamed):
        lab, old = _join_prior(rows, unnamed, keys, prior, p), len(prior.names)
        label[unnamed[lab < old]] = len(names) + lab[lab < old]
        names += prior.names
        parts.append(prior.centroids)
        first = 1 + max((int(x[len(CLUSTER_PREFIX) :]) for x in prior.names), default=-1)
        unnamed, lab = unnamed[lab >= old], lab[lab >= old] - old
        if len(unnamed):  # the new voices: named after the earlier ones, centroids their means
            used, lab = np.unique(lab, return_inverse=True)
            label[unnamed] = len(names) + lab
            names += [f"{CLUSTER_PREFIX}{first + k:04d}" for k in range(len(used))]
            parts.append(_means(rows, unnamed, lab, len(used), p.speaker_chunk, dim))
    elif len(unnamed):
        lab, new_names, centroids, sample_clusters = _cluster_unnamed(rows, unnamed, dim, p, first)
        label[unnamed] = len(names) + lab
        names += new_names
        parts.append(centroids)
    centroids = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
    distance = _distances(rows, np.arange(n), label, centroids, p.speaker_chunk) if n else np.zeros(0, np.float32)
    return Speakers(names, centroids, label, distance, sample_clusters, keys or (), None, _members(rows, label, names))


def assign_speakers_by_file(
    rows: Rows,
    files: Sequence[str],
    dim: int,
    given: Sequence[str | None],
    p: SpeakerParams,
    prior: Prior | None = None,
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

    keys = [None] * len(named) + names.tolist()  # a file is an item of the prior by its name
    spk = assign_speakers(item_rows, len(item_given), dim, item_given, p, keys, prior)
    label = np.empty(n, np.int32)
    label[named] = spk.label[: len(named)]
    label[unnamed] = spk.label[len(named) + file_of]
    distance = _distances(rows, np.arange(n), label, spk.centroids, chunk) if n else np.zeros(0, np.float32)
    return Speakers(spk.names, spk.centroids, label, distance, spk.sample_clusters, keys, spk.label, spk.members)
