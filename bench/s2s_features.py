#!/usr/bin/env python3
"""S2S dense features: batched with padding masks vs textlesslib's one-segment loop, same run.

    .venvs/s2s/bin/python bench/s2s_features.py [--segments 40] [--repeats 2] [--device cpu]

A HuBERT-base-sized model (12 layers, 768 dims, 512-channel conv extractor;
random weights) built through fairseq. Baseline: ``extract_features`` per
segment (textlesslib's dense model loop). Stage: ``speechprep.s2s.dense_features``
over duration-sorted batches within the stage's padded-seconds budget.
Prints audio-seconds per second (medians of interleaved repeats), the ratio
(aim >= 1.5x on CPU) and the largest feature difference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from speechprep import s2s  # noqa: E402
from speechprep.s2s_demo_models import BASE_CONV_LAYERS, demo_audio, tiny_hubert  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=40)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--max-seconds", type=float, default=12.0)
    ap.add_argument("--batch-seconds", type=float, default=60.0)
    ap.add_argument("--layer", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--breakdown", action="store_true", help="also time the conv extractor and the transformer separately"
    )
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model, _, _, _ = tiny_hubert(
            Path(tmp) / "l",
            layers=12,
            dim=768,
            ffn=3072,
            heads=12,
            conv_layers=BASE_CONV_LAYERS,
            conv_pos=128,
            conv_pos_groups=16,
        )
    model = model.to(a.device).eval()
    rng = np.random.default_rng(0)
    pool = np.concatenate(demo_audio(REPO / "resources/demo/truth.json"))
    segs = []
    for n in (rng.uniform(a.min_seconds, a.max_seconds, a.segments) * 16000).astype(int):
        start = int(rng.integers(0, len(pool) - n))
        segs.append(torch.tensor(pool[start : start + n], device=a.device))
    audio = sum(len(x) for x in segs) / 16000
    order = sorted(range(len(segs)), key=lambda i: -len(segs[i]))
    batches, cur = [], []
    for i in order:  # the stage's planner: padded seconds within the budget
        if cur and (len(cur) + 1) * len(segs[cur[0]]) / 16000 > a.batch_seconds:
            batches.append(cur)
            cur = []
        cur.append(i)
    batches.append(cur)

    def loop():
        out = []
        with torch.no_grad():
            for x in segs:
                f, _ = model.extract_features(x[None], padding_mask=None, mask=False, output_layer=a.layer)
                out.append(f[0])
        return out

    def batched():
        out = [None] * len(segs)
        for b in batches:
            for i, f in zip(b, s2s.dense_features(model, [segs[i] for i in b], a.layer, False)):
                out[i] = f
        return out

    loop()  # warm-up
    times = {"loop": [], "batched": []}
    for _ in range(a.repeats):
        t = time.perf_counter()
        ref = loop()
        times["loop"].append(time.perf_counter() - t)
        t = time.perf_counter()
        got = batched()
        times["batched"].append(time.perf_counter() - t)
    diff = max((x - y).abs().max().item() for x, y in zip(ref, got))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"S2S features: HuBERT-base-sized model (random), layer {a.layer}, {a.segments} segments of "
        f"{a.min_seconds:g}-{a.max_seconds:g} s ({audio:.0f} s of audio), {a.device}, {a.threads} threads, "
        f"median of {a.repeats}"
    )
    print(
        f"  one segment at a time (textlesslib loop): {med['loop']:.2f} s, {audio / med['loop']:.1f} audio-s/s"
        f"  (runs: {', '.join(f'{x:.2f}' for x in times['loop'])})"
    )
    print(
        f"  batched, {len(batches)} batches within {a.batch_seconds:g} padded s: {med['batched']:.2f} s, "
        f"{audio / med['batched']:.1f} audio-s/s  (runs: {', '.join(f'{x:.2f}' for x in times['batched'])})"
    )
    print(
        f"batched / loop: {med['loop'] / med['batched']:.2f}x   (aim >= 1.5x on CPU); "
        f"max |feature difference| {diff:.2e}"
    )
    if a.breakdown:
        breakdown(model, segs, a.layer)


def breakdown(model, segs, layer) -> None:
    """Where one-at-a-time time goes, and what batching the transformer alone changes."""
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
        single = time.perf_counter() - t
        order = sorted(range(len(feats)), key=lambda i: -len(feats[i]))
        print(f"  breakdown: conv extractor per segment {cnn:.2f} s; transformer one at a time {single:.2f} s")
        for bs in (4, 8, 16):
            t = time.perf_counter()
            for k in range(0, len(order), bs):
                group = [feats[i] for i in order[k : k + bs]]
                x = group[0].new_zeros(len(group), len(group[0]), group[0].shape[1])
                pad = torch.ones(len(group), len(group[0]), dtype=torch.bool)
                for j, f in enumerate(group):
                    x[j, : len(f)] = f
                    pad[j, : len(f)] = False
                model.encoder(x, padding_mask=pad, layer=layer - 1)
            print(f"  transformer in groups of {bs}: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
