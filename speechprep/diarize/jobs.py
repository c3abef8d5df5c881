"""The diarization stage's jobs (:mod:`speechprep.core.jobs`); Resemblyzer lives in the curate env."""

from ..core.jobs import Memory, job
from .params import DiarizeJobParams, RttmParams


@job(
    "diarize run",
    "curate",
    DiarizeJobParams,
    inputs="segments",
    outputs="out rejects turns speakers stats",
    options="threads? resume",
    # demo peak 455 MB (benchmark max_rss); a file's windows and one chunk of its audio on top
    memory=Memory(700, shard_mb_per_s=0.01),
)
def run(f, p):
    """Speaker turns inside each file of one shard; its VAD segments cut at changes, overlaps flagged."""
    from . import stage

    files = stage.DiarizeFiles(f.segments, f.out, f.rejects, f.turns, f.speakers, f.stats, f.resume)
    stage.run(files, p, f.threads)


@job(
    "diarize rttm", "curate", RttmParams, inputs="turns speakers", outputs="out", options="measures? assign? centroids?"
)
def rttm(f, p):
    """A shard's turns as RTTM, each file's speakers named by the run's speaker ids (when curated)."""
    from . import speakermap

    speakermap.write_rttm_shard(f.turns, f.speakers, f.out, p, f.measures, f.assign, f.centroids)
