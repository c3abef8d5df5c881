"""S2S stage: HuBERT units and unit HiFi-GAN resynthesis of a shard's segments, on the
model-batch runner (:mod:`speechprep.core.modelstage`); the models are :mod:`.models`.

Each accepted segment gets its units (one per frame, not deduplicated), their
deduplicated form with durations, and a 16 kHz WAV: one file per segment in the
shard's directory, or every segment's in one ``packed.wav`` (``tts.layout``).
"""

from __future__ import annotations

import logging
import os
from functools import cached_property
from typing import Any

import numpy as np

from ..core import modelstage
from ..core.artifacts import WAV, Kind
from ..core.modelstage import Accepted, ModelStage, Rejected, ShardFiles
from ..io.audio import SAMPLE_RATE
from ..io.modelfiles import sha256_cached
from .models import Models, dedup, synthesize, units_for_batch
from .params import S2sParams
from .runtime import resolve_runtime

log = logging.getLogger("speechprep.s2s")
STAGE = "s2s"
MODEL_FILES = ("hubert", "kmeans", "vocoder", "vocoder_config")


def identity(p: S2sParams) -> dict[str, str]:
    """Each model file's absolute path and sha256 (cached per file version)."""
    out = {}
    for key in MODEL_FILES:
        path = getattr(p, key)
        out[key] = os.path.abspath(path)
        out[f"{key}_sha256"] = sha256_cached(path, p.hash_cache)
    return out


class S2sStage(ModelStage):
    """Units and resynthesised audio of a shard's segments. ``export``: the checked ONNX
    export of the HuBERT (``s2s.runtime`` onnxruntime); ``models``: loaded models (tests)."""

    stage = STAGE
    version = "1"
    kinds = (Kind("wav", WAV),)

    def __init__(self, p: S2sParams, export: str | None = None, models: Models | None = None):
        super().__init__(p)
        self.export, self.models = export, models

    @cached_property
    def identity(self) -> dict[str, Any]:
        return identity(self.p)

    def fingerprint(self) -> dict[str, Any]:
        from ..core.batching import resolve_device

        # the runtime as resolved: a resumed job does not mix runtimes
        return {**super().fingerprint(), "runtime": resolve_runtime(self.p.runtime, resolve_device(self.p.device))}

    def model_name(self) -> str:
        return f"{self.p.hubert} (k-means {self.p.kmeans}, vocoder {self.p.vocoder})"

    def screen(self, s: dict) -> Rejected | None:
        d = float(s["duration"])
        if d > self.p.max_duration:
            return Rejected("too_long", f"{d:.2f} s exceeds s2s.max_duration ({self.p.max_duration} s)")
        return None

    def load(self, device: str, threads: int) -> None:
        if self.models is None:
            self.models = Models(self.p, device, self.export, threads)

    def infer(self, audios: list[np.ndarray]) -> list[tuple[list[int], np.ndarray]]:
        m = self.models
        units = units_for_batch(m, audios, int(self.p.max_chunk_seconds * SAMPLE_RATE))
        return [(u, synthesize(m.vocoder, u, m.dur_prediction, m.device)) for u in units]

    def accept(self, s: dict, audio: Any, result: Any, scratch) -> Accepted:
        units, wav = result
        scratch.save("wav", s["id"], wav)
        return Accepted({"units": units, "frame_rate": self.models.frame_rate, "wav_samples": len(wav)})

    def line(self, s: dict, r: dict) -> dict:
        dd, durs = dedup(r["units"])
        return {
            "id": s["id"],
            "units": r["units"],
            "frame_rate": r["frame_rate"],
            "dedup_units": dd,
            "durations": durs,
            "wav": None,  # placed by the runner
            "wav_samples": r["wav_samples"],
            **self.identity,
        }


def run(
    files: ShardFiles, p: S2sParams, threads: int = 1, export: str | None = None, models: Models | None = None
) -> dict[str, Any]:
    """Units and resynthesised WAVs for every segment of a shard (resumable): the WAVs
    one per segment in ``files.arrays["wav"]``, or packed there (``p.layout``)."""
    return modelstage.run(S2sStage(p, export, models), files, threads)
