"""Every job of the workflow, as the stages declare them (:mod:`speechprep.core.jobs`).

Each subpackage with a ``jobs`` module declares its jobs there; this module imports them
all. A rule selects its job's parameters from the run's config with :func:`job_params`
(each parameters class says where each of its fields comes from:
:meth:`speechprep.core.config.StageParams.select`), so a config change reruns exactly
the jobs whose parameters it changes. Standard library only: the Snakefile imports this.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any

from .core.jobs import DECLARED, Job

PACKAGE = Path(__file__).parent


def _declared() -> dict[str, Job]:
    for info in pkgutil.iter_modules([str(PACKAGE)]):
        if info.ispkg and (PACKAGE / info.name / "jobs.py").is_file():
            importlib.import_module(f"{__package__}.{info.name}.jobs")
    jobs = {}
    for name, spec in sorted(DECLARED.items()):
        if isinstance(spec.params, str):
            module, _, cls = spec.params.partition(":")
            spec = dataclasses.replace(spec, params=getattr(importlib.import_module(f"{__package__}.{module}"), cls))
        jobs[name] = spec
    return jobs


JOBS: dict[str, Job] = _declared()


def job_params(job: str, config: dict[str, Any], dataset: str | None = None, **given: Any) -> str:
    """What a rule passes as ``--params`` to ``job``: its parameters from ``config`` for
    ``dataset`` (JSON, keys sorted). ``given``: values the rule decides (a run directory,
    the dataset's name), used by the classes that have such a field."""
    cls = JOBS[job].params
    if cls is None:
        raise KeyError(f"job {job!r} takes no parameters")
    names = {f.name for f in dataclasses.fields(cls)}
    own = {k: v for k, v in given.items() if k in names}
    return json.dumps(cls.select(config, dataset, **own), sort_keys=True)


def stage_envs() -> dict[str, str]:
    """The environment each stage's tests run in: its ``<stage> run`` job's, or the one its
    jobs share (a stage whose jobs run in several has none)."""
    envs: dict[str, set[str]] = {}
    for name, spec in JOBS.items():
        envs.setdefault(name.split()[0], set()).add(spec.env)
    out = {stage: e.pop() for stage, e in envs.items() if len(e) == 1}
    out.update({name.split()[0]: spec.env for name, spec in JOBS.items() if name.endswith(" run")})
    return dict(sorted(out.items()))


if __name__ == "__main__":  # "<stage> <env>" lines, for scripts/run_tests.sh
    print("\n".join(f"{stage} {env}" for stage, env in stage_envs().items()))
