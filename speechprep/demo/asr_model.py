"""Build the demo ASR model: a tiny character CTC model trained on the demo corpus.

NOT a speech recognizer. It is a ~100k-parameter NeMo ``EncDecCTCModel``
(ConvASR encoder) trained for about a minute on CPU on the demo's clean
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
import tempfile
import time
from pathlib import Path

log = logging.getLogger("speechprep.demo")
LABELS = [" "] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["'"]
# Training always runs on this many threads, whatever the job was given: thread
# count changes the order of float reductions, and with it the trained weights.
TRAIN_THREADS = 2


def training_manifest(truth_path: Path, out: Path, copies: int, jitter: float, seed: int = 0) -> list[dict]:
    """Each clean phrase ``copies`` times with its boundaries moved by up to ``jitter`` s,
    so the model does not depend on exactly where VAD cuts."""
    truth = json.loads(truth_path.read_text(encoding="utf-8"))
    audio_root = truth_path.parent / "audio"
    rng = random.Random(seed)
    rows = []
    for rel, info in sorted(truth["files"].items()):
        if not info.get("clean"):
            continue
        for sp in info["speech"]:
            for k in range(copies):
                a = max(0.0, sp["start"] - (rng.uniform(0, jitter) if k else 0.0))
                b = min(info["duration"], sp["end"] + (rng.uniform(0, jitter) if k else 0.0))
                rows.append(
                    {
                        "audio_filepath": str((audio_root / rel).resolve()),
                        "offset": round(a, 3),
                        "duration": round(b - a, 3),
                        "text": sp["text"],
                    }
                )
    with open(out, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
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


def model_config(manifest: str, batch_size: int):
    from omegaconf import OmegaConf

    train_ds = {
        "manifest_filepath": manifest,
        "sample_rate": 16000,
        "labels": LABELS,
        "batch_size": batch_size,
        "shuffle": True,
        "num_workers": 0,
        "trim_silence": False,
        "max_duration": 30.0,
        "normalize_transcripts": False,
    }
    optim = {
        "name": "adamw",
        "lr": 0.01,
        "weight_decay": 0.0,
        "sched": {"name": "CosineAnnealing", "warmup_steps": 20, "min_lr": 1e-4},
    }
    modules = _modules()
    return OmegaConf.create({"sample_rate": 16000, "labels": LABELS, "train_ds": train_ds, **modules, "optim": optim})


def build(truth_path: Path, out: Path, max_steps: int = 1500, seed: int = 0) -> dict:
    """Train for ``max_steps`` (a few minutes on 2 cores), deterministically: the same
    steps, seed and thread count give the same model."""
    import lightning.pytorch as pl
    import torch
    from nemo.collections.asr.models import EncDecCTCModel

    threads = torch.get_num_threads()
    torch.set_num_threads(TRAIN_THREADS)
    pl.seed_everything(seed, workers=True, verbose=False)
    random.seed(seed)
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "train.jsonl"
        rows = training_manifest(truth_path, manifest, copies=6, jitter=0.12, seed=seed)
        cfg = model_config(str(manifest), batch_size=16)
        cfg.optim.sched.max_steps = max_steps

        trainer = pl.Trainer(
            accelerator="cpu",
            devices=1,
            max_steps=max_steps,
            logger=False,
            deterministic=True,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=tmp,
        )
        model = EncDecCTCModel(cfg=cfg, trainer=trainer)
        n_params = sum(p.numel() for p in model.parameters())
        log.info("demo ASR model: %d parameters, %d training rows, %d steps on CPU", n_params, len(rows), max_steps)
        t0 = time.monotonic()
        trainer.fit(model)
        train_s = time.monotonic() - t0
        model.eval()
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp_out = out.with_name(f".{out.name}.tmp")
        model.save_to(str(tmp_out))
        os.replace(tmp_out, out)
    torch.set_num_threads(threads)
    info = {"parameters": n_params, "steps": trainer.global_step, "train_seconds": round(train_s, 1)}
    log.info("demo ASR model saved to %s: %s", out, info)
    return info
