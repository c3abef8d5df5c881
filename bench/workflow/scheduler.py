#!/usr/bin/env python3
"""Snakemake's own cost of starting shard jobs: CPU per job started, the wait from the DAG to
the first job, and the DAG's memory per job, with the generic cluster executor and a submit
command that finishes each job at once (so every CPU second counted is Snakemake's own).

    .venvs/workflow/bin/python bench/workflow/scheduler.py --jobs 10000 50000 \\
        [--settings default profile] [--parallel 500]

Each case writes a bare workflow of N independent shard jobs (one rule, as a per-shard rule
of the project's Snakefile is, plus ``all``) and runs ``snakemake --executor cluster-generic``
on it, once with Snakemake's defaults and once with the settings profiles/slurm and
profiles/local set (``scheduler-subsample``, ``max-jobs-per-timespan``; the greedy scheduler
in both). The submit command writes the job's output itself and prints an id; the status
command says ``success``. Printed per case: the DAG's build time and peak RSS (an ``-n``
run), the run's CPU (user + sys of Snakemake and its children) per job, the seconds from
the DAG built to the first submission, the run's wall.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SNAKEFILE = """N = int(config["shards"])

rule all:
    input: expand("out/{i}.txt", i=range(N))
    localrule: True

rule vad:
    output: "out/{i}.txt"
    shell: "echo {wildcards.i} > {output}"
"""
# the submit "runs" the job: the last argument is the jobscript, whose output path we create
SUBMIT = """#!/usr/bin/env bash
mkdir -p out
out=$(grep -o 'out/[0-9]*\\.txt' "$1" | head -1)
echo x > "$out"
echo 1
"""
STATUS = "#!/usr/bin/env bash\necho success\n"


def profile_settings(which: str) -> list[str]:
    """The scheduling settings of profiles/slurm as command-line flags ([] for Snakemake's defaults)."""
    if which == "default":  # Snakemake's default scheduler is ilp: the baseline is greedy, as in both profiles
        return ["--scheduler", "greedy"]
    cfg = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text(encoding="utf-8"))
    flags = []
    for key in ("scheduler", "scheduler-subsample", "max-jobs-per-timespan"):
        if key in cfg:
            flags += [f"--{key}", str(cfg[key])]
    return flags


def workdir(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "Snakefile").write_text(SNAKEFILE, encoding="utf-8")
    for name, text in (("submit.sh", SUBMIT), ("status.sh", STATUS)):
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o755)
    return root


def timed(cmd: list[str], cwd: Path) -> tuple[dict, str]:
    """Run ``cmd`` under GNU time: wall, CPU (user + sys, children included), peak RSS."""
    t = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %M", *cmd], cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - t
    m = re.search(r"TIME ([\d.]+) ([\d.]+) (\d+)", p.stderr)
    if p.returncode != 0 or not m:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    cpu = float(m.group(1)) + float(m.group(2))
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": int(m.group(3)) / 1024}, p.stderr


def own_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` alone (not its children), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_BASE: dict[str, float] = {}


def base_rss_mb(root: Path) -> float:
    """Peak RSS of the same dry run over one job: the interpreter and Snakemake, not the DAG."""
    if "rss" not in _BASE:
        wd = workdir(root / "base-1")
        cmd = [sys.executable, "-m", "snakemake", "all", "-s", "Snakefile", "-n", "--config", "shards=1"]
        _BASE["rss"] = timed(cmd, wd)[0]["peak_rss_mb"]
    return _BASE["rss"]


def case(n: int, which: str, parallel: int, root: Path) -> dict:
    wd = workdir(root / f"{which}-{n}")
    base = [sys.executable, "-m", "snakemake", "all", "-s", "Snakefile"]
    config = ["--config", f"shards={n}"]  # last: --config takes every word after it
    dag, _ = timed([*base, "-n", *profile_settings(which), *config], wd)
    run_cmd = [
        *base,
        "--executor",
        "cluster-generic",
        "--cluster-generic-submit-cmd",
        "./submit.sh",
        "--cluster-generic-status-cmd",
        "./status.sh",
        "--jobs",
        str(parallel),
        "--latency-wait",
        "0",
        "--seconds-between-status-checks",
        "0",
        # the generic executor calls the status command once per job, at most 10 a second by default:
        # that, not the scheduler, would pace the run (the SLURM plugin asks squeue once for all jobs)
        "--max-status-checks-per-second",
        "100000",
        *profile_settings(which),
        *config,
    ]
    t0 = time.monotonic()
    log = open(wd / "run.log", "w", encoding="utf-8")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(run_cmd, cwd=wd, stdout=log, stderr=subprocess.STDOUT)
    first, cpu, out = None, 0.0, wd / "out"
    while proc.poll() is None:
        if first is None and out.is_dir() and any(out.iterdir()):
            first = time.monotonic() - t0
        cpu = own_cpu_s(proc.pid) or cpu  # Snakemake's own process: the submit scripts are not counted
        time.sleep(0.05)
    wall = time.monotonic() - t0
    log.close()
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}):\n{(wd / 'run.log').read_text(encoding='utf-8')[-3000:]}")
    done = sum(1 for _ in out.iterdir())
    return {
        "jobs": n,
        "settings": which,
        "flags": " ".join(profile_settings(which)),
        "dag_s": round(dag["wall_s"], 2),
        "dag_mb": round(dag["peak_rss_mb"], 1),
        "dag_kb_per_job": round((dag["peak_rss_mb"] - base_rss_mb(root)) * 1024 / n, 2),
        "first_job_s": None if first is None else round(first, 2),
        "run_wall_s": round(wall, 1),
        "cpu_ms_per_job": round(1000 * cpu / n, 2),
        "outputs": done,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--settings", nargs="+", default=["default", "profile"], choices=["default", "profile"])
    ap.add_argument("--parallel", type=int, default=500, help="--jobs: jobs queued at once")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in a.jobs:
            for which in a.settings:
                rows.append(case(n, which, a.parallel, Path(tmp)))
                print(json.dumps(rows[-1]), flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
