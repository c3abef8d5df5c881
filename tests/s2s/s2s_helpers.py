"""Helpers of the S2S tests: fixtures written by a 2021 stack (legacy_writer.py in
.venvs/legacy_fixtures) and hostile pickles."""

import argparse
import os
import pickle
import subprocess
import types
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("legacy_writer.py")


def run_writer(python, *args) -> str:
    p = subprocess.run(
        [str(python), str(WRITER), *map(str, args)], capture_output=True, text=True, encoding="utf-8", cwd=WRITER.parent
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def tagged(obj):
    """What an old trainer pickled as an object -> plain data tagged for legacy_writer.py."""
    from fairseq.data.dictionary import Dictionary
    from omegaconf import DictConfig, OmegaConf

    if isinstance(obj, argparse.Namespace):
        return {"__legacy__": "namespace", "value": {k: tagged(v) for k, v in vars(obj).items()}}
    if isinstance(obj, DictConfig):
        return {"__legacy__": "dictconfig", "value": OmegaConf.to_container(obj, resolve=False)}
    if isinstance(obj, Dictionary):
        return {"__legacy__": "dictionary", "value": dict(vars(obj))}
    if isinstance(obj, (np.ndarray, np.generic)):
        return {"__legacy__": "numpy", "value": obj.tolist(), "dtype": obj.dtype.str}
    if isinstance(obj, dict):
        new = {k: tagged(v) for k, v in obj.items()}
        return obj if all(new[k] is obj[k] for k in obj) else new  # keeps a state_dict's _metadata
    if isinstance(obj, (list, tuple)):
        new = [tagged(v) for v in obj]
        return obj if all(a is b for a, b in zip(new, obj)) else type(obj)(new)
    return obj


def checkpoint_naming(path: Path, full_name: str, legacy_format: bool = False) -> Path:
    """A torch checkpoint whose pickle calls ``full_name()``, whatever it names: a
    pickler that writes the GLOBAL as given (no module needs to hold it)."""
    module, _, name = full_name.rpartition(".")
    target = type("Target", (), {})

    class Pickler(pickle._Pickler):
        def save_global(self, obj, name_=None):
            if obj is target:
                self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode())
            else:
                super().save_global(obj, name_)

    class Call:
        def __reduce__(self):
            return target, ()

    pickle_module = types.SimpleNamespace(__name__="pickle", Pickler=Pickler, dump=pickle.dump)
    torch.save(
        {"model": {}, "args": None, "cfg": {}, "x": Call()},
        path,
        pickle_module=pickle_module,
        _use_new_zipfile_serialization=not legacy_format,
    )
    return path


class Hostile:
    """Unpickling it runs ``touch <marker>``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def tiny_wav2vec_ctc(tmp: Path):
    """``(model, state)``: a small fine-tuned wav2vec 2.0 CTC model built by fairseq's own
    ``audio_finetuning`` task and ``wav2vec_ctc`` model (nested ``w2v_args``, letter
    labels), and its checkpoint as a 2021 trainer left it: a pickled DictConfig, the
    target ``Dictionary`` in ``task_state``, numpy values, pos_conv g over dim 0, and
    ``task.data`` naming the training data directory, which is gone (another machine)."""
    import dataclasses
    import shutil

    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models.wav2vec.wav2vec2 import Wav2Vec2Config
    from fairseq.models.wav2vec.wav2vec2_asr import Wav2Vec2CtcConfig
    from fairseq.tasks.audio_finetuning import AudioFinetuningConfig, AudioFinetuningTask
    from fairseq.tasks.audio_pretraining import AudioPretrainingConfig
    from omegaconf import OmegaConf, open_dict

    from speechprep.demo.s2s_models import CONV_LAYERS, legacy_pos_conv

    data = tmp / "training_data"
    data.mkdir(parents=True)
    (data / "dict.ltr.txt").write_text(
        "".join(f"{c} {900 - 30 * i}\n" for i, c in enumerate("|ETAONIHSRDLUMWCFGYPBVKXJQZ'")), encoding="utf-8"
    )
    torch.manual_seed(0)
    w2v = Wav2Vec2Config(
        extractor_mode="default",
        encoder_layers=2,
        encoder_embed_dim=64,
        encoder_ffn_embed_dim=128,
        encoder_attention_heads=2,
        conv_feature_layers=CONV_LAYERS,
        conv_pos=16,
        conv_pos_groups=4,
        final_dim=32,
        latent_vars=8,
        latent_groups=2,
    )
    groups = dataclasses.asdict(FairseqConfig())  # every config group, as a trainer's cfg has them
    pretraining = OmegaConf.to_container(
        OmegaConf.create(
            {  # resolved, as fairseq saved w2v_args
                **groups,
                "model": {**dataclasses.asdict(w2v), "_name": "wav2vec2"},
                "task": {
                    **dataclasses.asdict(AudioPretrainingConfig(data="/data/librispeech/pretraining")),
                    "_name": "audio_pretraining",
                },
            }
        ),
        resolve=True,
        enum_to_str=True,
    )
    task_cfg = AudioFinetuningConfig(data=str(data), labels="ltr", normalize=False)
    task = AudioFinetuningTask.setup_task(task_cfg)
    model_cfg = OmegaConf.structured(
        Wav2Vec2CtcConfig(
            w2v_path="/checkpoints/wav2vec_small.pt",
            w2v_args=pretraining,
            normalize=False,
            data=str(data),
            apply_mask=False,
            final_dropout=0.0,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
        )
    )
    with open_dict(model_cfg):
        model_cfg._name = "wav2vec_ctc"
    model = task.build_model(model_cfg).eval()
    cfg = OmegaConf.to_container(
        OmegaConf.create(
            {
                **groups,
                "task": {**dataclasses.asdict(task_cfg), "_name": "audio_finetuning"},
                "model": OmegaConf.to_container(model_cfg, enum_to_str=True),
                "criterion": {"_name": "ctc", "zero_infinity": True},
            }
        ),
        resolve=True,
        enum_to_str=True,
    )
    state = {
        "cfg": OmegaConf.create(cfg),
        "args": None,
        "model": legacy_pos_conv(model.state_dict(), pre="w2v_encoder.w2v_model.encoder.pos_conv.0"),
        "task_state": {"target_dictionary": task.target_dictionary},
        "optimizer_history": [
            {"criterion_name": "CtcCriterion", "optimizer_name": "adam", "lr_scheduler_state": {}, "num_updates": 20000}
        ],
        "extra_state": {"train_iterator": {"epoch": 80}, "best_loss": np.float64(0.0421)},
    }
    shutil.rmtree(data)
    return model, state


def tiny_wav2vec_ctc_2020(tmp: Path):
    """``(model, state)``: :func:`tiny_wav2vec_ctc`'s model in a checkpoint as a 2020 argparse
    trainer left it: ``args`` a flat ``Namespace`` made by fairseq's own command-line parser
    (``fairseq-train ... --arch wav2vec_ctc``) whose ``w2v_args`` is the pretraining run's own
    flat ``Namespace`` (``--arch wav2vec2``), as fine-tuning copied it from the pretrained
    checkpoint; no ``cfg``."""
    from fairseq import options

    model, state = tiny_wav2vec_ctc(tmp)
    cfg = state["cfg"]
    w2v, data = cfg["model"]["w2v_args"]["model"], cfg["task"]["data"]

    def flat(*argv: str):
        return options.parse_args_and_arch(options.get_training_parser(), input_args=[*argv])

    shape = [
        "--encoder-layers", str(w2v["encoder_layers"]),
        "--encoder-embed-dim", str(w2v["encoder_embed_dim"]),
        "--encoder-ffn-embed-dim", str(w2v["encoder_ffn_embed_dim"]),
        "--encoder-attention-heads", str(w2v["encoder_attention_heads"]),
        "--conv-feature-layers", w2v["conv_feature_layers"],
        "--conv-pos", str(w2v["conv_pos"]),
        "--conv-pos-groups", str(w2v["conv_pos_groups"]),
        "--final-dim", str(w2v["final_dim"]),
        "--latent-vars", str(w2v["latent_vars"]),
        "--latent-groups", str(w2v["latent_groups"]),
    ]  # fmt: skip
    pretraining = flat("/data/librispeech/pretraining", "--task", "audio_pretraining", "--arch", "wav2vec2",
                       "--criterion", "wav2vec", "--no-progress-bar", *shape)  # fmt: skip
    args = flat(data, "--task", "audio_finetuning", "--labels", "ltr", "--arch", "wav2vec_ctc",
                "--w2v-path", "/checkpoints/wav2vec_small.pt", "--criterion", "ctc",
                "--final-dropout", "0", "--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0",
                "--no-progress-bar")  # fmt: skip
    args.w2v_args = pretraining
    return model, {**state, "cfg": None, "args": args}
