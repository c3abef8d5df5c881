#!/usr/bin/env python3
"""A shard job's peak memory against its shard's hours: what grows with the shard rather than
with the batch, the figure behind the plan's largest recommended shard (docs/cluster_scale.md,
"Sizing a run for a cluster").

    nice -n 10 .venvs/vad/bin/python bench/workflow/shard_memory.py [--vad-hours 0.5,1,2,5,10,20,50]
        [--measure-hours 0.05,0.1,0.2] [--decide-hours 0.5,5,20,50] [--workers 1]
        [--{asr,s2s,tts-features,diarize,curate-annotate}-{hours,lines} LIST] [--short 0.5]
        [--threads 2] [--work .cache/shard_memory] [--json out.json]

(an empty list skips a job). The audio is real speech repeated: the LibriVox reader's five
sentences and the cards speaker's prompts (Debian's pocketsphinx-testdata, tests/real_speech.py;
the LibriVox recordings are in the public domain, pocketsphinx-testdata is BSD-licensed),
concatenated and tiled to one 10-minute 16 kHz WAV. A shard of H hours lists that file 6 x H
times under distinct names (symbolic links: each line is its own file id, the disk holds 10
minutes), so every line is decoded and analysed for real and the outputs grow as a real
shard's would. Jobs, each the stage's own code in a fresh process of its stage's venv:

* ``vad``: ``speechprep.vad.stage.run_shard`` (TEN-VAD) on the shard, ``--workers`` workers;
* ``curate_measure``: ``speechprep.curate.measure.run`` (DNSMOS, loudness, SNR, the speaker
  embedding, hashes; on the CPU) on VAD's real segments of the speech up to H hours, each with
  the LibriVox reader's words as its text (2.5 words a second: an ASR line);
* ``curate_decide``: ``speechprep.curate.stage.run_decide`` on the largest measure run's real
  lines repeated under new ids to H hours, one speaker for every line, no duplicates.

* the model jobs, each its declared handler (``speechprep.<stage>.jobs``) with the config's
  parameters on the CPU: ``asr run`` (the demo ASR model, word timestamps), ``s2s run`` (the
  demo HuBERT, k-means and vocoder, eager PyTorch), ``tts features`` (Resemblyzer, eGeMAPS;
  the S2S job's real units of the same audio), ``diarize run`` (Resemblyzer windows) and
  ``curate annotate`` (SwiftF0), the demo models built from code as the workflow builds them.
  Their shards are VAD's real segments of the 10-minute file repeated onto each link, up to
  ``--<stage>-hours`` hours of segment audio, and ``--<stage>-lines`` lines of the same
  segments' first ``--short`` seconds: the line count of a 50-h shard with little audio to
  compute (what a job keeps per line is measured there, what it keeps per audio second by
  the hours).

A job's peak is the kernel's ``ru_maxrss`` of its process and the workers it waited for
(``os.wait4``); the least-squares line through the sizes gives MB per shard hour, read at
50 h (printed as measured where a size reached 50 h, else extrapolated).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
FILE_S = 600.0
CODE = [REPO]  # the tree whose speechprep the jobs import (--code)


def source(work: Path) -> Path:
    """The 10-minute WAV of real speech repeated (made once)."""
    import numpy as np
    import soundfile as sf

    from tests import real_speech

    out = work / "speech-10min.wav"
    if out.exists():
        return out
    parts = [real_speech.read(u.path, 16000) for u in [*real_speech.librivox(), *real_speech.cards()]]
    pool = np.concatenate([x for x, _ in parts]).astype(np.float32)
    n = int(FILE_S * 16000)
    work.mkdir(parents=True, exist_ok=True)
    sf.write(out, np.tile(pool, n // len(pool) + 1)[:n], 16000, subtype="PCM_16")
    return out


def shard(work: Path, wav: Path, hours: float) -> Path:
    """A shard of ``hours`` of the WAV, each line its own link (its own file id)."""
    links = work / "links"
    links.mkdir(parents=True, exist_ok=True)
    lines = []
    for k in range(max(1, round(hours * 3600 / FILE_S))):
        link = links / f"f{k:05d}.wav"
        if not link.is_symlink():
            link.symlink_to(wav)
        lines.append({"id": f"f{k:05d}", "audio_filepath": str(link), "duration": FILE_S})
    path = work / f"shard-{hours:g}h.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


VAD_JOB = """
from speechprep.vad.stage import VadParams, run_shard
from tests.support import params
run_shard({shard!r}, {out!r} + "/seg.jsonl", {out!r} + "/stats.jsonl", {out!r} + "/rej.jsonl",
          params(VadParams), {workers}, {out!r} + "/resume.jsonl")
"""
MEASURE_JOB = """
from speechprep.core.modelstage import ShardFiles
from speechprep.curate import measure
from speechprep.jobs import JOBS
from tests.support import config
p = JOBS["curate measure"].params.from_config(config(), device="cpu")
o = {out!r}
open(o + "/units.jsonl", "w", encoding="utf-8").close()
files = ShardFiles({shard!r}, o + "/measures.jsonl", o + "/measure_rejects.jsonl", o + "/partial.jsonl")
measure.run(files, p, o + "/units.jsonl", o + "/emb.npy", o + "/minhash.npy", o + "/fp.npy", threads={workers})
"""
DECIDE_JOB = """
from speechprep.curate import stage
from speechprep.jobs import JOBS
from tests.support import config
p = JOBS["curate decide"].params.from_config(config())
o = {out!r}
stage.run_decide({shard!r}, o + "/in_rejects.jsonl", o + "/speakers.jsonl", o + "/dups.jsonl",
                 o + "/kept.jsonl", o + "/rejects.jsonl", p)
"""
EXPORT_JOB = """
import json
import shutil
from speechprep.export import stage
from speechprep.export.layouts import column_types
from speechprep.export.params import ExportParams
from speechprep.io.jsonio import read_jsonl
from tests.support import params
o = {out!r}
lines = o + "/shard-0000.jsonl"  # the export's shard name: a shard's
shutil.copy({shard!r}, lines)
with open(o + "/columns.json", "w", encoding="utf-8") as f:
    json.dump(column_types(read_jsonl(lines)), f)
stage.run_shard(lines, o + "/columns.json", o + "/export", o + "/rejects.jsonl", params(ExportParams),
                o + "/partial.jsonl")
"""
# a model stage's job: its declared handler (speechprep.<stage>.jobs, what `python -m speechprep
# <stage> <job>` runs) with its flags' files and the config's parameters
MODEL_JOB = """
import json
from speechprep.jobs import JOBS
from tests.support import config
job = JOBS[{job!r}]
p = job.params.from_config(config(), **json.loads({overrides!r}))
job.run(job.files_class()(**json.loads({files!r})), p)
"""
JOBS = {"vad": (VAD_JOB, "vad", "seg.jsonl"), "curate_measure": (MEASURE_JOB, "curate", "measures.jsonl")}
JOBS["export"] = (EXPORT_JOB, "export", "export/parquet/shard-0000.index.jsonl")
JOBS["curate_decide"] = (DECIDE_JOB, "curate", "kept.jsonl rejects.jsonl")
# model jobs: (declared job, its env, output files counted, its files by flag: "{o}" the job's
# folder, "{shard}" the shard, "{units}"/"{s2s_rejects}" the S2S output given to TTS)
MODEL_JOBS = {
    "asr": ("asr run", "asr", "out.jsonl rejects.jsonl", {"out": "{o}/out.jsonl", "rejects": "{o}/rejects.jsonl"}),
    "s2s": (
        "s2s run",
        "s2s",
        "units.jsonl rejects.jsonl",
        {"out": "{o}/units.jsonl", "wav_dir": "{o}/wav", "rejects": "{o}/rejects.jsonl"},
    ),
    "tts_features": (
        "tts features",
        "tts",
        "index.jsonl rejects.jsonl",
        {
            "units": "{units}",
            "s2s_rejects": "{s2s_rejects}",
            "out": "{o}/index.jsonl",
            "rejects": "{o}/rejects.jsonl",
            "out_dir": "{o}/features",
        },
    ),
    "diarize": (
        "diarize run",
        "curate",
        "out.jsonl rejects.jsonl",
        {
            "out": "{o}/out.jsonl",
            "rejects": "{o}/rejects.jsonl",
            "turns": "{o}/turns.jsonl",
            "speakers": "{o}/speakers.jsonl",
            "stats": "{o}/stats.jsonl",
        },
    ),
    "curate_annotate": (
        "curate annotate",
        "curate",
        "annotations.jsonl rejects.jsonl",
        {"out": "{o}/annotations.jsonl", "rejects": "{o}/rejects.jsonl"},
    ),
}
for _kind, (_job, _env, _outs, _) in MODEL_JOBS.items():
    JOBS[_kind] = (MODEL_JOB, _env, _outs)


def model_fields(kind: str, out: Path, path: Path, threads: int, given: dict) -> dict:
    """The format fields of a model job (:data:`MODEL_JOB`): its job, files and parameters."""
    job, _, _, named = MODEL_JOBS[kind]
    files = {k: v.format(o=out, shard=path, **given.get("files", {})) for k, v in named.items()}
    files |= {"segments": str(path), "threads": threads, "resume": str(out / "resume.jsonl")}
    overrides = {"device": "cpu", **given.get("params", {})}
    return {"job": job, "files": json.dumps(files), "overrides": json.dumps(overrides)}


# the model jobs' default sizes: shards of real segments (hours), of short ones (lines)
MODEL_SIZES = (
    ("asr", "0.5,2,5,10", "1000,16800"),
    ("s2s", "0.25,0.5,1", "1000,16800"),
    ("tts-features", "0.25,0.5,1", "1000,16800"),
    ("diarize", "0.1,0.25,0.5", "1000,16800"),
    ("curate-annotate", "0.5,2,5", "1000,16800"),
)


def run_job(
    kind: str, work: Path, path: Path, hours: float, workers: int, prepare=None, given=None, tag: str | None = None
) -> dict:
    """The ``kind`` job on ``path`` in a fresh process of its stage's venv: its peak RSS (MB,
    the process and its workers), wall seconds, output lines. ``given``: a model job's files
    and parameters (:func:`model_fields`); ``tag``: its folder's name (default the hours)."""
    code, env, out_name = JOBS[kind]
    out = work / f"{kind}-{tag or f'{hours:g}h'}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if prepare:
        prepare(out)
    python = REPO / ".venvs" / env / "bin" / "python"
    fields = {"out": str(out), "shard": str(path), "workers": workers}
    if kind in MODEL_JOBS:
        fields = model_fields(kind, out, path, workers, given or {})
    t = time.monotonic()
    p = subprocess.Popen(
        [str(python), "-c", code.format(**fields)],
        cwd=CODE[0],
        env={**os.environ, "PYTHONPATH": str(CODE[0])},
    )
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"the {kind} job on {path} failed ({status})")
    lines = 0
    for name in out_name.split():
        with open(out / name, encoding="utf-8") as f:
            lines += sum(1 for _ in f)
    given_lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return {
        "hours": hours,
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
        "wall_s": round(time.monotonic() - t, 1),
        "lines": lines,
        "in_lines": len(given_lines),
        "audio_s": round(sum(float(x.get("duration") or 0) for x in given_lines), 1),
    }


def segments(work: Path, wav: Path, hours: float, workers: int) -> Path:
    """Real segments of about ``hours`` of the speech: VAD's lines of a shard of whole files
    (run once), the first ones up to ``hours`` of segment audio."""
    files = max(1, math.ceil(hours * 3600 / FILE_S))
    seg = work / f"vad-{files * FILE_S / 3600:g}h" / "seg.jsonl"
    if not seg.exists():
        run_job("vad", work, shard(work, wav, files * FILE_S / 3600), files * FILE_S / 3600, workers)
    from tests import real_speech

    words = " ".join(u.text for u in real_speech.librivox()).split()
    out, total = work / f"segments-{hours:g}h.jsonl", 0.0
    with open(seg, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
        for k, x in enumerate(f):
            line = json.loads(x)
            total += line["duration"]
            if total > hours * 3600:
                break
            # an ASR line's text: the reader's words, 2.5 a second of the segment
            n = max(1, round(2.5 * line["duration"]))
            line["text"] = " ".join(words[(k * 7 + i) % len(words)] for i in range(n)).lower()
            g.write(json.dumps(line, ensure_ascii=False) + "\n")
    return out


def words(duration: float, k: int) -> str:
    """An ASR line's text: the LibriVox reader's words, 2.5 a second of the segment."""
    from tests import real_speech

    pool = " ".join(u.text for u in real_speech.librivox()).split()
    return " ".join(pool[(k * 7 + i) % len(pool)] for i in range(max(1, round(2.5 * duration)))).lower()


def tiled(
    work: Path, wav: Path, hours: float | None = None, lines: int | None = None, cut: float | None = None
) -> Path:
    """A model job's shard: VAD's real segments of the 10-minute file (the VAD job run on it
    once), repeated onto each link (each link is that file, so VAD would cut each the same), up
    to ``hours`` of segment audio or to ``lines`` lines; ``cut``: each segment's first ``cut``
    seconds only (short real speech: a shard with the line count of a larger one). Each line
    with an ASR line's text."""
    one = FILE_S / 3600
    base = work / f"vad-{one:g}h" / "seg.jsonl"
    if not base.exists():
        run_job("vad", work, shard(work, wav, one), one, 1)
    segs = [json.loads(x) for x in base.read_text(encoding="utf-8").splitlines() if x.strip()]
    links, out, total = work / "links", [], 0.0
    for k in itertools.count():
        link = links / f"f{k:05d}.wav"
        if not link.is_symlink():
            link.symlink_to(wav)
        for j, x in enumerate(segs):
            d = min(x["duration"], cut) if cut else x["duration"]
            if (hours is not None and total + d > hours * 3600) or (lines is not None and len(out) >= lines):
                break
            fid = f"f{k:05d}"
            y = {**x, "id": f"{fid}_{j:04d}", "file_id": fid, "audio_filepath": str(link), "duration": d}
            out.append({**y, "text": words(d, j)})
            total += d
        else:
            continue
        break
    name = f"{hours:g}h" if hours is not None else f"{lines}lines" + (f"x{cut:g}s" if cut else "")
    path = work / f"tiled-{name}.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in out), encoding="utf-8")
    return path


def tiled_units(work: Path, wav: Path, path: Path, cut: float | None, threads: int, s2s: dict) -> dict:
    """The TTS features job's S2S inputs for the tiled shard ``path``: the S2S job's real units of
    one file's segments (cut as they are; run once), given to each file's lines (the same audio)."""
    tag = f"base-{cut:g}s" if cut else "base"
    units = work / f"s2s-{tag}" / "units.jsonl"
    if not units.exists():
        one = len(read_lines(work / f"vad-{FILE_S / 3600:g}h" / "seg.jsonl"))  # tiled() made it
        base = tiled(work, wav, lines=one, cut=cut)
        run_job("s2s", work, base, 0.0, threads, given=s2s, tag=tag)
    by_seg = {x["id"].split("_", 1)[1]: x for x in read_lines(units)}
    out = work / f"units-{path.stem}.jsonl"
    with open(out, "w", encoding="utf-8") as f:
        for x in read_lines(path):
            f.write(json.dumps({**by_seg[x["id"].split("_", 1)[1]], "id": x["id"]}) + "\n")
    rejects = work / "s2s-rejects-none.jsonl"
    rejects.write_text("", encoding="utf-8")
    return {"files": {"units": str(out), "s2s_rejects": str(rejects)}}


def read_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def demo_models(work: Path) -> dict:
    """The demo ASR model and the demo S2S models (the config's defaults, which the workflow
    builds from code: ``python -m speechprep demo asr-model``, ``demo s2s-models``), built once."""
    d = work / "models"
    asr = d / "demo_asr.nemo"
    for env, args, made in (
        ("asr", ["asr-model", "--truth", str(REPO / "resources/demo/truth.json"), "--out", str(asr)], asr),
        (
            "s2s",
            ["s2s-models", "--truth", str(REPO / "resources/demo/truth.json"), "--out-dir", str(d)],
            d / "demo_km.bin",
        ),
    ):
        if not made.exists():
            python = REPO / ".venvs" / env / "bin" / "python"
            subprocess.run([str(python), "-m", "speechprep", "demo", *args], cwd=CODE[0], check=True)
    s2s = {k: str(d / n) for k, n in (("hubert", "demo_hubert_legacy.pt"), ("kmeans", "demo_km.bin"))}
    s2s |= {"vocoder": str(d / "demo_vocoder.pt"), "vocoder_config": str(d / "demo_vocoder.json")}
    # eager PyTorch: ONNX Runtime needs the `s2s export` job's file first
    return {"asr": {"params": {"model": str(asr)}}, "s2s": {"params": {**s2s, "runtime": "torch"}}}


def repeated(work: Path, measures: Path, hours: float) -> Path:
    """A curate decide shard of ``hours``: the real measure lines repeated under new ids."""
    base = [json.loads(x) for x in measures.read_text(encoding="utf-8").splitlines() if x.strip()]
    seconds = sum(x["duration"] for x in base)
    path = work / f"decide-in-{hours:g}h.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for k in range(max(1, round(hours * 3600 / seconds))):
            for x in base:
                f.write(json.dumps({**x, "id": f"r{k:05d}_{x['id']}"}, ensure_ascii=False) + "\n")
    return path


def decide_inputs(path: Path):
    """The decide job's other inputs: one speaker for every line, no duplicates, no rejects."""

    def prepare(out: Path) -> None:
        with open(out / "speakers.jsonl", "w", encoding="utf-8") as f:
            for x in path.read_text(encoding="utf-8").splitlines():
                rid = json.loads(x)["id"]
                f.write(json.dumps({"id": rid, "speaker": "spk0", "speaker_distance": 0.1}) + "\n")
        for name in ("dups.jsonl", "in_rejects.jsonl"):
            (out / name).write_text("", encoding="utf-8")

    return prepare


def line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``(fixed, per_hour)`` through ``(hours, MB)``."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - slope * mx, slope


def report(kind: str, rows: list[dict]) -> dict:
    for r in rows:
        print(f"{kind} {r['hours']:g} h: peak {r['peak_mb']:.0f} MB, {r['lines']} lines, {r['wall_s']:.0f} s")
    fixed, per_hour = line([(r["hours"], r["peak_mb"]) for r in rows])
    at50 = fixed + 50 * per_hour
    top = max(r["hours"] for r in rows)
    said = "measured" if top >= 50 else "extrapolated"
    print(f"{kind}: {fixed:.0f} MB + {per_hour:.2f} MB per shard hour; at 50 h ({said}): {at50:.0f} MB")
    return {"runs": rows, "fixed_mb": fixed, "mb_per_hour": per_hour, "at_50h_mb": at50}


def declared_mb_per_hour(kind: str) -> float:
    """What the job declares it keeps per audio second of its shard (``Memory.shard_mb_per_s``), per hour."""
    from speechprep.jobs import JOBS as DECLARED

    memory = DECLARED[MODEL_JOBS[kind][0]].memory
    return (memory.shard_mb_per_s if memory else 0.0) * 3600


def report_model(kind: str, rows: list[dict], lines_per_hour: float) -> dict:
    """A model job's runs: the line through the shards of real segments (MB per shard hour,
    read at 50 h), and through the shards of short segments (MB per 1,000 lines: what the job
    keeps per line, with batches of the same short segments); ``lines_per_hour``: the real
    segments' lines an hour (a 50-h shard's line count is 50 times it)."""
    for r in rows:
        print(
            f"{kind} {r['in_lines']} lines, {r['audio_s'] / 3600:.2f} h of audio: peak {r['peak_mb']:.0f} MB, "
            f"{r['lines']} lines out, {r['wall_s']:.0f} s"
        )
    real = [r for r in rows if not r.get("short")]
    short = [r for r in rows if r.get("short")]
    out = {"runs": rows, "lines_per_hour": lines_per_hour, "declared_mb_per_hour": declared_mb_per_hour(kind)}
    said = []
    if real:
        fixed, per_hour = line([(r["audio_s"] / 3600, r["peak_mb"]) for r in real])
        out |= {"fixed_mb": fixed, "mb_per_hour": per_hour, "at_50h_mb": fixed + 50 * per_hour}
        said.append(
            f"{fixed:.0f} MB + {per_hour:.2f} MB per shard hour; at 50 h (extrapolated): {fixed + 50 * per_hour:.0f} MB"
        )
    if short:
        k_fixed, per_k = line([(r["in_lines"] / 1000, r["peak_mb"]) for r in short])
        most = max(short, key=lambda r: r["in_lines"])
        out |= {"short_fixed_mb": k_fixed, "mb_per_1000_lines": per_k, "short_most": most}
        said.append(
            f"short segments {k_fixed:.0f} MB + {per_k:.2f} MB per 1,000 lines "
            f"({per_k * lines_per_hour / 1000:.2f} MB per shard hour at {lines_per_hour:.0f} lines an hour); "
            f"{most['in_lines']} lines (measured): {most['peak_mb']:.0f} MB"
        )
    print(f"{kind}: " + "; ".join(said) + f" (declared {out['declared_mb_per_hour']:g} MB per shard hour)")
    return out


def model_runs(kind: str, work: Path, wav: Path, hours: list[float], lines: list[int], a, given: dict) -> dict:
    """The ``kind`` model job on tiled shards of ``hours`` of real segments and of ``lines``
    short segments (``--short`` s each)."""
    rows = []
    for h, n in [(h, None) for h in hours] + [(None, n) for n in lines]:
        cut = a.short if n is not None else None
        path = tiled(work, wav, hours=h, lines=n, cut=cut)
        run_given = given.get(kind, {})
        if kind == "tts_features":
            run_given = tiled_units(work, wav, path, cut, a.threads, given["s2s"])
        rows.append(
            {**run_job(kind, work, path, h or 0.0, a.threads, given=run_given, tag=path.stem), "short": bool(cut)}
        )
    one = read_lines(work / f"vad-{FILE_S / 3600:g}h" / "seg.jsonl")
    return report_model(kind, rows, len(one) / (sum(x["duration"] for x in one) / 3600))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vad-hours", default="0.5,1,2,5,10,20,50", help="VAD shard sizes (audio hours)")
    ap.add_argument("--measure-hours", default="0.05,0.1,0.2", help="curate measure's shard sizes")
    ap.add_argument("--decide-hours", default="0.5,5,20,50", help="curate decide's shard sizes")
    ap.add_argument("--export-hours", default="0.5,2,5", help="export's shard sizes (every format of the config)")
    for stage, hours, lines in MODEL_SIZES:
        ap.add_argument(f"--{stage}-hours", default=hours, help=f"{stage}: shards of real segments (audio hours)")
        ap.add_argument(f"--{stage}-lines", default=lines, help=f"{stage}: shards of short segments (lines)")
    ap.add_argument("--short", type=float, default=0.5, help="the short segments' seconds (their first seconds)")
    ap.add_argument("--threads", type=int, default=2, help="the model jobs' threads (the config's)")
    ap.add_argument("--workers", type=int, default=1, help="each job's workers (threads)")
    ap.add_argument("--work", default=str(REPO / ".cache" / "shard_memory"))
    ap.add_argument("--code", default=str(REPO), help="the tree (speechprep, tests, config) the jobs import")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    CODE[0] = Path(a.code).resolve()
    work = Path(a.work)
    wav = source(work)
    sizes = {
        k: [float(x) for x in v.split(",") if x]
        for k, v in (("vad", a.vad_hours), ("measure", a.measure_hours), ("decide", a.decide_hours))
    }
    out = {}
    if sizes["vad"]:
        out["vad"] = report("vad", [run_job("vad", work, shard(work, wav, h), h, a.workers) for h in sizes["vad"]])
    if sizes["measure"]:
        rows = [
            run_job("curate_measure", work, segments(work, wav, h, a.workers), h, a.workers) for h in sizes["measure"]
        ]
        out["curate_measure"] = report("curate_measure", rows)
    if sizes["decide"]:
        measured = work / f"curate_measure-{max(sizes['measure'] or [0.2]):g}h" / "measures.jsonl"
        if not measured.exists():
            h = max(sizes["measure"] or [0.2])
            run_job("curate_measure", work, segments(work, wav, h, a.workers), h, a.workers)
        rows = []
        for h in sizes["decide"]:
            path = repeated(work, measured, h)
            rows.append(run_job("curate_decide", work, path, h, a.workers, decide_inputs(path)))
        out["curate_decide"] = report("curate_decide", rows)
    for h in [float(x) for x in a.export_hours.split(",") if x]:
        out.setdefault("export_runs", []).append(run_job("export", work, segments(work, wav, h, a.workers), h, 1))
    if out.get("export_runs"):
        out["export"] = report("export", out.pop("export_runs"))
    given = None
    for stage, _, _ in MODEL_SIZES:
        kind = stage.replace("-", "_")
        hours = [float(x) for x in getattr(a, f"{kind}_hours").split(",") if x]
        lines = [int(x) for x in getattr(a, f"{kind}_lines").split(",") if x]
        if hours or lines:
            given = given or demo_models(work)
            out[kind] = model_runs(kind, work, wav, hours, lines, a, given)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
