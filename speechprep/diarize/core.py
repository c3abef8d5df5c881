"""One file: its audio and VAD segments in, speaker turns, overlaps and what to do with each segment out.

:func:`diarize_file` runs the steps of :mod:`.embed`, :mod:`.cluster` and
:mod:`.turns`, then decides per VAD segment (:func:`decide_segment`):

* one speaker and no overlap: kept as it is;
* speaker changes: cut at each (a pause within ``snap`` of the estimate when there
  is one); a piece shorter than ``min_speech`` is dropped (its seconds are
  counted, ``trimmed``);
* overlaps: the stretch becomes a piece of its own, flagged ``overlap`` (the
  TTS view drops it, reason ``overlap``; the ASR view keeps it, flagged);
* ``multi_speaker`` (the whole segment dropped) when it cannot be cut cleanly:
  two changes closer than ``min_turn`` (a turn shorter than one window, which
  the encoder cannot attribute), or nothing of ``min_speech`` left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from ..core.spectral import bandwidth_hz
from ..io.audio import SAMPLE_RATE
from . import cluster, turns
from .embed import EncoderWindows, Windows, window_embeddings, windows_per_batch
from .params import DiarizeParams


@dataclass(frozen=True)
class Piece:
    """A part of a VAD segment: one local speaker's speech, or an overlap (``speaker`` the main
    voice, ``other`` the one mixed in)."""

    start: float
    end: float
    speaker: int
    overlap: bool = False
    other: int | None = None


@dataclass
class SegmentDecision:
    index: int  # the VAD segment's index in the file's list
    start: float
    end: float
    pieces: list[Piece] = field(default_factory=list)  # empty when rejected
    reason: str | None = None  # "multi_speaker" when the segment is dropped whole
    detail: str = ""
    trimmed: float = 0.0  # seconds of pieces under min_speech dropped

    @property
    def cut(self) -> bool:
        return self.reason is None and (
            len(self.pieces) > 1 or (self.pieces[0].start, self.pieces[0].end) != (self.start, self.end)
        )


@dataclass
class FileDiarization:
    centroids: np.ndarray  # (speakers, dim) local speakers' centroids, unit norm
    speech: np.ndarray  # (speakers,) seconds of windows each speaker won
    decisions: list[SegmentDecision]
    windows: Windows
    labels: np.ndarray  # local speaker of each window
    bandwidth_hz: float | None = None  # the file's speech, measured (diarize.bandwidth: auto)
    narrow: bool = False  # diarized with the telephone-band parameters
    extra: dict = field(default_factory=dict)  # what the file's stats add (a Sortformer's windows)

    def turns(self) -> list[turns.Turn]:
        """Speaker turns, time order: every kept piece, and for an overlap both voices."""
        out = []
        for d in self.decisions:
            for p in d.pieces:
                out.append(turns.Turn(p.start, p.end, p.speaker))
                if p.overlap and p.other is not None:
                    out.append(turns.Turn(p.start, p.end, p.other))
        return sorted(out, key=lambda t: (t.start, t.end, t.speaker))


def _changes(
    audio: np.ndarray, win: Windows, labels: np.ndarray, centroids: np.ndarray, a: int, b: int, p: DiarizeParams
) -> list[float]:
    """Change times inside the segment whose windows are ``[a, b)``."""
    span = (float(win.start[a]), float(win.end[b - 1]))
    out = []
    for i in range(a, b - 1):
        if labels[i] != labels[i + 1]:
            t = turns.refine_change(win, a, b, i, centroids, int(labels[i]), int(labels[i + 1]))
            out.append(turns.nearest_pause(audio, t, p.snap, p.pause_db, span))
    return out


def decide_segment(
    index: int,
    span: tuple[float, float],
    cuts: list[float],
    labels_at,
    overlaps: list[tuple[float, float, int, int]],
    p: DiarizeParams,
) -> SegmentDecision:
    """The pieces of one segment: cut at ``cuts`` (sorted change times), ``overlaps``
    (``start, end, main, other``) as pieces of their own; ``labels_at(t0, t1)`` gives the local
    speaker of a stretch."""
    s, e = span
    d = SegmentDecision(index, s, e)
    close = [round(y - x, 2) for x, y in pairwise(cuts) if y - x < p.min_turn]
    if close:
        d.reason, d.detail = "multi_speaker", f"speaker changes {close} s apart (a turn shorter than {p.min_turn} s)"
        return d
    bounds = sorted({s, e, *[c for c in cuts if s < c < e]})
    for ov in overlaps:
        bounds = sorted({*bounds, max(s, ov[0]), min(e, ov[1])})
    for x, y in pairwise(bounds):
        ov = next((o for o in overlaps if o[0] <= (x + y) / 2 <= o[1]), None)
        if ov is not None:
            d.pieces.append(Piece(x, y, ov[2], True, ov[3]))
        elif y - x < p.min_speech and len(bounds) > 2:  # a segment not cut is kept, whatever its length
            d.trimmed += y - x
        else:
            d.pieces.append(Piece(x, y, labels_at(x, y)))
    if not d.pieces:
        d.reason, d.detail = "multi_speaker", f"no piece of {p.min_speech} s is left after cutting at {cuts}"
    return d


def _overlap_stretches(
    win: Windows, labels: np.ndarray, centroids: np.ndarray, p: DiarizeParams
) -> list[tuple[float, float, int, int, int]]:
    """``(start, end, main speaker, other speaker, segment)`` of every overlap."""
    score, _ = turns.pair_scores(win, centroids)
    evidence = turns.mix_evidence(win, labels, score, p.overlap_db_weight)
    for i, j in turns.excursions(win, labels, int(round(p.overlap_max / p.hop))):
        # shorter than a window: two voices in every window; longer: when it looks mixed
        if (j - i + 1) * p.hop < p.min_turn or evidence[i : j + 1].mean() >= p.overlap_floor:
            evidence[i : j + 1] = np.inf
            labels[i : j + 1] = labels[i - 1]  # a mix inside the voice around it, not its turn
    out = []
    for i, j, main in turns.overlap_runs(win, labels, evidence, p.overlap_floor, p.overlap_peak, p.overlap_windows):
        sim = win.emb[i : j + 1] @ centroids.T
        sim[:, main] = -np.inf  # the voice mixed in: the nearest other speaker, most often
        other = int(np.bincount(np.argmax(sim, axis=1)).argmax())
        out.append((win.centre[i] - p.overlap_pad, win.centre[j] + p.overlap_pad, main, other, int(win.segment[i])))
        labels[i : j + 1] = main  # the mixed windows are not a turn of the other voice
    return out


BAND_SECONDS = 30.0  # s of a file's speech its bandwidth is measured on


def band(audio: np.ndarray, segments: Sequence[tuple[float, float]], p: DiarizeParams) -> tuple[float | None, bool]:
    """``(bandwidth_hz, narrow)`` of a file: ``diarize.bandwidth`` says, or with ``auto`` the
    bandwidth of its first ``BAND_SECONDS`` of speech is under ``narrowband_hz`` (a telephone
    call reads about 4000 Hz whether stored at 8 or 16 kHz)."""
    if p.bandwidth != "auto":
        return None, p.bandwidth == "narrow"
    parts, n = [], 0
    for s, e in segments:
        parts.append(audio[int(s * SAMPLE_RATE) : int(e * SAMPLE_RATE)])
        n += len(parts[-1])
        if n >= BAND_SECONDS * SAMPLE_RATE:
            break
    hz = bandwidth_hz(np.concatenate(parts), SAMPLE_RATE, p.bandwidth_floor_db) if parts else None
    return hz, hz is not None and hz < p.narrowband_hz


def embed_windows(model, audio, segments: Sequence[tuple[float, float]], p: DiarizeParams) -> Windows:
    """The file's embedding windows (:mod:`.embed`): Resemblyzer's batched mels, or a lab's
    speaker model (:class:`.embed.EncoderWindows`)."""
    if isinstance(model, EncoderWindows):
        return model.window_embeddings(audio, segments, p.hop, p.batch)
    return window_embeddings(model, audio, segments, p.hop, windows_per_batch(model, p.batch))


def diarize_file(
    model, audio: np.ndarray, segments: Sequence[tuple[float, float]], p: DiarizeParams
) -> FileDiarization:
    """Diarize one file: ``audio`` 16 kHz mono float32 (the whole file), ``segments`` its VAD
    segments ``(start, end)`` in seconds, ``model`` Resemblyzer's ``VoiceEncoder``; a
    telephone-band file with its band's parameters (:func:`band`)."""
    hz, narrow = band(audio, segments, p)
    win = embed_windows(model, audio, segments, p)
    result = diarize_windows(audio, segments, win, p.for_band(narrow))
    result.bandwidth_hz, result.narrow = hz, narrow
    return result


def diarize_windows(
    audio: np.ndarray, segments: Sequence[tuple[float, float]], win: Windows, p: DiarizeParams
) -> FileDiarization:
    """:func:`diarize_file` from the file's windows, already embedded."""
    if len(win) == 0:
        return FileDiarization(np.zeros((0, 256), np.float32), np.zeros(0), [], win, np.zeros(0, np.int64))
    scores = cluster.change_scores(win, p.change_context)
    piece = cluster.split_pieces(win, scores, p.change_threshold, p.change_context, p.hop)
    centroids, _ = cluster.cluster_pieces(
        win, piece, p.threshold, p.speaker_linkage, p.min_speaker, p.hop, p.speaker_threshold
    )
    labels = cluster.smooth_labels(win, centroids, p.switch_penalty)
    overlaps = _overlap_stretches(win, labels, centroids, p)

    def labels_at(t0: float, t1: float, k: int) -> int:
        inside = (win.segment == k) & (win.centre >= t0) & (win.centre <= t1)
        if not inside.any():  # a piece narrower than the hop: the window nearest its middle
            near = np.flatnonzero(win.segment == k)
            return int(labels[near[np.argmin(np.abs(win.centre[near] - (t0 + t1) / 2))]])
        return int(np.bincount(labels[inside]).argmax())

    decisions = []
    for a, b in cluster.segment_ranges(win):
        k = int(win.segment[a])
        cuts = _changes(audio, win, labels, centroids, a, b, p)
        ovs = [o[:4] for o in overlaps if o[4] == k]
        d = decide_segment(k, segments[k], cuts, lambda x, y, k=k: labels_at(x, y, k), ovs, p)
        decisions.append(d)
    speech = np.bincount(labels, minlength=len(centroids)) * p.hop
    return FileDiarization(centroids, speech, decisions, win, labels)
