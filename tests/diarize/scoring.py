"""How the tests score a diarization against the truth a conversation was built with."""

from __future__ import annotations

from speechprep.diarize import scoring as score
from speechprep.diarize.core import FileDiarization


def reference(conv) -> score.Reference:
    """A built conversation's truth as reference turns: its turns and the voices talking over them."""
    return score.Reference([*conv.turns, *conv.overlaps], conv.duration)


def changes_handled(conv, result: FileDiarization, tolerance: float = 0.5) -> tuple[int, int]:
    """``(handled, total)`` over the VAD segments holding a true speaker change: handled when
    dropped, or cut within ``tolerance`` s of every change inside it."""
    return score.changes_handled(reference(conv), result, tolerance)


def overlap_removed(conv, result: FileDiarization) -> tuple[float, float]:
    """``(seconds, total)``: the overlapped seconds of the truth that no kept one-voice piece holds."""
    return score.overlap_removed(reference(conv), result)


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
    """pyannote.metrics' diarization error rate over the whole file (``collar``: seconds around
    each reference boundary left out, half on each side)."""
    return score.der(reference(conv), result, collar)
