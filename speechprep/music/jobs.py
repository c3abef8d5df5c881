"""The music stage's jobs (:mod:`speechprep.core.jobs`)."""

from ..core.jobs import Memory, job, torch_threads
from .params import MusicParams


@job(
    "music run",
    "music",
    MusicParams,
    inputs="segments",
    outputs="out rejects vocals",
    options="threads? resume",
    # demo peak (benchmark max_rss) with headroom; a separated segment's mix and vocals at the
    # model's rate on top, and the separator's chunk (docs/stages/music.md, "The music stage in the workflow")
    memory=Memory(800, shard_mb_per_s=0.01),
)
def run(f, p):
    """music_prob of each segment of one shard; music alone dropped, flagged files separated."""
    from . import stage

    if p.separate.model:  # torch only where a separator runs (the signal rule is numpy)
        torch_threads(f.threads)
    stage.run(stage.MusicFiles(f.segments, f.out, f.rejects, f.vocals, f.resume), p, f.threads)
