"""A file's diarization scored against reference turns: what the tests, the accuracy bench and
``speakers calibrate`` (diarization's distances chosen on a lab's conversations) measure.

:class:`Reference` holds the turns ``(start, end, speaker)`` (seconds; turns of two voices may
overlap). From them: the speaker changes (where one voice's turn gives way to another's: the
middle of the pause between them, whether or not there is one) and the overlaps (where two
voices' turns cross).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .core import FileDiarization, SegmentDecision


@dataclass
class Reference:
    turns: Sequence[tuple[float, float, str]]
    duration: float

    def changes(self) -> list[float]:
        """Times where the voice holding the floor gives way to another without talking over it."""
        out, holder = [], None
        for s, e, v in sorted(self.turns):
            if holder is not None and s >= holder[1] and v != holder[2]:
                out.append((holder[1] + s) / 2)
            if holder is None or e > holder[1]:
                holder = (s, e, v)
        return out

    def overlaps(self) -> list[tuple[float, float]]:
        """Stretches where two voices' turns cross, merged where they touch."""
        spans = []
        turns = sorted(self.turns)
        for i, (_, e, v) in enumerate(turns):
            for s2, e2, v2 in turns[i + 1 :]:
                if s2 >= e:
                    break
                if v2 != v:
                    spans.append((s2, min(e, e2)))
        merged: list[list[float]] = []
        for s, e in sorted(spans):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        return [(s, e) for s, e in merged]

    def speech(self, bridge: float = 0.0) -> list[tuple[float, float]]:
        """The speech: every turn, merged where they touch or lie under ``bridge`` s apart."""
        out: list[list[float]] = []
        for s, e, _ in sorted(self.turns):
            if out and s - out[-1][1] < max(bridge, 1e-12):
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return [(s, e) for s, e in out]


def _gaps(d: SegmentDecision) -> list[tuple[float, float]]:
    """The stretches of a segment that a decision cut out or cut at (piece boundaries inside it)."""
    edges = [d.start] + [x for p in d.pieces if not p.overlap for x in (p.start, p.end)] + [d.end]
    pairs = zip(edges[::2], edges[1::2], strict=True)
    return [(a, b) for a, b in pairs if (a, b) not in ((d.start, d.start), (d.end, d.end))]


def _distance(t: float, gaps: list[tuple[float, float]]) -> float:
    return min((0.0 if a <= t <= b else min(abs(t - a), abs(t - b)) for a, b in gaps), default=float("inf"))


def changes_handled(ref: Reference, result: FileDiarization, tolerance: float = 0.5) -> tuple[int, int]:
    """``(handled, total)`` over the VAD segments holding a reference speaker change: handled
    when dropped, or cut within ``tolerance`` s of every change inside it."""
    handled = total = 0
    changes = ref.changes()
    for d in result.decisions:
        inside = [c for c in changes if d.start < c < d.end]
        if not inside:
            continue
        total += 1
        if d.reason is not None:
            handled += 1
            continue
        gaps = _gaps(d)
        handled += all(_distance(c, gaps) <= tolerance for c in inside)
    return handled, total


def overlap_removed(ref: Reference, result: FileDiarization) -> tuple[float, float]:
    """``(seconds, total)``: the reference's overlapped seconds that no kept one-voice piece holds."""
    kept = [(p.start, p.end) for d in result.decisions for p in d.pieces if not p.overlap]
    total = removed = 0.0
    for s, e in ref.overlaps():
        inside = sum(max(0.0, min(e, b) - max(s, a)) for a, b in kept)
        total += e - s
        removed += (e - s) - inside
    return removed, total


def der(ref: Reference, result: FileDiarization, collar: float) -> float:
    """pyannote.metrics' diarization error rate (``collar``: seconds around each reference
    boundary left out, half on each side) over the whole file."""
    from pyannote.core import Annotation, Segment, Timeline
    from pyannote.metrics.diarization import DiarizationErrorRate

    truth, hyp = Annotation(uri="f"), Annotation(uri="f")
    for k, (s, e, v) in enumerate(ref.turns):
        truth[Segment(s, e), k] = v
    for k, t in enumerate(result.turns()):
        hyp[Segment(t.start, t.end), k] = f"spk{t.speaker}"
    return DiarizationErrorRate(collar=collar)(truth, hyp, uem=Timeline([Segment(0, ref.duration)]))
