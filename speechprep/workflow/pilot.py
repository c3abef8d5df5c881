"""Know the bill before the run: ``python -m speechprep plan [--directory WORK] --configfile CONFIG
(--sample FRACTION | --sample-minutes M) --out plan.json [--nodes N --cores C --gpus G --mem-gb M]
[--price-cpu-h X --price-gpu-h Y] [--alternative KEY=VALUE ...] [-- snakemake options]``, in the
workflow env.

It reads every input's length (each file's header, as ingest does, or a manifest line's
``duration``; a corpus in its own layout, ``kaldi``, ``lhotse``, ...: each item's seconds as its
own reader gives them, :func:`source_items`, by audio file) and draws a sample of every dataset
of the run (a share of its audio, the same share of each of four strata of file length, a fixed
seed), runs the real workflow on it with
the user's config (every enabled stage, the real models, the config's devices) in
``WORK/.plan/pilot`` (links to WORK's entries, so relative paths mean what they mean to the
run), and reads what each job used: the line speechprep's CLI logs as a job ends (wall and
CPU seconds of the process and its workers, peak memory: :func:`speechprep.core.logs.used`),
or its Snakemake benchmark file's figures where larger, and Snakemake's log of the run (rule,
dataset, shard, threads, memory asked for). The pilot
runs in two steps, half of the sample and then all of it (the stable shard plan adds the
second half's shards; the run-wide steps run again over all of it, reclustering the speakers
and training the tokenizer anew),
so that each run-wide step's cost is fitted on two sizes (:func:`speechprep.workflow.bill.fit`).
Then :func:`estimate` scales: a shard job's cost by the audio hours its dataset holds
(the corpus's seconds of audio over the sample's), a dataset's and the run's jobs by
the fit at the corpus's segments, job counts by the shards the corpus will have at the
configured size; ``plan.json`` and a page, ``plan.html``, beside it. Each
``--alternative`` (a setting: diarization off, another batch size, exports off) gets a pilot
of its own on the same sample and its totals beside the plan's (``alternatives``).
docs/cluster.md, "Before the run: the plan", says what each figure is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..core import logs
from ..core.config import defaults, effective, merge
from ..diarize.params import runs_for as diarize_runs_for
from ..errors import UsageError
from ..ingest.sources import source_key
from ..io.inventory import walk_audio
from ..io.jsonio import read_jsonl, write_json
from .bill import (
    Cluster,
    Line,
    RuleLoad,
    RuleSize,
    capacity_bound,
    critical_path,
    fit,
    fit_files,
    fit_jobs,
    interval,
    recommend,
    slots,
    snakemake_cost,
)
from .plan_page import compare_html, plan_html, write_page
from .probe import PROBED, read, sizes, target

REPO = Path(__file__).resolve().parents[2]
SCRATCH = ".plan"  # below WORK: the pilot's run directory
STRATA = 4
# a dataset's or the run's job between the pilot's two sizes: what is no growth (seconds, MB),
# and whether one size alone scales with the segments (its CPU does; its memory is taken as is)
NOISE = {"cpu_s": (1.0, True), "s": (1.0, True), "rss_mb": (16.0, False)}
# results/<ds>/<dir>: a stage's outputs
STAGE_DIRS = ("vad", "diarize", "music", "asr", "s2s", "curate", "tts", "export")


@dataclass
class Item:
    """A dataset's input: an audio file below its ``audio_dir`` (``rel``), a manifest line, or
    an audio file of a corpus in its own layout (``key`` its path) with the source ids in it."""

    key: str
    seconds: float  # its audio, from its header or its manifest line (0: unreadable, ingest rejects it)
    rel: str | None = None
    line: dict | None = None
    ids: list[str] | None = None  # a source's file: the ids of its utterances (their seconds summed)


def _seconds(path: str) -> float:
    """A file's seconds from its header, as ingest probes it (0: unreadable, ingest rejects it)."""
    from ..io.audio import AudioError, probe

    try:
        return probe(path).duration
    except AudioError:
        return 0.0


def _headers(paths: list[str]) -> list[float]:
    """Each file's seconds, from its header (ingest's probe), 8 at a time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(_seconds, paths, chunksize=64))


def source_items(name: str, cfg: dict, scratch: Path) -> list[Item]:
    """A corpus in its own layout as the pilot draws it: each audio file with the source ids of
    its utterances and their seconds summed, from ``ingest items`` (the source's own reader in the
    ingest environment, as ingest reads it: its checks, its durations; no audio written, the list
    in ``scratch/<name>.jsonl``). A file, not an utterance, is drawn: what a job pays once per file
    it reads (a header, a decode, a shorten file written out as FLAC, diarization's cost per file)
    is then paid in the sample as often, for its share of the audio, as in the run; utterances
    drawn one by one would have a 10 % sample read nearly every file of a corpus of long ones."""
    from ..core.envspec import env_python
    from ..jobs import job_params

    python = env_python("ingest")
    if python is None:
        raise UsageError("plan: the ingest environment is not built (no .venvs/ingest): run scripts/setup.sh")
    out = scratch / f"{name}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(python), "-m", "speechprep", "--env-file", str(REPO / "envs" / "ingest.yaml")]
    cmd += ["ingest", "items", "--params", job_params("ingest items", cfg, name, name=name), "--out", str(out)]
    cmd += ["--threads", str(cfg["ingest"].get("threads", 1))]
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", check=False)
    if p.returncode != 0:
        raise UsageError(f"plan: dataset {name!r} could not be listed ({' '.join(cmd[:6])} ...):\n{p.stderr[-2000:]}")
    by_file: dict[str, list[dict]] = defaultdict(list)
    for rec in read_jsonl(out):
        by_file[rec["file"]].append(rec)
    return [
        Item(path, sum(float(r["seconds"]) for r in recs), ids=[r["id"] for r in recs])
        for path, recs in sorted(by_file.items())
    ]


def corpus(ds: dict, extensions: list[str], name: str = "", cfg: dict | None = None, scratch: Path | None = None):
    """A dataset's inputs (:class:`Item`) with their seconds of audio: every file's header is
    read (as ingest reads it), a manifest line's ``duration`` is taken as it is; a corpus in its
    own layout (``kaldi``, ``lhotse``, ...: docs/sources.md) is listed by its reader, by file
    (:func:`source_items`: ``name``, the run's ``cfg`` and a ``scratch`` folder)."""
    key = source_key(ds)
    if key is not None:
        if cfg is None or scratch is None:
            raise UsageError(f"plan: dataset {name!r} is given as `{key}`: its listing needs the run's config")
        return source_items(name, cfg, scratch)
    if ds.get("audio_dir"):
        root = ds["audio_dir"]
        rels = [rel for rel, _ in walk_audio(root, extensions)]
        return [Item(r, t, rel=r) for r, t in zip(rels, _headers([os.path.join(root, r) for r in rels]), strict=True)]
    base = os.path.dirname(os.path.abspath(ds["manifest"]))
    lines = []
    for rec in read_jsonl(ds["manifest"]):
        for k in ("audio_filepath", "text_filepath"):
            if isinstance(rec.get(k), str) and not os.path.isabs(rec[k]):
                rec[k] = os.path.normpath(os.path.join(base, rec[k]))
        lines.append(rec)
    untimed = [r for r in lines if not isinstance(r.get("duration"), int | float)]
    probed = dict(zip(map(id, untimed), _headers([str(r.get("audio_filepath")) for r in untimed]), strict=True))
    return [
        Item(f"{k}", float(r["duration"]) if id(r) not in probed else probed[id(r)], line=r)
        for k, r in enumerate(lines)
    ]


def draw(items: list[Item], fraction: float, seed: int) -> tuple[list[Item], list[Item]]:
    """A sample of about ``fraction`` of the items' audio, the same share of each of
    ``STRATA`` strata of length (files short to long), at least one item; as two halves
    (alternate draws), the first drawn first. Same items, same seed: same sample."""
    rng = random.Random(seed)
    ordered = sorted(items, key=lambda x: (x.seconds, x.key))
    size = max(1, math.ceil(len(ordered) / STRATA))
    first: list[Item] = []
    second: list[Item] = []
    for s in range(0, len(ordered), size):
        stratum = ordered[s : s + size]
        rng.shuffle(stratum)
        goal, got = fraction * sum(x.seconds for x in stratum), 0.0
        for x in stratum:
            if got >= goal:
                break
            (first if (len(first) + len(second)) % 2 == 0 else second).append(x)
            got += x.seconds
    if not first and ordered:
        first.append(rng.choice(ordered))
    return first, second


# the pilot's run directory's own entries (pilot_runs, pilot_dataset, run_longest)
PILOT_OWN = ("results", ".snakemake", SCRATCH, "pilot.json", "longest.json", "sample.json", "step1.json", "step2.json")
PILOT_OWN += ("pilot_audio", "pilot_manifests", "pilot_ids", "reuse-aside")


def link_tree(work: Path, pilot: Path) -> None:
    """The pilot's run directory: a link to each of WORK's entries but its results and
    Snakemake's state, so that a relative path in the config reads the same file. An entry
    an earlier pilot made itself before WORK had one (a cache the config names, such as the
    grammars under ``resources/``, which a real run then made in WORK) gives way to the link."""
    pilot.mkdir(parents=True, exist_ok=True)
    for entry in work.iterdir():
        here = pilot / entry.name
        if entry.name in PILOT_OWN or here.is_symlink():
            continue
        if here.is_dir():
            shutil.rmtree(here)
        elif here.exists():
            here.unlink()
        here.symlink_to(entry.resolve())


def pilot_dataset(name: str, ds: dict, chosen: list[Item], pilot: Path, fraction: float) -> dict:
    """The dataset's pilot entry: its sampled files linked below ``pilot_audio/<name>`` (same
    relative paths: same ids), its sampled lines in ``pilot_manifests/<name>.jsonl``, or a
    corpus in its own layout as it is (its key, read by its reader: offsets, channels, ids and
    the audio ingest writes out as in the run) with ``pilot_ids``, the source ids of its sampled
    files in ``pilot_ids/<name>.txt``, the only ones ingest reads; a fixed shard count scaled to
    the sample."""
    out = {k: v for k, v in ds.items() if k not in ("audio_dir", "manifest")}
    if source_key(ds) is not None:
        path = pilot / "pilot_ids" / f"{name}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{i}\n" for i in sorted(i for x in chosen for i in x.ids or ())), encoding="utf-8")
        out["pilot_ids"] = str(path)
    elif ds.get("audio_dir"):
        root = pilot / "pilot_audio" / name
        for x in chosen:
            dest = root / x.rel
            if not dest.is_symlink():
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.symlink_to(os.path.abspath(os.path.join(ds["audio_dir"], x.rel)))
        out["audio_dir"] = str(root)
    else:
        path = pilot / "pilot_manifests" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for x in sorted(chosen, key=lambda x: int(x.key)):
                f.write(json.dumps(x.line, ensure_ascii=False) + "\n")
        out["manifest"] = str(path)
    if ds.get("shards"):
        out["shards"] = max(1, round(ds["shards"] * fraction))
    return out


def run_snakemake(pilot: Path, configfiles: list[str], options: list[str]) -> None:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(pilot)]
    cmd += ["--configfile", *configfiles, *options]
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", check=False)
    if p.returncode != 0:
        raise SystemExit(f"the pilot run failed ({' '.join(cmd)}):\n{(p.stdout + p.stderr)[-3000:]}")


JOB_START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")


def _key(job: dict) -> tuple:
    """(rule, dataset, shard, the other wildcards): a job's key."""
    other = ", ".join(f"{k}={v}" for k, v in sorted(job.get("wildcards", {}).items()) if k not in ("ds", "shard"))
    return (job["rule"], job["wildcards"].get("ds"), job["wildcards"].get("shard"), other)


def jobs_of_logs(log_dir: Path) -> dict[tuple, dict]:
    """Every job Snakemake's run logs (``.snakemake/log``) list, by :func:`_key`, the latest
    run's last: its ``wildcards``, ``log``, ``benchmark``, ``threads``, ``mem_mb``."""
    out: dict[tuple, dict] = {}
    for path in sorted(log_dir.glob("*.snakemake.log")):
        job: dict | None = None
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            m = JOB_START.match(line)
            if m:
                job = {"rule": m.group(1), "wildcards": {}, "threads": 1, "mem_mb": 0.0}
            elif job is not None and line.startswith("    ") and ": " in line:
                _field(job, *line.strip().split(": ", 1))
            elif job is not None:
                out[_key(job)] = job
                job = None
        if job is not None:  # the file's last block
            out[_key(job)] = job
    return out


def _field(job: dict, key: str, value: str) -> None:
    if key == "wildcards":
        job["wildcards"] = dict(kv.split("=", 1) for kv in value.split(", ") if "=" in kv)
    elif key == "threads":
        job["threads"] = int(value)
    elif key == "resources":
        mem = re.search(r"\bmem_mb=(\d+)", value)
        job["mem_mb"] = float(mem.group(1)) if mem else 0.0
    elif key in ("log", "benchmark"):
        job[key] = value


def benchmark(path: Path) -> dict | None:
    """A Snakemake benchmark file's last row: ``s`` (wall), ``cpu_s``, ``rss_mb`` (max_rss).
    Snakemake samples the job's processes now and then: a short job's figures miss most of it."""
    if not path.exists():
        return None
    rows = path.read_text(encoding="utf-8").splitlines()
    if len(rows) < 2:
        return None
    row = dict(zip(rows[0].split("\t"), rows[-1].split("\t"), strict=True))
    num = {k: float(v) if v not in ("", "-", "NA") else 0.0 for k, v in row.items() if k != "h:m:s"}
    return {"s": num.get("s", 0.0), "cpu_s": num.get("cpu_time", 0.0), "rss_mb": num.get("max_rss", 0.0)}


def logged(log: Path, tag: str):
    """The JSON value after ``tag`` on the last line of a job's log that holds it (None: none)."""
    if not log.exists():
        return None
    found = None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if tag in line:
            found = json.loads(line.split(tag, 1)[1])
    return found


def job_used(log: Path) -> dict | None:
    """What a job of speechprep's CLI logged it used (:func:`speechprep.core.logs.used`): its
    process's wall and CPU seconds (its workers' included) and peak memory, with ``threads``
    workers at its largest worker's peak at once."""
    found = logged(log, logs.USED)
    if found is None:
        return None
    workers = found["threads"] * found["worker_rss_mb"]
    return {"s": found["wall_s"], "cpu_s": found["cpu_s"], "rss_mb": found["rss_mb"] + workers}


def file_costs(log: Path) -> list[list[float]] | None:
    """The ``[seconds, CPU seconds]`` per file a job logged (:func:`speechprep.core.logs.file_costs`)."""
    return logged(log, logs.FILE_COSTS)


def job_cost(pilot: Path, job: dict) -> dict | None:
    """A job's cost: what it logged, or where it logged nothing (a rule that runs no job of
    the CLI) or its benchmark file saw more, the benchmark's figures."""
    got = [
        x
        for x in (
            job_used(pilot / job["log"]) if job.get("log") else None,
            benchmark(pilot / job["benchmark"]) if job.get("benchmark") else None,
        )
        if x
    ]
    return {k: max(x[k] for x in got) for k in ("s", "cpu_s", "rss_mb")} if got else None


@dataclass
class Measured:
    """What the pilot's results hold, per dataset: audio hours, segments, shards and output
    bytes by stage folder; and each job (rule, dataset, shard) with its benchmark."""

    hours: dict[str, float] = field(default_factory=dict)
    segments: dict[str, int] = field(default_factory=dict)
    shards: dict[str, int] = field(default_factory=dict)
    output_bytes: dict[tuple[str, str], int] = field(default_factory=dict)  # (dataset, stage)
    shard_hours: dict[tuple[str, str], float] = field(default_factory=dict)  # (dataset, shard)
    jobs: dict[tuple, dict] = field(default_factory=dict)


def _bytes_below(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def measure(pilot: Path, datasets: list[str]) -> Measured:
    results, m = pilot / "results", Measured()
    for ds in datasets:
        root = results / ds
        manifest = root / "manifest.jsonl"
        m.hours[ds] = sum(x.get("duration") or 0.0 for x in read_jsonl(manifest)) / 3600 if manifest.exists() else 0.0
        m.segments[ds] = sum(1 for p in (root / "vad").glob("shard-*.segments.jsonl") for _ in read_jsonl(p))
        for shard in sorted((root / "shards").glob("*.jsonl")):
            m.shard_hours[(ds, shard.stem)] = sum(x.get("duration") or 0.0 for x in read_jsonl(shard)) / 3600
        m.shards[ds] = sum(1 for k in m.shard_hours if k[0] == ds)
        for stage in STAGE_DIRS:
            m.output_bytes[(ds, stage)] = _bytes_below(root / stage)
    for key, job in jobs_of_logs(pilot / ".snakemake" / "log").items():
        m.jobs[key] = {**job, "bench": job_cost(pilot, job)}
        files = file_costs(pilot / job["log"]) if job.get("log") else None
        if files:
            m.jobs[key]["files"] = files
        ready = logged(pilot / job["log"], logs.READY) if job.get("log") else None
        if ready:
            m.jobs[key]["ready"] = ready
    return m


@dataclass(frozen=True)
class Corpus:
    """The whole corpus as the pilot scales to it, per dataset: how many times the sample's
    audio it holds, and the shards it will have at the configured size."""

    scale: dict[str, float]
    shards: dict[str, int]
    # a probed rule's peak memory on synthetic inputs (speechprep.workflow.probe), by (rule,
    # dataset or None): {"items": the corpus's, "points": [(items, MB), (items, MB)]}
    probes: dict[tuple, dict] = field(default_factory=dict)
    # a rule's peak memory on a shard of the dataset's longest file where the sample missed
    # it, by (rule, dataset): MB (:func:`run_longest`)
    longest: dict[tuple, float] = field(default_factory=dict)
    # that job's cost per file where it logged one (diarization): [[seconds, CPU s]], by (rule, dataset)
    longest_files: dict[tuple, list] = field(default_factory=dict)
    # every file's seconds of audio, by dataset (a manifest's lines of one file summed), and
    # how many times over the corpus is taken (--hours): what a cost per file is read at
    files: dict[str, list[float]] = field(default_factory=dict)
    grow: float = 1.0


def corpus_shards(ds: dict, cfg: dict, hours: float) -> int:
    """Shards of a first ingest of ``hours`` of the dataset (speechprep.ingest.plan)."""
    fixed = ds.get("shards", cfg["ingest"].get("shards"))
    return (
        int(fixed) if fixed else max(1, math.ceil(hours / float(ds.get("shard_hours", cfg["ingest"]["shard_hours"]))))
    )


def _kind(key: tuple) -> str:
    return "shard" if key[2] is not None else "dataset" if key[1] is not None else "run"


def _on_gpu(rule: str, cfg: dict, cluster: Cluster) -> bool:
    device = str((cfg.get(rule.split("_")[0]) or {}).get("device", "cpu"))
    return device.startswith("cuda") or (device == "auto" and cluster.gpus > 0)


def _shard_rule(jobs: list[tuple[tuple, dict]], m: Measured, c: Corpus) -> dict:
    """A shard rule's jobs in the corpus: as many as the corpus's shards (in the sample's ratio
    of jobs to shards), each costing a fixed part and a part per audio hour, fitted over the
    sample's jobs (:func:`~speechprep.workflow.bill.fit_jobs`)."""
    out = {"jobs": 0.0, "cpu_s": 0.0, "s": 0.0, "rss_mb": 0.0, "fits": {}}
    hours = {k: m.shard_hours.get((k[1], k[2]), 0.0) for k, _ in jobs}
    for what in ("cpu_s", "s"):
        line = fit_jobs([(hours[k], (j["bench"] or {}).get(what, 0.0)) for k, j in jobs])
        line = _with_ready(line, jobs, hours, what)
        out["fits"][what] = {"fixed": round(line.fixed, 3), "per_audio_hour": round(line.per_item, 3)}
        for ds in sorted({k[1] for k, _ in jobs}):
            mine = [k for k, _ in jobs if k[1] == ds]
            n = len(mine) / max(1, m.shards[ds]) * c.shards[ds]
            out[what] += n * line.fixed + line.per_item * sum(hours[k] for k in mine) * c.scale[ds]
        if what == "cpu_s":  # how far the sample's jobs sit from the fit: the estimate's interval
            ratios = [((j["bench"] or {}).get(what, 0.0) / line(hours[k]), hours[k]) for k, j in jobs if line(hours[k])]
            span = interval([r for r, _ in ratios], [h for _, h in ratios])
            out["cpu_s_interval"] = [out[what] * span[0], out[what] * span[1]] if span else None
    for ds in sorted({k[1] for k, _ in jobs}):
        out["jobs"] += sum(1 for k, _ in jobs if k[1] == ds) / max(1, m.shards[ds]) * c.shards[ds]
    out["rss_mb"] = max(((j["bench"] or {}).get("rss_mb", 0.0) for _, j in jobs), default=0.0)
    rule = jobs[0][0][0]
    if all(j.get("files") and j["bench"] for _, j in jobs) and all(k[1] in c.files for k, _ in jobs):
        _by_files(rule, jobs, m, c, out)
    for ds in sorted({k[1] for k, _ in jobs}):
        alone = c.longest.get((rule, ds))  # the job on the longest file, which the sample missed
        if alone is not None:
            out["rss_mb"] = max(out["rss_mb"], alone)
            out["fits"][f"{ds}.rss_mb.longest"] = alone
    return out


def _with_ready(line: Line, jobs: list[tuple[tuple, dict]], hours: dict, what: str) -> Line:
    """Where the jobs are too few or too alike in size for the fit to tell a job's fixed part
    from its part per audio hour (``line`` has none), the fixed part each job logged as it
    became ready (:func:`speechprep.core.logs.ready`: imports, the model's restore), the rest
    per hour. A real-size pilot's two ASR jobs of one size scaled a 34.5 CPU-s restore with the
    hours and were 33 % high (docs/benchmarks/plan.md, "With the real-size models")."""
    key = {"cpu_s": "cpu_s", "s": "wall_s"}[what]
    done = [(hours[k], (j["bench"] or {}).get(what, 0.0), (j.get("ready") or {}).get(key)) for k, j in jobs]
    if line.fixed > 0 or not done or any(r is None for _, _, r in done) or sum(h for h, _, _ in done) <= 0:
        return line
    fixed = min(min(v for _, v, _ in done), sum(r for _, _, r in done) / len(done))
    return Line(fixed, max(0.0, sum(v - fixed for _, v, _ in done) / sum(h for h, _, _ in done)))


def _by_files(rule: str, jobs: list[tuple[tuple, dict]], m: Measured, c: Corpus, out: dict) -> None:
    """A shard rule whose jobs logged their CPU per file (diarization, whose cost follows each
    file's length, not only the audio hours): each job's fixed part (the job's CPU less its
    files') plus, for every file of the corpus, its cost by its seconds of speech (its seconds
    times the sample's share of speech), fitted per dataset (a dataset has its diarization
    model: each model its own fit) on the sample's files and on the longest file's job where
    the sample missed it (:func:`~speechprep.workflow.bill.fit_files`). The wall seconds and
    the interval move with the CPU."""
    total = 0.0
    for ds in sorted({k[1] for k, _ in jobs}):
        mine = [j for k, j in jobs if k[1] == ds]
        pairs = [(float(x), float(y)) for j in mine for x, y in j["files"]]
        fixed = sum(max(0.0, j["bench"]["cpu_s"] - sum(y for _, y in j["files"])) for j in mine) / len(mine)
        line = fit_files(pairs + [(float(x), float(y)) for x, y in c.longest_files.get((rule, ds), [])])
        share = min(1.0, sum(x for x, _ in pairs) / max(1e-9, m.hours.get(ds, 0.0) * 3600))
        n = len(mine) / max(1, m.shards[ds]) * c.shards[ds]
        files = c.grow * sum(line(share * x) for x in c.files[ds])
        total += n * fixed + files
        out["fits"][f"{ds}.cpu_s.files"] = {
            "fixed_per_job": round(fixed, 3),
            "per_file": round(line.per_file, 5),
            "per_speech_s": line.per_second,
            "per_speech_s2": line.per_second2,
            "speech_share": round(share, 4),
            "files": len(pairs),
        }
    ratio = total / out["cpu_s"] if out["cpu_s"] else 1.0
    out["cpu_s"], out["s"] = total, out["s"] * ratio
    if out.get("cpu_s_interval"):
        out["cpu_s_interval"] = [x * ratio for x in out["cpu_s_interval"]]


def _fitted_rule(jobs: list[tuple[tuple, dict]], first: Measured | None, m: Measured, c: Corpus) -> dict:
    """A dataset's or the run's jobs: each one's cost fitted on the pilot's two sizes
    (segments of its dataset, or of every dataset) and read at the corpus's segments."""
    out = {"jobs": float(len(jobs)), "cpu_s": 0.0, "s": 0.0, "rss_mb": 0.0, "fits": {}}
    for key, j in jobs:
        names = [key[1]] if key[1] is not None else list(m.segments)
        n2, n = sum(m.segments[d] for d in names), sum(m.segments[d] * c.scale[d] for d in names)
        b2 = j["bench"] or {}
        b1 = ((first.jobs.get(key) or {}).get("bench") if first else None) or {}
        n1 = sum(first.segments.get(d, 0) for d in names) if first else 0
        for what in ("cpu_s", "s", "rss_mb"):
            points = [(n1, b1[what])] if b1 and n1 != n2 else []
            line = fit([*points, (n2, b2.get(what, 0.0))], *NOISE[what])
            value = line(n)
            name = ".".join(x for x in (key[1] or "run", key[3], what) if x)
            out["fits"][name] = {"fixed": round(line.fixed, 3), "per_segment": line.per_item}
            probe = c.probes.get((key[0], key[1])) if what == "rss_mb" else None
            if probe:  # the job on synthetic inputs toward the corpus's size: how it grows
                grows = fit(probe["points"], *NOISE[what])
                value = max(value, grows(probe["items"]))
                out["fits"][f"{name}.probe"] = {
                    "fixed": round(grows.fixed, 3),
                    "per_item": grows.per_item,
                    "points": probe["points"],
                    "items": probe["items"],
                }
            out[what] = max(out[what], value) if what == "rss_mb" else out[what] + value
    return out


def rule_costs(m: Measured, first: Measured | None, c: Corpus) -> dict[str, dict]:
    """Each rule's jobs in the corpus: count, CPU and wall seconds summed, peak memory, the
    memory and threads its jobs ask for, and how it was scaled."""
    by_rule: dict[str, list[tuple[tuple, dict]]] = defaultdict(list)
    for key, job in m.jobs.items():
        if key[0] != "all":
            by_rule[key[0]].append((key, job))
    out = {}
    for rule, jobs in sorted(by_rule.items()):
        kind = _kind(jobs[0][0])
        cost = _shard_rule(jobs, m, c) if kind == "shard" else _fitted_rule(jobs, first, m, c)
        cost.update(
            kind=kind,
            measured=all(j["bench"] for _, j in jobs),
            threads=max(j["threads"] for _, j in jobs),
            mem_mb_asked=max(j["mem_mb"] for _, j in jobs),
        )
        out[rule] = cost
    return out


def _stage_totals(rules: dict[str, dict], m: Measured, c: Corpus, cfg: dict, cluster: Cluster) -> dict:
    stages: dict[str, dict] = {}
    for rule, r in rules.items():
        stage = rule.split("_")[0]
        s = stages.setdefault(stage, {"cpu_s": 0.0, "gpu_s": 0.0, "peak_rss_mb": 0.0, "output_bytes": 0, "jobs": 0})
        s["cpu_s"] += r["cpu_s"]
        s["gpu_s"] += r["s"] if _on_gpu(rule, cfg, cluster) else 0.0
        s["peak_rss_mb"] = max(s["peak_rss_mb"], r["rss_mb"])
        s["jobs"] += round(r["jobs"])
    hours = sum(m.hours[d] * c.scale[d] for d in m.hours)
    for stage, s in stages.items():
        s["output_bytes"] = round(sum(m.output_bytes.get((d, stage), 0) * c.scale[d] for d in m.hours))
        s["cpu_s_per_audio_hour"] = s["cpu_s"] / hours if hours else None
    return stages


def _loads(rules: dict[str, dict], cfg: dict, cluster: Cluster) -> dict[str, RuleLoad]:
    return {
        rule: RuleLoad(
            jobs=round(r["jobs"]),
            seconds=r["s"] / max(1.0, r["jobs"]),
            threads=r["threads"],
            mem_mb=max(r["mem_mb_asked"], r["rss_mb"]),
            gpus=1 if _on_gpu(rule, cfg, cluster) else 0,
        )
        for rule, r in rules.items()
    }


def _cpu_interval(rules: dict[str, dict]) -> list[float] | None:
    """A 95% interval of the run's CPU seconds: each shard rule's (from its jobs' spread about
    their fit) and the other rules' estimates (None: a shard rule had too few jobs to say)."""
    lo = hi = 0.0
    for r in rules.values():
        if r["kind"] != "shard":
            lo, hi = lo + r["cpu_s"], hi + r["cpu_s"]
        elif r.get("cpu_s_interval") is None:
            return None
        else:
            lo, hi = lo + r["cpu_s_interval"][0], hi + r["cpu_s_interval"][1]
    return [round(lo, 1), round(hi, 1)]


def estimate(m: Measured, first: Measured | None, c: Corpus, cfg: dict, cluster: Cluster, edges, prices) -> dict:
    """plan.json (docs/cluster.md, "Before the run: the plan")."""
    rules = rule_costs(m, first, c)
    stages = _stage_totals(rules, m, c, cfg, cluster)
    loads = _loads(rules, cfg, cluster)
    path_s, path = critical_path(loads, [e for e in edges if e[0] in loads or e[1] in loads], cluster)
    bound = capacity_bound(loads, cluster)
    total = {k: sum(s[k] for s in stages.values()) for k in ("cpu_s", "gpu_s", "output_bytes", "jobs")}
    total["core_s"] = sum(x.jobs * x.threads * x.seconds for x in loads.values())
    total["cpu_s_interval"] = _cpu_interval(rules)
    bottleneck = max(loads, key=lambda r: loads[r].jobs * loads[r].seconds, default=None)
    plan = {
        "datasets": {
            d: {
                "sample_hours": m.hours[d],
                "hours": m.hours[d] * c.scale[d],
                "scale": c.scale[d],
                "segments": round(m.segments[d] * c.scale[d]),
                "shards": c.shards[d],
                "sample_shards": m.shards[d],
            }
            for d in m.hours
        },
        "stages": stages,
        "rules": rules,
        "total": total,
        "cluster": vars(cluster),
        "wall_s": max(path_s, bound),
        "wall_s_critical_path": path_s,
        "wall_s_capacity": bound,
        "critical_path": path,
        "bottleneck": bottleneck,
    }
    if prices:
        cpu_h, gpu_h = prices
        plan["cost"] = {
            "core_hours": total["core_s"] / 3600,
            "gpu_hours": total["gpu_s"] / 3600,
            "total": total["core_s"] / 3600 * cpu_h + total["gpu_s"] / 3600 * gpu_h,
        }
    return plan


def rule_graph(pilot: Path, configfiles: list[str], options: list[str]) -> list[tuple[str, str]]:
    """The run's rule graph (``snakemake --rulegraph``): ``(before, after)`` by rule name."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(pilot)]
    cmd += ["--configfile", *configfiles, *options, "--rulegraph"]
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", check=False)
    if p.returncode != 0:
        raise SystemExit(f"snakemake --rulegraph failed:\n{p.stderr[-2000:]}")
    names = dict(re.findall(r'^\s*(\d+)\[label = "(\w+)"', p.stdout, re.M))
    edges = [(names[a], names[b]) for a, b in re.findall(r"^\s*(\d+) -> (\d+)", p.stdout, re.M)]
    # a shard job reads what the ingest checkpoint wrote through an input function: no edge drawn
    first = set(names.values()) - {b for _, b in edges} - {"ingest"}
    return edges + [("ingest", r) for r in sorted(first) if not r.startswith("demo_")]


def this_machine() -> Cluster:
    """One node: this machine's cores, GPUs (``nvidia-smi -L``) and memory."""
    gpus = 0
    if shutil.which("nvidia-smi"):
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, encoding="utf-8", check=False)
        gpus = p.stdout.count("GPU ") if p.returncode == 0 else 0
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    return Cluster(1, os.cpu_count() or 1, gpus, round(mem, 1))


def sample_fraction(a: argparse.Namespace, items: dict[str, list[Item]]) -> float:
    if a.sample is not None:
        return a.sample
    seconds = sum(x.seconds for its in items.values() for x in its)
    return min(1.0, a.sample_minutes * 60 / seconds) if seconds else 1.0


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m speechprep plan", description=__doc__.splitlines()[0])
    ap.add_argument("--directory", default=".", help="the run's directory (as snakemake's --directory)")
    ap.add_argument("--configfile", nargs="*", default=[], help="the run's config files, as given to snakemake")
    size = ap.add_mutually_exclusive_group(required=True)
    size.add_argument("--sample", type=float, help="share of each dataset's audio in the pilot (0-1]")
    size.add_argument("--sample-minutes", type=float, help="minutes of audio in the pilot, over every dataset")
    size.add_argument("--compare", metavar="PLAN", help="a plan.json, against the finished run in --directory")
    ap.add_argument("--seed", type=int, default=0, help="the sample's random seed")
    ap.add_argument("--reuse", action="store_true", help="the last pilot's measurements, if it drew this sample")
    ap.add_argument(
        "--hours", type=float, help="the corpus's hours, when WORK holds a part of it (each dataset scaled alike)"
    )
    ap.add_argument("--out", required=True, help="plan.json (with --compare: the comparison)")
    ap.add_argument("--nodes", type=int, help="the cluster's nodes (default: this machine)")
    ap.add_argument("--cores", type=int, help="cores per node")
    ap.add_argument("--gpus", type=int, help="GPUs per node")
    ap.add_argument("--mem-gb", type=float, help="memory per node (GB)")
    ap.add_argument("--max-queued", type=int, help="the site's limit on a user's queued and running jobs (array tasks)")
    ap.add_argument("--jobs", type=int, help="the most jobs the run may have submitted at once (a site's or your cap)")
    ap.add_argument(
        "--rtfx",
        action="append",
        default=[],
        metavar="RULE=X",
        help="a rule's audio seconds per wall second on the cluster's device, where the pilot ran "
        "elsewhere (asr=3000); repeatable",
    )
    ap.add_argument("--price-cpu-h", type=float, help="price of a core-hour")
    ap.add_argument("--price-gpu-h", type=float, help="price of a GPU-hour")
    ap.add_argument(
        "--alternative",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="also plan the run with this setting (a dotted config key, a YAML value, e.g. "
        "diarize.enabled=false); its own pilot on the same sample; repeatable",
    )
    ap.add_argument(
        "--probe-max",
        type=int,
        default=1_000_000,
        help="the run-wide jobs' memory probe: items of its larger size at most (0: no probe)",
    )
    ap.add_argument("snakemake", nargs="*", help="after --: the run's snakemake options (default: the local profile)")
    a = ap.parse_args(argv)
    if a.sample is not None and not 0 < a.sample <= 1:
        ap.error("--sample is a share of the audio, in (0, 1]")
    return a


def _cluster(a: argparse.Namespace) -> Cluster:
    here = this_machine()
    return Cluster(
        a.nodes or here.nodes,
        a.cores or here.cores,
        here.gpus if a.gpus is None else a.gpus,
        a.mem_gb or here.mem_gb,
    )


def _pilot_step(
    pilot: Path, cfg: dict, chosen: dict[str, list[Item]], fraction: float, run: tuple, aside: bool = False
) -> Measured:
    """Write the pilot's config for ``chosen`` and run the workflow on it. ``aside``: the jobs'
    reuse stores are set aside while it runs, so a job it runs again costs what it costs in a
    first run (it reuses nothing), and put back where it did not, for the output bytes a run
    leaves (the stores are a tenth to a half of a stage's bytes)."""
    config = {
        "datasets": {d: pilot_dataset(d, cfg["datasets"][d], chosen[d], pilot, fraction) for d in chosen},
        "speakers": {"recluster": True},  # each step clusters every segment: a first run's cost
        "tts": {"retrain_tokenizer": True},  # and trains the tokenizer on every transcript
    }
    write_json(pilot / "pilot.json", config)
    configfiles, options = run
    results, kept = pilot / "results", pilot / "reuse-aside"
    if aside:
        shutil.rmtree(kept, ignore_errors=True)
        _move_stores(results, kept)
    run_snakemake(pilot, [*configfiles, str(pilot / "pilot.json")], options)
    if aside:
        _move_stores(kept, results)
        shutil.rmtree(kept)
    return measure(pilot, list(chosen))


def _move_stores(src: Path, dest: Path) -> None:
    """Every reuse store below ``src`` (``<ds>/<stage>/.partial*/<shard>.reuse``) to the same
    place below ``dest``, but where ``dest`` has one (a job that ran again wrote its own):
    that one is deleted."""
    for store in sorted(src.glob("*/*/.partial*/*.reuse")):
        there = dest / store.relative_to(src)
        if there.exists():
            shutil.rmtree(store)
            continue
        there.parent.mkdir(parents=True, exist_ok=True)
        store.rename(there)


def save_measured(path: Path, m: Measured) -> None:
    write_json(
        path,
        {
            "hours": m.hours,
            "segments": m.segments,
            "shards": m.shards,
            "output_bytes": [[*k, v] for k, v in m.output_bytes.items()],
            "shard_hours": [[*k, v] for k, v in m.shard_hours.items()],
            "jobs": [[*k, v] for k, v in m.jobs.items()],
        },
    )


def load_measured(path: Path) -> Measured:
    z = json.loads(path.read_text(encoding="utf-8"))
    return Measured(
        hours=z["hours"],
        segments=z["segments"],
        shards=z["shards"],
        output_bytes={(d, s): v for d, s, v in z["output_bytes"]},
        shard_hours={(d, s): v for d, s, v in z["shard_hours"]},
        jobs={tuple(j[:4]): j[4] for j in z["jobs"]},
    )


def _unsized(cfg: dict) -> dict:
    """The config without the shard sizes (``shards``, ``shard_hours``): a plan at other shard
    sizes reuses the pilot, whose jobs' fits say what a shard of any size costs."""
    sizing = ("shards", "shard_hours")
    out = {**cfg, "ingest": {k: v for k, v in cfg["ingest"].items() if k not in sizing}}
    out["datasets"] = {d: {k: v for k, v in ds.items() if k not in sizing} for d, ds in cfg["datasets"].items()}
    return out


def pilot_runs(
    a: argparse.Namespace, work: Path, cfg: dict, halves: dict, fraction: float, run: tuple, name: str = "pilot"
):
    """The pilot's two steps' measurements ``(first, whole)`` (``first`` None: one step), run
    now in ``WORK/.plan/<name>``, or with ``--reuse`` read from the last pilot there when it
    drew the same sample with the same config but for the shard sizes."""
    pilot = work / SCRATCH / name
    config = hashlib.sha256(json.dumps(_unsized(cfg), sort_keys=True, default=str).encode("utf-8")).hexdigest()
    key = {"config": config, "files": {d: [x.key for h in hs for x in h] for d, hs in halves.items()}}
    steps = [pilot / "step1.json", pilot / "step2.json"]
    if a.reuse and (pilot / "sample.json").exists() and all(p.exists() for p in steps):
        if json.loads((pilot / "sample.json").read_text(encoding="utf-8")) == key:
            first, m = (load_measured(p) for p in steps)
            return (first if first.jobs != m.jobs else None), m
        print("--reuse: the last pilot drew another sample or ran another config: running it again")
    for stale in (pilot / x for x in PILOT_OWN):  # the last pilot's, whatever it got to
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
        else:
            stale.unlink(missing_ok=True)
    link_tree(work, pilot)
    first = _pilot_step(pilot, cfg, {d: h[0] for d, h in halves.items()}, fraction, run)
    save_measured(steps[0], first)
    whole = {d: h[0] + h[1] for d, h in halves.items()}
    m = _pilot_step(pilot, cfg, whole, fraction, run, aside=True) if any(h[1] for h in halves.values()) else first
    save_measured(steps[1], m)
    write_json(pilot / "sample.json", key)
    return (first if m is not first else None), m


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    work = Path(a.directory).resolve()
    out = Path(a.out).resolve()
    os.chdir(work)  # the config's relative paths are the run's
    loaded: dict = {}
    for f in a.configfile:  # as Snakemake loads them: each over the ones before
        loaded = merge(loaded, defaults(f))
    cfg = effective(loaded, a.configfile, REPO / "config" / "config.yaml")
    if a.compare:
        return compare(json.loads(Path(a.compare).read_text(encoding="utf-8")), work, cfg, out)
    items = {
        d: corpus(ds, ds.get("extensions", cfg["ingest"]["extensions"]), d, cfg, work / SCRATCH / "items")
        for d, ds in cfg["datasets"].items()
    }
    fraction = sample_fraction(a, items)
    halves = {d: draw(its, fraction, a.seed) for d, its in items.items()}
    run = (
        [str(Path(f).resolve()) for f in a.configfile],
        a.snakemake or ["--profile", str(REPO / "profiles" / "local")],
    )
    plan = plan_of(a, work, cfg, (items, halves, fraction), run)
    whole = {d: h[0] + h[1] for d, h in halves.items()}
    plan["sample"] = {
        "fraction": fraction,
        "seed": a.seed,
        "files": {d: [len(whole[d]), len(items[d])] for d in whole},
        "longest_s": longest_files(items, whole),
    }
    ids = {d: [sum(len(x.ids or ()) for x in xs) for xs in (whole[d], items[d])] for d in whole}
    plan["sample"]["source_ids"] = {d: n for d, n in ids.items() if source_key(cfg["datasets"][d]) is not None}
    _print(plan)
    for k, spec in enumerate(a.alternative, 1):
        change = setting(spec)
        override = work / SCRATCH / f"alternative-{k}.json"
        write_json(override, change)
        alt_run = ([*run[0], str(override)], run[1])
        alt = plan_of(a, work, merge(cfg, change), (items, halves, fraction), alt_run, f"pilot-alternative-{k}")
        plan.setdefault("alternatives", {})[spec] = versus(alt, plan)
        print(f"{spec}: " + ", ".join(f"{x} x{r:.2f}" for x, r in plan["alternatives"][spec]["ratio"].items() if r))
    write_json(out, plan)
    write_page(out.with_suffix(".html"), plan_html(plan))
    return 0


def file_seconds(items: list[Item]) -> list[float]:
    """Each audio file's seconds: an input file's, or a manifest's lines (a source's utterances)
    of one file summed."""
    by_file: dict[str, float] = defaultdict(float)
    for x in items:
        by_file[x.rel or (str(x.line.get("audio_filepath")) if x.line is not None else x.key)] += x.seconds
    return list(by_file.values())


def longest_files(items: dict[str, list[Item]], sample: dict[str, list[Item]]) -> dict[str, list[float]]:
    """Per dataset, the longest file of the sample and of the corpus (s): where the sample
    missed it, :func:`run_longest` measures the jobs whose memory follows it."""
    return {
        d: [
            round(max((x.seconds for x in chosen), default=0.0), 3),
            round(max((x.seconds for x in items[d]), default=0.0), 3),
        ]
        for d, chosen in sample.items()
    }


def plan_of(a: argparse.Namespace, work: Path, cfg: dict, sample: tuple, run: tuple, name: str = "pilot") -> dict:
    """The plan of ``cfg``: its pilot (``WORK/.plan/<name>``) on ``sample`` (every dataset's
    items, the drawn halves, the share), scaled to the corpus."""
    items, halves, fraction = sample
    first, m = pilot_runs(a, work, cfg, halves, fraction, run, name)
    whole = {d: h[0] + h[1] for d, h in halves.items()}
    scale = {d: sum(x.seconds for x in items[d]) / max(1e-9, sum(x.seconds for x in whole[d])) for d in whole}
    # the corpus is larger than what is on disk (--hours): each dataset grows alike
    grow = a.hours / max(1e-9, sum(m.hours[d] * scale[d] for d in whole)) if a.hours else 1.0
    files = {d: file_seconds(items[d]) for d in whole}
    c = Corpus(scale={d: v * grow for d, v in scale.items()}, shards={}, files=files, grow=grow)
    c.shards.update({d: corpus_shards(cfg["datasets"][d], cfg, m.hours[d] * c.scale[d]) for d in whole})
    c.probes.update(run_probes(a.probe_max, work / SCRATCH / name, run, m, c, {d: len(whole[d]) for d in whole}))
    memory, costs = run_longest(work / SCRATCH / name, run, cfg, items, whole)
    c.longest.update(memory)
    c.longest_files.update(costs)
    prices = (a.price_cpu_h or 0.0, a.price_gpu_h or 0.0) if a.price_cpu_h or a.price_gpu_h else None
    pilot = work / SCRATCH / name
    edges = rule_graph(pilot, [*run[0], str(pilot / "pilot.json")], run[1])
    plan = estimate(m, first, c, cfg, _cluster(a), edges, prices)
    plan.update(sized(plan, m, cfg, _cluster(a), a.max_queued, a.jobs, dict(map(rate, a.rtfx))))
    return plan


def rate(spec: str) -> tuple[str, float]:
    """``--rtfx RULE=X``: the rule's audio seconds per wall second on the cluster's device."""
    rule, sep, value = spec.partition("=")
    try:
        x = float(value)
    except ValueError:
        x = 0.0
    if not sep or x <= 0:
        raise SystemExit(f"--rtfx {spec!r}: give RULE=X, X the rule's audio seconds per wall second (asr=3000)")
    return rule.strip(), x


def _job_of(rule: str) -> str:
    """The declared job a rule runs (``asr`` runs "asr run", ``curate_measure`` "curate measure")."""
    stage, _, job = rule.partition("_")
    return f"{stage} {job or 'run'}"


def rule_sizes(
    plan: dict, m: Measured, cfg: dict, cluster: Cluster, rtfx: dict[str, float] | None = None
) -> list[RuleSize]:
    """Each shard rule of the plan as :func:`~speechprep.workflow.bill.recommend` sizes it:
    its jobs' fixed part (the wall seconds each logged as it became ready, the mean), its wall
    seconds per audio hour after that (the pilot's, or 3,600 / ``rtfx[rule]`` where given: the
    rule's speed on the cluster's device), how many of its jobs the cluster runs at once, and
    the largest shard whose job fits a node's memory (its peak in the pilot plus what its job
    declares it keeps per audio second of the shard: :class:`speechprep.core.jobs.Memory`)."""
    from ..jobs import JOBS

    rtfx = rtfx or {}
    shards = sum(d["shards"] for d in plan["datasets"].values())
    out = []
    for rule, r in plan["rules"].items():
        if r["kind"] != "shard":
            continue
        done = [
            (
                m.shard_hours.get((k[1], k[2]), 0.0),
                (j["bench"] or {}).get("s", 0.0),
                (j.get("ready") or {}).get("wall_s"),
            )
            for k, j in m.jobs.items()
            if k[0] == rule
        ]
        timed = [(h, s, f) for h, s, f in done if f is not None]
        hours = sum(h for h, _, _ in timed)
        fixed = sum(f for _, _, f in timed) / len(timed) if timed else r["fits"]["s"]["fixed"]
        per_hour = (
            sum(max(0.0, s - f) for _, s, f in timed) / hours if timed and hours else r["fits"]["s"]["per_audio_hour"]
        )
        if rule in rtfx:
            per_hour = 3600 / rtfx[rule]
        job = JOBS.get(_job_of(rule))
        grows = job.memory.shard_mb_per_s * 3600 if job is not None and job.memory is not None else 0.0
        room = cluster.mem_gb * 1024 - max(r["rss_mb"], r["mem_mb_asked"])
        biggest = max((h for h, _, _ in done), default=0.0)
        gpus = 1 if _on_gpu(rule, cfg, cluster) else 0
        load = RuleLoad(1, 1.0, r["threads"], max(r["mem_mb_asked"], r["rss_mb"]), gpus)
        out.append(
            RuleSize(
                name=rule,
                fixed_s=fixed,
                per_hour_s=per_hour,
                at_once=max(1, slots(load, cluster) * cluster.nodes),
                jobs_per_shard=r["jobs"] / max(1, shards),
                most_hours=biggest + room / grows if grows > 0 else float("inf"),
                model=bool(timed),
            )
        )
    return out


def dag_jobs(plan: dict, cfg: dict, shard_hours: float | None = None) -> int:
    """The run's jobs with shards of ``shard_hours`` (None: the config's; a dataset with a
    fixed ``shards`` count keeps it): each shard rule's jobs per shard times the shards, the
    other rules' as planned, and the target rule."""
    now = sum(d["shards"] for d in plan["datasets"].values())
    size = {} if shard_hours is None else {"shard_hours": shard_hours}
    then = sum(
        corpus_shards({**cfg["datasets"][name], **size}, cfg, d["hours"]) for name, d in plan["datasets"].items()
    )
    jobs = sum(r["jobs"] * (then / max(1, now) if r["kind"] == "shard" else 1.0) for r in plan["rules"].values())
    return round(jobs) + 1


def sized(
    plan: dict,
    m: Measured,
    cfg: dict,
    cluster: Cluster,
    max_queued: int | None = None,
    jobs: int | None = None,
    rtfx: dict[str, float] | None = None,
) -> dict:
    """plan.json's ``recommended`` (the shard size and ``--jobs`` for the cluster and the
    site's limits: :func:`~speechprep.workflow.bill.recommend`) and ``snakemake`` (the DAG's
    jobs, Snakemake's own CPU and memory at that size), with ``snakemake_configured``: the same
    at the config's size."""
    hours = sum(d["hours"] for d in plan["datasets"].values())
    configured = float(cfg["ingest"]["shard_hours"])
    rec = recommend(rule_sizes(plan, m, cfg, cluster, rtfx), hours, configured, max_queued, jobs)
    rec["limits"] = {"max_queued": max_queued, "jobs": jobs}
    part = cfg.get("targets_per_part")  # rule all's targets in parts (Plan.parts)
    return {
        "recommended": rec,
        "snakemake": snakemake_cost(dag_jobs(plan, cfg, rec["shard_hours"]), per_part=part)
        if rec["shard_hours"]
        else {},
        "snakemake_configured": snakemake_cost(dag_jobs(plan, cfg), per_part=part),
    }


def run_probes(most: int, pilot: Path, run: tuple, m: Measured, c: Corpus, files: dict[str, int]) -> dict:
    """Each probed rule's job (:mod:`speechprep.workflow.probe`) on synthetic inputs at two
    sizes toward the corpus's (at most ``most`` items), run as the pilot ran (rules/plan.smk):
    :attr:`Corpus.probes`. Ingest's items are the dataset's files, the others' segments."""
    wanted = {}
    for rule, ds in sorted({k[:2] for k in m.jobs if k[0] in PROBED}, key=str):
        names = [ds] if ds is not None else list(m.segments)
        count = files if rule == "ingest" else m.segments
        corpus_n = sum(count[d] * c.scale[d] for d in names)
        at = sizes(corpus_n, sum(count[d] for d in names), most)
        if at:
            wanted[(rule, ds)] = (corpus_n, at)
    if wanted:
        targets = [target(rule, ds, n) for (rule, ds), (_, at) in wanted.items() for n in at]
        configfiles, options = run
        run_snakemake(pilot, [*configfiles, str(pilot / "pilot.json")], [*options, *targets])
    return {key: {"items": n, "points": read(pilot, *key, at)} for key, (n, at) in wanted.items()}


def longest_rules(cfg: dict, ds: str) -> list[str]:
    """The dataset's shard rules that follow its longest file: VAD (a worker's memory holds its
    decode block) and, where the dataset is diarized, diarization (its cost per file)."""
    stages = set(cfg.get("stages", ()))
    rules = ["vad"] if "vad" in stages else []
    return rules + (["diarize"] if rules and diarize_runs_for(cfg, ds) and stages - {"vad"} else [])


def run_longest(
    pilot: Path, run: tuple, cfg: dict, items: dict[str, list[Item]], sample: dict[str, list[Item]]
) -> tuple[dict, dict]:
    """:attr:`Corpus.longest` and :attr:`Corpus.longest_files`: for each dataset whose sample
    missed its longest file, the :func:`longest_rules` jobs on a shard of that file alone (a
    dataset ``<name>_longest`` of the pilot's run, its outputs targeted; run as the pilot
    ran), their peak memory and cost per file. Drawing that file into the sample instead made
    it a fifth of a 10 % sample of short prompts, and the outputs were predicted 13 % low
    (docs/benchmarks.md)."""
    extra, targets, names = {}, [], {}
    for d, chosen in sample.items():
        top = max(items[d], key=lambda x: (x.seconds, x.key), default=None)
        rules = longest_rules(cfg, d)
        if not rules or top is None or top.seconds <= max((x.seconds for x in chosen), default=0.0):
            continue
        name = f"{d}_longest"
        while name in cfg["datasets"]:
            name += "_"
        print(f"{d}: the sample missed the longest file ({top.seconds:.1f} s): {', '.join(rules)} on it alone")
        entry = {
            k: v for k, v in pilot_dataset(name, cfg["datasets"][d], [top], pilot, 1.0).items() if k != "shard_hours"
        }
        extra[name], names[name] = {**entry, "shards": 1}, d
        targets += [f"results/{name}/{r}/shard-0000.segments.jsonl" for r in rules]
    if not extra:
        return {}, {}
    write_json(pilot / "longest.json", {"datasets": extra})
    configfiles, options = run
    run_snakemake(pilot, [*configfiles, str(pilot / "pilot.json"), str(pilot / "longest.json")], [*options, *targets])
    memory, costs = {}, {}
    for key, job in jobs_of_logs(pilot / ".snakemake" / "log").items():
        cost = job_cost(pilot, job) if key[0] in ("vad", "diarize") and key[1] in names else None
        if cost:
            memory[(key[0], names[key[1]])] = cost["rss_mb"]
            files = file_costs(pilot / job["log"]) if job.get("log") else None
            if files:
                costs[(key[0], names[key[1]])] = files
    return memory, costs


def setting(spec: str) -> dict:
    """``--alternative a.b=VALUE`` as ``{"a": {"b": VALUE}}``, VALUE read as YAML (``false``,
    ``16``, ``[vad, asr]``)."""
    import yaml

    key, sep, value = spec.partition("=")
    if not sep or not key.strip():
        raise SystemExit(f"--alternative {spec!r}: give KEY=VALUE, KEY a dotted config key (diarize.enabled=false)")
    out = yaml.safe_load(value)
    for part in reversed(key.strip().split(".")):
        out = {part: out}
    return out


def versus(alt: dict, plan: dict) -> dict:
    """An alternative's plan beside the plan: its totals, wall time, stages, bottleneck and
    cost, and each total's ratio to the plan's."""
    keys = ("cpu_s", "gpu_s", "output_bytes", "jobs")
    ratio = {k: alt["total"][k] / plan["total"][k] if plan["total"][k] else None for k in keys}
    ratio["wall_s"] = alt["wall_s"] / plan["wall_s"] if plan["wall_s"] else None
    out = {
        "total": {k: alt["total"][k] for k in keys},
        "wall_s": alt["wall_s"],
        "stages": {s: {k: v[k] for k in ("cpu_s", "gpu_s", "output_bytes", "jobs")} for s, v in alt["stages"].items()},
        "bottleneck": alt["bottleneck"],
        "ratio": ratio,
    }
    if "cost" in alt:
        out["cost"] = alt["cost"]
    return out


def _print(plan: dict) -> None:
    t = plan["total"]
    for stage, s in plan["stages"].items():
        print(
            f"{stage}: {s['jobs']} jobs, {s['cpu_s'] / 3600:.2f} CPU-h, {s['gpu_s'] / 3600:.2f} GPU-h, "
            f"peak {s['peak_rss_mb']:.0f} MB, {s['output_bytes'] / 1e9:.3f} GB"
        )
    print(
        f"total: {t['jobs']} jobs, {t['cpu_s'] / 3600:.2f} CPU-h, {t['gpu_s'] / 3600:.2f} GPU-h, "
        f"{t['output_bytes'] / 1e9:.3f} GB; wall {plan['wall_s'] / 3600:.2f} h on {plan['cluster']}; "
        f"bottleneck {plan['bottleneck']}"
    )
    rec, sm = plan.get("recommended"), plan.get("snakemake")
    if rec:
        shares = ", ".join(f"{r} {x:.1%}" for r, x in rec["fixed_share"].items())
        print(
            f"recommended: shard_hours {rec['shard_hours']:g} ({rec['shards']} shards; "
            f"{rec['range'][0]:.3g} to {rec['range'][1]:g} h hold), --jobs {rec['jobs']}; fixed part of a job: {shares}"
        )
        for note in rec["notes"]:
            print(f"  {note}")
    for name, x in (("at that size", sm), ("at the config's size", plan.get("snakemake_configured"))):
        if x:
            print(
                f"snakemake {name}: {x['dag_jobs']} jobs, DAG {x['dag_s']:.0f} CPU-s and {x['dag_mb']:.0f} MB, "
                f"scheduler {x['scheduler_cpu_s']:.0f} CPU-s, submissions {x['submit_s'] / 3600:.2f} h"
            )


def compare(plan: dict, work: Path, cfg: dict, out: Path) -> int:
    """A finished run (``work``'s results and Snakemake's logs) measured as the pilot was, per
    stage beside the plan: CPU and GPU seconds, peak memory, output bytes, jobs."""
    m = measure(work, list(cfg["datasets"]))
    c = Corpus(scale=dict.fromkeys(m.hours, 1.0), shards=dict(m.shards))
    cluster = Cluster(**plan["cluster"])
    actual = _stage_totals(rule_costs(m, None, c), m, c, cfg, cluster)
    rows = {}
    for stage in sorted(set(plan["stages"]) | set(actual)):
        p, r = plan["stages"].get(stage, {}), actual.get(stage, {})
        rows[stage] = {
            k: {"plan": p.get(k), "run": r.get(k), "ratio": (p[k] / r[k]) if p.get(k) and r.get(k) else None}
            for k in ("cpu_s", "gpu_s", "peak_rss_mb", "output_bytes", "jobs")
        }
        print(
            stage + ": " + ", ".join(f"{k} {v['plan'] or 0:.4g} / {v['run'] or 0:.4g}" for k, v in rows[stage].items())
        )
    total = {k: sum((r.get(k) or 0) for r in actual.values()) for k in ("cpu_s", "gpu_s", "output_bytes", "jobs")}
    comparison = {"stages": rows, "total": {k: {"plan": plan["total"][k], "run": v} for k, v in total.items()}}
    write_json(out, comparison)
    write_page(out.with_suffix(".html"), compare_html(comparison))
    return 0
