#!/usr/bin/env python3
"""Snakemake's own cost of starting shard jobs: CPU per job started, the wait from the DAG to
the first job, and the DAG's memory per job, with the generic cluster executor and a submit
command that finishes each job at once (so every CPU second counted is Snakemake's own).

    .venvs/workflow/bin/python bench/workflow/scheduler.py --jobs 10000 50000 \\
        [--settings default profile] [--parallel 500] [--set scheduler-subsample=100 ...] [--group K]

Each case writes a bare workflow of N independent shard jobs (one rule, as a per-shard rule
of the project's Snakefile is, plus the local ``all`` that takes every shard's output, as the
project's takes each shard's VAD segments; ``--group K``: ``all`` takes a local marker per K
shards instead) and runs ``snakemake --executor cluster-generic``
on it, once with Snakemake's defaults and once with the settings profiles/slurm and
profiles/local set (``scheduler-subsample``, ``max-jobs-per-timespan``; the greedy scheduler
in both). The submit command writes the job's output itself and prints an id; the status
command says ``success``, checked once a second (``--status-interval``: the generic executor
polls in a loop, and at 0 s that loop alone costs more than the scheduler; the SLURM plugin
asks ``squeue`` once for all jobs, every 40 s or more). Printed per case: the DAG's build
time and peak RSS (an ``-n`` run) and its memory per job over a one-job DAG; in the real run,
the seconds from its start to the DAG built (Snakemake's ``Job stats:`` line), from the DAG to
the first job's output, Snakemake's own CPU (its process alone, not the submit and status
scripts) per job, in all and after the DAG (the scheduling: selection, submission, status,
each finished job's bookkeeping, the final local ``all`` job), the run's wall.

The targets (issue 65) hold for the profile's settings: at most ``TARGET_MS_PER_JOB`` of
Snakemake's CPU per job started after the DAG, the first job at most ``TARGET_FIRST_S`` after
it; a ``profile`` case that misses either makes the bench exit 1.
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
SNAKEMAKE = [sys.executable, "-m", "snakemake", "all", "-s", "Snakefile"]
SNAKEFILE = """N = int(config["shards"])
K = int(config.get("group", 0))

rule all:
    input: expand("done/{g}.txt", g=range((N + K - 1) // K)) if K else expand("out/{i}.txt", i=range(N))
    localrule: True

rule done:
    input: lambda wc: expand("out/{i}.txt", i=range(int(wc.g) * K, min(N, (int(wc.g) + 1) * K)))
    output: touch("done/{g}.txt")
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
TARGET_MS_PER_JOB = 10.0  # Snakemake's CPU per job started, after the DAG
TARGET_FIRST_S = 10.0  # the first job's output after the DAG
DAG_DONE = "Job stats:"  # Snakemake logs the DAG's job table right before it starts scheduling
FINAL_JOB = "localrule all:"  # the aggregating local job, once every shard job has finished


SCHEDULING_KEYS = ("scheduler", "scheduler-subsample", "max-jobs-per-timespan")


def profile_settings(which: str, overrides: dict[str, str] | None = None) -> list[str]:
    """The scheduling settings of profiles/slurm as command-line flags (``default``: Snakemake's,
    but the greedy scheduler), ``overrides`` (``key: value``, a Snakemake option without its
    dashes) over them."""
    if which == "default":  # Snakemake's default scheduler is ilp: the baseline is greedy, as in both profiles
        cfg = {"scheduler": "greedy"}
    else:
        profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text(encoding="utf-8"))
        cfg = {key: profile[key] for key in SCHEDULING_KEYS if key in profile}
    cfg.update(overrides or {})
    return [x for key, value in cfg.items() for x in (f"--{key}", str(value))]


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


def run_cmd(n: int, flags: list[str], a: argparse.Namespace) -> list[str]:
    return [
        *SNAKEMAKE,
        "--executor",
        "cluster-generic",
        "--cluster-generic-submit-cmd",
        "./submit.sh",
        "--cluster-generic-status-cmd",
        "./status.sh",
        "--jobs",
        str(a.parallel),
        "--latency-wait",
        "0",
        "--seconds-between-status-checks",
        str(a.status_interval),
        # the generic executor calls the status command once per job, at most 10 a second by default:
        # that, not the scheduler, would pace the run (the SLURM plugin asks squeue once for all jobs)
        "--max-status-checks-per-second",
        "100000",
        *flags,
        "--config",  # last: --config takes every word after it
        f"shards={n}",
        f"group={a.group}",
    ]


def watch(proc: subprocess.Popen, wd: Path) -> dict:
    """Poll the run every 50 ms until it ends: when its log says the DAG is built and when it
    starts the final ``all`` job (and Snakemake's own CPU at each), when the first job's output
    appears, its own CPU at the end."""
    t0 = time.monotonic()
    seen: dict = {"first": None, "cpu": 0.0}
    out, marks, tail = wd / "out", {"dag": DAG_DONE, "all": FINAL_JOB}, ""
    with open(wd / "run.log", encoding="utf-8", errors="replace") as log:
        while proc.poll() is None:
            now, cpu = time.monotonic() - t0, own_cpu_s(proc.pid)
            tail = tail[-64:] + log.read()  # only what the log has gained since
            for key, mark in marks.items():
                if key not in seen and mark in tail:
                    seen[key], seen[f"{key}_cpu"] = now, cpu
            if seen["first"] is None and out.is_dir() and any(out.iterdir()):
                seen["first"] = now
            seen["cpu"] = cpu or seen["cpu"]  # Snakemake's own process: the scripts are not counted
            time.sleep(0.05)
    seen["wall"] = time.monotonic() - t0
    return seen


def case(n: int, which: str, a: argparse.Namespace, root: Path) -> dict:
    overrides = dict(kv.split("=", 1) for kv in a.set)
    flags = profile_settings(which, overrides if which == "profile" else None)
    wd = workdir(root / f"{which}-{n}")
    dag, _ = timed([*SNAKEMAKE, "-n", *flags, "--config", f"shards={n}", f"group={a.group}"], wd)
    with open(wd / "run.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(run_cmd(n, flags, a), cwd=wd, stdout=log, stderr=log)
        seen = watch(proc, wd)
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}):\n{(wd / 'run.log').read_text(encoding='utf-8')[-3000:]}")
    after = seen["cpu"] - seen["dag_cpu"] if seen.get("dag_cpu") is not None else None
    final = seen["cpu"] - seen["all_cpu"] if seen.get("all_cpu") is not None else None
    first = seen["first"] - seen["dag"] if seen["first"] is not None and "dag" in seen else None
    return {
        "jobs": n,
        "settings": which,
        "flags": " ".join(flags),
        "group": a.group,
        "dag_s": round(dag["wall_s"], 2),
        "dag_mb": round(dag["peak_rss_mb"], 1),
        "dag_kb_per_job": round((dag["peak_rss_mb"] - base_rss_mb(root)) * 1024 / n, 2),
        "run_dag_s": round(seen["dag"], 2) if "dag" in seen else None,
        "first_job_after_dag_s": None if first is None else round(first, 2),
        "run_wall_s": round(seen["wall"], 1),
        "cpu_ms_per_job": round(1000 * seen["cpu"] / n, 2),
        "cpu_ms_per_job_after_dag": None if after is None else round(1000 * after / n, 2),
        # of which the final local job (its input checks grow with the square of its inputs) and the exit
        "final_job_cpu_s": None if final is None else round(final, 2),
        "outputs": sum(1 for _ in (wd / "out").iterdir()),
    }


def missed(row: dict) -> list[str]:
    """The targets a ``profile`` case missed (none for the baseline: it is not what the profiles run)."""
    if row["settings"] != "profile":
        return []
    ms, first = row["cpu_ms_per_job_after_dag"], row["first_job_after_dag_s"]
    why = []
    if ms is None or ms > TARGET_MS_PER_JOB:
        why.append(f"{row['jobs']} jobs: {ms} ms of Snakemake CPU a job after the DAG (target {TARGET_MS_PER_JOB:g})")
    if first is None or first > TARGET_FIRST_S:
        why.append(f"{row['jobs']} jobs: first job {first} s after the DAG (target {TARGET_FIRST_S:g})")
    return why


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--settings", nargs="+", default=["default", "profile"], choices=["default", "profile"])
    ap.add_argument("--parallel", type=int, default=500, help="--jobs: jobs queued at once")
    ap.add_argument("--status-interval", type=int, default=1, help="--seconds-between-status-checks")
    ap.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="a Snakemake option over the profile's settings"
    )
    ap.add_argument(
        "--group", type=int, default=0, help="K: rule all takes a local marker per K shards (0: every shard's output)"
    )
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows, why = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in a.jobs:
            for which in a.settings:
                rows.append(case(n, which, a, Path(tmp)))
                print(json.dumps(rows[-1]), flush=True)
                why += missed(rows[-1])
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if why:
        raise SystemExit("targets missed: " + "; ".join(why))


if __name__ == "__main__":
    main()
