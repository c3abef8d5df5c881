"""Tiny NeMo speaker models built from code (no download): NOT real models, random weights.

Each is a real NeMo class, laid out as NeMo's own shipped configs lay it out
(``examples/speaker_tasks/recognition/conf/titanet-large.yaml``, ``ecapa_tdnn.yaml``,
``examples/speaker_tasks/diarization/conf/neural_diarizer/sortformer_diarizer_hybrid_loss_4spk-v1.yaml``)
with the same targets and module layout at tiny sizes, seeded, and saved with
NeMo's own ``save_to``, so that the code that loads a lab's speaker models runs
end to end offline. Their embeddings and speaker probabilities are meaningless.

    titanet.nemo     EncDecSpeakerLabelModel: ConvASREncoder of separable
                     squeeze-excite blocks, SpeakerDecoder with attention pooling
    ecapa.nemo       EncDecSpeakerLabelModel: ECAPAEncoder, SpeakerDecoder with
                     attention pooling (as ``ecapa_tdnn.yaml``)
    sortformer.nemo  SortformerEncLabelModel, 4 speakers: Conformer encoder,
                     Transformer encoder, Sortformer modules

Every model reads 80-band log-mel features of 16 kHz audio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..io.model_archive import save_nemo

SAMPLE_RATE = 16000
N_MELS = 80
SEED = 0
# embedding sizes (the real models' are 192): two sizes, so that no code can assume one
TITANET_EMB = 32
ECAPA_EMB = 24
NUM_CLASSES = 8  # speakers of the (never run) training set
SORTFORMER_SPEAKERS = 4


def preprocessor(**extra: Any) -> dict:
    """The speaker models' preprocessor, as the shipped configs have it (80 mels, 25/10 ms, hann, n_fft 512)."""
    return {
        "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
        "normalize": "per_feature",
        "window_size": 0.025,
        "sample_rate": SAMPLE_RATE,
        "window_stride": 0.01,
        "window": "hann",
        "features": N_MELS,
        "n_fft": 512,
        "frame_splicing": 1,
        "dither": 0.00001,  # applied in training only
        **extra,
    }


def spec_augment() -> dict:
    return {
        "_target_": "nemo.collections.asr.modules.SpectrogramAugmentation",
        "freq_masks": 3,
        "freq_width": 4,
        "time_masks": 5,
        "time_width": 0.03,
    }


def angular_loss() -> dict:
    return {"_target_": "nemo.collections.asr.losses.angularloss.AngularSoftmaxLoss", "scale": 30, "margin": 0.2}


def titanet_config(filters: int = 16, out_filters: int = 48, emb: int = TITANET_EMB) -> dict:
    """titanet-large.yaml's layout: a prolog block, two residual mega-blocks (kernels 7
    and 11; the real one has three of three sub-blocks), an epilog block, every block
    separable with squeeze-excite over the whole clip; attention pooling."""

    def block(kernel: int, n_filters: int, residual: bool) -> dict:
        return {
            "filters": n_filters,
            "repeat": 2 if residual else 1,
            "kernel": [kernel],
            "stride": [1],
            "dilation": [1],
            "dropout": 0.0,
            "residual": residual,
            "separable": True,
            "se": True,
            "se_context_size": -1,
        }

    return {
        "sample_rate": SAMPLE_RATE,
        "preprocessor": preprocessor(),
        "spec_augment": spec_augment(),
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConvASREncoder",
            "feat_in": N_MELS,
            "activation": "relu",
            "conv_mask": True,
            "jasper": [
                block(3, filters, False),
                block(7, filters, True),
                block(11, filters, True),
                block(1, out_filters, False),
            ],
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.SpeakerDecoder",
            "feat_in": out_filters,
            "num_classes": NUM_CLASSES,
            "pool_mode": "attention",
            "emb_sizes": emb,
            "attention_channels": 16,
        },
        "loss": angular_loss(),
    }


def ecapa_config(emb: int = ECAPA_EMB) -> dict:
    """ecapa_tdnn.yaml's layout (a TDNN, three SE-TDNN blocks, feature aggregation;
    kernels 5,3,3,3,1) with 16 channels (48 aggregated), group scale 4; attention pooling."""
    return {
        "sample_rate": SAMPLE_RATE,
        "preprocessor": preprocessor(stft_conv=False),
        "spec_augment": spec_augment(),
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ECAPAEncoder",
            "feat_in": N_MELS,
            "filters": [16, 16, 16, 16, 48],
            "kernel_sizes": [5, 3, 3, 3, 1],
            "dilations": [1, 1, 1, 1, 1],
            "scale": 4,
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.SpeakerDecoder",
            "feat_in": 48,
            "num_classes": NUM_CLASSES,
            "pool_mode": "attention",
            "emb_sizes": emb,
            "attention_channels": 16,
        },
        "loss": angular_loss(),
    }


def conformer_config(d_model: int) -> dict:
    """The Sortformer's FastConformer encoder: one layer, 8x depthwise-striding subsampling."""
    return {
        "_target_": "nemo.collections.asr.modules.ConformerEncoder",
        "feat_in": N_MELS,
        "feat_out": -1,
        "n_layers": 1,
        "d_model": d_model,
        "subsampling": "dw_striding",
        "subsampling_factor": 8,
        "subsampling_conv_channels": 16,
        "causal_downsampling": False,
        "ff_expansion_factor": 2,
        "self_attention_model": "rel_pos",
        "n_heads": 2,
        "att_context_size": [-1, -1],
        "att_context_style": "regular",
        "xscaling": True,
        "untie_biases": True,
        "pos_emb_max_len": 5000,
        "conv_kernel_size": 9,
        "conv_norm_type": "batch_norm",
        "conv_context_size": None,
        "dropout": 0.1,
        "dropout_pre_encoder": 0.1,
        "dropout_emb": 0.0,
        "dropout_att": 0.1,
        "stochastic_depth_drop_prob": 0.0,
        "stochastic_depth_mode": "linear",
        "stochastic_depth_start_layer": 1,
    }


def sortformer_config(fc_d_model: int = 32, tf_d_model: int = 16) -> dict:
    """sortformer_diarizer_hybrid_loss_4spk-v1.yaml's layout (offline Sortformer, 4
    speakers, 80 ms frames): one Conformer layer and one Transformer layer, narrow."""
    return {
        "sample_rate": SAMPLE_RATE,
        "pil_weight": 0.5,
        "ats_weight": 0.5,
        "max_num_of_spks": SORTFORMER_SPEAKERS,
        "model_defaults": {"fc_d_model": fc_d_model, "tf_d_model": tf_d_model},
        "preprocessor": preprocessor(),
        "sortformer_modules": {
            "_target_": "nemo.collections.asr.modules.sortformer_modules.SortformerModules",
            "num_spks": SORTFORMER_SPEAKERS,
            "dropout_rate": 0.5,
            "fc_d_model": fc_d_model,
            "tf_d_model": tf_d_model,
        },
        "encoder": conformer_config(fc_d_model),
        "transformer_encoder": {
            "_target_": "nemo.collections.asr.modules.transformer.transformer_encoders.TransformerEncoder",
            "num_layers": 1,
            "hidden_size": tf_d_model,
            "inner_size": 2 * tf_d_model,
            "num_attention_heads": 2,
            "attn_score_dropout": 0.5,
            "attn_layer_dropout": 0.5,
            "ffn_dropout": 0.5,
            "hidden_act": "relu",
            "pre_ln": False,
            "pre_ln_final_layer_norm": True,
        },
        "loss": {"_target_": "nemo.collections.asr.losses.bce_loss.BCELoss", "weight": None, "reduction": "mean"},
    }


def ambernet_config() -> dict:
    """langid_ambernet.yaml's layout (TitaNet's encoder, a class per language, cross-entropy),
    tiny, with ``LANGUAGES`` as its classes."""
    cfg = titanet_config()
    cfg["decoder"]["num_classes"] = len(LANGUAGES)
    cfg["loss"] = {"_target_": "nemo.collections.common.losses.cross_entropy.CrossEntropyLoss"}
    return cfg


LANGUAGES = ["en", "fr", "de", "it"]  # the tiny language-ID model's classes
# name: (class, config, the languages its train_ds names: set once built, as a trained model keeps them)
MODELS = {
    "titanet": ("EncDecSpeakerLabelModel", titanet_config, None),
    "ecapa": ("EncDecSpeakerLabelModel", ecapa_config, None),
    "ambernet": ("EncDecSpeakerLabelModel", ambernet_config, LANGUAGES),
    "sortformer": ("SortformerEncLabelModel", sortformer_config, None),
}


def build_one(name: str, out: Path, seed: int = SEED) -> Path:
    """``out``: the tiny model ``name`` (one of ``MODELS``), weights drawn from ``seed``,
    written atomically (a temporary name beside it, then renamed)."""
    import torch
    from nemo.collections.asr import models
    from omegaconf import OmegaConf, open_dict

    cls_name, config, labels = MODELS[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(models, cls_name)(cfg=OmegaConf.create(config()))
    model.eval()
    if labels:  # set after construction: a train_ds at construction sets up a data loader
        with open_dict(model._cfg):
            model._cfg.train_ds = {"manifest_filepath": None, "labels": labels, "sample_rate": SAMPLE_RATE}
    return save_nemo(model, out)


def one_voice_sortformer(out: Path, seed: int = SEED) -> Path:
    """``out``: the tiny Sortformer made to hear one voice wherever there is sound: its output
    layer's weights zeroed, its biases +4 for the first speaker and -4 for the others
    (probabilities 0.98 and 0.02), what a trained model gives for a file of one speaker. For
    workflow tests of files of one voice, whose curation would drop a random model's overlaps."""
    import torch
    from nemo.collections.asr.models import SortformerEncLabelModel

    build_one("sortformer", out, seed)
    model = SortformerEncLabelModel.restore_from(str(out), map_location="cpu").eval()
    layer = model.sortformer_modules.single_hidden_to_spks
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.fill_(-4.0)
        layer.bias[0] = 4.0
    return save_nemo(model, out)


def build_tiny(out_dir: Path, seed: int = SEED) -> dict[str, Path]:
    """``out_dir/{titanet,ecapa,sortformer}.nemo``; returns their paths by name."""
    out_dir = Path(out_dir)
    return {name: build_one(name, out_dir / f"{name}.nemo", seed) for name in MODELS}
