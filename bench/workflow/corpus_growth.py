#!/usr/bin/env python3
"""What a grown corpus costs: a full run, then the same corpus with a few files more.

    .venvs/workflow/bin/python bench/workflow/corpus_growth.py [--files 200] [--add 4 [1 ...]] [--shards 10]
        [--remove 5] [--without-store] [--join 1] [--voices allison_en,june_fr] [--work DIR]

The corpus: real telephone prompts of professional voices (tests/real_speech.py
``TELEPHONE_VOICES``; by default asterisk-core-sounds en and fr, 8 kHz wav), ``--files``
files in about ``--shards`` shards (``shard_hours`` from their audio); a file is one
prompt, or with ``--join K`` K prompts of one voice one after the other, 0.3-0.8 s of
silence between them (a longer recording: more audio a shard for as many files); the
voices take turns. Every stage on, export too (its four formats), the demo models (built by ``make demo`` in
resources/models), ``curate.min_bandwidth_hz`` off (the prompts are telephone speech) and
``curate.min_confidence`` off (the demo ASR model's confidence on real speech means nothing).
The first run is timed whole; then each ``--add`` in turn: that many more files (of the
same voices) are moved in and the same command runs again. Prints each run's jobs by rule
and their CPU seconds summed from the ``job used`` line each job's log ends with (every
job, the run-wide steps, manifests and reports included; the larger of it and the job's
benchmark file where it has one), the ratio to the first run, a dry run after it (jobs
left: none), how many of the old segments' lines (curation's decision, kept or
rejected; the speaker assignment; the TTS manifest line) stayed byte-identical, and what a
shard's jobs cost whatever its size: each per-shard rule's CPU seconds over every shard's
job fitted as a fixed part and a part per audio hour, each part summed over the rules.
``--remove`` then deletes that many of the first run's files (one in every ``--files /
--remove``, so they fall in different shards) and runs again: its CPU seconds, its jobs,
how many jobs loaded a model (a log line ``loaded on``) and how many of the other
segments' lines stayed byte-identical (and how many but for their row in a shard's file,
which a removal from the same shard moves); ``--without-store`` deletes the jobs' reuse stores
(``<stage>/.partial/<shard>.reuse``) before it, for what the same removal costs when
every job of a touched shard computes all its items again. ``--work`` runs in that
(new) directory and keeps it, to look at what the runs left.

``--scratch`` (after the growths, before a removal) runs the grown corpus again from
scratch in ``<work>/scratch`` and compares the added files' lines with that run's, field by
field: the feature arrays by their content (their paths name a shard, which differs), the
export members by their name inside the tar (the tar and the Parquet row name a shard),
paths under either run's folder relative to it. A grown corpus keeps, on purpose, what a
from-scratch run decides again from every segment (docs/stages/ingest.md, "Shards, resume,
reruns"): the speaker ids and their distances, the tokenizer (``text_ids``) and the caption
bins (``description``); these are counted apart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from speechprep.workflow import pilot  # noqa: E402
from tests import real_speech  # noqa: E402

MODELS = REPO / "resources" / "models"


def config(work: Path, shard_hours: float) -> None:
    """The run's config: the corpus, the demo models by absolute path."""
    s2s = {k: str(MODELS / f"demo_{n}") for k, n in (("hubert", "hubert_legacy.pt"), ("kmeans", "km.bin"))}
    s2s |= {"vocoder": str(MODELS / "demo_vocoder.pt"), "vocoder_config": str(MODELS / "demo_vocoder.json")}
    cfg = {
        "stages": ["vad", "asr", "s2s", "curate", "tts", "export"],
        "datasets": {"calls": {"audio_dir": str(work / "corpus"), "shard_hours": shard_hours}},
        "asr": {"model": str(MODELS / "demo_asr.nemo")},
        "s2s": s2s,
        # telephone prompts: all narrowband, by nature; the demo ASR model knows only the demo's
        # phrases, and its confidence on these prompts (below 0.3 on nearly all one-prompt files)
        # would leave curation nothing to keep
        "curate": {"min_bandwidth_hz": None, "min_confidence": None},
    }
    (work / "config.yaml").write_text(json.dumps(cfg), encoding="utf-8")


def snakemake(work: Path, *extra: str) -> str:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(work)]
    cmd += ["--configfile", str(work / "config.yaml"), "--profile", str(REPO / "profiles" / "local"), *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", check=False)
    if p.returncode != 0:
        errors = [x for x in (p.stdout + p.stderr).splitlines() if "rror" in x]
        raise SystemExit("snakemake failed:\n" + "\n".join(errors[-20:]))
    return p.stdout + p.stderr


def cpu_since(work: Path, since: float) -> tuple[float, Counter, Counter]:
    """CPU seconds of the jobs that ran after ``since`` (their logs, read as the plan reads
    them: :func:`speechprep.workflow.pilot.job_cost`), their count and CPU seconds by rule."""
    total, rules, cpu = 0.0, Counter(), Counter()
    for job in pilot.jobs_of_logs(work / ".snakemake" / "log").values():
        log = work / job["log"] if job.get("log") else None
        if log is None or not log.exists() or log.stat().st_mtime < since:
            continue
        cost = pilot.job_cost(work, job)
        if cost:
            total += cost["cpu_s"]
            rules[job["rule"]] += 1
            cpu[job["rule"]] += round(cost["cpu_s"], 1)
    return total, rules, cpu


def lines_of(work: Path) -> dict[str, str]:
    """Every segment's lines as written, by file and id: its curation decision (kept or
    rejected), its speaker assignment, its TTS manifest line, its line in each export
    format's shard index (the member and its audio's sha256)."""
    res = work / "results" / "calls"
    paths = [
        *sorted((res / "curate").glob("shard-*[0-9].jsonl")),
        *sorted((res / "curate").glob("shard-*.rejects.jsonl")),
        *sorted((res / "curate" / "speaker_assignments").glob("*.jsonl")),
        res / "tts" / "train_manifest.jsonl",
        *sorted((res / "export").glob("*/shard-*.index.jsonl")),
    ]
    out = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            out[f"{path.parent.name}/{path.name}:{json.loads(line)['id']}"] = line
    return out


def duration(path: Path) -> float:
    with wave.open(str(path)) as w:
        return w.getnframes() / w.getframerate()


def prompts(n: int, voices: list[str], join: int) -> list[list[Path]]:
    """``n`` files of ``join`` prompts each, the voices in turn (each voice's prompts sorted
    by path)."""
    each = [iter(real_speech.telephone_prompts(v)) for v in voices]
    out = [[next(each[k % len(each)]).path for _ in range(join)] for k in range(n)]
    return out


def write(paths: list[Path], dest: Path, seed: int) -> None:
    """``paths`` (8 kHz wav) one after the other in ``dest``, 0.3-0.8 s of silence between."""
    import numpy as np
    import soundfile as sf

    rng, parts, rate = random.Random(seed), [], None
    for k, p in enumerate(paths):
        x, rate = sf.read(str(p), dtype="int16")
        if k:
            parts.append(np.zeros(int(rate * rng.uniform(0.3, 0.8)), np.int16))
        parts.append(x)
    sf.write(str(dest), np.concatenate(parts), rate, subtype="PCM_16")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--add", type=int, nargs="+", default=[4], help="files added in each growth, one after the other")
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--remove", type=int, default=0)
    ap.add_argument("--without-store", action="store_true", help="delete the reuse stores before the removal")
    ap.add_argument("--join", type=int, default=1, help="prompts of one voice in each file")
    ap.add_argument("--voices", default="allison_en,june_fr", help="tests/real_speech.py TELEPHONE_VOICES")
    ap.add_argument("--work", type=Path, help="run in this new directory and keep it")
    ap.add_argument("--scratch", action="store_true", help="compare the added files with a from-scratch run")
    a = ap.parse_args()
    if not (MODELS / "demo_asr.nemo").exists():
        raise SystemExit("build the demo models first: make demo")
    files = prompts(a.files + sum(a.add), a.voices.split(","), a.join)
    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or Path(tmp)
        (work / "corpus").mkdir(parents=True)
        (work / "later").mkdir()  # the files added after the first run
        paths = [work / ("corpus" if k < a.files else "later") / f"{k:04d}_{f[0].name}" for k, f in enumerate(files)]
        for k, (f, dest) in enumerate(zip(files, paths, strict=True)):
            write(f, dest, k)
        seconds = sum(duration(p) for p in paths[: a.files])
        print(f"corpus: {a.files} files, {seconds / 60:.1f} min; then {' + '.join(map(str, a.add))} more")
        config(work, seconds / 3600 / a.shards)
        t0 = time.time()
        snakemake(work, "--cores", "2")
        first, first_rules, _ = cpu_since(work, t0)
        print(f"first run: {first:.0f} CPU-s, jobs {dict(sorted(first_rules.items()))}", flush=True)
        at = a.files
        for add in a.add:
            grow(work, paths[at : at + add], first)
            at += add
        if a.scratch:
            scratch(work, [p.stem for p in paths[a.files : at]])
        if a.remove:
            remove(work, a, first, lines_of(work))


def grow(work: Path, new: list[Path], first: float) -> None:
    """Add ``new`` to the corpus, run again; print its cost against ``first`` and what stayed."""
    before = lines_of(work)
    for p in new:
        p.rename(work / "corpus" / p.name)
    t = time.time()
    snakemake(work, "--cores", "2")
    cpu, rules, by_rule = cpu_since(work, t)
    after = lines_of(work)
    left = snakemake(work, "--dry-run")
    kept = sum(after.get(k) == v for k, v in before.items())
    for k in [k for k, v in before.items() if after.get(k) != v][:5]:
        print(f"changed: {k}\n  before {before[k]}\n  after  {after.get(k)}")
    print(f"{len(new)} files added: {cpu:.0f} CPU-s ({cpu / first:.1%}), jobs {dict(sorted(rules.items()))}")
    print(f"their CPU-s by rule: {dict(by_rule.most_common())}")
    print(f"dry run after it: {'nothing to do' if 'Nothing to be done' in left else left[-2000:]}")
    print(f"old lines byte-identical: {kept} of {len(before)}", flush=True)
    shard_floor(work, first)


def shard_floor(work: Path, first: float) -> None:
    """Print what a new shard costs before its first second of audio: each per-shard rule's
    jobs (the first run's shards and the new ones) fitted as the plan fits them, a fixed part
    and a part per audio hour (:func:`speechprep.workflow.pilot.rule_costs`), the fixed
    parts summed (the interpreter, the imports and the model's load of each job's process),
    and the parts per audio hour."""
    m = pilot.measure(work, ["calls"])
    rules = pilot.rule_costs(m, None, pilot.Corpus(scale={"calls": 1.0}, shards=dict(m.shards)))
    fits = {r: v["fits"]["cpu_s"] for r, v in rules.items() if v["kind"] == "shard"}
    fixed, hourly = ({r: round(f[k], 1) for r, f in fits.items()} for k in ("fixed", "per_audio_hour"))
    total = sum(fixed.values())
    print(f"a shard's jobs, fixed part: {total:.1f} CPU-s ({total / first:.1%} of the first run): {fixed}")
    print(f"a shard's jobs, per audio hour: {sum(hourly.values()):.0f} CPU-s: {hourly}", flush=True)


def remove(work: Path, a: argparse.Namespace, first: float, before: dict[str, str]) -> None:
    """Delete ``a.remove`` of the first run's files, spread over the shards, and run again."""
    files = sorted((work / "corpus").iterdir())[: a.files]
    gone = [f.stem for f in files[:: max(1, a.files // a.remove)][: a.remove]]
    for f in files:
        if f.stem in gone:
            f.unlink()
    if a.without_store:
        for store in (work / "results").glob("*/*/.partial*/*.reuse"):
            shutil.rmtree(store)
    t = time.time()
    snakemake(work, "--cores", "2")
    cpu, rules, by_rule = cpu_since(work, t)
    after = lines_of(work)
    logs = [p for p in (work / "results" / "calls" / "logs").rglob("*.log") if p.stat().st_mtime >= t]
    loaded = sum("loaded on" in p.read_text(encoding="utf-8") for p in logs)
    others = {k: v for k, v in before.items() if not any(f":{g}" in k for g in gone)}
    kept = sum(after.get(k) == v for k, v in others.items())
    placed = sum(k in after and unplaced(after[k]) == unplaced(v) for k, v in others.items())
    left = [k for k in after if any(f":{g}" in k for g in gone)]
    print(f"{len(gone)} files removed: {cpu:.0f} CPU-s ({cpu / first:.1%}), jobs {dict(sorted(rules.items()))}")
    print(f"their CPU-s by rule: {dict(by_rule.most_common())}; jobs that loaded a model: {loaded}")
    print(f"other lines byte-identical: {kept} of {len(others)}; but for their row in a shard file: {placed}")
    print(f"lines of the removed files left: {len(left)}")


KEPT_ON_GROWTH = ("speaker", "speaker_distance", "text_ids", "text_ids_len", "description")


def scratch(work: Path, added: list[str]) -> None:
    """Run the grown corpus from scratch in ``work/scratch``; compare the ``added`` files'
    lines with it, field by field (:func:`comparable`), and print each segment whose lines
    differ in a field a grown corpus does not keep on purpose."""
    fresh = work / "scratch"
    shutil.copytree(work / "corpus", fresh / "corpus")
    cfg = json.loads((work / "config.yaml").read_text(encoding="utf-8"))
    cfg["datasets"]["calls"]["audio_dir"] = str(fresh / "corpus")
    (fresh / "config.yaml").write_text(json.dumps(cfg), encoding="utf-8")
    t = time.time()
    snakemake(fresh, "--cores", "2")
    print(f"from scratch over the grown corpus: {time.time() - t:.0f} s", flush=True)
    grown, again = by_id(work, added), by_id(fresh, added)
    kept, differs = Counter(), {}
    for key in sorted(grown.keys() | again.keys()):
        if key not in grown or key not in again:
            differs.setdefault(key[1], set()).add(f"{key[0]} (only {'grown' if key in grown else 'from scratch'})")
            continue
        a, b = comparable(grown[key], work), comparable(again[key], fresh)
        for f in sorted(a.keys() | b.keys()):
            if a.get(f) == b.get(f):
                continue
            if f in KEPT_ON_GROWTH:
                kept[f] += 1
            else:
                differs.setdefault(key[1], set()).add(f)
                print(f"differs: {key} {f}\n  grown        {a.get(f)}\n  from scratch {b.get(f)}")
    segments = {k[1] for k in grown.keys() | again.keys()}
    print(f"added files: {len(segments)} segments, {len(grown)} lines; kept from before on purpose: {dict(kept)}")
    same = len(segments) - len(differs)
    print(f"segments equal to a from-scratch run in every other field: {same} of {len(segments)}")
    for seg, fields in sorted(differs.items()):
        print(f"  {seg}: {', '.join(sorted(fields))}", flush=True)


def by_id(work: Path, files: list[str]) -> dict[tuple[str, str], str]:
    """The lines of :func:`lines_of` of the segments of ``files``, by kind of line and id
    (the shard's name left out)."""
    out = {}
    for key, line in lines_of(work).items():
        where, seg = key.split(":", 1)
        if any(seg.startswith(f"{f}_") for f in files):
            out[(re.sub(r"shard-\d+", "shard", where), seg)] = line
    return out


def comparable(line: str, work: Path) -> dict:
    """A line's fields as a run elsewhere would give them: a path to a NumPy array (a
    segment's own file, or a row of a shard's) as its content's sha256; an export member as
    its name inside the tar (none for a Parquet row); other paths under ``work`` relative."""
    import numpy as np

    d = json.loads(line)
    if "embedding_file" in d:
        row = np.load(d.pop("embedding_file"))[d.pop("embedding_row")]
        d["embedding"] = hashlib.sha256(row.tobytes()).hexdigest()
    if "member" in d:
        d["member"] = None if ".parquet:" in d["member"] else d["member"].split(":", 1)[1]
    for k, v in d.items():
        if isinstance(v, str) and v.endswith(".npy") and Path(v).is_file():
            d[k] = hashlib.sha256(np.load(v).tobytes()).hexdigest()
        elif isinstance(v, str) and v.startswith(f"{work}/"):
            d[k] = v[len(str(work)) + 1 :]
    return d


def unplaced(line: str) -> dict:
    """A line without its row in a shard's file (``embedding_row``; the Parquet row of an
    export index's ``member``): what a removal from the same shard moves."""
    d = json.loads(line)
    d.pop("embedding_row", None)
    if ".parquet:" in d.get("member", ""):
        d["member"] = d["member"].rsplit(":", 1)[0]
    return d


if __name__ == "__main__":
    main()
