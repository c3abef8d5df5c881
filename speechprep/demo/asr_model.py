"""Build the demo ASR model: a tiny character CTC model trained on the demo corpus.

NOT a speech recognizer. It is a 135k-parameter NeMo ``EncDecCTCModel``
(ConvASR encoder) trained for under a minute of CPU on the demo's clean
phrases and their ground-truth texts, so that the real NeMo loading and
transcription code can run end to end offline. On the demo corpus it
reproduces those texts; on anything else its output is meaningless.

    python -m speechprep demo asr-model --truth resources/demo/truth.json --out resources/models/demo_asr.nemo
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path

log = logging.getLogger("speechprep.demo")
LABELS = [" "] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["'"]
# Training always runs on this many threads, whatever the job was given: thread
# count changes the order of float reductions, and with it the trained weights. One
# thread: a model this small gains nothing from two (two spent 6x the CPU time).
TRAIN_THREADS = 1
SAMPLE_RATE = 16000
STEPS = 600  # batches trained: the demo's clean phrases are all right from 300 (bench/demo_asr_model.py)
BATCH = 16


def training_rows(truth_path: Path, copies: int, jitter: float, seed: int = 0) -> list[dict]:
    """Each clean phrase ``copies`` times with its boundaries moved by up to ``jitter`` s
    (the first copy as it is), so the model does not depend on exactly where VAD cuts:
    ``{"file", "offset", "duration", "text"}``."""
    truth = json.loads(truth_path.read_text(encoding="utf-8"))
    rng = random.Random(seed)
    rows = []
    for rel, info in sorted(truth["files"].items()):
        if not info.get("clean"):
            continue
        for sp in info["speech"]:
            for k in range(copies):
                a = max(0.0, sp["start"] - (rng.uniform(0, jitter) if k else 0.0))
                b = min(info["duration"], sp["end"] + (rng.uniform(0, jitter) if k else 0.0))
                rows.append({"file": rel, "offset": a, "duration": b - a, "text": sp["text"]})
    return rows


FEATURES, WIDTH = 64, 128  # mel features in, channels of the ConvASR blocks


def _block(filters, kernel, stride=1, residual=False) -> dict:
    """One separable ConvASR (Jasper) block."""
    return {
        "filters": filters,
        "repeat": 1,
        "kernel": [kernel],
        "stride": [stride],
        "dilation": [1],
        "dropout": 0.0,
        "residual": residual,
        "separable": True,
    }


def _modules() -> dict:
    """The preprocessor, encoder and decoder configs of the demo model."""
    return {
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "normalize": "per_feature",
            "window_size": 0.025,
            "window_stride": 0.01,
            "features": FEATURES,
            "n_fft": 512,
            "dither": 0.0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConvASREncoder",
            "feat_in": FEATURES,
            "activation": "relu",
            "conv_mask": True,
            "jasper": [
                _block(WIDTH, 11, stride=2),
                _block(WIDTH, 13, residual=True),
                _block(WIDTH, 15, residual=True),
                _block(WIDTH, 17, residual=True),
                _block(WIDTH, 1),
            ],
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.ConvASRDecoder",
            "feat_in": WIDTH,
            "num_classes": len(LABELS),
            "vocabulary": LABELS,
        },
    }


def model_config():
    from omegaconf import OmegaConf

    return OmegaConf.create({"sample_rate": 16000, "labels": LABELS, **_modules()})


def _cut(x, row: dict):
    a = int(round(row["offset"] * SAMPLE_RATE))
    return x[a : a + int(round(row["duration"] * SAMPLE_RATE))]


def _batches(rows: list[dict], audio: dict, batch_size: int, steps: int, seed: int):
    """``steps`` batches of ``(signal, lengths, targets, target lengths)`` tensors: the rows
    shuffled once an epoch (``seed``), each cut from its file's audio held in memory."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    order: list[int] = []
    for _ in range(steps):
        if len(order) < batch_size:
            order += rng.permutation(len(rows)).tolist()
        pick, order = order[:batch_size], order[batch_size:]
        clips = [_cut(audio[rows[i]["file"]], rows[i]) for i in pick]
        tokens = [[LABELS.index(c) for c in rows[i]["text"]] for i in pick]
        signal = torch.zeros(len(pick), max(map(len, clips)))
        targets = torch.zeros(len(pick), max(map(len, tokens)), dtype=torch.long)
        for j, (c, t) in enumerate(zip(clips, tokens)):
            signal[j, : len(c)] = torch.from_numpy(c)
            targets[j, : len(t)] = torch.tensor(t)
        yield signal, torch.tensor([len(c) for c in clips]), targets, torch.tensor([len(t) for t in tokens])


def _schedule(step: int, steps: int, warmup: int = 20, lr: float = 0.01, min_lr: float = 1e-4) -> float:
    """Linear warm-up, then cosine annealing to ``min_lr`` (NeMo's CosineAnnealing)."""
    import math

    if step < warmup:
        return lr * (step + 1) / warmup
    x = (step - warmup) / max(1, steps - warmup)
    return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * min(1.0, x)))


def build(truth_path: Path, out: Path, max_steps: int = STEPS, seed: int = 0) -> dict:
    """Train NeMo's ``EncDecCTCModel`` for ``max_steps`` batches with its own forward pass and
    CTC loss, the demo audio decoded once and held in memory (no data loader, no Lightning
    trainer), deterministically: the same steps, seed and thread count give the same model."""
    import soundfile as sf
    import torch
    from nemo.collections.asr.models import EncDecCTCModel

    threads = torch.get_num_threads()
    torch.set_num_threads(TRAIN_THREADS)
    torch.manual_seed(seed)
    random.seed(seed)
    rows = training_rows(truth_path, copies=6, jitter=0.12, seed=seed)
    root = truth_path.parent / "audio"
    audio = {}
    for r in rows:
        if r["file"] not in audio:
            x, rate = sf.read(root / r["file"], dtype="float32", always_2d=True)
            assert rate == SAMPLE_RATE, f"{r['file']}: the demo's clean clips are {SAMPLE_RATE} Hz"
            audio[r["file"]] = x.mean(axis=1)
    model = EncDecCTCModel(cfg=model_config())
    n_params = sum(p.numel() for p in model.parameters())
    log.info("demo ASR model: %d parameters, %d training rows, %d steps on CPU", n_params, len(rows), max_steps)
    opt = torch.optim.AdamW(model.parameters(), lr=_schedule(0, max_steps), weight_decay=0.0)
    t0 = time.monotonic()
    model.train()
    for step, (x, xl, y, yl) in enumerate(_batches(rows, audio, BATCH, max_steps, seed)):
        for group in opt.param_groups:
            group["lr"] = _schedule(step, max_steps)
        log_probs, enc_len, _ = model(input_signal=x, input_signal_length=xl)
        loss = model.loss(log_probs=log_probs, targets=y, input_lengths=enc_len, target_lengths=yl)
        opt.zero_grad()
        loss.backward()
        opt.step()
    train_s = time.monotonic() - t0
    model.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(f".{out.name}.tmp")
    model.save_to(str(tmp_out))
    os.replace(tmp_out, out)
    torch.set_num_threads(threads)
    info = {"parameters": n_params, "steps": max_steps, "train_seconds": round(train_s, 1), "loss": float(loss)}
    log.info("demo ASR model saved to %s: %s", out, info)
    return info
