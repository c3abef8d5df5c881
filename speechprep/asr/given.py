"""The ASR job of a ``text: given`` dataset: the given text is kept, no model is loaded.

Each utterance (VAD's trimmed line, or an utterance the align job cut from a
long recording) becomes an ASR line with its given ``text``, ``text_source:
"given"`` and ``words``/``confidence`` null (no model heard it). The checks
ASR makes before any model still hold: an utterance shorter than
``asr.min_duration`` is rejected ``too_short``, one longer than
``asr.max_duration`` ``too_long`` (a given utterance is never cut: its text
covers all of it). The align job's rejects (``files.passed``) are written
first into the rejects file, so the ASR stage accounts for every VAD line.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.modelstage import ShardFiles
from ..core.shardjob import Accepted, Rejected, ShardJob
from .params import AsrParams, GivenParams

log = logging.getLogger("speechprep.asr")
STAGE = "asr"
VERSION = "1"


def duration_screen(d: float | None, p: AsrParams | GivenParams, too_long_why: str) -> Rejected | None:
    """``too_long`` over ``asr.max_duration`` (``too_long_why``: what should have cut it),
    ``too_short`` under ``asr.min_duration``: the ASR stage's checks of a line's duration."""
    if d is not None and d > p.max_duration:
        return Rejected("too_long", f"{d:.2f} s exceeds asr.max_duration ({p.max_duration} s); {too_long_why}")
    if d is not None and d < p.min_duration:
        return Rejected("too_short", f"{d:.3f} s is below asr.min_duration ({p.min_duration} s)")
    return None


def screen(seg: dict[str, Any], p: AsrParams | GivenParams) -> Rejected | None:
    """The rejects decided from the line alone (a given utterance, or one ASR will verify)."""
    d = seg.get("duration")
    if seg.get("long_form"):
        return Rejected(
            "too_long",
            f"a recording of {d} s with its text, longer than vad.max_segment, reached ASR without the align job "
            "(its manifest duration said it was shorter: probe the files, or fix the manifest's durations)",
        )
    return duration_screen(d, p, "a given utterance is never cut")


def run(files: ShardFiles, p: AsrParams | GivenParams) -> dict[str, Any]:
    """Every utterance of ``files.items`` with its given text (module docstring): the job
    ``asr given`` (:class:`GivenParams`)."""
    job = ShardJob(STAGE, files.items, None, {"text": "given", **p.identity()}, VERSION)
    todo = job.todo(lambda seg: screen(seg, p))
    with job.running(todo):
        for seg in todo:
            job.emit(seg, Accepted({}))
    lines = [{**seg, "text_source": "given", "words": None, "confidence": None} for seg, _ in job.accepted()]
    log.info("%d utterances keep their given text (no ASR model loaded)", len(lines))
    return job.commit({files.out: lines}, files.rejects, files.passed_rejects(), given=len(lines))
