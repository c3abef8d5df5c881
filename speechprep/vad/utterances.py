"""VAD of a transcribed dataset (``text: given`` or ``verify``): a manifest line is one utterance.

Its text covers the whole line, so VAD never cuts it: the line becomes one
segments line, trimmed to its speech (from the first speech segment's start to
the last one's end, each padded by ``vad.pad`` as every segment is), the line's
own bounds kept as ``vad_offset``/``vad_duration`` (as ASR trimming keeps the
VAD bounds). A line without speech is rejected ``no_speech`` as any file is.

A line whose speech spans more than ``vad.max_segment`` is a long recording
with its text (an audiobook chapter and its book text): it is written whole,
``offset`` 0 and its ``duration``, with ``long_form: true``, for the align job
(:mod:`speechprep.asr.align`), which cuts it into utterances at sentence ends.
Nothing is cut blindly.

The statistics line is computed from VAD's speech segments as for any file
(speech ratio, silences), so ``vad/stats.csv`` reads the same for every
dataset; ``n_segments`` there counts VAD's speech segments, not lines.
"""

from __future__ import annotations

from typing import Any

from .params import VadParams

PASSTHROUGH = ("speaker", "language", "gender", "text", "text_filepath", "source_id", "channel")


def utterance_lines(
    entry: dict[str, Any], segments: list[tuple[float, float]], duration: float, p: VadParams
) -> list[dict[str, Any]]:
    """The one segments line of a transcribed dataset's manifest line (module docstring);
    ``segments``: VAD's padded speech segments, at least one."""
    fid = entry["id"]
    start, end = segments[0][0], segments[-1][1]
    line: dict[str, Any] = {"id": f"{fid}_0000", "file_id": fid, "audio_filepath": entry["audio_filepath"]}
    if end - start > p.max_segment:
        line.update(offset=0.0, duration=round(duration, 4), long_form=True)
    else:
        line.update(offset=round(start, 4), duration=round(end - start, 4))
        line.update(vad_offset=0.0, vad_duration=round(duration, 4))
    for key in PASSTHROUGH:
        if entry.get(key) is not None:
            line[key] = entry[key]
    return [line]
