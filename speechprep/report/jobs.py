"""The report's jobs (:mod:`speechprep.core.jobs`)."""

from ..core.jobs import job
from .params import PlotParams


@job("report plots", "report", PlotParams, options="results out-dir")
def plots(f, p):
    """Plots and the stage table of one dataset for snakemake --report."""
    from . import stages

    stages.make(f.results, p.stages, f.out_dir)


# the thresholds the histograms draw: curation's own parameters, named (a stage imports no other)
@job("report curation", "report", "curate.params:DecideParams", options="results out-dir")
def curation(f, p):
    """Curation tables, histograms with thresholds, speakers and the listening page."""
    from dataclasses import asdict

    from . import curation

    curation.make(f.results, asdict(p), f.out_dir)


@job("report annotations", "report", options="results out-dir")
def annotations(f, p):
    """The TTS manifests' annotations and captions: distributions with their bins, caption
    counts, and segments to listen to next to their captions."""
    from . import annotations

    annotations.make(f.results, f.out_dir)
