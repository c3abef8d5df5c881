"""The annotate job of a shard (rule ``curate_annotate``), on the model-batch runner
(:mod:`speechprep.core.modelstage`): what captions are made of, per segment.

Pitch and monotony from SwiftF0's F0 track (:mod:`.pitch`, :func:`.measures.pitch_measures`)
and reverberation from the segment's level (:func:`.measures.reverb_s`). A job of its
own beside the measure job: its settings (``curate.pitch_range_hz``, ``pitch_voicing``)
rerun neither DNSMOS nor the speaker encoder, and a run made before annotations existed
gains them without measuring again. Writes ``<s>.annotations.jsonl`` (``id`` and the
annotations, a line per segment read) and ``<s>.annotation_rejects.jsonl`` (segments
whose audio could not be read; the measure job rejects those too). The decide job joins
the lines to the measurements (docs/stages/curate.md, "Annotations").
"""

from __future__ import annotations

import importlib.metadata
from functools import cached_property
from typing import Any

import numpy as np

from ..core import modelstage
from ..core.modelstage import Accepted, ModelStage, Outcome, Rejected, ShardFiles
from ..io.audio import SAMPLE_RATE
from ..io.modelfiles import sha256_cached
from . import measures as M
from . import pitch as F0
from .decide import STAGE
from .params import AnnotateParams

MIN_VOICED_FRAMES = 8  # 128 ms of voice: fewer, and the segment has no pitch (None)
FIELDS = (*M.PITCH_FIELDS, "reverb")


def annotations(x: np.ndarray, p: AnnotateParams) -> dict[str, Any]:
    """The captions' measures of one decoded segment (16 kHz float32)."""
    f0 = F0.f0_track(x, SAMPLE_RATE, tuple(p.pitch_range_hz), p.pitch_voicing)
    return {**M.pitch_measures(f0, F0.FRAME_S, MIN_VOICED_FRAMES), "reverb": M.reverb_s(x, SAMPLE_RATE)}


class AnnotateStage(ModelStage):
    """The annotations of a shard's segments."""

    stage = STAGE
    version = "2"  # 2: reverberation from four bands
    error_reason = "annotation_error"
    reject_fields = ("offset", "duration")

    @cached_property
    def identity(self) -> dict[str, Any]:
        return {
            "swift_f0": {"path": F0.model_file(), "sha256": sha256_cached(F0.model_file(), self.p.hash_cache)},
            "packages": {n: importlib.metadata.version(n) for n in ("swift-f0", "onnxruntime", "numpy")},
        }

    def model_name(self) -> str:
        return "SwiftF0"

    def screen(self, s: dict) -> Rejected | None:
        return modelstage.too_short(s, self.p.min_duration, "curate.min_duration")

    def load(self, device: str, threads: int) -> None:
        F0.detector()

    def infer(self, inputs: list) -> list:
        return [annotations(x, self.p) for x in inputs]

    def accept(self, s: dict, prepared: Any, result: Any, scratch) -> Outcome:
        return Accepted(result)

    def line(self, s: dict, data: dict) -> dict:
        return {"id": s["id"], **data}


def run(files: ShardFiles, p: AnnotateParams, threads: int = 1) -> dict[str, Any]:
    """Annotate every segment of a shard (resumable per segment)."""
    return modelstage.run(AnnotateStage(p), files, threads)
