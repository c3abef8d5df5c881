"""What the rules compute from their inputs: resources that grow with a shard and each
retry, and shell arguments naming many files. Standard library only (the Snakefile
imports it); each returns the function Snakemake calls, or a string."""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path

from ..core.jobs import listed
from ..jobs import JOBS
from .resources import memory_mb, shard_content


def scaled(base: float, per_mb: float = 0.0, of: str | None = None, cap: float | None = None):
    """A resource that grows with the size of input ``of`` (MB) and with each retry: a retried
    job (cancelled, out of memory, out of time) is resubmitted with ``attempt`` times it."""

    def f(wildcards, input, attempt):
        mb = 0.0
        if of is not None:
            with contextlib.suppress(OSError, KeyError, IndexError):  # not there yet: the base
                mb = Path(input[of]).stat().st_size / 1e6
        value = (base + per_mb * mb) * attempt
        return int(min(value, cap) if cap else value)

    return f


def shard_memory(job: str, of, models=(), **settings):
    """``mem_mb`` of a shard rule: what its job will hold (its shard's lines, longest segment
    and audio, its models, its batch: the job's declared memory model,
    :mod:`speechprep.workflow.resources`), x the attempt. ``of``: the input that lists the
    shard, or a function of the wildcards giving a file; ``models``: the model files, or a
    function of the wildcards giving them."""
    memory = JOBS[job].memory
    if memory is None:
        raise KeyError(f"job {job!r} declares no memory model")

    def f(wildcards, input, threads, attempt):
        listing = of(wildcards) if callable(of) else input[of]
        files = models(wildcards) if callable(models) else models
        return memory_mb(memory, shard_content(listing), files, threads=threads, **settings) * attempt

    return f


def audio_minutes(base: float, per_audio_hour: float, of: str):
    """A ``runtime`` (minutes) that grows with the audio hours input ``of`` lists, and each retry."""

    def f(wildcards, input, attempt):
        return int((base + per_audio_hour * shard_content(input[of]).seconds / 3600) * attempt)

    return f


def flag_list(flag: str, paths) -> str:
    """``--flag path`` for a shell line, ``--flag`` and a file of the paths for several (a
    list per shard or dataset: :func:`speechprep.core.jobs.listed`), nothing for none."""
    words = " ".join(shlex.quote(str(x)) for x in paths)
    return f"--{flag} " + (listed(words) if len(paths) > 1 else words) if paths else ""


# MB a probe job asks for per item of its synthetic inputs: twice the largest measured
# (ingest's 2.4 KB a line, the speakers' 1.8 KB a segment: docs/benchmarks.md)
PROBE_MB_PER_ITEM = 0.005


def probe_memory(wildcards, attempt) -> int:
    """A probe rule's ``mem_mb`` (rules/plan.smk): its fixed part and its items'."""
    return int((1000 + PROBE_MB_PER_ITEM * int(wildcards.n)) * attempt)
