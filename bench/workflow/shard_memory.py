#!/usr/bin/env python3
"""A shard job's peak memory against its shard's hours: what grows with the shard rather than
with the batch, the figure behind the plan's largest recommended shard (docs/cluster_scale.md,
"Sizing a run for a cluster").

    nice -n 10 .venvs/vad/bin/python bench/workflow/shard_memory.py [--vad-hours 0.5,1,2,5,10,20,50]
        [--measure-hours 0.05,0.1,0.2] [--decide-hours 0.5,5,20,50] [--workers 1]
        [--work .cache/shard_memory] [--json out.json]

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

A job's peak is the kernel's ``ru_maxrss`` of its process and the workers it waited for
(``os.wait4``); the least-squares line through the sizes gives MB per shard hour, read at
50 h (printed as measured where a size reached 50 h, else extrapolated).
"""

from __future__ import annotations

import argparse
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
JOBS = {"vad": (VAD_JOB, "vad", "seg.jsonl"), "curate_measure": (MEASURE_JOB, "curate", "measures.jsonl")}
JOBS["export"] = (EXPORT_JOB, "export", "export/parquet/shard-0000.index.jsonl")
JOBS["curate_decide"] = (DECIDE_JOB, "curate", "kept.jsonl rejects.jsonl")


def run_job(kind: str, work: Path, path: Path, hours: float, workers: int, prepare=None) -> dict:
    """The ``kind`` job on ``path`` in a fresh process of its stage's venv: its peak RSS (MB,
    the process and its workers), wall seconds, output lines."""
    code, env, out_name = JOBS[kind]
    out = work / f"{kind}-{hours:g}h"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if prepare:
        prepare(out)
    python = REPO / ".venvs" / env / "bin" / "python"
    t = time.monotonic()
    p = subprocess.Popen(
        [str(python), "-c", code.format(out=str(out), shard=str(path), workers=workers)],
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
    return {
        "hours": hours,
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
        "wall_s": round(time.monotonic() - t, 1),
        "lines": lines,
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vad-hours", default="0.5,1,2,5,10,20,50", help="VAD shard sizes (audio hours)")
    ap.add_argument("--measure-hours", default="0.05,0.1,0.2", help="curate measure's shard sizes")
    ap.add_argument("--decide-hours", default="0.5,5,20,50", help="curate decide's shard sizes")
    ap.add_argument("--export-hours", default="0.5,2,5", help="export's shard sizes (every format of the config)")
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
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
