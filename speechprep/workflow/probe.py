"""The plan's memory probe: a run-wide job on synthetic inputs of a given size.

    python -m speechprep probe "<stage> <job>" --items N --dir SCRATCH --params JSON
        [--like JSON] --out RESULT.json

runs in the job's own environment (the rules ``probe_<rule>`` of rules/plan.smk, which the
plan targets after its pilot). A pilot of a few hundred segments cannot show how a run-wide
job's memory grows (the speakers' clustering, the duplicates' bands, ingest's lines: within
the noise of their fixed part); the job itself on ``N`` items can. The job declares how its
inputs are made (``probe`` in its declaration, :mod:`speechprep.core.jobs`: e.g.
:func:`speechprep.curate.probe.speakers`); they are written under ``SCRATCH``, the job runs
on them in a fresh process (its peak resident memory is the job's, not the maker's: Linux
``VmHWM``), and ``RESULT.json`` gets ``items``, ``seconds``, ``cpu_s`` and ``peak_rss_mb``;
the inputs are deleted. ``--like``: settings of the inputs as the run's other jobs write
them (e.g. the MinHash width). The plan fits a line through two sizes
(:func:`speechprep.workflow.bill.fit`) and reads it at the corpus's segments.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..core.envspec import require_stage_env
from ..io.jsonio import write_json
from ..jobs import JOBS


def peak_rss_mb() -> float:
    """This process's peak resident memory (``VmHWM``; ``ru_maxrss`` where /proc has none:
    it can carry the high-water mark of the process that started this one)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make(job: str, items: int, root: Path, params: dict, like: dict) -> None:
    """Write ``job``'s synthetic inputs for ``items`` items under ``root`` and what the run
    needs to find them (``root/probe.json``)."""
    spec = JOBS[job]
    if not spec.probe:
        raise SystemExit(f"job {job!r} declares no probe")
    module, _, name = spec.probe.partition(":")
    maker = getattr(importlib.import_module(f"speechprep.{module}"), name)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    files, p = maker(root, items, like, spec.params.from_dict(params))
    write_json(root / "probe.json", {"job": job, "files": files, "params": dataclasses.asdict(p)})


def run(root: Path) -> dict:
    """Run the job ``root/probe.json`` describes; what it used."""
    z = json.loads((root / "probe.json").read_text(encoding="utf-8"))
    spec = JOBS[z["job"]]
    if any(f.key == "threads" for f in spec.flags):
        z["files"].setdefault("threads", 1)  # one thread: the job's memory, not its workers'
    t, cpu = time.monotonic(), time.process_time()
    spec.run(spec.files_class()(**z["files"]), spec.params.from_dict(z["params"]))
    return {"seconds": time.monotonic() - t, "cpu_s": time.process_time() - cpu, "peak_rss_mb": peak_rss_mb()}


def main(argv: list[str], env_file: str | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m speechprep probe", description=__doc__.splitlines()[0])
    ap.add_argument("job", help='a job that declares a probe, e.g. "curate speakers"')
    ap.add_argument("--items", type=int, help="segments (or lines) of the synthetic inputs")
    ap.add_argument("--dir", required=True, help="scratch for the inputs (emptied, then deleted)")
    ap.add_argument("--params", type=json.loads, help="the job's parameters, as its rule selects them")
    ap.add_argument("--like", type=json.loads, default={}, help="settings of the inputs (JSON)")
    ap.add_argument("--out", help="the result (JSON)")
    ap.add_argument("--run", action="store_true", help=argparse.SUPPRESS)  # the fresh process's part
    a = ap.parse_args(argv)
    root = Path(a.dir)
    if env_file:
        require_stage_env(JOBS[a.job].env, env_file)
    if a.run:
        print(json.dumps(run(root)))
        return 0
    if a.items is None or a.params is None or a.out is None:
        ap.error("--items, --params and --out are required")
    try:
        make(a.job, a.items, root, a.params, a.like)
        cmd = [sys.executable, "-m", "speechprep", "probe", a.job, "--dir", str(root), "--run"]
        p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", check=False)
    finally:  # the inputs are large: gone whatever happened
        shutil.rmtree(root, ignore_errors=True)
    if p.returncode != 0:
        raise SystemExit(f"the probe of {a.job} on {a.items} items failed:\n{(p.stdout + p.stderr)[-3000:]}")
    used = json.loads(p.stdout.strip().splitlines()[-1])
    write_json(a.out, {"job": a.job, "items": a.items, **used})
    return 0


# The plan's side (the workflow environment): which rules' jobs are probed, at what sizes.


def rule_of(job: str) -> str:
    """The rule that runs ``job`` ("ingest run": ``ingest``, "curate speakers": ``curate_speakers``)."""
    stage, _, name = job.partition(" ")
    return stage if name == "run" else f"{stage}_{name}"


PROBED = {rule_of(name): name for name, spec in JOBS.items() if spec.probe}  # rule: job


def sizes(corpus_items: float, pilot_items: float, most: int) -> tuple[int, int] | None:
    """The two sizes a job is probed at: the corpus's items, at most ``most``, and a third
    of that (a line through them is read at the corpus's size); ``None`` where that is not
    beyond the pilot's own size (its two steps measured it) or ``most`` is 0 (no probe)."""
    top = min(int(corpus_items), most)
    if top <= max(3 * pilot_items, 3):
        return None
    return top // 3, top


def target(rule: str, dataset: str | None, items: int) -> str:
    """A probe's result, below the pilot's run directory (rules/plan.smk)."""
    return f"results/{dataset}/.probe/{rule}/{items}.json" if dataset else f"results/.probe/{rule}/{items}.json"


def read(pilot: Path, rule: str, dataset: str | None, at: tuple[int, int]) -> list[tuple[float, float]]:
    """``(items, peak_rss_mb)`` of a rule's two probes."""
    out = []
    for n in at:
        z = json.loads((pilot / target(rule, dataset, n)).read_text(encoding="utf-8"))
        out.append((float(z["items"]), float(z["peak_rss_mb"])))
    return out
