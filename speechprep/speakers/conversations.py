"""Diarization's distances (``speakers.diarize``) chosen on a lab's conversations with reference
turns, for ``speakers calibrate`` (docs/stages/speakers.md, "Speaker models").

A conversation is a manifest line with ``turns``: ``[[start, end, speaker], ...]`` in seconds
from the clip's start (its ``offset``; turns of two voices may overlap). Its VAD segments are
the reference speech, turns under ``vad.min_silence`` apart joined, as VAD joins speech: what
is calibrated is the diarization, not the VAD. Each conversation is embedded once (the
configured speaker model's windows, as the diarize job makes them); every candidate is then
a :func:`~speechprep.diarize.core.diarize_windows` of those windows. The distances are chosen
one at a time, each over a grid of multiples of its current value (the model's scale is the
model's), the one of least mean DER on the calibration part (ties: the nearest to the current
value), two rounds; telephone-band conversations (measured as the job measures them) choose the
narrowband distances. The report part gives DER, the changes caught (a segment holding a
reference change, cut within 0.5 s of it or dropped) and the overlapped seconds kept out of
one-voice pieces.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..diarize.core import band, diarize_windows, embed_windows
from ..diarize.embed import Windows
from ..diarize.params import DiarizeParams
from ..diarize.scoring import Reference, changes_handled, der, overlap_removed
from ..errors import UsageError
from ..io.audio import SAMPLE_RATE, AudioError, read_segment

COLLAR = 0.25  # s around each reference boundary left out of DER (half each side)
FACTORS = np.round(np.arange(0.5, 2.01, 0.1), 2)  # a distance's candidates: these x its current value
WIDE = ("threshold", "change_threshold", "switch_penalty", "overlap_floor", "overlap_peak")
NARROW = ("narrowband_threshold", "narrowband_merge")


@dataclass
class Conversation:
    """One conversation of the sample, embedded: what every candidate diarizes."""

    name: str
    part: int
    audio: np.ndarray
    segments: list[tuple[float, float]]
    reference: Reference
    windows: Windows
    narrow: bool


def is_conversation(line: dict[str, Any]) -> bool:
    return isinstance(line.get("turns"), list)


def _reference(line: dict[str, Any], duration: float) -> Reference:
    try:
        turns = [(float(s), float(e), str(v)) for s, e, v in line["turns"]]
    except (TypeError, ValueError) as e:
        raise UsageError(f"{line['audio_filepath']}: turns must be [start, end, speaker] lists ({e})") from e
    if not turns or any(e <= s for s, e, _ in turns):
        raise UsageError(f"{line['audio_filepath']}: no turns, or a turn that ends before it starts")
    return Reference(turns, duration)


def load(lines: list[dict[str, Any]], part_of, model, p: DiarizeParams, min_silence: float) -> list[Conversation]:
    """The conversations of ``lines`` (``part_of(line)``: 0 or 1), each embedded by ``model``
    (as :func:`speechprep.diarize.stage.load_model` loads it); unreadable ones are skipped."""
    out = []
    for line in lines:
        try:
            audio = read_segment(line)
        except AudioError:
            continue
        ref = _reference(line, len(audio) / SAMPLE_RATE)
        segments = ref.speech(bridge=min_silence)
        _, narrow = band(audio, segments, p)
        win = embed_windows(model, audio, segments, p)
        name = str(line.get("file_id") or line["audio_filepath"])
        out.append(Conversation(name, part_of(line), audio, segments, ref, win, narrow))
    return out


def diarize(c: Conversation, p: DiarizeParams):
    return diarize_windows(c.audio, c.segments, c.windows, p.for_band(c.narrow))


def mean_der(convs: list[Conversation], p: DiarizeParams) -> float:
    return float(np.mean([der(c.reference, diarize(c, p), COLLAR) for c in convs]))


def choose(convs: list[Conversation], p: DiarizeParams) -> tuple[DiarizeParams, list[dict[str, Any]]]:
    """The distances of least mean DER on ``convs``, one at a time over :data:`FACTORS` of each's
    current value, two rounds; and each sweep's best (for the block's header)."""
    keys = [k for k in WIDE if any(not c.narrow for c in convs)] + [k for k in NARROW if any(c.narrow for c in convs)]
    sweeps = []
    for _ in range(2):
        for key in keys:
            now = float(getattr(p, key))
            tried = [round(float(now * f), 4) for f in FACTORS]
            best = min((mean_der(convs, replace(p, **{key: v})), abs(v - now), v) for v in tried)
            p = replace(p, **{key: best[2]})
            sweeps.append({"key": key, "value": best[2], "der": round(best[0], 4)})
    return p, sweeps


def figures(convs: list[Conversation], p: DiarizeParams) -> dict[str, Any]:
    """Mean DER, the changes caught and the overlapped seconds kept out of one-voice pieces."""
    handled = total = removed = overlapped = 0.0
    ders = []
    for c in convs:
        result = diarize(c, p)
        ders.append(der(c.reference, result, COLLAR))
        h, t = changes_handled(c.reference, result)
        r, o = overlap_removed(c.reference, result)
        handled, total, removed, overlapped = handled + h, total + t, removed + r, overlapped + o
    return {
        "conversations": len(convs),
        "der": round(float(np.mean(ders)), 4) if ders else None,
        "changes_caught": round(handled / total, 3) if total else None,
        "overlaps_caught": round(removed / overlapped, 3) if overlapped else None,
    }
