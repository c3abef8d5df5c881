#!/usr/bin/env python3
"""Workflow scale: a 1,000,000-entry manifest through ingest and planning.

    .venvs/workflow/bin/python bench/workflow/scale.py [--entries 1000000] [--shard-hours 1.0]
        [--text asr|given|verify] [--asr-model demo_asr.nemo] [--real-audio SECONDS] [--until 1|2]

Generates a manifest (durations 2-12 s, files that need not exist: probing is
off, so durations are trusted and unreadable files would be caught by VAD; or, with
``--real-audio S``, a file per line that is a link to one of the real recordings of
tests/real_speech.py no longer than S seconds: the klettres letters and syllables,
with their letter as the text, the cards speaker and the LibriVox reader with theirs),
then, with the real workflow and the local profile, the VAD stage (``--text asr``,
the default) or, for a transcribed dataset (``--text given`` or ``verify``: every
line carries its ``text``), the VAD and ASR stages (``verify`` needs ``--asr-model``;
its jobs load it only for a shard with segments left):
  1. ingest only (``snakemake results/big/manifest.jsonl``)  target: < 2 min
  2. a dry run of everything after it: jobs planned          target: <= 5,000
     (``--plan F``: then ``python -m speechprep plan --sample F``, its job count and its
     ingest memory against the dry run's and the ingest job's, and stop there)
  3. the real run of every job: the files do not exist, so VAD rejects each
     one ``missing`` (the path unprobed corpora take); with ``--real-audio``, VAD
     and the ASR model run on every file; accounting is checked (every line in
     VAD's or ASR's rejects or in ASR's output)
  4. the no-op dry run after it (``Nothing to be done``)     target: < 30 s
With ``--grow N`` (the growth issue's planning at scale), N new lines are then added to
the manifest and the same command given again:
  5. ingest of the grown manifest: the old shard files keep their bytes
  6. the dry run after it: only the new shard(s) and the steps over every shard planned,
     in under a minute of planning                                target: < 60 s
  7. the run of those jobs
  8. a no-op dry run
A ``--keep`` directory that already holds a finished run goes straight to step 5.
``--until N``: stop after step N (1: ingest alone; 2: and the dry run after it).
Prints each wall time and the job count.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


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


def lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def real_pool(max_seconds: float) -> list[tuple[str, float, str]]:
    """``(path, duration, text)`` of the real recordings no longer than ``max_seconds``."""
    import soundfile as sf

    sys.path.insert(0, str(REPO))
    from tests import real_speech as R

    utts = R.librivox() + R.cards()
    for lang in R.klettres_languages():
        utts += R.klettres_voices(lang)
    out = []
    for u in utts:
        d = sf.info(str(u.path)).duration
        if d <= max_seconds:
            out.append((str(u.path), round(d, 3), u.text or u.path.stem))
    return out


def write_manifest(work: Path, entries: int, text: str, real_audio: float | None, start: int = 0) -> None:
    """``work/big.jsonl`` (lines ``start`` on appended); with ``real_audio``, each line's own
    link under ``work/audio``."""
    rng = random.Random(start)
    pool = real_pool(real_audio) if real_audio else []
    with open(work / "big.jsonl", "a" if start else "w", encoding="utf-8") as f:
        for i in range(start, start + entries):
            path = f"/data/corpus/spk{i % 5000:04d}/utt{i:07d}.flac"
            duration, words = round(rng.uniform(2.0, 12.0), 3), f"utterance number {i} of the corpus"
            if pool:
                src, duration, words = pool[i % len(pool)]
                link = work / "audio" / f"spk{i % 5000:04d}" / f"utt{i:07d}{Path(src).suffix}"
                link.parent.mkdir(parents=True, exist_ok=True)
                link.unlink(missing_ok=True)
                link.symlink_to(src)
                path = str(link)
            line = {"audio_filepath": path, "duration": duration, **({"text": words} if text != "asr" else {})}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    if pool:
        hours = sum(p[1] for p in pool) * (entries / len(pool)) / 3600
        print(f"real audio: {len(pool)} recordings of at most {real_audio} s, {hours:.1f} h in all")


def first_run(work: Path, a: argparse.Namespace) -> None:
    """Steps 1-4: ingest, the dry run, the run, the no-op dry run."""
    t = time.perf_counter()
    write_manifest(work, a.entries, a.text, a.real_audio)
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
    summary = next(x for x in reversed(log.splitlines()) if "'accepted':" in x)
    used = next(x for x in reversed(log.splitlines()) if "job used" in x)  # its wall, CPU and peak memory
    print(f"1. ingest (snakemake wall, start-up included): {t_ingest:.1f} s   (target < 120 s)")
    print(f"   {summary}\n   {used}")
    if a.until == 1:
        return

    t_plan, out = smk(work, "--dry-run")
    jobs = planned(out)
    print(f"2. dry run after ingest: {t_plan:.1f} s, {jobs:,} jobs planned   (target <= 5,000)")
    if a.until == 2:
        return

    if a.plan:
        plan_step(work, a.plan, jobs)
        return
    t_run, _ = smk(work)
    vad = json.loads((work / "results/big/vad/summary.json").read_text(encoding="utf-8"))
    if a.text == "asr":  # every file in VAD's per-file statistics or its rejects
        ok = vad["rejected"] + vad["files"] == a.entries
    else:  # every line a VAD segment (trimmed) or rejected; every segment an ASR line or rejected
        asr_lines = lines(work / "results/big/asr/manifest.jsonl")
        asr_rejects = sum(lines(p) for p in (work / "results/big/asr").glob("shard-*.rejects.jsonl"))
        ok = vad["segments"] + vad["rejected"] == a.entries and asr_lines + asr_rejects == vad["segments"]
        print(f"   VAD: {vad['segments']:,} segments; ASR ({a.text}): {asr_lines:,} lines, {asr_rejects:,} rejected")
    print(
        f"3. full run: {t_run:.1f} s ({t_run / max(jobs, 1) * 1000:.0f} ms/job); "
        f"VAD rejects {vad['rejects_by_reason']}; accounting {'holds' if ok else 'BROKEN'}"
    )
    noop(work, 4)


def plan_step(work: Path, sample: float, jobs: int) -> None:
    """2b. ``python -m speechprep plan`` on a ``sample`` of the manifest: its job count against
    the dry run's, its ingest memory (the probe's line at the corpus's lines) against the
    ingest job's own peak (the ``job used`` line its log ends with)."""
    cmd = [sys.executable, "-m", "speechprep", "plan", "--directory", str(work), "--configfile", "config.yaml"]
    cmd += ["--sample", str(sample), "--out", str(work / "plan.json"), "--"]
    cmd += ["--profile", str(REPO / "profiles/local"), "--cores", "2"]
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, encoding="utf-8")
    if p.returncode != 0:
        raise SystemExit(f"plan failed:\n{(p.stdout + p.stderr)[-4000:]}")
    plan = json.loads((work / "plan.json").read_text(encoding="utf-8"))
    log = (work / "results/big/logs/ingest.log").read_text(encoding="utf-8")
    used = [x for x in log.splitlines() if "job used" in x]
    measured = json.loads(used[-1].split("job used ", 1)[1])["rss_mb"]
    ingest = plan["rules"]["ingest"]
    probe = ingest["fits"].get("big.rss_mb.probe", {})
    print(f"2b. plan on a {sample} sample: {time.perf_counter() - t:.1f} s")
    print(f"   jobs: plan {plan['total']['jobs']:,} (ingest's among them), the dry run after ingest {jobs:,} (`all`'s)")
    print(f"   ingest peak memory: plan {ingest['rss_mb']:,.0f} MB, the job {measured:,.0f} MB")
    print(f"   (probes: {probe.get('points')}, read at {probe.get('items', 0):,.0f} lines)")


def planned(out: str) -> int:
    """The job count of a dry run's table (0 when there is nothing to do, -1 when unread)."""
    m = re.search(r"^total\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else 0 if "Nothing to be done" in out else -1


def noop(work: Path, step: int) -> None:
    t_noop, out = smk(work, "--dry-run")
    nothing = "Nothing to be done" in out
    said = "nothing to be done" if nothing else "JOBS PLANNED"
    print(f"{step}. no-op dry run: {t_noop:.1f} s, {said}   (target < 30 s)")
    if not nothing:
        print(out[-3000:])


def shard_files(work: Path) -> dict[str, str]:
    """Each shard file's sha256 (ingest writes its checkpoint's folder anew, so every file is new
    to the file system: Snakemake reruns a shard's jobs where its checksum changed)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (work / "results/big/shards").glob("*.jsonl")}


def grow(work: Path, a: argparse.Namespace) -> None:
    """Steps 5-7: ``a.grow`` new lines, ingest, the growth's dry run, its run, a no-op."""
    before = shard_files(work)
    write_manifest(work, a.grow, a.text, a.real_audio, start=lines(work / "big.jsonl"))
    t_ingest, _ = smk(work, "results/big/manifest.jsonl")
    after = shard_files(work)
    kept = sum(after.get(name) == stat for name, stat in before.items())
    print(
        f"5. ingest after {a.grow:,} lines were added: {t_ingest:.1f} s; {kept:,} of {len(before):,} shard files "
        f"with the same bytes, {len(after) - len(before):,} new"
    )
    t_plan, out = smk(work, "--dry-run")
    table = out[out.index("Job stats:") :].split("\n\n")[0] if "Job stats:" in out else out[-2000:]
    print(f"6. dry run after the growth: {t_plan:.1f} s, {planned(out):,} jobs planned   (target < 60 s)")
    print("   " + table.replace("\n", "\n   "))
    t_run, _ = smk(work)
    print(f"7. the growth's run: {t_run:.1f} s")
    noop(work, 8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--shard-hours", type=float, default=1.0)
    ap.add_argument("--text", choices=("asr", "given", "verify"), default="asr")
    ap.add_argument("--asr-model", help="the ASR model for --text verify (a .nemo)")
    ap.add_argument("--keep", help="work in this directory and keep it")
    ap.add_argument("--real-audio", type=float, metavar="SECONDS", help="lines link to real recordings this short")
    ap.add_argument("--grow", type=int, metavar="N", help="then add N lines and plan and run again")
    ap.add_argument("--plan", type=float, metavar="FRACTION", help="after the dry run, `plan` on this sample; stop")
    ap.add_argument("--until", type=int, choices=(1, 2), help="stop after this step (1: ingest, 2: its dry run)")
    a = ap.parse_args()
    if a.text == "verify" and not a.asr_model:
        ap.error("--text verify needs --asr-model")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        if (work / "results/big/vad/summary.json").exists() and a.grow:
            print(f"a finished run kept in {work}: straight to the growth")
        else:
            first_run(work, a)
        if a.grow:
            grow(work, a)


if __name__ == "__main__":
    main()
