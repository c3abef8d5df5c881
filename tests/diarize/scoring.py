"""How the tests score a diarization against the truth a conversation was built with."""

from __future__ import annotations

from speechprep.diarize.core import FileDiarization


def _gaps(d) -> list[tuple[float, float]]:
    """The stretches of a segment that a decision cut out or cut at (piece boundaries inside it)."""
    edges = [d.start] + [x for p in d.pieces if not p.overlap for x in (p.start, p.end)] + [d.end]
    pairs = zip(edges[::2], edges[1::2])
    return [(a, b) for a, b in pairs if (a, b) not in ((d.start, d.start), (d.end, d.end))]


def _distance(t: float, gaps: list[tuple[float, float]]) -> float:
    return min((0.0 if a <= t <= b else min(abs(t - a), abs(t - b)) for a, b in gaps), default=float("inf"))


def changes_handled(conv, result: FileDiarization, tolerance: float = 0.5) -> tuple[int, int]:
    """``(handled, total)`` over the VAD segments holding a true speaker change: handled when
    dropped, or cut within ``tolerance`` s of every change inside it."""
    handled = total = 0
    for d in result.decisions:
        inside = [c for c in conv.changes() if d.start < c < d.end]
        if not inside:
            continue
        total += 1
        if d.reason is not None:
            handled += 1
            continue
        gaps = _gaps(d)
        handled += all(_distance(c, gaps) <= tolerance for c in inside)
    return handled, total


def overlap_removed(conv, result: FileDiarization) -> tuple[float, float]:
    """``(seconds, total)``: the overlapped seconds of the truth that no kept one-voice piece holds."""
    kept = [(p.start, p.end) for d in result.decisions for p in d.pieces if not p.overlap]
    total = removed = 0.0
    for s, e, _ in conv.overlaps:
        inside = sum(max(0.0, min(e, b) - max(s, a)) for a, b in kept)
        total += e - s
        removed += (e - s) - inside
    return removed, total


def touched(result: FileDiarization) -> tuple[int, int]:
    """``(cut or dropped, segments)``."""
    n = sum(1 for d in result.decisions if d.reason is not None or d.cut)
    return n, len(result.decisions)


def one_voice_kept(result: FileDiarization) -> tuple[float, float, int]:
    """``(seconds dropped, seconds of speech, speakers in the turns)`` of a one-voice file: what
    its decisions drop (segments rejected, overlap pieces, trimmed bits) and how many speakers
    its RTTM would name."""
    total = sum(d.end - d.start for d in result.decisions)
    kept = sum(p.end - p.start for d in result.decisions for p in d.pieces if not p.overlap)
    return total - kept, total, len({t.speaker for t in result.turns()})


def der(conv, result: FileDiarization, collar: float) -> float:
    """pyannote.metrics' diarization error rate (``collar``: seconds around each reference
    boundary left out, half on each side) over the whole file."""
    from pyannote.core import Annotation, Segment, Timeline
    from pyannote.metrics.diarization import DiarizationErrorRate

    ref, hyp = Annotation(uri="f"), Annotation(uri="f")
    for k, (s, e, v) in enumerate([*conv.turns, *conv.overlaps]):
        ref[Segment(s, e), k] = v
    for k, t in enumerate(result.turns()):
        hyp[Segment(t.start, t.end), k] = f"spk{t.speaker}"
    return DiarizationErrorRate(collar=collar)(ref, hyp, uem=Timeline([Segment(0, conv.duration)]))
