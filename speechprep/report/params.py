"""The report jobs' parameters (standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import StageParams, from_config


@dataclass(frozen=True)
class PlotParams(StageParams):
    """A dataset's plots and stage table: which stages ran."""

    stages: list = from_config("stages")
