"""The S2S jobs' parameters (standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import StageParams, from_config


@dataclass(frozen=True)
class S2sParams(StageParams):
    """``s2s`` in config/config.yaml (what each means is written there), with the
    shared ``model_failure`` rule, the model-digest cache and where the WAVs go
    (``tts.layout``: one file per segment, or packed per shard)."""

    SECTION = "s2s"
    hubert: str
    kmeans: str
    vocoder: str
    vocoder_config: str
    layer: int
    device: str
    batch_seconds: float
    max_chunk_seconds: float
    min_duration: float
    max_duration: float
    dur_prediction: str
    runtime: str
    layout: str = from_config("tts.layout")
    model_failure: dict = from_config("model_failure", run_only=True)
    hash_cache: str | None = from_config(None, run_only=True)


@dataclass(frozen=True)
class S2sExportParams(StageParams):
    """The HuBERT export for ONNX Runtime: up to which layer."""

    SECTION = "s2s"
    layer: int
