"""Demo S2S models, built from code (no download). NOT real models: random weights.

* :func:`tiny_hubert` builds a small HuBERT through fairseq's own
  ``hubert_pretraining`` task and ``hubert`` model (HuBERT base's conv
  strides, so 50 Hz frames, but 2 narrow transformer layers).
* :func:`save_checkpoint` saves it modern (cfg dict, current pos_conv layout)
  or 2021-style legacy, with any of the three problems of
  :mod:`speechprep.fairseq_legacy`: pickled argparse/omegaconf/fairseq/numpy
  objects, integer fields stored as floats, pos_conv weight norm in another layout.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

CONV_LAYERS = "[(32, 10, 5)] + [(32, 3, 2)] * 4 + [(32, 2, 2)] * 2"  # 320x: 50 Hz at 16 kHz
LEGACY_PROBLEMS = ("pickles", "float_ints", "pos_conv")


def _write_dict(label_dir: Path, label: str, n: int) -> None:
    label_dir.mkdir(parents=True, exist_ok=True)
    (label_dir / f"dict.{label}.txt").write_text("".join(f"{i} 1\n" for i in range(n)), encoding="utf-8")


def tiny_hubert(label_dir: Path, n_labels: int = 50, seed: int = 0, layers: int = 2, dim: int = 64,
                normalize: bool = False, conv_layers: str = CONV_LAYERS):
    """``(model, task)`` built by fairseq from its own configs."""
    from fairseq.models.hubert.hubert import HubertConfig
    from fairseq.tasks.hubert_pretraining import HubertPretrainingConfig, HubertPretrainingTask
    from omegaconf import OmegaConf

    torch.manual_seed(seed)
    _write_dict(label_dir, "km", n_labels)
    task_cfg = HubertPretrainingConfig(data=str(label_dir), label_dir=str(label_dir), labels=["km"],
                                       label_rate=50.0, sample_rate=16000, normalize=normalize,
                                       enable_padding=False, max_sample_size=250000)
    task = HubertPretrainingTask.setup_task(task_cfg)
    model_cfg = HubertConfig(label_rate=50.0, extractor_mode="default", encoder_layers=layers,
                             encoder_embed_dim=dim, encoder_ffn_embed_dim=2 * dim,
                             encoder_attention_heads=2, conv_feature_layers=conv_layers, conv_pos=16,
                             conv_pos_groups=4, final_dim=32, layer_norm_first=normalize,
                             dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                             dropout_input=0.0, dropout_features=0.0, feature_grad_mult=1.0)
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


def _legacy_pos_conv(sd: dict[str, torch.Tensor], layout: str) -> dict[str, torch.Tensor]:
    """pos_conv as an older torch/fairseq stored it: g over dim 0, or parametrizations."""
    sd = dict(sd)
    pre = "encoder.pos_conv.0"
    g, v = sd.pop(f"{pre}.weight_g"), sd.pop(f"{pre}.weight_v")
    w = v * (g / torch.norm_except_dim(v, 2, 2))
    if layout == "dim0":
        sd[f"{pre}.weight_g"], sd[f"{pre}.weight_v"] = torch.norm_except_dim(w, 2, 0), w.clone()
    else:  # parametrizations (torch.nn.utils.parametrizations.weight_norm, dim=2)
        sd[f"{pre}.parametrizations.weight.original0"] = torch.norm_except_dim(w, 2, 2)
        sd[f"{pre}.parametrizations.weight.original1"] = w.clone()
    return sd


def save_checkpoint(model, task, task_cfg, model_cfg, out: Path, problems: tuple[str, ...] = (),
                    pos_conv_layout: str = "dim0", args_style: bool = False) -> Path:
    """Save ``model`` modern (no problems) or with the listed legacy problems.

    ``args_style`` stores an argparse Namespace (2021 HuBERT checkpoints), which
    is itself a pickled class, so it implies ``pickles``.
    """
    from omegaconf import OmegaConf

    unknown = set(problems) - set(LEGACY_PROBLEMS)
    if unknown:
        raise ValueError(f"unknown problems {unknown}")
    sd = model.state_dict()
    if "pos_conv" in problems:
        sd = _legacy_pos_conv(sd, pos_conv_layout)
    cfg = _cfg_dict(task_cfg, model_cfg)
    if "float_ints" in problems:
        for group, keys in (("task", ("sample_rate", "max_sample_size")),
                            ("model", ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim",
                                       "encoder_attention_heads", "conv_pos", "conv_pos_groups", "final_dim"))):
            for k in keys:
                cfg[group][k] = float(cfg[group][k])
    state: dict[str, Any] = {
        "model": sd,
        "optimizer_history": [{"criterion_name": "HubertCriterion", "optimizer_name": "adam",
                               "lr_scheduler_state": {"best": None}, "num_updates": 400000}],
        "extra_state": {"train_iterator": {"epoch": 1}},
    }
    if args_style:
        flat: dict[str, Any] = {}
        for group in ("common", "task", "model"):
            flat.update({k: v for k, v in cfg[group].items() if k != "_name"})
        flat.update(task="hubert_pretraining", arch="hubert", criterion="hubert", optimizer="adam",
                    lr_scheduler="polynomial_decay", lr=[0.0005])
        state["args"] = argparse.Namespace(**flat)
        state["cfg"] = None
    elif "pickles" in problems:
        state["cfg"] = OmegaConf.create(cfg)  # pickled DictConfig, as fairseq saved it
        state["args"] = None
    else:
        state["cfg"] = cfg
        state["args"] = None
    if "pickles" in problems or args_style:
        state["task_state"] = {"dictionaries": task.dictionaries}  # fairseq Dictionary objects
        state["extra_state"]["best_loss"] = np.float64(1.2345)  # numpy scalar, as old trainers left
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, out)
    return out
