"""Demo S2S models, built from code (no download). NOT real models: random weights.

* :func:`tiny_hubert` builds a small HuBERT through fairseq's own
  ``hubert_pretraining`` task and ``hubert`` model (HuBERT base's conv
  strides, so 50 Hz frames, but 2 narrow transformer layers).
* :func:`save_checkpoint` saves it modern (cfg dict, current pos_conv layout)
  or 2021-style legacy, with any of the three problems of
  :mod:`speechprep.s2s.fairseq_legacy`: pickled argparse/omegaconf/fairseq/numpy
  objects, integer fields stored as floats, pos_conv weight norm in another layout.

Random weights are the same on every CPU: torch's float32 ``normal_`` and
``uniform_`` take an AVX2 or a scalar kernel depending on the CPU and so draw other
numbers, so every parameter is drawn in float64 (the scalar path everywhere) and
then cast to float32 (:func:`_drawn_in_float64`).

:func:`build_demo` fits the k-means on a criterion, not on a seed alone: every
demo frame the tests read has a clear nearest centre (no near-tie that float32
differences between ONNX Runtime and eager PyTorch could flip), and the re-encoded
copies of the first demo phrase keep most of its unit n-grams while different phrases
share few. Until both hold it refits with the next seed, at most ``MAX_FITS`` times;
past that the build fails saying so (:class:`~speechprep.demo.asr_model.CriterionUnmet`,
exit code 4).

    python -m speechprep demo s2s-models --truth resources/demo/truth.json --out-dir resources/models
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..io.model_archive import save_model
from .asr_model import CriterionUnmet, phrases
from .corpus import demo_audio

log = logging.getLogger("speechprep.demo")
CONV_LAYERS = "[(32, 10, 5)] + [(32, 3, 2)] * 4 + [(32, 2, 2)] * 2"  # 320x: 50 Hz at 16 kHz
LEGACY_PROBLEMS = ("pickles", "float_ints", "pos_conv")
# The label directory a built checkpoint that holds its dictionaries records (a trainer's own path in a
# lab's checkpoint; the stage's loader puts the dictionaries it holds in its place): not the build's
# temporary directory, so that two builds write the same bytes.
RECORDED_LABEL_DIR = "labels"


def _write_dict(label_dir: Path, label: str, n: int) -> None:
    label_dir.mkdir(parents=True, exist_ok=True)
    (label_dir / f"dict.{label}.txt").write_text("".join(f"{i} 1\n" for i in range(n)), encoding="utf-8")


BASE_CONV_LAYERS = "[(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2"
# fairseq's HuBERT builds these two as torch.FloatTensor (float32 whatever the default
# dtype) and fills them with uniform_ over [0, 1): they are drawn again in float64.
FLOAT32_BUILT = {"mask_emb", "label_embs_concat"}


@contextlib.contextmanager
def _drawn_in_float64(seed: int):
    """Modules built inside draw their initial weights in float64 from torch's generator
    seeded ``seed``: float64 draws take the same (scalar) kernel on every CPU, where
    float32 ones take an AVX2 or a scalar one and differ. Cast with :func:`_as_float32`."""
    dtype = torch.get_default_dtype()
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)


def _as_float32(model, seed: int, float32_built: set[str] = frozenset()):
    """``model`` (built in :func:`_drawn_in_float64`) in float32; its parameters named in
    ``float32_built``, which its code builds in float32 and fills uniformly over [0, 1),
    drawn again in float64. Any other float32 parameter is an error: its draw would
    depend on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dtype == torch.float64:
                continue
            if name not in float32_built:
                raise RuntimeError(f"{name} was not drawn in float64 ({p.dtype}): its weights would depend on the CPU")
            p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64))
    return model.float()


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
    with _drawn_in_float64(seed):
        model = task.build_model(OmegaConf.structured(model_cfg))
    return _as_float32(model, seed, FLOAT32_BUILT).eval(), task, task_cfg, model_cfg


def recorded_labels(task_cfg):
    """``task_cfg`` with :data:`RECORDED_LABEL_DIR` as its data and label directory."""
    return dataclasses.replace(task_cfg, data=RECORDED_LABEL_DIR, label_dir=RECORDED_LABEL_DIR)


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
    return save_model(out, lambda path: torch.save(state, path))


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

    cfg = dict(VOCODER_CONFIG, num_embeddings=n_units)
    if dur_predictor:
        cfg["dur_predictor_params"] = {
            "encoder_embed_dim": 16,
            "var_pred_hidden_dim": 16,
            "var_pred_kernel_size": 3,
            "var_pred_dropout": 0.5,
        }
    with _drawn_in_float64(seed):
        gen = CodeGenerator(cfg)
    gen = _as_float32(gen, seed)
    save_model(out, lambda path: torch.save({"generator": gen.state_dict()}, path))
    save_model(config_out, lambda path: path.write_text(json.dumps(cfg, indent=1) + "\n", encoding="utf-8"))


# The k-means criterion (build_demo). Every demo frame the tests read -- the clean files whole (the
# k-means' training frames), each clean phrase cut as tests/support.demo_segments cuts it, the first
# phrase's re-encoded copies -- has its nearest centre closer than the second by MIN_GAP of the frame's
# norm (~8: layer-normed features). ONNX Runtime moves such a frame from eager PyTorch by at most 1.8e-6
# of its norm, batching by 4.3e-7; a unit can flip only where the gap is under twice the move
# (bench/demo/s2s_models.py --moves; docs/benchmarks/demo.md, "The demo S2S models on other CPUs").
MIN_GAP = 1e-5
# The re-encodes that tests/curate/test_duplicates.py reads: (libsndfile format, gain dB). Each keeps at least
# MIN_COPY_JACCARD of the first phrase's unit n-grams (NGRAM: the config's minhash_ngram), exactly; the
# test's MinHash LSH at near_duplicate_jaccard 0.35 (32 bands of 4) catches a pair at 0.6 with
# probability 0.988. No two different clean phrases share MAX_OTHER_JACCARD (the test: under 0.35).
COPIES = (("MP3", -4.0), ("FLAC", 3.0))
NGRAM, MIN_COPY_JACCARD, MAX_OTHER_JACCARD = 2, 0.6, 0.25
MAX_FITS = 10  # k-means seeds tried at most: past them the build fails


def criterion_audio(truth_path: Path) -> dict[str, list[np.ndarray]]:
    """What the k-means criterion reads, 16 kHz float32: ``files`` (the clean demo files whole),
    ``phrases`` (each clean phrase as a segment, as the tests cut it) and ``copies`` (the first
    phrase through each of ``COPIES``)."""
    from ..io.audio import read_segment
    from . import damage

    audio = truth_path.parent / "audio"
    cut = [
        read_segment(
            {
                "audio_filepath": str(audio / ph["file"]),
                "offset": round(ph["start"], 3),
                "duration": round(ph["end"] - ph["start"], 3),
            }
        )
        for ph in phrases(truth_path)
    ]
    copies = [damage.reencode(cut[0], fmt=fmt, gain_db=gain) for fmt, gain in COPIES]
    return {"files": demo_audio(truth_path), "phrases": cut, "copies": copies}


def nearest_gaps(centers: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each frame's distance to its second-nearest centre minus that to its nearest, over
    the frame's norm (float64)."""
    x, c = np.asarray(x, np.float64), np.asarray(centers, np.float64)
    sq = (x**2).sum(1)[:, None] - 2 * x @ c.T + (c**2).sum(1)[None, :]
    two = np.partition(np.sqrt(np.maximum(sq, 0.0)), 1, axis=1)[:, :2]
    return (two[:, 1] - two[:, 0]) / np.maximum(np.linalg.norm(x, axis=1), 1e-12)


def check_units(km, feats: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    """The criterion's measures of ``km`` on :func:`criterion_audio`'s features: the smallest
    relative gap over every frame, each copy's and the closest two phrases' unit Jaccard."""
    from ..curate.duplicates import unit_jaccard

    gaps = nearest_gaps(km.cluster_centers_, np.concatenate([f for group in feats.values() for f in group]))
    units = {k: [km.predict(f).tolist() for f in feats[k]] for k in ("phrases", "copies")}
    first, said = units["phrases"][0], units["phrases"]
    others = max(unit_jaccard(a, b, NGRAM) for i, a in enumerate(said) for b in said[i + 1 :])
    return {
        "frames": len(gaps),
        "min_gap": float(gaps.min()),
        "copy_jaccard": [round(unit_jaccard(first, u, NGRAM), 4) for u in units["copies"]],
        "other_jaccard": round(others, 4),
    }


def fit_kmeans(feats: dict[str, list[np.ndarray]], n_units: int, seed: int, min_gap: float, max_fits: int):
    """``(k-means, criterion)``: fitted on ``feats["files"]`` with seeds ``seed``, ``seed + 1``, ...
    until :func:`check_units` meets the criterion, else :class:`CriterionUnmet`."""
    from sklearn.cluster import MiniBatchKMeans

    train, tried = np.concatenate(feats["files"]), []
    for k in range(max_fits):
        km = MiniBatchKMeans(n_clusters=n_units, random_state=seed + k, n_init=3, batch_size=1024).fit(train)
        result = {"seed": seed + k, **check_units(km, feats)}
        tried.append(result)
        log.info("k-means fit %d: %s", k + 1, result)
        if (
            result["min_gap"] >= min_gap
            and min(result["copy_jaccard"]) >= MIN_COPY_JACCARD
            and result["other_jaccard"] < MAX_OTHER_JACCARD
        ):
            return km, {**result, "fits": k + 1}
    raise CriterionUnmet(
        f"demo S2S k-means: none of {max_fits} seeds from {seed} gives every demo frame a nearest centre "
        f"{min_gap:g} of its norm ahead of the next, copies' unit Jaccard >= {MIN_COPY_JACCARD} and other "
        f"phrases' < {MAX_OTHER_JACCARD} (best gap {max(t['min_gap'] for t in tried):.2e}; fits: {tried})"
    )


def build_demo(
    truth_path: Path,
    out_dir: Path,
    n_units: int = 50,
    layer: int = 2,
    seed: int = 0,
    min_gap: float = MIN_GAP,
    max_fits: int = MAX_FITS,
) -> dict[str, str]:
    """The demo S2S models in ``out_dir``: a 2021-style legacy HuBERT checkpoint, a k-means
    fitted on its layer-``layer`` features of the demo corpus (on :func:`fit_kmeans`'s
    criterion), a random unit HiFi-GAN. The paths by name; the criterion met is logged."""
    import json
    import tempfile

    import joblib

    from ..s2s import fairseq_legacy
    from ..s2s.models import dense_features

    t0 = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model, task, tcfg, mcfg = tiny_hubert(Path(tmp) / "labels", n_labels=n_units, seed=seed)
        hubert = save_checkpoint(
            model,
            task,
            recorded_labels(tcfg),
            mcfg,
            out_dir / "demo_hubert_legacy.pt",
            problems=LEGACY_PROBLEMS,
            args_style=True,
        )
    model = fairseq_legacy.load(hubert)[0]  # as the stage reads it (its pos_conv weight norm converted)
    feats = {
        k: [f.numpy() for f in dense_features(model, wavs, layer, normalize=False)]
        for k, wavs in criterion_audio(truth_path).items()
    }
    km, criterion = fit_kmeans(feats, n_units, seed, min_gap, max_fits)
    km_path = out_dir / "demo_km.bin"
    save_model(km_path, lambda path: joblib.dump(km, path))
    tiny_vocoder(out_dir / "demo_vocoder.pt", out_dir / "demo_vocoder.json", n_units, seed)
    paths = {
        "hubert": str(hubert),
        "kmeans": str(km_path),
        "vocoder": str(out_dir / "demo_vocoder.pt"),
        "vocoder_config": str(out_dir / "demo_vocoder.json"),
    }
    criterion["build_seconds"] = round(time.monotonic() - t0, 1)
    log.info("demo S2S models (%d units, layer %d): %s", n_units, layer, paths)
    log.info("demo S2S criterion met: %s", json.dumps(criterion))
    return paths
