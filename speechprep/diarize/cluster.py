"""Speakers inside one file: change scores, pieces, clustering, a smoothed label per window.

1. :func:`change_scores`: at each window start, the cosine distance between the
   mean embedding of the windows just before it and of those just after it
   (``context`` seconds each side, within its VAD segment). Peaks mark candidate
   speaker changes.
2. :func:`split_pieces`: each VAD segment is cut at the peaks at or above
   ``change_threshold`` (an over-segmentation: a false cut costs nothing here,
   the clustering joins the pieces again).
3. :func:`cluster_pieces`: each piece's windows pooled (mean, normalised: a piece
   is to a file what a file is to the run's ``curate speakers`` job), the pieces
   clustered with scipy's agglomerative ``linkage`` on cosine distance, cut at
   ``threshold``; a local speaker with less than ``min_speaker`` seconds of
   windows is dissolved into the nearest other, and two whose centroids (all
   their windows pooled) are closer than ``speaker_threshold``, the run-wide
   clustering's cut, are joined: the run would take them for one speaker.
4. :func:`smooth_labels`: every window scored against every local speaker's
   centroid (cosine similarity), and a Viterbi path per VAD segment that pays
   ``switch_penalty`` per change of speaker: an isolated odd window does not
   make a turn, a run of them does.
"""

from __future__ import annotations

import numpy as np

from .embed import Windows

MAX_PIECES = 4000  # pieces clustered at once (the condensed distance matrix: 64 MB); more are sampled evenly
TOLERANCE = 0.13  # s: windows this far past a boundary still count on its side (mel frames are centred)


def normalise(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.maximum(n, 1e-12)).astype(np.float32)


def segment_ranges(win: Windows) -> list[tuple[int, int]]:
    """``[a, b)`` window index ranges of each VAD segment (windows are in time order)."""
    if len(win) == 0:
        return []
    cut = np.flatnonzero(np.diff(win.segment) != 0) + 1
    bounds = np.r_[0, cut, len(win)]
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def change_scores(win: Windows, context: float) -> np.ndarray:
    """Per window: cosine distance between the pooled windows that end by its start and begin
    within ``context`` before it, and those that start at or after it and end within ``context``
    after it; 0 where either side has none."""
    out = np.zeros(len(win), np.float32)
    for a, b in segment_ranges(win):
        s, e, x = win.start[a:b], win.end[a:b], win.emb[a:b].astype(np.float64)
        c = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
        for i in range(b - a):
            t = s[i]
            lo, hi = np.searchsorted(s, t - context - TOLERANCE), np.searchsorted(e, t + TOLERANCE, "right")
            r_hi = np.searchsorted(e, t + context + TOLERANCE, "right")
            if hi <= lo or r_hi <= i:
                continue
            left, right = c[hi] - c[lo], c[r_hi] - c[i]
            out[a + i] = 1.0 - left @ right / max(np.linalg.norm(left) * np.linalg.norm(right), 1e-12)
    return out


def split_pieces(win: Windows, scores: np.ndarray, threshold: float, context: float, hop: float) -> np.ndarray:
    """Piece id per window: a new piece at each VAD segment's first window and at each
    window whose score is at or above ``threshold`` and the highest within ``context``."""
    reach = max(1, int(round(context / hop)))
    piece = np.zeros(len(win), np.int64)
    cur = -1
    for a, b in segment_ranges(win):
        sc = scores[a:b]
        for i in range(b - a):
            peak = sc[i] >= threshold and sc[i] >= sc[max(0, i - reach) : i + reach + 1].max()
            if i == 0 or peak:
                cur += 1
            piece[a + i] = cur
    return piece


def _pooled(win: Windows, piece: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normalised mean embedding and window count of each piece (ids 0..n-1)."""
    n = int(piece.max()) + 1
    sums = np.zeros((n, win.emb.shape[1]), np.float64)
    np.add.at(sums, piece, win.emb)
    return normalise(sums), np.bincount(piece, minlength=n)


def cluster_pieces(
    win: Windows, piece: np.ndarray, threshold: float, method: str, min_speaker: float, hop: float, merge: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(centroids (k, dim), label of each piece)``: the pieces' pooled embeddings clustered
    (``method`` linkage, cosine, cut at ``threshold``); a speaker with fewer than ``min_speaker``
    seconds of windows joins the nearest bigger one, speakers whose centroids end under ``merge``
    apart are one (:func:`merge_close`); ordered by how much they speak."""
    from scipy.cluster.hierarchy import fcluster, linkage

    pooled, count = _pooled(win, piece)
    n = len(pooled)
    if n == 1:
        return pooled, np.zeros(1, np.int64)
    pick = np.unique(np.linspace(0, n - 1, min(n, MAX_PIECES)).round().astype(np.int64))
    lab = fcluster(linkage(pooled[pick].astype(np.float64), method=method, metric="cosine"), threshold, "distance")
    ids = np.unique(lab)
    weight = np.array([count[pick][lab == k].sum() for k in ids], np.float64)
    sums = np.stack([(pooled[pick][lab == k] * count[pick][lab == k, None]).sum(axis=0) for k in ids])
    order = np.argsort(-weight, kind="stable")
    big = [k for k in order if weight[k] * hop >= min_speaker] or [order[0]]
    centroids = normalise(sums[big])
    # every piece (sampled or not) to the nearest kept speaker, then centroids from what they won
    label = np.argmax(pooled @ centroids.T, axis=1)
    label = merge_close(pooled, count, label, merge)
    sums = np.zeros((int(label.max()) + 1, pooled.shape[1]), np.float64)
    np.add.at(sums, label, pooled * count[:, None])
    centroids = normalise(sums)
    return centroids, np.argmax(pooled @ centroids.T, axis=1)


def merge_close(pooled: np.ndarray, count: np.ndarray, label: np.ndarray, merge: float) -> np.ndarray:
    """Labels with every two speakers whose pooled centroids are under ``merge`` apart (cosine)
    joined, closest first, renumbered by speech: on the run's ``speaker_threshold`` the run-wide
    clustering would take them for one speaker anyway."""
    label = label.copy()
    while True:
        ids, weight = np.unique(label, return_counts=True)
        weight = np.array([count[label == k].sum() for k in ids])
        sums = np.stack([(pooled[label == k] * count[label == k, None]).sum(axis=0) for k in ids])
        c = normalise(sums)
        d = 1.0 - c @ c.T
        np.fill_diagonal(d, np.inf)
        i, j = np.unravel_index(np.argmin(d), d.shape)
        if len(ids) < 2 or d[i, j] >= merge:
            break
        keep, gone = (ids[i], ids[j]) if weight[i] >= weight[j] else (ids[j], ids[i])
        label[label == gone] = keep
    order = ids[np.argsort(-weight, kind="stable")]
    remap = np.zeros(int(label.max()) + 1, np.int64)
    remap[order] = np.arange(len(order))
    return remap[label]


def viterbi(score: np.ndarray, penalty: float) -> np.ndarray:
    """The label path maximising the summed ``score`` (n, k) minus ``penalty`` per change."""
    n, k = score.shape
    back = np.zeros((n, k), np.int64)
    total = score[0].astype(np.float64)
    for i in range(1, n):
        best = int(np.argmax(total))
        stay = total
        move = total[best] - penalty
        back[i] = np.where(stay >= move, np.arange(k), best)
        total = np.maximum(stay, move) + score[i]
    path = np.empty(n, np.int64)
    path[-1] = int(np.argmax(total))
    for i in range(n - 1, 0, -1):
        path[i - 1] = back[i, path[i]]
    return path


def smooth_labels(win: Windows, centroids: np.ndarray, penalty: float) -> np.ndarray:
    """Local speaker per window: a Viterbi path per VAD segment over the windows' cosine
    similarities to the centroids, ``penalty`` per change of speaker."""
    sim = win.emb @ centroids.T
    out = np.zeros(len(win), np.int64)
    for a, b in segment_ranges(win):
        out[a:b] = viterbi(sim[a:b], penalty)
    return out
