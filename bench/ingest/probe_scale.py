#!/usr/bin/env python3
"""The plan's memory probe against the job at the corpus's size.

    .venvs/<env>/bin/python bench/ingest/probe_scale.py "curate speakers" --sizes 10000000 [--most 1000000]
        [--keep DIR]

For each corpus size N, the plan (``python -m speechprep plan``, speechprep.workflow.probe)
runs the job on synthetic inputs at two sizes (:func:`~speechprep.workflow.probe.sizes`: N at
most ``--most``, and a third of it) and reads the line through their peak memory at N. This
runs those two probes and the job itself at N (the same command, the same synthetic inputs),
each in its own process, in the job's environment (``curate`` for the curation jobs,
``ingest`` for ``"ingest run"``), with the config's defaults, and prints the predicted and
the measured peak RSS. Results are kept in ``--keep`` (one JSON a size) and not run again.
``--fingerprints DIR``: the real rows the duplicates probe's fingerprints are shaped on (the
plan gives the pilot's ``curate`` folder; without it, random rows).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from speechprep.core.config import defaults  # noqa: E402
from speechprep.jobs import job_params  # noqa: E402
from speechprep.workflow.bill import fit  # noqa: E402
from speechprep.workflow.pilot import NOISE  # noqa: E402
from speechprep.workflow.probe import sizes  # noqa: E402


def probe(job: str, n: int, keep: Path, fingerprints: str | None) -> dict:
    out = keep / f"{job.replace(' ', '_')}.{n}.json"
    if not out.exists():
        cfg = defaults(REPO / "config" / "config.yaml")
        cfg["datasets"] = {"bench": {"manifest": str(keep / "unused.jsonl")}}
        cmd = [sys.executable, "-m", "speechprep", "probe", job, "--items", str(n), "--dir", str(keep / "inputs")]
        cmd += ["--params", job_params(job, cfg, "bench", name="bench"), "--out", str(out)]
        cmd += ["--like", json.dumps({"minhash_perm": cfg["curate"]["minhash_perm"], "fingerprints": fingerprints})]
        subprocess.run(cmd, check=True, cwd=REPO)
    return json.loads(out.read_text(encoding="utf-8"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000_000])
    ap.add_argument("--most", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--fingerprints", help="a folder of real fingerprint rows the duplicates probe is shaped on")
    a = ap.parse_args()
    keep = a.keep or Path(tempfile.mkdtemp(prefix="probe_scale_"))
    keep.mkdir(parents=True, exist_ok=True)
    print("| items | probes (items: MB) | predicted MB | measured MB | predicted / measured |")
    print("|---|---|---|---|---|")
    for n in a.sizes:
        at = sizes(n, 0, a.most)
        points = [(float(k), probe(a.job, k, keep, a.fingerprints)["peak_rss_mb"]) for k in at]
        predicted = fit(points, *NOISE["rss_mb"])(n)
        measured = probe(a.job, n, keep, a.fingerprints)["peak_rss_mb"]
        shown = ", ".join(f"{k:,.0f}: {mb:,.0f}" for k, mb in points)
        print(f"| {n:,} | {shown} | {predicted:,.0f} | {measured:,.0f} | {predicted / measured:.3f} |", flush=True)


if __name__ == "__main__":
    main()
