"""Diarization by a Sortformer model (``diarize.model``: a NeMo ``SortformerEncLabelModel``
``.nemo``): who speaks when, and where two speak at once, straight from the model's frame
probabilities; no embedding arithmetic decides a turn or an overlap.

A file's VAD segments are grouped into model windows (:func:`model_windows`): runs of whole
segments spanning at most ``diarize.window`` seconds (a longer segment cut into window-long
parts), the audio between them included. Each window goes through the model once, and NeMo's
own post-processing (:func:`~speechprep.encoders.nemo_speaker.sortformer_turns`, thresholds
``diarize.onset`` / ``offset``) turns its probabilities into each of its speakers' turns, kept
where VAD found speech. The model tells at most its ``max_num_of_spks`` voices (4 in NVIDIA's
models) apart within a window; a file's windows are linked by the speaker model
(``speakers.model``): each window speaker's vector is the mean of the embedding windows
(:mod:`.embed`) over the frames it speaks alone, and a window's speakers are matched one to
one to the file's speakers so far (Hungarian assignment on cosine distance); a pair farther
apart than the pieces' cut (``speakers.diarize.threshold``, or its narrowband value) is a new
speaker, and two speakers of one window never become one.

Then, per model frame (80 ms) inside a VAD segment: one speaker active, that speaker's; two or
more, an overlap (the main voice the most probable over the stretch, the other the next); none,
the nearest frame's speaker in the segment (VAD heard speech; a segment without an active frame
goes to the speaker most probable over it). Cuts go where the speaker changes outside an
overlap, snapped to a pause as in the windowed path; the pieces are made by
:func:`.core.decide_segment`, except that no turn is too short to keep apart (``min_turn``
is the 1.6 s windows' limit, not this model's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..io.audio import SAMPLE_RATE, AudioError
from . import turns
from .cluster import normalise
from .core import FileDiarization, band, decide_segment, embed_windows
from .embed import Windows
from .params import DiarizeParams

NO_SPEAKER, OVERLAP = -1, -2  # frame labels besides a speaker's index


@dataclass
class SortformerModels:
    """A Sortformer diarizer (``__call__(clip) -> (frames, speakers)`` probabilities or an
    :class:`AudioError`, ``frame_seconds``, ``subsampling``, ``speakers``: as
    :class:`~speechprep.encoders.nemo_speaker.NemoSortformer`) and the speaker model whose
    windows link its windows (Resemblyzer's ``VoiceEncoder`` or an :class:`.embed.EncoderWindows`)."""

    diarizer: Any
    embedder: Any

    def __repr__(self) -> str:
        return f"{self.diarizer!r} linked by {self.embedder!r}"


def model_windows(segments: Sequence[tuple[float, float]], window: float) -> list[tuple[float, float]]:
    """``(start, end)`` of each model window: consecutive whole segments spanning at most
    ``window`` s, a segment longer than that cut into ``window``-long parts."""
    out: list[tuple[float, float]] = []
    for s, e in segments:
        while e - s > window:
            out.append((s, s + window))
            s += window
        if out and e - out[-1][0] <= window:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


@dataclass
class _Frames:
    """The file on the model's frame grid (frame ``i``: ``[i * step, (i + 1) * step)``): each
    segment's frames ``[a, b)`` (those whose centres it holds; at least the one its middle is
    in), and which frames lie in a segment."""

    step: float
    ranges: list[tuple[int, int]]
    inside: np.ndarray

    @classmethod
    def of(cls, segments: Sequence[tuple[float, float]], step: float) -> _Frames:
        n = int(np.ceil(max((e for _, e in segments), default=0.0) / step)) + 1
        ranges, inside = [], np.zeros(n, bool)
        for s, e in segments:
            a, b = max(0, int(np.ceil(s / step - 0.5))), min(n, int(np.ceil(e / step - 0.5)))
            if b <= a:
                a = min(n - 1, int((s + e) / 2 / step))
                b = a + 1
            ranges.append((a, b))
            inside[a:b] = True
        return cls(step, ranges, inside)


def _window_activity(models: SortformerModels, audio, a: float, b: float, frames: _Frames, p: DiarizeParams):
    """``(first frame, probabilities (m, S), active (m, S) bool)`` of one model window, its
    activity by NeMo's post-processing, kept inside VAD segments; None when the window is too
    short for a frame."""
    from ..encoders.nemo_speaker import sortformer_turns

    probs = models.diarizer(audio[int(round(a * SAMPLE_RATE)) : int(round(b * SAMPLE_RATE))])
    if isinstance(probs, AudioError):
        return None
    i0 = int(round(a / frames.step))
    m = max(0, min(len(probs), len(frames.inside) - i0))
    probs = np.asarray(probs[:m], np.float32)
    active = np.zeros(probs.shape, bool)
    for s, e, k in sortformer_turns(probs, models.diarizer.subsampling, p.onset, p.offset):
        active[int(round(s / frames.step)) : int(round(e / frames.step)), k] = True
    active &= frames.inside[i0 : i0 + m, None]
    return i0, probs, active


def _speaker_vectors(win: Windows, frames: _Frames, i0: int, active: np.ndarray) -> list[tuple[np.ndarray, float]]:
    """Per window speaker: (sum of the embedding windows over the frames it speaks alone,
    weighted by those frames; the weight), or over every frame it speaks when it never speaks alone."""
    lo = np.clip(np.round(win.start / frames.step).astype(np.int64) - i0, 0, len(active))
    hi = np.clip(np.round(win.end / frames.step).astype(np.int64) - i0, 0, len(active))
    alone = active & (active.sum(axis=1, keepdims=True) == 1)
    out = []
    for k in range(active.shape[1]):
        vec, weight = np.zeros(win.emb.shape[1]), 0.0
        for mask in (alone[:, k], active[:, k]):
            c = np.concatenate([[0], np.cumsum(mask)])
            w = (c[hi] - c[lo]).astype(np.float64)
            if w.sum() > 0:
                vec, weight = w @ win.emb.astype(np.float64), float(w.sum())
                break
        out.append((vec, weight))
    return out


def link(vectors: list[tuple[np.ndarray, float]], sums: list[np.ndarray], threshold: float) -> list[int]:
    """The file speaker each of a window's speakers is (one to one, within ``threshold`` cosine
    distance of the file speaker's pooled vector ``sums[g]``, else a new one appended to
    ``sums``); a window speaker with no speech (weight 0) maps to -1. ``sums`` grows in place."""
    from scipy.optimize import linear_sum_assignment

    speaking = [k for k, (_, w) in enumerate(vectors) if w > 0]
    out = [-1] * len(vectors)
    if sums and speaking:
        v = normalise(np.stack([vectors[k][0] for k in speaking]))
        dist = 1.0 - v @ normalise(np.stack(sums)).T
        for r, c in zip(*linear_sum_assignment(dist), strict=True):
            if dist[r, c] <= threshold:
                out[speaking[r]] = int(c)
    for k in speaking:
        if out[k] < 0:
            sums.append(np.zeros_like(vectors[k][0]))
            out[k] = len(sums) - 1
        sums[out[k]] += vectors[k][0]
    return out


def _file_activity(models, audio, segments, win: Windows, frames: _Frames, p: DiarizeParams):
    """``(probabilities (n, G), active (n, G), pooled vectors (G, dim), model windows, full
    windows)`` of the file's speakers on its frame grid, its windows linked."""
    n, sums, parts, full = len(frames.inside), [], [], 0
    spans = model_windows(segments, p.window)
    for a, b in spans:
        got = _window_activity(models, audio, a, b, frames, p)
        if got is None:
            continue
        i0, probs, active = got
        full += int(active.any(axis=0).all())
        parts.append((i0, probs, active, link(_speaker_vectors(win, frames, i0, active), sums, p.threshold)))
    probs_all, active_all = np.zeros((n, len(sums)), np.float32), np.zeros((n, len(sums)), bool)
    for i0, probs, active, mapping in parts:
        for k, g in enumerate(mapping):
            if g >= 0:
                probs_all[i0 : i0 + len(probs), g] = np.maximum(probs_all[i0 : i0 + len(probs), g], probs[:, k])
                active_all[i0 : i0 + len(probs), g] |= active[:, k]
    dim = win.emb.shape[1]
    return probs_all, active_all, np.stack(sums) if sums else np.zeros((0, dim)), len(spans), full


def _nearest(known: np.ndarray, n: int) -> np.ndarray:
    """For each of ``n`` positions, the nearest of the sorted positions ``known`` (not empty)."""
    at = np.arange(n)
    pos = np.searchsorted(known, at)
    left, right = known[np.maximum(pos - 1, 0)], known[np.minimum(pos, len(known) - 1)]
    return np.where(np.abs(at - left) <= np.abs(right - at), left, right)


def _frame_labels(probs: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(label, filled)`` of a segment's frames (``probs``, ``active``: its rows): a speaker,
    ``OVERLAP`` or ``NO_SPEAKER``; ``filled``: each frame's speaker (an overlap's most probable
    active one, a frame of nobody the nearest such frame's, a segment of nobody its most
    probable speaker)."""
    count = active.sum(axis=1)
    label = np.where(count == 1, np.argmax(active, axis=1), np.where(count > 1, OVERLAP, NO_SPEAKER))
    filled = np.where(count > 0, np.argmax(np.where(active, probs, -1.0), axis=1), NO_SPEAKER)
    known = np.flatnonzero(filled >= 0)
    if not len(known):
        return label, np.full(len(label), int(np.argmax(probs.mean(axis=0))))
    return label, filled[_nearest(known, len(label))]


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[a, b)`` of each run of True in ``mask``."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _segment(audio, span: tuple[float, float], k: int, rows, frames: _Frames, p: DiarizeParams):
    """Segment ``k``'s decision from ``rows``: ``(label, filled, probs, active)`` of its frames."""
    label, filled, probs, active = rows
    s, e = span
    first = frames.ranges[k][0]
    at = lambda i: min(e, max(s, (first + i) * frames.step))  # a frame's start, in the segment
    overlaps = []
    for a, b in _runs(label == OVERLAP):
        weight = np.where(active[a:b], probs[a:b], 0.0).sum(axis=0)
        main, other = (int(x) for x in np.argsort(-weight, kind="stable")[:2])
        overlaps.append((at(a), at(b), main, other))
    cuts = []
    for i in range(1, len(label)):
        if OVERLAP not in (label[i - 1], label[i]) and filled[i] != filled[i - 1]:
            cuts.append(turns.nearest_pause(audio, at(i), p.snap, p.pause_db, span))
    centre = (first + np.arange(len(label)) + 0.5) * frames.step

    def labels_at(x: float, y: float) -> int:
        inside = (centre >= x) & (centre <= y) & (label != OVERLAP)
        if not inside.any():
            return int(filled[np.argmin(np.abs(centre - (x + y) / 2))])
        return int(np.bincount(filled[inside]).argmax())

    return decide_segment(k, span, sorted(cuts), labels_at, overlaps, p)


def _decisions(audio, segments, probs: np.ndarray, active: np.ndarray, frames: _Frames, p: DiarizeParams):
    """``(decisions, speech s of each speaker, each frame's speaker)``, the speakers renumbered
    by their speech, most first (``order``: old index of each new one)."""
    rows, filled_all = [], np.full(len(frames.inside), NO_SPEAKER)
    for a, b in frames.ranges:
        label, filled = _frame_labels(probs[a:b], active[a:b])
        rows.append((label, filled))
        filled_all[a:b] = filled
    speech = np.bincount(filled_all[filled_all >= 0], minlength=probs.shape[1]) * frames.step
    order = np.argsort(-speech, kind="stable")
    new = np.argsort(order)  # old index -> new
    decisions = []
    for k, ((a, b), (label, filled)) in enumerate(zip(frames.ranges, rows, strict=True)):
        label = np.where(label >= 0, new[np.maximum(label, 0)], label)
        ranked = (label, new[filled], probs[a:b, order], active[a:b, order])
        decisions.append(_segment(audio, segments[k], k, ranked, frames, p))
    return decisions, speech[order], order, np.where(filled_all >= 0, new[np.maximum(filled_all, 0)], NO_SPEAKER)


def diarize_file(models: SortformerModels, audio, segments: Sequence[tuple[float, float]], p: DiarizeParams):
    """Diarize one file with a Sortformer (the module's docstring): ``audio`` 16 kHz mono
    float32 on the file's clock, ``segments`` its VAD segments ``(start, end)`` in seconds."""
    hz, narrow = band(audio, segments, p)
    p = replace(p.for_band(narrow), min_turn=0.0)
    win = embed_windows(models.embedder, audio, segments, p)
    if len(win) == 0:
        return FileDiarization(np.zeros((0, win.emb.shape[1]), np.float32), np.zeros(0), [], win, np.zeros(0, np.int64))
    frames = _Frames.of(segments, float(models.diarizer.frame_seconds))
    probs, active, sums, spans, full = _file_activity(models, audio, segments, win, frames, p)
    if not len(sums):  # the model heard nobody anywhere: the file is one speaker's
        probs, active = np.ones((len(frames.inside), 1), np.float32), np.zeros((len(frames.inside), 1), bool)
        sums = win.emb.astype(np.float64).sum(axis=0, keepdims=True)
    decisions, speech, order, filled = _decisions(audio, segments, probs, active, frames, p)
    at = np.clip((win.centre / frames.step).astype(np.int64), 0, len(filled) - 1)
    labels = np.maximum(filled[at], 0)
    result = FileDiarization(normalise(sums[order]).astype(np.float32), speech, decisions, win, labels)
    result.bandwidth_hz, result.narrow = hz, narrow
    result.extra = {"model_windows": spans, "model_windows_full": full}
    return result
