"""What the workflow adds to the SLURM executor plugin (docs/cluster.md)."""

import os
from pathlib import Path


def use_status_shims(repo):
    """Put ``scripts/slurm`` (squeue and sacct wrappers) first on PATH, once.

    The executor plugin runs them for its job-status checks; the wrappers report a
    job that ended PREEMPTED (not requeued) as FAILED, so that it is resubmitted
    instead of waited for forever.
    """
    shims = str(Path(repo) / "scripts" / "slurm")
    path = os.environ.get("PATH", "")
    if shims not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([shims, path]) if path else shims
