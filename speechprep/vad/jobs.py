"""The VAD stage's jobs (:mod:`speechprep.core.jobs`)."""

from ..core.jobs import Memory, job
from .params import VadParams


@job(
    "vad run",
    "vad",
    VadParams,
    inputs="shard",
    outputs="segments stats rejects",
    options="threads? resume",
    memory=Memory(150, workers=True),  # the job's own process; each worker adds its decode block
)
def run(f, p):
    """TEN-VAD over one shard: segments, per-file statistics, rejects."""
    from . import stage

    stage.run_shard(f.shard, f.segments, f.stats, f.rejects, p, f.threads, f.resume)


@job("vad merge", "vad", inputs="stats+ rejects+ segments+", outputs="csv summary")
def merge(f, p):
    """Every shard's statistics in stats.csv and summary.json."""
    from . import stage

    stage.merge(f.stats, f.rejects, f.segments, f.csv, f.summary)
