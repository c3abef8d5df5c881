"""The export stage's jobs (:mod:`speechprep.core.jobs`)."""

from ..core.jobs import Memory, job
from .params import BucketParams, ExportParams


@job("export lines", "export", inputs="manifests+ features+", options="out+ columns")
def lines(f, p):
    """A dataset's TTS manifest lines cut per shard (--out: one per --features, in the same
    order) and the dataset's Parquet column types (--columns)."""
    from . import stage

    stage.run_lines(f.manifests, f.features, f.out, f.columns)


@job(
    "export shard",
    "export",
    ExportParams,
    inputs="lines columns features",
    outputs="rejects",
    options="resume out-dir",
    memory=Memory(500, shard_mb_per_s=0.01),  # its lines and index; audio one row group at a time
)
def shard(f, p):
    """One shard's kept segments (--lines, its cut of the manifests) in every format of
    export.formats (--columns: the dataset's Parquet column types)."""
    from . import stage

    stage.run_shard(f.lines, f.columns, f.out_dir, f.rejects, p, f.resume)


@job("export summary", "export", BucketParams, inputs="indexes+", outputs="index stats", options="format?")
def summary(f, p):
    """A format's index.jsonl and stats.json (segments, hours, duration-bucket edges),
    and what the format's loader reads for the whole dataset (--format)."""
    from . import stage

    stage.run_summary(f.indexes, f.index, f.stats, p, f.format)
