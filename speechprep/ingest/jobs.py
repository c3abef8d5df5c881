"""The ingest stage's job (:mod:`speechprep.core.jobs`)."""

from ..core.jobs import job
from .params import IngestParams


@job(
    "ingest run",
    "ingest",
    IngestParams,
    outputs="manifest rejects shards",
    options="threads?",
    probe="ingest.probe:run",
)
def run(f, p):
    """List or read a dataset, probe headers, write the manifest and shards."""
    from . import stage

    stage.run(p, f.manifest, f.rejects, f.shards, f.threads)


@job("ingest items", "ingest", IngestParams, outputs="out", options="threads?")
def items(f, p):
    """Each item of a corpus in its own layout, its id, file and seconds, for the plan's pilot."""
    from . import stage

    stage.items(p, f.out, f.threads)
