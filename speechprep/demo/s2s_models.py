"""Demo S2S models, built from code (no download). NOT real models: random weights.

* :func:`tiny_hubert` builds a small HuBERT through fairseq's own
  ``hubert_pretraining`` task and ``hubert`` model (HuBERT base's conv
  strides, so 50 Hz frames, but 2 narrow transformer layers).
* :func:`save_checkpoint` saves it modern (cfg dict, current pos_conv layout)
  or 2021-style legacy, with any of the three problems of
  :mod:`speechprep.s2s.fairseq_legacy`: pickled argparse/omegaconf/fairseq/numpy
  objects, integer fields stored as floats, pos_conv weight norm in another layout.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .corpus import demo_audio

CONV_LAYERS = "[(32, 10, 5)] + [(32, 3, 2)] * 4 + [(32, 2, 2)] * 2"  # 320x: 50 Hz at 16 kHz
LEGACY_PROBLEMS = ("pickles", "float_ints", "pos_conv")


def _write_dict(label_dir: Path, label: str, n: int) -> None:
    label_dir.mkdir(parents=True, exist_ok=True)
    (label_dir / f"dict.{label}.txt").write_text("".join(f"{i} 1\n" for i in range(n)), encoding="utf-8")


BASE_CONV_LAYERS = "[(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2"


def tiny_hubert(
    label_dir: Path,
    n_labels: int = 50,
    seed: int = 0,
    layers: int = 2,
    dim: int = 64,
    normalize: bool = False,
    conv_layers: str = CONV_LAYERS,
    ffn: int | None = None,
    heads: int = 2,
    conv_pos: int = 16,
    conv_pos_groups: int = 4,
):
    """``(model, task)`` built by fairseq from its own configs."""
    from fairseq.models.hubert.hubert import HubertConfig
    from fairseq.tasks.hubert_pretraining import HubertPretrainingConfig, HubertPretrainingTask
    from omegaconf import OmegaConf

    torch.manual_seed(seed)
    _write_dict(label_dir, "km", n_labels)
    task_cfg = HubertPretrainingConfig(
        data=str(label_dir),
        label_dir=str(label_dir),
        labels=["km"],
        label_rate=50.0,
        sample_rate=16000,
        normalize=normalize,
        enable_padding=False,
        max_sample_size=250000,
    )
    task = HubertPretrainingTask.setup_task(task_cfg)
    model_cfg = HubertConfig(
        label_rate=50.0,
        extractor_mode="default",
        encoder_layers=layers,
        encoder_embed_dim=dim,
        encoder_ffn_embed_dim=ffn or 2 * dim,
        encoder_attention_heads=heads,
        conv_feature_layers=conv_layers,
        conv_pos=conv_pos,
        conv_pos_groups=conv_pos_groups,
        final_dim=32,
        layer_norm_first=normalize,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        dropout_input=0.0,
        dropout_features=0.0,
        feature_grad_mult=1.0,
    )
    model_cfg._name = "hubert"
    model = task.build_model(OmegaConf.structured(model_cfg)).eval()
    return model, task, task_cfg, model_cfg


def _cfg_dict(task_cfg, model_cfg) -> dict[str, Any]:
    task = dataclasses.asdict(task_cfg)
    task["_name"] = "hubert_pretraining"
    model = dataclasses.asdict(model_cfg)
    model["_name"] = "hubert"
    model["label_rate"] = task["label_rate"]
    return {"task": task, "model": model, "common": {"seed": 1}, "criterion": None}


def legacy_pos_conv(
    sd: dict[str, torch.Tensor], layout: str = "dim0", pre: str = "encoder.pos_conv.0"
) -> dict[str, torch.Tensor]:
    """pos_conv as an older torch/fairseq stored it: g over dim 0, or parametrizations."""
    sd = dict(sd)
    g, v = sd.pop(f"{pre}.weight_g"), sd.pop(f"{pre}.weight_v")
    w = v * (g / torch.norm_except_dim(v, 2, 2))
    if layout == "dim0":
        sd[f"{pre}.weight_g"], sd[f"{pre}.weight_v"] = torch.norm_except_dim(w, 2, 0), w.clone()
    else:  # parametrizations (torch.nn.utils.parametrizations.weight_norm, dim=2)
        sd[f"{pre}.parametrizations.weight.original0"] = torch.norm_except_dim(w, 2, 2)
        sd[f"{pre}.parametrizations.weight.original1"] = w.clone()
    return sd


# integer settings old trainers stored as floats (legacy problem "float_ints")
FLOAT_INTS = {
    "task": ("sample_rate", "max_sample_size"),
    "model": (
        "encoder_layers",
        "encoder_embed_dim",
        "encoder_ffn_embed_dim",
        "encoder_attention_heads",
        "conv_pos",
        "conv_pos_groups",
        "final_dim",
    ),
}


def _argparse_args(cfg: dict[str, Any]) -> argparse.Namespace:
    """The config as a 2021 HuBERT checkpoint's argparse ``args``: every group's keys, flat."""
    flat: dict[str, Any] = {}
    for group in ("common", "task", "model"):
        flat.update({k: v for k, v in cfg[group].items() if k != "_name"})
    flat.update(
        task="hubert_pretraining",
        arch="hubert",
        criterion="hubert",
        optimizer="adam",
        lr_scheduler="polynomial_decay",
        lr=[0.0005],
    )
    return argparse.Namespace(**flat)


def checkpoint_state(
    model,
    task,
    task_cfg,
    model_cfg,
    problems: tuple[str, ...] = (),
    pos_conv_layout: str = "dim0",
    args_style: bool = False,
) -> dict[str, Any]:
    """The checkpoint of ``model``, modern (no problems) or with the listed legacy problems.

    ``args_style`` stores an argparse Namespace (2021 HuBERT checkpoints), which
    is itself a pickled class, so it implies ``pickles``.
    """
    from omegaconf import OmegaConf

    unknown = set(problems) - set(LEGACY_PROBLEMS)
    if unknown:
        raise ValueError(f"unknown problems {unknown}")
    sd = model.state_dict()
    if "pos_conv" in problems:
        sd = legacy_pos_conv(sd, pos_conv_layout)
    cfg = _cfg_dict(task_cfg, model_cfg)
    if "float_ints" in problems:
        for group, keys in FLOAT_INTS.items():
            for k in keys:
                cfg[group][k] = float(cfg[group][k])
    state: dict[str, Any] = {
        "model": sd,
        "optimizer_history": [
            {
                "criterion_name": "HubertCriterion",
                "optimizer_name": "adam",
                "lr_scheduler_state": {"best": None},
                "num_updates": 400000,
            }
        ],
        "extra_state": {"train_iterator": {"epoch": 1}},
    }
    if args_style:
        state["args"], state["cfg"] = _argparse_args(cfg), None
    elif "pickles" in problems:
        state["cfg"] = OmegaConf.create(cfg)  # pickled DictConfig, as fairseq saved it
        state["args"] = None
    else:
        state["cfg"] = cfg
        state["args"] = None
    if "pickles" in problems or args_style:
        state["task_state"] = {"dictionaries": task.dictionaries}  # fairseq Dictionary objects
        # numpy values, as old trainers left them
        state["extra_state"]["best_loss"] = np.float64(1.2345)
        state["extra_state"]["val_losses"] = np.array([2.5, 1.75, 1.2345])
    return state


def save_checkpoint(
    model,
    task,
    task_cfg,
    model_cfg,
    out: Path,
    problems: tuple[str, ...] = (),
    pos_conv_layout: str = "dim0",
    args_style: bool = False,
) -> Path:
    """Save :func:`checkpoint_state` to ``out`` with this stack's torch and numpy."""
    state = checkpoint_state(model, task, task_cfg, model_cfg, problems, pos_conv_layout, args_style)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, out)
    return out


VOCODER_CONFIG = {  # a tiny unit HiFi-GAN: hop 5*4*4*4 = 320 samples = one 50 Hz unit
    "resblock": "1",
    "upsample_rates": [5, 4, 4, 4],
    "upsample_kernel_sizes": [11, 8, 8, 8],
    "upsample_initial_channel": 32,
    "resblock_kernel_sizes": [3],
    "resblock_dilation_sizes": [[1, 3, 5]],
    "model_in_dim": 16,
    "num_embeddings": 50,
    "embedding_dim": 16,
}


def tiny_vocoder(out: Path, config_out: Path, n_units: int, seed: int = 0, dur_predictor: bool = False) -> None:
    """A random CodeHiFiGAN generator saved as textlesslib ships vocoders: checkpoint + config JSON."""
    import json

    from fairseq.models.text_to_speech.codehifigan import CodeGenerator

    torch.manual_seed(seed)
    cfg = dict(VOCODER_CONFIG, num_embeddings=n_units)
    if dur_predictor:
        cfg["dur_predictor_params"] = {
            "encoder_embed_dim": 16,
            "var_pred_hidden_dim": 16,
            "var_pred_kernel_size": 3,
            "var_pred_dropout": 0.5,
        }
    gen = CodeGenerator(cfg)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"generator": gen.state_dict()}, out)
    config_out.write_text(json.dumps(cfg, indent=1) + "\n", encoding="utf-8")


def build_demo(truth_path: Path, out_dir: Path, n_units: int = 50, layer: int = 2, seed: int = 0) -> dict[str, str]:
    """The demo S2S models in ``out_dir``: a 2021-style legacy HuBERT checkpoint, a k-means
    fitted on its layer-``layer`` features of the demo corpus, a random unit HiFi-GAN."""
    import tempfile

    import joblib
    from sklearn.cluster import MiniBatchKMeans

    from ..s2s.models import dense_features

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model, task, tcfg, mcfg = tiny_hubert(Path(tmp) / "labels", n_labels=n_units, seed=seed)
        hubert = save_checkpoint(
            model, task, tcfg, mcfg, out_dir / "demo_hubert_legacy.pt", problems=LEGACY_PROBLEMS, args_style=True
        )
    feats = torch.cat(dense_features(model, demo_audio(truth_path), layer, normalize=False)).numpy()
    km = MiniBatchKMeans(n_clusters=n_units, random_state=seed, n_init=3, batch_size=1024).fit(feats)
    km_path = out_dir / "demo_km.bin"
    joblib.dump(km, km_path)
    tiny_vocoder(out_dir / "demo_vocoder.pt", out_dir / "demo_vocoder.json", n_units, seed)
    paths = {
        "hubert": str(hubert),
        "kmeans": str(km_path),
        "vocoder": str(out_dir / "demo_vocoder.pt"),
        "vocoder_config": str(out_dir / "demo_vocoder.json"),
    }
    logging.getLogger("speechprep.demo").info(
        "demo S2S models (%d feature frames, %d units, layer %d): %s", len(feats), n_units, layer, paths
    )
    return paths
