"""The one command line: ``python -m speechprep <stage> <job> [options]``.

Every rule runs one job through it. The CLI checks once that the job runs in
its stage's pinned environment (``--env-file``, the rule's ``envs/<stage>.yaml``),
sets up logging (one format: stage, shard, message), builds the job's
parameters object from ``--params`` (what the rule selected from the config:
:mod:`speechprep.jobs`), runs the job, and turns a typed error
(:mod:`speechprep.errors`) into its exit code and one clear line: 2 for a
setting, input or model file that cannot work, 3 for the wrong environment, 4
for a model that fails systematically (124 comes from the watchdog). The other
flags name the job's files (and ``--threads``, the rule's threads); a list
flag's value ``@FILE`` stands for FILE's items (a rule's lists come so:
:func:`speechprep.core.jobs.listed`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from typing import Any

from .core import logs
from .core.envspec import require_stage_env
from .core.jobs import ARGS_FILE_PREFIX, Job, read_listed
from .errors import SpeechprepError
from .jobs import JOBS

# Flags with more than a plain string: name -> argparse keywords (a job's flags: its declaration,
# speechprep.core.jobs).
FLAGS: dict[str, dict[str, Any]] = {
    "threads": {"type": int, "default": 1, "help": "the rule's threads"},
    "shard-counts": {"type": int, "help": "how many of the shard files are each dataset's, in order"},
    "write-modern": {"metavar": "OUT", "help": "write a copy plain fairseq loads"},
    "format": {"help": "an export format (export.formats)"},
    "configfile": {"action": "extend", "help": "a config file, as snakemake's (repeatable: later over earlier)"},
    "split": {"choices": ["auto", "speaker", "source", "file"], "help": "split the sample by speaker, source or file"},
}


def _add(p: argparse.ArgumentParser, spec: Job) -> None:
    for flag in spec.flags:
        kw = dict(FLAGS.get(flag.name, {}))
        if flag.kind == "=":
            p.add_argument(flag.name, **kw)
            continue
        if flag.kind in ("+", "*"):
            kw["nargs"] = "+"
        kw.setdefault("required", not flag.optional)
        p.add_argument(f"--{flag.name}", **kw)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m speechprep", description="Run one job of the speechprep workflow (each rule runs one)."
    )
    ap.add_argument("--env-file", help="the stage's envs/<stage>.yaml: its pins are checked before the job runs")
    stages = ap.add_subparsers(dest="stage", required=True, metavar="stage")
    subs: dict[str, Any] = {}
    for name, spec in JOBS.items():
        stage, job_name = name.split()
        if stage not in subs:
            jobs = ", ".join(n.split()[1] for n in JOBS if n.split()[0] == stage)
            subs[stage] = stages.add_parser(stage, help=f"jobs: {jobs}").add_subparsers(
                dest="job", required=True, metavar="job"
            )
        sub = subs[stage].add_parser(job_name, help=spec.help, description=f"{spec.help} (environment: {spec.env})")
        if spec.params is not None:
            sub.add_argument("--params", type=json.loads, required=True, help="the job's parameters, as JSON")
        _add(sub, spec)
    return ap


def expand_listed(argv: list[str], spec: Job | None) -> list[str]:
    """``argv`` with each list flag's ``@FILE`` value replaced by the file's items: how a rule
    passes a list (speechprep.core.jobs.listed). ``spec``: the job (None: nothing to expand)."""
    lists = {f"--{f.name}" for f in spec.flags if f.kind in ("+", "*")} if spec else set()
    out: list[str] = []
    for i, a in enumerate(argv):
        if i and argv[i - 1] in lists and a.startswith(ARGS_FILE_PREFIX):
            out += read_listed(a[len(ARGS_FILE_PREFIX) :])
        else:
            out.append(a)
    return out


def _shard_label(argv: list[str]) -> str:
    """The shard a job's log lines name: the one its arguments name, ``-`` for none or several
    (a merge of every shard)."""
    from .ingest.plan import SHARD_PATTERN

    names = {m for x in argv for m in re.findall(SHARD_PATTERN, x)}
    return names.pop() if len(names) == 1 else "-"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plan"]:  # the bill before the run (speechprep.workflow.pilot), not a job
        from .workflow.pilot import main as plan

        try:
            return plan(argv[1:])
        except SpeechprepError as e:  # a job that fits no node of the cluster described
            print(f"error: {e}", file=sys.stderr, flush=True)
            return e.exit_code
    lead, rest = (argv[:2], argv[2:]) if argv[:1] == ["--env-file"] else ([], argv)
    if rest[:1] == ["probe"]:  # a run-wide job on synthetic inputs, for the plan (speechprep.workflow.probe)
        from .workflow.probe import main as probe

        logs.setup("probe")
        return probe(rest[1:], lead[1] if lead else None)
    argv = expand_listed(argv, JOBS.get(" ".join(rest[:2])))
    a = parser().parse_args(argv)
    name = f"{a.stage} {a.job}"
    spec = JOBS[name]
    logs.setup(a.stage, _shard_label(argv))
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
    try:
        if a.env_file:
            require_stage_env(spec.env, a.env_file)
        started = time.monotonic()
        spec.run(spec.files(a), spec.params.from_dict(a.params) if spec.params else None)
        logs.used(time.monotonic() - started, getattr(a, "threads", 1))
    except SpeechprepError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    return 0
