#!/usr/bin/env python3
"""S2S dense features on CPU: eager PyTorch vs the ONNX Runtime path, same run, same segments.

    .venvs/s2s/bin/python bench/s2s/features.py [--segments 40]
        [--repeats 3] [--threads 2] [--variants eager,onnxruntime] [--json out.json] [--breakdown]

A HuBERT-base-sized model (12 layers, 768 dims, 512-channel conv extractor; random
weights) built through fairseq and saved as a checkpoint; features of layer 6 for 40
segments of 1-12 s cut from the demo audio. Variants, one segment at a time (the
conv extractor's GroupNorm is per segment):

* ``eager``: fairseq's ``extract_features`` (textlesslib's dense model loop; what
  ``s2s.dense_features`` computes per segment);
* ``onnxruntime``: ``speechprep.s2s.runtime``: the checkpoint exported by
  ``build_export`` (checked against eager at build time) in an onnxruntime session;
* ``onnxruntime-spin`` (ORT threads spin while idle), ``onnxruntime-dynamo`` (the
  ``dynamo=True`` exporter), ``onnxruntime-noarena`` (no memory arena): design
  comparisons, not in the default run.

Each variant runs in its own worker process (its own peak RSS, no thread pool of one
spinning while the other works); the parent sends each segment to every worker in
turn (order rotated, segments shuffled per repeat), so load from other processes hits
all variants alike. Per segment: median wall time over the repeats; a variant's total
is the sum of those; ratios are eager / variant, same run. CPU time (all threads) is
printed too, and "best-of-repeats" (sum over segments of the fastest repeat: the
closest this run comes to an idle machine).

Figures and the command: docs/benchmarks/s2s.md, "S2S features".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
VARIANTS = ("eager", "onnxruntime", "onnxruntime-spin", "onnxruntime-dynamo", "onnxruntime-noarena")


def segments(a) -> list[np.ndarray]:
    from speechprep.demo.corpus import demo_audio

    rng = np.random.default_rng(0)
    pool = np.concatenate(demo_audio(REPO / "resources/demo/truth.json"))
    segs = []
    for n in (rng.uniform(a.min_seconds, a.max_seconds, a.segments) * 16000).astype(int):
        start = int(rng.integers(0, len(pool) - n))
        segs.append(np.ascontiguousarray(pool[start : start + n], dtype=np.float32))
    return segs


def status_mb(key: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process: unlike ru_maxrss, VmHWM starts again at
    exec, so a worker does not inherit the parent's peak."""
    with open("/proc/self/status", encoding="utf-8") as f:
        return next(int(x.split()[1]) for x in f if x.startswith(f"{key}:")) / 1024


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def worker(a) -> None:
    """Serve ``run I`` / ``stats`` / ``quit`` on stdin; one JSON line per answer on the real stdout."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # library prints go to stderr
    import torch

    torch.set_num_threads(a.threads)
    segs = segments(a)
    t = time.perf_counter()
    if a.worker == "eager":
        from speechprep.s2s import fairseq_legacy

        model = fairseq_legacy.load(a.checkpoint)[0].float().eval()

        def run(x):
            with torch.no_grad():
                return model.extract_features(
                    torch.from_numpy(x)[None], padding_mask=None, mask=False, output_layer=a.layer
                )[0][0].numpy()
    else:
        from speechprep.s2s import runtime as s2s_runtime

        run = s2s_runtime.load_encoder(
            a.export,
            layer=a.layer,
            threads=a.threads,
            spinning=a.worker == "onnxruntime-spin",
            arena=a.worker != "onnxruntime-noarena",
        )
    loaded = {"load_s": time.perf_counter() - t, "rss_after_load_mb": status_mb("VmRSS")}
    out_dir = Path(a.features) / a.worker
    out_dir.mkdir(parents=True, exist_ok=True)
    proto.write(json.dumps(loaded) + "\n")
    proto.flush()
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "run":
            i = int(cmd[1])
            t, c = time.perf_counter(), cpu_s()
            f = run(segs[i])
            res = {"wall": time.perf_counter() - t, "cpu": cpu_s() - c}
            if not (out_dir / f"{i}.npy").exists():
                np.save(out_dir / f"{i}.npy", f)
        elif cmd[0] == "stats":
            res = {"peak_rss_mb": status_mb("VmHWM"), "rss_mb": status_mb("VmRSS")}
        else:
            return
        proto.write(json.dumps(res) + "\n")
        proto.flush()


class Worker:
    def __init__(self, variant: str, a, checkpoint: Path, export: Path | None, features: Path):
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            variant,
            "--checkpoint",
            str(checkpoint),
            "--features",
            str(features),
            "--export",
            str(export),
            "--threads",
            str(a.threads),
            "--layer",
            str(a.layer),
            "--segments",
            str(a.segments),
            "--min-seconds",
            str(a.min_seconds),
            "--max-seconds",
            str(a.max_seconds),
        ]
        self.variant = variant
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
        self.loaded = self._read()

    def _read(self) -> dict:
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.variant} ended (exit {self.p.wait()}); its stderr says why")
        return json.loads(line)

    def ask(self, cmd: str) -> dict:
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait()


def parser() -> argparse.ArgumentParser:
    """The command line, with the hidden flags of a worker."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=40)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--max-seconds", type=float, default=12.0)
    ap.add_argument("--layer", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--variants", default="eager,onnxruntime", help=f"comma-separated, eager first; of {', '.join(VARIANTS)}"
    )
    ap.add_argument(
        "--breakdown", action="store_true", help="also time eager's conv extractor and transformer separately"
    )
    ap.add_argument("--json", help="also write every timing, per variant and segment, to this file")
    ap.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    for hidden in ("--checkpoint", "--export", "--features"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    return ap


def exporter_of(variant: str) -> str:
    """The ONNX exporter whose export ``variant`` runs."""
    return "dynamo" if variant.endswith("dynamo") else "torchscript"


def hubert_base(tmp: Path) -> tuple:
    """A HuBERT-base-sized model with random weights, saved as a checkpoint: (model, checkpoint path)."""
    from speechprep.demo.s2s_models import BASE_CONV_LAYERS, save_checkpoint, tiny_hubert

    sizes = {"layers": 12, "dim": 768, "ffn": 3072, "heads": 12, "conv_pos": 128, "conv_pos_groups": 16}
    model, task, tcfg, mcfg = tiny_hubert(tmp / "l", conv_layers=BASE_CONV_LAYERS, **sizes)
    return model, save_checkpoint(model, task, tcfg, mcfg, tmp / "hubert_base_random.pt")


def build_exports(a: argparse.Namespace, variants: list[str], ckpt: Path, tmp: Path) -> tuple[dict, dict]:
    """Each exporter's ONNX export of ``ckpt`` that the variants need: (paths, (seconds, check, MB))."""
    from speechprep.s2s import runtime as s2s_runtime

    exports, builds = {}, {}
    for v in variants[1:]:
        exporter = exporter_of(v)
        if exporter not in exports:
            t = time.perf_counter()
            exports[exporter] = tmp / exporter / "export.onnx"
            meta = s2s_runtime.build_export(ckpt, a.layer, exports[exporter], threads=a.threads, exporter=exporter)
            builds[exporter] = (
                time.perf_counter() - t,
                meta["max_abs_diff"],
                exports[exporter].stat().st_size / 1e6,
            )
    return exports, builds


def time_workers(workers: list[Worker], variants: list[str], n: int, repeats: int) -> tuple[dict, dict]:
    """A warm-up pass, then ``repeats`` shuffled ones, workers in turn: (wall, CPU) seconds per variant and segment."""
    for i in range(n):  # warm-up pass, which also saves each variant's features
        for w in workers:
            w.ask(f"run {i}")
    wall = {v: [[] for _ in range(n)] for v in variants}
    cpu = {v: [[] for _ in range(n)] for v in variants}
    rng = np.random.default_rng(1)
    for r in range(repeats):
        for k, i in enumerate(rng.permutation(n)):
            for j in range(len(workers)):
                w = workers[(j + k + r) % len(workers)]
                res = w.ask(f"run {i}")
                wall[w.variant][i].append(res["wall"])
                cpu[w.variant][i].append(res["cpu"])
    return wall, cpu


def feature_diffs(features: Path, variants: list[str], n: int) -> dict[str, float]:
    """Each variant's largest absolute difference from eager's features over the ``n`` segments."""
    ref = [np.load(features / "eager" / f"{i}.npy") for i in range(n)]
    return {
        v: max(float(np.abs(np.load(features / v / f"{i}.npy") - ref[i]).max()) for i in range(n)) for v in variants[1:]
    }


def per_seg(d: dict, v: str) -> list[float]:
    """Variant ``v``'s median over the repeats, per segment."""
    return [statistics.median(x) for x in d[v]]


def print_header(a: argparse.Namespace, audio: float, load: list, builds: dict) -> None:
    """The run's set-up: model, segments, load average, and each export's build."""
    print(
        f"S2S features: HuBERT-base-sized model (random), layer {a.layer}, {a.segments} segments of "
        f"{a.min_seconds:g}-{a.max_seconds:g} s ({audio:.0f} s of audio), CPU, {a.threads} threads, "
        f"per segment, median of {a.repeats} interleaved repeats"
    )
    print(
        f"  load average (1/5/15 min) before {'/'.join(f'{x:.1f}' for x in load[0])}, "
        f"after {'/'.join(f'{x:.1f}' for x in load[1])} on {os.cpu_count()} CPUs"
    )
    for exporter, (secs, diff, size) in builds.items():
        print(
            f"  export ({exporter}): built and checked in {secs:.1f} s, {size:.0f} MB, "
            f"max |export - eager| on the check waveforms {diff:.2e}"
        )


def print_variants(workers: list[Worker], audio: float, wall: dict, cpu: dict, stats: dict, diffs: dict) -> None:
    """Per variant: totals, load and memory, and its ratios to eager."""
    base_wall, base_cpu = per_seg(wall, "eager"), per_seg(cpu, "eager")
    base_best = sum(min(x) for x in wall["eager"])
    for w in workers:
        v = w.variant
        sw, sc, best = per_seg(wall, v), per_seg(cpu, v), sum(min(x) for x in wall[v])
        line = (
            f"  {v:18s} {sum(sw):6.2f} s wall, {audio / sum(sw):5.1f} audio-s/s, {sum(sc):6.2f} s CPU, "
            f"{best:.2f} s best-of-repeats wall; "
            f"load {w.loaded['load_s']:.1f} s, RSS after load {w.loaded['rss_after_load_mb']:.0f} MB, "
            f"peak RSS {stats[v]['peak_rss_mb']:.0f} MB"
        )
        if v != "eager":
            ratios = [b / x for b, x in zip(base_wall, sw, strict=True)]
            line += (
                f"\n  {'':18s} eager / {v}: {sum(base_wall) / sum(sw):.2f}x wall (per segment: median "
                f"{statistics.median(ratios):.2f}x, min {min(ratios):.2f}x), {sum(base_cpu) / sum(sc):.2f}x "
                f"CPU, {base_best / best:.2f}x best-of-repeats wall; max |feature difference| {diffs[v]:.2e}"
            )
        print(line)


def main() -> None:
    ap = parser()
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    if a.worker:
        return worker(a)
    import logging

    import torch

    logging.basicConfig(level=logging.WARNING)
    variants = a.variants.split(",")
    if variants[0] != "eager" or not set(variants) <= set(VARIANTS):
        ap.error(f"--variants: eager first, then some of {', '.join(VARIANTS[1:])}")
    torch.set_num_threads(a.threads)
    load = [os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model, ckpt = hubert_base(tmp)
        exports, builds = build_exports(a, variants, ckpt, tmp)
        workers = [Worker(v, a, ckpt, exports.get(exporter_of(v)), tmp / "features") for v in variants]
        segs = segments(a)
        audio = sum(len(x) for x in segs) / 16000
        wall, cpu = time_workers(workers, variants, len(segs), a.repeats)
        stats = {w.variant: w.ask("stats") for w in workers}
        for w in workers:
            w.close()
        load.append(os.getloadavg())
        diffs = feature_diffs(tmp / "features", variants, len(segs))
    print_header(a, audio, load, builds)
    print_variants(workers, audio, wall, cpu, stats, diffs)
    print("aim: eager / onnxruntime >= 1.5x wall on CPU")
    if a.json:
        lengths = [len(x) / 16000 for x in segs]
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"seconds": lengths, "wall": wall, "cpu": cpu, "load": load, "stats": stats}, f)
    if a.breakdown:
        breakdown(model.eval(), [torch.from_numpy(x) for x in segs], a.layer)


def breakdown(model, segs, layer) -> None:
    """Where eager time goes: the conv extractor and the transformer, one segment at a time."""
    import torch

    with torch.no_grad():
        t = time.perf_counter()
        feats = [model.feature_extractor(x[None])[0].t() for x in segs]
        cnn = time.perf_counter() - t
        feats = [model.layer_norm(f) for f in feats]
        if model.post_extract_proj is not None:
            feats = [model.post_extract_proj(f) for f in feats]
        t = time.perf_counter()
        for f in feats:
            model.encoder(f[None], padding_mask=None, layer=layer - 1)
        print(f"  eager breakdown: conv extractor {cnn:.2f} s; transformer {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
