"""Where a run stands: ``python -m speechprep.workflow.status [--configfile F ...] [-- snakemake
options]``, run where the run's ``results/`` is, in the workflow env
(``.venvs/workflow/bin/python``); the snakemake options are the run's (default
``--profile profiles/local``).

Per dataset, what ingest last took in (files and hours in ``manifest.jsonl``, shards of
its plan, files rejected and those left out by ``exclude``, files removed so far in
``removed.jsonl``) and what has changed in its ``audio_dir`` since (files new to it, files
gone); then what the next run computes: Snakemake's dry run, its jobs by rule (when ingest
or a run-wide step runs first, the jobs downstream of it are known only after it: the
table says so).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from ..core.config import defaults, effective, merge
from ..io.inventory import walk_audio
from ..io.jsonio import read_jsonl

REPO = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[dict]:
    return list(read_jsonl(path)) if path.exists() else []


def dataset_status(results: Path, name: str, ds: dict, extensions: list[str]) -> dict:
    """One dataset's figures (see the module's docstring)."""
    root = results / name
    manifest, rejects = _lines(root / "manifest.jsonl"), _lines(root / "rejects" / "ingest.jsonl")
    plan = (
        json.loads((root / "shard_plan.json").read_text(encoding="utf-8"))
        if (root / "shard_plan.json").exists()
        else {}
    )
    out = {
        "files": len(manifest),
        "hours": round(sum(x.get("duration") or 0.0 for x in manifest) / 3600, 4),
        "shards": len(plan.get("shards", {})),
        "rejected": sum(r["reason"] != "excluded" for r in rejects),
        "excluded": sum(r["reason"] == "excluded" for r in rejects),
        "removed": dict(Counter(r["reason"] for r in _lines(root / "removed.jsonl"))),
    }
    if ds.get("audio_dir"):
        here = {
            os.path.join(os.path.abspath(ds["audio_dir"]), rel) for rel, _ in walk_audio(ds["audio_dir"], extensions)
        }
        known = {x["audio_filepath"] for x in manifest} | {r.get("audio_filepath") for r in rejects}
        out["new_files"], out["gone_files"] = len(here - known), len({x["audio_filepath"] for x in manifest} - here)
    return out


# the rules after which Snakemake knows the jobs downstream (rules/*.smk's checkpoints)
CHECKPOINTS = ("ingest", "curate_speakers", "curate_duplicates", "tts_tokenizer", "export_lines")


def next_jobs(snakemake_args: list[str]) -> dict[str, int]:
    """Jobs by rule of Snakemake's dry run with ``snakemake_args`` (its "Job stats" table)."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--dry-run", "--quiet", "rules"]
    p = subprocess.run([*cmd, *snakemake_args], capture_output=True, text=True, encoding="utf-8", check=False)
    if p.returncode != 0:
        raise SystemExit(f"snakemake's dry run failed:\n{p.stderr[-2000:]}")
    table = p.stdout.split("Job stats:", 1)[1] if "Job stats:" in p.stdout else ""
    rows = re.findall(r"^(\w+)\s+(\d+)$", table, re.M)
    return {rule: int(n) for rule, n in rows if rule != "total"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m speechprep.workflow.status", description=__doc__.splitlines()[0])
    ap.add_argument("--configfile", nargs="*", default=[], help="the run's config files, as given to snakemake")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("snakemake", nargs="*", help="after --: the run's snakemake options")
    a = ap.parse_args(argv)
    options = a.snakemake or ["--profile", str(REPO / "profiles" / "local")]
    loaded: dict = {}
    for f in a.configfile:  # as Snakemake loads them: each over the ones before
        loaded = merge(loaded, defaults(f))
    cfg = effective(loaded, a.configfile, REPO / "config" / "config.yaml")
    results = Path("results")  # where rules/common.smk puts it: the run's directory
    status = {
        name: dataset_status(results, name, ds, ds.get("extensions", cfg["ingest"]["extensions"]))
        for name, ds in cfg["datasets"].items()
    }
    jobs = next_jobs([*options, *(x for f in a.configfile for x in ("--configfile", f))])
    if a.json:
        print(json.dumps({"datasets": status, "next_run": jobs}, ensure_ascii=False, indent=1))
        return 0
    for name, s in status.items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in s.items()))
    if not jobs:
        print("next run: nothing to do")
    else:
        print("next run: " + ", ".join(f"{rule} {n}" for rule, n in jobs.items()))
        first = [rule for rule in CHECKPOINTS if rule in jobs]
        if first:
            print(f"  ({', '.join(first)} run(s) first: the jobs after them are known once they have)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
