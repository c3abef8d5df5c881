"""The ASR job's parameters (standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import StageParams, from_config, from_dataset


@dataclass(frozen=True)
class AsrParams(StageParams):
    """``asr`` in config/config.yaml (what each means is written there), with the
    dataset's language, the shared ``model_failure`` rule and the model-digest cache."""

    SECTION = "asr"
    model: str
    device: str
    language: str
    cpu_batch_seconds: float
    seconds_per_gib: float
    gpu_reserve_gib: float
    max_batch_seconds: float
    min_duration: float
    max_duration: float
    batch_timeout: float
    timestamps: bool
    trim: bool
    trim_pad: float
    dataset_language: str | None = from_dataset("language")
    model_failure: dict = from_config("model_failure")
    hash_cache: str | None = from_config(None)
