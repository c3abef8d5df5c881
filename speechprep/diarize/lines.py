"""A file's diarization as segment lines, rejects, RTTM turns and counts.

Each VAD segment line ends in exactly one of: the line itself (one speaker, not
cut), its pieces (cut at speaker changes; ids ``<segment id>_<k>``, ``k`` from 0
in time order, each naming its ``diarize_source``), or a reject (``multi_speaker``).
Overlap pieces are lines flagged ``overlap: true`` in the ASR view, rejects
(reason ``overlap``, the piece's id) in the TTS view. In a file of two or more local speakers every line carries
``diarize_speaker``, its local speaker (``spk<k>``, most speech first), which
curation's speakers job and the RTTM map to the run's speaker ids; a file of one
speaker keeps its lines as VAD wrote them (its speaker is the file's, ``spk0``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.rejects import reject
from ..io.audio import grid_span
from .core import FileDiarization, SegmentDecision
from .rttm import RttmTurn

STAGE = "diarize"


def local_name(k: int) -> str:
    return f"spk{k}"


def _piece_lines(line: dict[str, Any], d: SegmentDecision, named: bool) -> list[dict[str, Any]]:
    out = []
    for k, p in enumerate(d.pieces):
        new = dict(line)  # a segment not cut keeps its bounds as VAD wrote them
        if d.cut:
            lo = float(line.get("offset") or 0.0)
            new.update(zip(("offset", "duration"), grid_span(p.start, p.end, (lo, lo + float(line["duration"])))))
            new["id"] = f"{line['id']}_{k}"
            new["diarize_source"] = line["id"]
        if named:
            new["diarize_speaker"] = local_name(p.speaker)
        if p.overlap:
            new["overlap"] = True
            if p.other is not None:
                new["overlap_speaker"] = local_name(p.other)
        out.append(new)
    return out


def segment_lines(
    lines: Sequence[dict[str, Any]], result: FileDiarization, tts: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(kept lines, rejects)`` of a file's VAD segment ``lines`` (in the order their segments
    were diarized). ``tts``: overlap pieces are rejected ``overlap``; else kept, flagged."""
    kept, rejected = [], []
    named = len(result.centroids) > 1  # one speaker: the file's; its lines stay as VAD wrote them
    for d in result.decisions:
        line = lines[d.index]
        if d.reason is not None:
            rejected.append(
                reject(
                    line["id"],
                    line.get("audio_filepath"),
                    STAGE,
                    d.reason,
                    d.detail,
                    file_id=line.get("file_id"),
                    offset=line.get("offset"),
                    duration=line.get("duration"),
                )
            )
            continue
        for new in _piece_lines(line, d, named):
            if tts and new.get("overlap"):
                detail = f"two voices at once ({new['diarize_speaker']} and {new.get('overlap_speaker', '?')})"
                rejected.append(
                    reject(
                        new["id"],
                        new.get("audio_filepath"),
                        STAGE,
                        "overlap",
                        detail,
                        offset=new["offset"],
                        duration=new["duration"],
                        diarize_source=line["id"],
                    )
                )
            else:
                kept.append(new)
    return kept, rejected


def rttm_turns(file_id: str, result: FileDiarization, names: Sequence[str] | None = None) -> list[RttmTurn]:
    """The file's turns for RTTM, its speakers named ``names[k]`` (the run's ids, phase 2) or ``spk<k>``."""
    return [
        RttmTurn(
            file_id, round(t.start, 3), round(t.end - t.start, 3), names[t.speaker] if names else local_name(t.speaker)
        )
        for t in result.turns()
    ]


def turn_lines(file_id: str, lines: Sequence[dict[str, Any]], result: FileDiarization) -> list[dict[str, Any]]:
    """The file's turns as lines, time order: every piece kept in the ASR view (its local
    speaker, the VAD segment it came from), and for an overlap piece a second line for the
    voice mixed in; both of an overlap carry ``overlap: true``."""
    out = []
    for d in result.decisions:
        for p in d.pieces:
            base = {"file_id": file_id, "start": round(p.start, 3), "end": round(p.end, 3)}
            base["segment"] = lines[d.index]["id"]
            out.append({**base, "speaker": local_name(p.speaker), "overlap": p.overlap})
            if p.overlap and p.other is not None:
                out.append({**base, "speaker": local_name(p.other), "overlap": True})
    return sorted(out, key=lambda t: (t["start"], t["end"], t["speaker"]))


def speaker_lines(file_id: str, result: FileDiarization) -> list[dict[str, Any]]:
    """One line per local speaker of the file: its name, the seconds of windows it won, its
    centroid (unit norm, 6 decimals): what maps it to the run's speakers."""
    return [
        {
            "file_id": file_id,
            "diarize_speaker": local_name(k),
            "speech": round(float(result.speech[k]), 3),
            "centroid": [round(float(v), 6) for v in c],
        }
        for k, c in enumerate(result.centroids)
    ]


def counts(result: FileDiarization) -> dict[str, Any]:
    """Per file: speakers, segments kept/cut/dropped, and seconds: of its segments
    (``speech_s``), of those cut (``cut_s``), dropped per reason, flagged ``overlap``."""
    dec = result.decisions
    return {
        "speakers": len(result.centroids),
        "segments": len(dec),
        "cut": sum(d.cut for d in dec),
        "multi_speaker": sum(d.reason == "multi_speaker" for d in dec),
        "multi_speaker_s": round(sum(d.end - d.start for d in dec if d.reason == "multi_speaker"), 3),
        "overlap": sum(p.overlap for d in dec for p in d.pieces),
        "overlap_s": round(sum(p.end - p.start for d in dec for p in d.pieces if p.overlap), 3),
        "trimmed_s": round(sum(d.trimmed for d in dec), 3),
        "speech_s": round(sum(d.end - d.start for d in dec), 3),
        "cut_s": round(sum(d.end - d.start for d in dec if d.cut), 3),
    }
