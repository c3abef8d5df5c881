"""Helpers the Snakefile uses at parse time (driver environment, stdlib only)."""

from __future__ import annotations

import os
from pathlib import Path


def setup_env_modules(venvs: Path, required: bool) -> None:
    """Make `module load speechprep/<stage>` work in every job's shell.

    Jobs run in non-interactive bash, which defines no `module` function unless
    BASH_ENV points at the modules init; scripts/setup.sh records where it is
    and where the modulefiles are (``.venvs/modules.env``). Exported variables
    reach local jobs and, through sbatch's default ``--export=ALL``, cluster jobs.
    """
    env_file = venvs / "modules.env"
    if not env_file.exists():
        if required:
            raise RuntimeError(
                f"--sdm env-modules needs the stage environments: run {venvs.parent / 'scripts' / 'setup.sh'} first"
            )
        return
    values = {}
    for line in env_file.read_text(encoding="utf-8").splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export ") :].partition("=")
            values[k] = v
    modulepath = values["SPEECHPREP_MODULEPATH"]
    paths = [p for p in os.environ.get("MODULEPATH", "").split(":") if p]
    if modulepath not in paths:
        os.environ["MODULEPATH"] = ":".join([modulepath, *paths])
    os.environ.setdefault("BASH_ENV", values["SPEECHPREP_MODULES_INIT"])
