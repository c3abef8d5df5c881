"""The export jobs' parameters (standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import StageParams


@dataclass(frozen=True)
class ExportParams(StageParams):
    """A shard's export: the formats, the audio's rate and loudness."""

    SECTION = "export"
    formats: list
    sample_rate: int
    lufs: float | None


@dataclass(frozen=True)
class BucketParams(StageParams):
    """A format's stats.json: the duration buckets."""

    SECTION = "export"
    bucket_edges: list | None
    buckets: int
