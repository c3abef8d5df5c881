#!/usr/bin/env python3
"""Workflow scale: a 1,000,000-entry manifest through ingest and planning.

    .venvs/workflow/bin/python bench/workflow_scale.py [--entries 1000000] [--shard-hours 1.0]
        [--text asr|given|verify] [--asr-model demo_asr.nemo]

Generates a manifest (durations 2-12 s, files that need not exist: probing is
off, so durations are trusted and unreadable files would be caught by VAD),
then, with the real workflow and the local profile, the VAD stage (``--text asr``,
the default) or, for a transcribed dataset (``--text given`` or ``verify``: every
line carries its ``text``), the VAD and ASR stages (``verify`` needs ``--asr-model``;
its jobs load it only for a shard with segments left):
  1. ingest only (``snakemake results/big/manifest.jsonl``)  target: < 2 min
  2. a dry run of everything after it: jobs planned          target: <= 5,000
  3. the real run of every job: the files do not exist, so VAD rejects each
     one ``missing`` (the path unprobed corpora take); accounting is checked
     (every line in VAD's rejects; with given text, no ASR output line either)
  4. the no-op dry run after it (``Nothing to be done``)     target: < 30 s
Prints each wall time and the job count.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def smk(work: Path, *args: str) -> tuple[float, str]:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(work),
        "--configfile",
        str(work / "config.yaml"),
        "--profile",
        str(REPO / "profiles/local"),
        "--cores",
        "2",
        *args,
    ]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{(p.stdout + p.stderr)[-4000:]}")
    return dt, p.stdout + p.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--shard-hours", type=float, default=1.0)
    ap.add_argument("--text", choices=("asr", "given", "verify"), default="asr")
    ap.add_argument("--asr-model", help="the ASR model for --text verify (a .nemo)")
    ap.add_argument("--keep", help="work in this directory and keep it")
    a = ap.parse_args()
    if a.text == "verify" and not a.asr_model:
        ap.error("--text verify needs --asr-model")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rng = random.Random(0)
        t = time.perf_counter()
        with open(work / "big.jsonl", "w", encoding="utf-8") as f:
            for i in range(a.entries):
                f.write(
                    json.dumps(
                        {
                            "audio_filepath": f"/data/corpus/spk{i % 5000:04d}/utt{i:07d}.flac",
                            "duration": round(rng.uniform(2.0, 12.0), 3),
                            **({"text": f"utterance number {i} of the corpus"} if a.text != "asr" else {}),
                        }
                    )
                    + "\n"
                )
        gen = time.perf_counter() - t
        stages = "[vad]" if a.text == "asr" else "[vad, asr]"
        (work / "config.yaml").write_text(
            f"datasets:\n  big:\n    manifest: {work / 'big.jsonl'}\n    probe: false\n"
            f"    shard_hours: {a.shard_hours}\n    text: {a.text}\nstages: {stages}\nvad:\n  threads: 1\n"
            + (f"asr:\n  model: {a.asr_model}\n" if a.asr_model else ""),
            encoding="utf-8",
        )
        print(f"manifest: {a.entries:,} entries generated in {gen:.1f} s")

        t_ingest, _ = smk(work, "results/big/manifest.jsonl")
        log = (work / "results/big/logs/ingest.log").read_text(encoding="utf-8")
        summary = log.strip().splitlines()[-1]
        print(f"1. ingest (snakemake wall, start-up included): {t_ingest:.1f} s   (target < 120 s)")
        print(f"   {summary}")

        t_plan, out = smk(work, "--dry-run")
        m = re.search(r"^total\s+(\d+)", out, re.M)
        jobs = int(m.group(1)) if m else -1
        print(f"2. dry run after ingest: {t_plan:.1f} s, {jobs:,} jobs planned   (target <= 5,000)")

        t_run, _ = smk(work)
        summary = json.loads((work / "results/big/vad/summary.json").read_text(encoding="utf-8"))
        ok = summary["rejected"] + summary["files"] == a.entries
        if a.text != "asr":
            text = (work / "results/big/asr/manifest.jsonl").read_text(encoding="utf-8")
            asr_lines = len(text.splitlines())
            ok = ok and asr_lines == 0
            print(f"   ASR ({a.text}): {asr_lines} lines (the VAD rejects every missing file)")
        print(
            f"3. full run: {t_run:.1f} s ({t_run / max(jobs, 1) * 1000:.0f} ms/job); "
            f"VAD rejects {summary['rejects_by_reason']}; accounting {'holds' if ok else 'BROKEN'}"
        )
        t_noop, out = smk(work, "--dry-run")
        nothing = "Nothing to be done" in out
        print(
            f"4. no-op dry run: {t_noop:.1f} s, {'nothing to be done' if nothing else 'JOBS PLANNED'}   (target < 30 s)"
        )
        if not nothing:
            print(out[-3000:])


if __name__ == "__main__":
    main()
