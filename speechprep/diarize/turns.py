"""From smoothed window labels to speaker turns, change points and overlaps.

* Change points: where a VAD segment's label path changes speaker (A to B), the
  windows around the switch are scored ``m = cos(e, c_B) - cos(e, c_A)`` and a
  ramp (A's level, rising linearly over one window length, B's level) is fitted
  to them by least squares: the change is where the ramp's window is half in B
  (:func:`refine_change`). Measured on real and synthetic voices with the
  speakers' true centroids, the ramp puts 97% of pause-free changes within
  0.5 s (median error 0.15 s), the label switch alone 96% (median 0.20 s). A
  pause (``pause_db`` under the segment's loud frames) within ``snap`` seconds
  of that estimate is taken as the cut instead.
* Overlaps: a 0 dB mix of two voices embeds near the normalised sum of their
  centroids: across speaker pairs, windows at least half overlapped score
  ``cos(e, pair) - max(cos(e, c_A), cos(e, c_B))`` of -0.005 (median), windows
  of one voice -0.10 (90% under -0.06). Windows of a pause-free change score as
  overlaps do, so a run of mixed windows is an overlap
  only where the speaker before it and after it is the same (A, mix, A). Runs of
  windows at or above ``overlap_floor`` peaking at ``overlap_peak`` or more, and
  at least ``overlap_db`` louder than the main voice's median window (two voices
  at 0 dB add 3 dB and fill the pauses of one), are flagged, from the run's
  first window centre to its last, widened by ``overlap_pad``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..io.audio import SAMPLE_RATE
from .cluster import normalise, segment_ranges
from .embed import WINDOW_S, Windows

LOUDER_CAP_DB = 4.0  # two voices at 0 dB are 3 dB louder than one: more says nothing about a mix


@dataclass(frozen=True)
class Turn:
    start: float
    end: float
    speaker: int  # local speaker (index into the file's centroids)


def ramp_fit(start: np.ndarray, m: np.ndarray, lo: float, hi: float, step: float = 0.01) -> float | None:
    """The change time ``tau`` in ``[lo, hi]`` whose ramp (``m`` constant before the windows that
    reach ``tau``, rising linearly across one window length, constant after) fits best; None
    when no rising ramp fits."""
    best, best_tau = np.inf, None
    X = np.ones((len(start), 2))
    for tau in np.arange(lo, hi + step / 2, step):
        X[:, 1] = np.clip((start + WINDOW_S - tau) / WINDOW_S, 0.0, 1.0)
        coef, *_ = np.linalg.lstsq(X, m, rcond=None)
        r = float(((X @ coef - m) ** 2).sum())
        if coef[1] > 0 and r < best:
            best, best_tau = r, float(tau)
    return best_tau


def frame_db(audio: np.ndarray, a: float, b: float, frame: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """``(centre times, dB)`` of ``frame``-second frames of ``audio`` between ``a`` and ``b`` s."""
    f = int(frame * SAMPLE_RATE)
    i, j = int(max(0.0, a) * SAMPLE_RATE), int(min(len(audio) / SAMPLE_RATE, b) * SAMPLE_RATE)
    n = max(0, (j - i) // f)
    x = audio[i : i + n * f].astype(np.float64).reshape(n, f)
    return i / SAMPLE_RATE + (np.arange(n) + 0.5) * frame, 10 * np.log10(np.mean(x**2, axis=1) + 1e-12)


def nearest_pause(audio: np.ndarray, t: float, reach: float, depth_db: float, span: tuple[float, float]) -> float:
    """The centre of the pause (20 ms frames ``depth_db`` under the loud frames around) nearest
    to ``t`` within ``reach`` s and inside ``span``; ``t`` when there is none."""
    times, db = frame_db(audio, t - reach - 0.5, t + reach + 0.5)
    if len(db) == 0:
        return t
    quiet = (db < np.quantile(db, 0.75) - depth_db) & (np.abs(times - t) <= reach)
    quiet &= (times > span[0]) & (times < span[1])
    idx = np.flatnonzero(quiet)
    if len(idx) == 0:
        return t
    runs = np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1)
    return min((float(times[r].mean()) for r in runs), key=lambda c: abs(c - t))


def refine_change(win: Windows, a: int, b: int, i: int, centroids: np.ndarray, before: int, after: int) -> float:
    """The change time between window ``i`` (speaker ``before``) and ``i + 1`` (``after``) of the
    segment whose windows are ``[a, b)``: the ramp fitted to the windows within a window
    length and a half of the switch, else the midpoint of the two windows' centres."""
    centre = win.centre
    guess = (centre[i] + centre[i + 1]) / 2
    near = np.arange(a, b)[np.abs(centre[a:b] - guess) <= 1.5 * WINDOW_S]
    m = win.emb[near] @ centroids[after] - win.emb[near] @ centroids[before]
    tau = ramp_fit(win.start[near], m, guess - WINDOW_S / 2, guess + WINDOW_S / 2) if len(near) >= 3 else None
    return guess if tau is None else tau


def pair_scores(win: Windows, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per window: ``cos(e, pair) - max over the pair of cos(e, c)`` for its two most similar
    speakers' normalised sum (``pair``), and the index of the second one; -inf with one speaker."""
    if len(centroids) < 2:
        return np.full(len(win), -np.inf, np.float32), np.zeros(len(win), np.int64)
    sim = win.emb @ centroids.T
    top = np.argsort(-sim, axis=1)[:, :2]
    pair = normalise(centroids[top[:, 0]] + centroids[top[:, 1]])
    score = np.einsum("ij,ij->i", win.emb, pair) - sim[np.arange(len(win)), top[:, 0]]
    return score.astype(np.float32), top[:, 1]


def mix_evidence(win: Windows, labels: np.ndarray, score: np.ndarray, db_weight: float) -> np.ndarray:
    """Per window: how far its pair score is above its speaker's median pair score, plus
    ``db_weight`` per dB it is louder than its speaker's median window (two voices at 0 dB add
    3 dB and fill each other's pauses). Relative to the speaker's own windows: a voice that sits
    nearer the others in the encoder's space, or speaks louder, is not taken for a mix."""
    db = 20 * np.log10(np.maximum(win.rms, 1e-9))
    base = np.zeros((int(labels.max()) + 1 if len(labels) else 0, 2))
    finite = np.isfinite(score)
    for k in np.unique(labels):
        own = labels == k
        base[k] = np.median(score[own & finite]) if (own & finite).any() else 0.0, np.median(db[own])
    return score - base[labels, 0] + db_weight * np.clip(db - base[labels, 1], 0.0, LOUDER_CAP_DB)


def excursions(win: Windows, labels: np.ndarray, max_windows: int) -> list[tuple[int, int]]:
    """``[i, j]`` runs of another speaker's label no longer than ``max_windows`` with the same
    speaker on both sides in their segment (A, B, A): a short turn inside another's speech, an
    interjection, or an overlap whose mix the encoder took for B."""
    out = []
    for a, b in segment_ranges(win):
        lab = labels[a:b]
        cut = np.r_[0, np.flatnonzero(np.diff(lab)) + 1, b - a]
        for x in range(1, len(cut) - 2):
            i, j = cut[x], cut[x + 1]
            if j - i <= max_windows and lab[cut[x - 1]] == lab[j]:
                out.append((a + i, a + j - 1))
    return out


def overlap_runs(
    win: Windows, labels: np.ndarray, evidence: np.ndarray, floor: float, peak: float, min_windows: int
) -> list[tuple[int, int, int]]:
    """``(i, j, main speaker)``: window runs ``[i, j]`` (within a segment) whose ``evidence`` is at
    or above ``floor`` for at least ``min_windows`` and peaks at ``peak`` or more, and whose
    neighbours outside the run are the same speaker (the main one): a voice mixed into another's
    turn, not a change from one to the other. A run at a segment's edge counts when all its
    windows are the main speaker's."""
    out = []
    for a, b in segment_ranges(win):
        hit = np.r_[False, evidence[a:b] >= floor, False]
        edges = np.flatnonzero(np.diff(hit.astype(np.int8)))
        for k, j in zip(edges[::2], edges[1::2] - 1):  # run [k, j] within the segment
            left = int(labels[a + k - 1]) if k > 0 else None
            right = int(labels[a + j + 1]) if a + j + 1 < b else None
            inside = {int(x) for x in labels[a + k : a + j + 1]}
            if left is not None and right is not None:
                if left != right:
                    continue  # a change from one speaker to another
            elif (left is None and right is None) or inside != {left if left is not None else right}:
                continue  # the whole segment mixed, or a change at its edge
            # (inside an A ... A run the labels may dip into B: the mixed windows won B's label)
            if j - k + 1 >= min_windows and evidence[a + k : a + j + 1].max() >= peak:
                out.append((a + k, a + j, left if left is not None else right))
    return out
