"""The S2S jobs' parameters (standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import ModelParams, StageParams, from_config


@dataclass(frozen=True)
class S2sParams(ModelParams):
    """``s2s`` in config/config.yaml (what each means is written there), with where the
    WAVs go (``tts.layout``: one file per segment, or packed per shard)."""

    SECTION = "s2s"
    hubert: str
    kmeans: str
    vocoder: str
    vocoder_config: str
    layer: int
    max_chunk_seconds: float
    max_duration: float
    dur_prediction: str
    runtime: str
    layout: str = from_config("tts.layout", run_only=True)  # where the WAVs go, not what they hold


@dataclass(frozen=True)
class S2sExportParams(StageParams):
    """The HuBERT export for ONNX Runtime: up to which layer."""

    SECTION = "s2s"
    layer: int
