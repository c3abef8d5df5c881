#!/usr/bin/env python3
"""A real-size model job under a memory limit below what its first batch needs:
does it halve, finish, account for every id, and write what it writes without the limit?

    nice -n 10 python3 bench/workflow/memory_limit.py [--jobs asr,s2s] [--asr-seconds 150]
        [--s2s-seconds 90] [--margin 400] [--s2s-margin 800] [--dir ~/.cache/speechprep/real_size]
        [--work .cache/memory_limit] [--mkldnn-off] [--limited-only] [--json out.json]

Jobs, each the pipeline's own stage through ``speechprep.core.modelstage.run`` on one shard
of real speech (``bench/workflow/real_size.py``'s clips, cut to <= 20 s, written as 16 kHz WAVs):

* ``asr``: ``AsrStage`` with the real-size FastConformer CTC large (random weights, 109 M
  parameters; CTC rather than the 0.6 B TDT: same encoder family, a quarter of the CPU), the
  config's ``asr`` block (``batch.cpu_seconds`` 120, timestamps on);
* ``s2s``: ``S2sStage`` with the real-size HuBERT-large (layer 24), runtime ``torch`` (the
  ONNX export of a 317 M-parameter model and its check cost more than the runs), a
  100-unit k-means fitted here (scikit-learn ``KMeans``) on HuBERT-large layer-24 features of
  the first ~30 s of the same speech, and the real-size unit HiFi-GAN; ``batch.cpu_seconds`` 60.

Each job runs twice, each time in a fresh worker process in the stage's venv on one thread:
with no limit (the reference), then limited: after the restore, ``gc.collect()`` and
``malloc_trim(0)`` the worker sets ``SPEECHPREP_MEM_MB`` to its resident memory plus
``--margin`` MB (ASR; ``--s2s-margin`` for S2S: less than the first batch needs) and
``SPEECHPREP_MEM_GUARD=1``: the guard (``speechprep.core.memprobe.guard``) then refuses an
allocation past it, as a cgroup's limit would kill the job. ``--mkldnn-off``: oneDNN off
while the guard is on (a guard subclass in place of modelstage's). ``--limited-only``: the
limited run alone, compared with the last no-limit run's outputs. The stage's ``infer`` is
wrapped to log what it raises (the job's log, ``<work>/<job>/<run>/job.log``).

Per run: the log's first batch (padded s), OOMs and halvings, whether oneDNN was turned off
(at the first refusal), the segments retried once without the guard, the batches held to
the memory left, ``batch_probe``, the accounting (outputs + rejects == inputs), outputs equal to the
reference's (ASR texts, S2S units), the worker's peak RSS (``ru_maxrss``, the restore
included) and the job's peak RSS after the limit was set (``VmRSS`` sampled every 10 ms),
wall and CPU seconds of the worker. Figures: docs/benchmarks/real_size.md, "A real-size job under a
memory limit".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS = {
    "asr": {"model": "fastconformer_ctc_large_random.nemo"},
    "s2s": {
        "hubert": "hubert_large_random.pt",
        "vocoder": "unit_hifigan_random.pt",
        "vocoder_config": "unit_hifigan_random.json",
    },
}
S2S_LAYER = 24
KMEANS_UNITS = 100
KMEANS_SECONDS = 30.0
PIECE_S = 20.0  # clips are cut to pieces no longer than this


# ---------------------------------------------------------------------------
# the worker: one job, limited or not, in the stage's venv
# ---------------------------------------------------------------------------
def status_mb(key: str) -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


class Sampler(threading.Thread):
    """The highest ``VmRSS`` seen, every 10 ms, from when it starts (before the guard: its
    stack is then part of what the guard anchors to)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.stop = 0.0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.01):
            self.peak = max(self.peak, status_mb("VmRSS"))


def settle() -> float:
    """Resident memory (MB) after ``gc.collect()`` and ``malloc_trim(0)``."""
    import gc

    from speechprep.core import memprobe

    gc.collect()
    memprobe.trim()
    return memprobe.rss_mb()


def mkldnn_off_while_guarded() -> None:
    """oneDNN off while the memory guard is on (``torch.backends.mkldnn.enabled``), through a
    guard subclass put in place of the one modelstage uses."""
    import torch

    from speechprep.core import memprobe, modelstage

    class NoOneDnnGuard(memprobe.guard):
        def __enter__(self):
            self._mkldnn = torch.backends.mkldnn.enabled
            torch.backends.mkldnn.enabled = False
            return super().__enter__()

        def __exit__(self, *exc):
            super().__exit__(*exc)
            torch.backends.mkldnn.enabled = getattr(self, "_mkldnn", True)

    modelstage.guard = NoOneDnnGuard


def asr_stage(args: argparse.Namespace):
    from speechprep.asr import stage as asr
    from speechprep.asr.params import AsrParams
    from speechprep.asr.words import NemoTranscriber
    from speechprep.core.config import defaults

    p = AsrParams.from_config(defaults(REPO / "config" / "config.yaml"), model=args.model, device="cpu")
    model = asr.load_model(p.model, "cpu")
    return asr.AsrStage(p, NemoTranscriber(model, p.timestamps), asr.model_sample_rate(model))


def s2s_stage(args: argparse.Namespace):
    from speechprep.core.config import defaults
    from speechprep.s2s.models import Models
    from speechprep.s2s.params import S2sParams
    from speechprep.s2s.stage import S2sStage

    files = {k: str(Path(args.model_dir) / v) for k, v in MODELS["s2s"].items()}
    p = S2sParams.from_config(
        defaults(REPO / "config" / "config.yaml"),
        **files,
        kmeans=args.kmeans,
        layer=S2S_LAYER,
        runtime="torch",
        device="cpu",
    )
    return S2sStage(p, models=Models(p, "cpu", None, 1))


def traced(stage) -> None:
    """``stage.infer`` logging what it raises (first line), with the resident memory then."""
    import logging

    log, infer = logging.getLogger("speechprep.bench"), stage.infer

    def run(inputs: list) -> list:
        try:
            return infer(inputs)
        except Exception as e:
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            log.info("infer raised on %d items: %s: %s (RSS %.0f MB)", len(inputs), type(e).__name__, first,
                     status_mb("VmRSS"))  # fmt: skip
            raise

    stage.infer = run


def worker(args: argparse.Namespace) -> None:
    """One job (``args.kind``) over ``args.segs``; a JSON line of its figures on stdout."""
    import torch

    from speechprep.core import logs, memprobe, modelstage

    torch.set_num_threads(1)
    logs.setup(args.kind)
    t0, wall0 = cpu_s(), time.monotonic()
    stage = asr_stage(args) if args.kind == "asr" else s2s_stage(args)
    traced(stage)
    rss = settle()
    sampler = Sampler()
    sampler.start()
    if args.limit_margin is not None:
        os.environ[memprobe.MEM_ENV] = str(round(rss + args.limit_margin))
        os.environ[memprobe.GUARD_ENV] = "1"
        if args.mkldnn_off:
            mkldnn_off_while_guarded()
    t1, wall1 = cpu_s(), time.monotonic()
    run_dir = Path(args.out).parent  # a fresh folder: nothing to resume or reuse
    arrays = {"wav": str(run_dir / "wav")} if args.kind == "s2s" else {}
    files = modelstage.ShardFiles(
        args.segs, args.out, str(run_dir / "rejects.jsonl"), str(run_dir / "scratch" / "resume.jsonl"), arrays
    )
    counts = modelstage.run(stage, files, threads=1)
    sampler.stop.set()
    figures = {
        "rss_after_restore_mb": round(rss, 1),
        "limit_mb": round(rss + args.limit_margin) if args.limit_margin is not None else None,
        "job_peak_rss_mb": round(sampler.peak, 1),
        "ru_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "restore_cpu_s": round(t1 - t0, 1),
        "restore_wall_s": round(wall1 - wall0, 1),
        "job_cpu_s": round(cpu_s() - t1, 1),
        "job_wall_s": round(time.monotonic() - wall1, 1),
    }
    print(json.dumps({"counts": counts, **figures}))


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------------------
# preparation (a worker in the s2s venv): segments of real speech, the k-means
# ---------------------------------------------------------------------------
def write_segments(work: Path, seconds: float, name: str) -> Path:
    """Real speech (``bench/workflow/real_size.py``'s clips), cut to <= ``PIECE_S`` pieces, written as
    16 kHz WAVs, and a segments file naming them."""
    import soundfile as sf

    sys.path.insert(0, str(REPO / "bench" / "workflow"))
    from real_size import real_clips

    audio = work / "audio"
    audio.mkdir(parents=True, exist_ok=True)
    lines, step = [], int(PIECE_S * 16000)
    for i, clip in enumerate(real_clips(seconds)):
        for j in range(0, len(clip), step):
            piece = clip[j : j + step]
            if len(piece) < 16000:
                continue
            path = audio / f"clip{i:03d}_{j // step}.wav"
            sf.write(path, piece, 16000, subtype="FLOAT")
            fid = path.stem
            lines.append({"id": f"{fid}_seg", "file_id": fid, "audio_filepath": str(path), "offset": 0.0,
                          "duration": round(len(piece) / 16000, 4)})  # fmt: skip
    out = work / f"{name}.segments.jsonl"
    out.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return out


def fit_kmeans(segs: Path, model_dir: Path, out: Path) -> None:
    """A ``KMEANS_UNITS``-unit k-means on HuBERT-large layer-``S2S_LAYER`` features of the
    first ``KMEANS_SECONDS`` of the segments, saved as textlesslib does (``joblib.dump``)."""
    import joblib
    import numpy as np
    import torch
    from sklearn.cluster import KMeans

    from speechprep.io.audio import read_segment
    from speechprep.s2s import fairseq_legacy
    from speechprep.s2s.models import dense_features

    torch.set_num_threads(1)
    model, _, task, _ = fairseq_legacy.load(str(model_dir / MODELS["s2s"]["hubert"]))
    wavs, total = [], 0.0
    for line in map(json.loads, segs.read_text(encoding="utf-8").splitlines()):
        if total < KMEANS_SECONDS:
            wavs.append(read_segment(line))
            total += line["duration"]
    with torch.no_grad():
        feats = dense_features(model, wavs, S2S_LAYER, bool(getattr(task.cfg, "normalize", False)))
    x = np.concatenate([f.cpu().numpy() for f in feats])
    km = KMeans(KMEANS_UNITS, n_init=1, random_state=0).fit(x)
    joblib.dump(km, out)


def prepare(args: argparse.Namespace) -> None:
    work = Path(args.work)
    asr = write_segments(work / "asr", args.asr_seconds, "asr")
    s2s = write_segments(work / "s2s", args.s2s_seconds, "s2s")
    km = work / "s2s" / "kmeans.bin"
    if "s2s" in args.jobs.split(",") and not km.exists():
        fit_kmeans(s2s, Path(args.model_dir), km)
    print(json.dumps({"asr": str(asr), "s2s": str(s2s), "kmeans": str(km)}))


# ---------------------------------------------------------------------------
# the orchestrator (standard library only)
# ---------------------------------------------------------------------------
def venv_python(kind: str) -> str:
    return str(REPO / ".venvs" / kind / "bin" / "python")


def call(kind: str, argv: list[str]) -> tuple[dict, str]:
    """The worker in ``kind``'s venv on one thread: (its JSON line, its stderr)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("SPEECHPREP_MEM_MB", None)
    env.pop("SPEECHPREP_MEM_GUARD", None)
    cmd = [venv_python(kind), str(Path(__file__).resolve()), *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        return {"failed": proc.returncode}, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def log_facts(log: str) -> dict:
    """What the job's log says: the first batch, its halvings, the guard."""
    first = re.search(r"first batch \(the probe\) ([\d.]+) padded s", log)
    oom = re.search(r"OOM on a batch of (\d+) \(([\d.]+) padded s\)", log)
    return {
        "budget_s": float(first.group(1)) if first else None,
        "first_oom_batch": f"{oom.group(1)} segs, {oom.group(2)} padded s" if oom else None,
        "halvings": log.count("halving to"),
        "unguarded_retries": log.count("retried once without it"),
        "onednn_off": "oneDNN off for the rest" in log,
        "lowered_to_memory_left": log.count("lowered to the memory left"),
        "primitive_errors": log.count("could not create a primitive"),
        "rejected_oom": log.count("rejected oom"),
    }


def compare(kind: str, segs: Path, out: Path, ref: Path) -> dict:
    """Accounting against the inputs and outputs against the reference run's."""
    ids = sorted(x["id"] for x in read_jsonl(segs))
    lines, rejects = read_jsonl(out), read_jsonl(out.parent / "rejects.jsonl")
    key = "text" if kind == "asr" else "units"
    mine, theirs = {x["id"]: x[key] for x in lines}, {x["id"]: x[key] for x in read_jsonl(ref)}
    return {
        "inputs": len(ids),
        "outputs": len(lines),
        "rejects": len(rejects),
        "accounted": sorted([x["id"] for x in lines] + [r["id"] for r in rejects]) == ids,
        "equal_to_reference": sum(mine[i] == theirs.get(i) for i in mine),
    }


def one_run(args: argparse.Namespace, kind: str, segs: Path, kmeans: str, margin: float | None) -> dict:
    tag = "nolimit" if margin is None else f"limit{margin:g}" + ("_nomkldnn" if args.mkldnn_off else "")
    run_dir = Path(args.work) / kind / tag
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    out = run_dir / "out.jsonl"
    argv = ["--worker", kind, "--segs", str(segs), "--out", str(out), "--dir", args.model_dir]
    argv += ["--kmeans", kmeans, "--model", str(Path(args.model_dir) / MODELS["asr"]["model"])]
    argv += [*(["--limit-margin", str(margin)] if margin is not None else []), *(["--mkldnn-off"] * args.mkldnn_off)]
    wall = time.monotonic()
    got, log = call(kind, argv)
    got["wall_s"] = round(time.monotonic() - wall, 1)
    (run_dir / "job.log").write_text(log, encoding="utf-8")
    got.update(log_facts(log), run=tag, out=str(out))
    if "failed" in got:
        got["log_tail"] = log[-2000:]
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="asr,s2s")
    ap.add_argument("--asr-seconds", type=float, default=150.0)
    ap.add_argument("--s2s-seconds", type=float, default=90.0)
    ap.add_argument("--margin", type=float, default=400.0, help="MB over the RSS after the restore (ASR)")
    ap.add_argument("--s2s-margin", type=float, default=800.0, help="the same, S2S")
    ap.add_argument("--dir", dest="model_dir", default=str(Path.home() / ".cache/speechprep/real_size"))
    ap.add_argument("--work", default=str(REPO / ".cache" / "memory_limit"))
    ap.add_argument("--mkldnn-off", action="store_true")
    ap.add_argument("--limited-only", action="store_true", help="compare with the last no-limit run's outputs")
    ap.add_argument("--json")
    ap.add_argument("--worker", choices=("asr", "s2s"), dest="kind")
    ap.add_argument("--prepare", action="store_true")
    ap.add_argument("--segs")
    ap.add_argument("--out")
    ap.add_argument("--model")
    ap.add_argument("--kmeans")
    ap.add_argument("--limit-margin", type=float)  # the worker's: no limit without it
    args = ap.parse_args()
    if args.kind:
        return worker(args)
    if args.prepare:
        return prepare(args)
    orchestrate(args)


def orchestrate(args: argparse.Namespace) -> None:
    argv = ["--prepare", "--work", args.work, "--dir", args.model_dir, "--jobs", args.jobs]
    argv += ["--asr-seconds", str(args.asr_seconds), "--s2s-seconds", str(args.s2s_seconds)]
    made, log = call("s2s", argv)
    if "failed" in made:
        sys.exit(f"preparing failed:\n{log[-3000:]}")
    results = {}
    for kind in args.jobs.split(","):
        segs = Path(made[kind])
        margin = args.s2s_margin if kind == "s2s" else args.margin
        margins = (margin,) if args.limited_only else (None, margin)
        runs = [one_run(args, kind, segs, made["kmeans"], m) for m in margins]
        reference = Path(args.work) / kind / "nolimit" / "out.jsonl"
        for r in runs:
            if "failed" not in r:
                r.update(compare(kind, segs, Path(r["out"]), reference))
            print(kind, json.dumps(r), flush=True)
        results[kind] = runs
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
