"""NeMo models at the real models' architecture and size, random weights: NOT real models.

For measuring what a lab's models cost (bench/workflow/real_size.py): random weights in the
real architecture and size cost the same FLOPs and memory as the trained ones.
NeMo 3.0's wheel ships no example configs (``find .venvs/asr -name "*fastconformer*"``
finds none), so each config below is written from the published model's hyperparameters
(its ``model_config.yaml`` on the model card), as NeMo's own classes take them:

    parakeet-tdt-0.6b     EncDecRNNTBPEModel, TDT: parakeet-tdt-0.6b-v2's FastConformer
                          (24 layers, d_model 1024, 8 heads, 8x dw_striding subsampling,
                          128 mels), a 2-layer LSTM prediction net and joint of 640,
                          durations [0, 1, 2, 3, 4], 1024 SentencePiece tokens
    fastconformer-ctc-large  EncDecCTCModelBPE: stt_en_fastconformer_ctc_large's
                          FastConformer (17 layers, d_model 512, 8 heads, 80 mels), 1024 tokens
    titanet-l             EncDecSpeakerLabelModel: titanet-large.yaml (1024 channels, three
                          mega-blocks of three, kernels 7/11/15, 3072-channel epilog, 192-d
                          embedding, attention pooling, 16681 training speakers)
    canary-1b             EncDecMultiTaskModel (AED): canary-1b's layout (a 24-layer
                          FastConformer of 1024, a 24-layer Transformer decoder of 1024,
                          canary-1 prompts, a CanaryTokenizer of 4 x 1024 tokens + specials)
    sortformer            SortformerEncLabelModel: diar_sortformer_4spk-v1's sizes (an
                          18-layer FastConformer of d_model 512, an 18-layer Transformer
                          of 192, 4 speakers)

Each tokenizer is a SentencePiece model trained here on the repository's own docs
(its pieces are English words of this project: the vocabulary's size, not its pieces,
is what costs). Seeded; written atomically.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..io.model_archive import save_nemo
from . import speaker_nemo

SEED = 0
VOCAB = 1024
REPO = Path(__file__).resolve().parents[2]


def preprocessor(features: int) -> dict:
    """FastConformer's preprocessor (25/10 ms, hann, n_fft 512, per-feature normalisation)."""
    return {**speaker_nemo.preprocessor(features=features, pad_to=0), "dither": 0.0}


def fastconformer(feat_in: int, n_layers: int, d_model: int, heads: int = 8) -> dict:
    """A FastConformer encoder: 8x depthwise-striding subsampling with 256 channels, FF x4,
    relative positions, kernel 9, batch norm (NeMo's fast-conformer configs)."""
    cfg = speaker_nemo.conformer_config(d_model)
    cfg.update(
        feat_in=feat_in,
        n_layers=n_layers,
        n_heads=heads,
        subsampling_conv_channels=256,
        ff_expansion_factor=4,
    )
    return cfg


def tokenizer(out_dir: Path, vocab: int = VOCAB) -> Path:
    """A ``vocab``-token SentencePiece (BPE) model trained on the repository's docs: ``out_dir``
    holds ``tokenizer.model``, ``tokenizer.vocab`` and ``vocab.txt`` (NeMo's layout)."""
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import create_spt_model

    text = out_dir / "text.txt"
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
    text.write_text("\n".join(p.read_text(encoding="utf-8") for p in sources).lower(), encoding="utf-8")
    create_spt_model(
        str(text), vocab, sample_size=-1, do_lower_case=True, tokenizer_type="bpe", output_dir=str(out_dir)
    )
    return out_dir


def tdt_config(work: Path) -> dict:
    """parakeet-tdt-0.6b-v2's layout (module docstring); its tokenizer built in ``work``."""
    tok_dir = tokenizer(work / "tokenizer")
    durations = [0, 1, 2, 3, 4]
    return {
        "sample_rate": 16000,
        "model_defaults": {"enc_hidden": 1024, "pred_hidden": 640, "joint_hidden": 640, "tdt_durations": durations},
        "tokenizer": {"dir": str(tok_dir), "type": "bpe"},
        "preprocessor": preprocessor(128),
        "encoder": fastconformer(128, 24, 1024),
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "normalization_mode": None,
            "random_state_sampling": False,
            "blank_as_pad": True,
            "prednet": {"pred_hidden": 640, "pred_rnn_layers": 2, "t_max": None, "dropout": 0.2},
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "log_softmax": None,
            "preserve_memory": False,
            "fuse_loss_wer": False,
            "num_extra_outputs": len(durations),
            "jointnet": {
                "joint_hidden": 640,
                "activation": "relu",
                "dropout": 0.2,
                "encoder_hidden": 1024,
                "pred_hidden": 640,
            },
        },
        "decoding": {
            "strategy": "greedy_batch",
            "model_type": "tdt",
            "durations": durations,
            "greedy": {"max_symbols": 10},
        },
        "loss": {
            "loss_name": "tdt",
            "tdt_kwargs": {"fastemit_lambda": 0.0, "clamp": -1.0, "durations": durations, "sigma": 0.02, "omega": 0.1},
        },
    }


def ctc_config(work: Path) -> dict:
    """stt_en_fastconformer_ctc_large's layout (module docstring); its tokenizer built in ``work``."""
    tok_dir = tokenizer(work / "tokenizer")
    return {
        "sample_rate": 16000,
        "tokenizer": {"dir": str(tok_dir), "type": "bpe"},
        "preprocessor": preprocessor(80),
        "encoder": fastconformer(80, 17, 512),
        "decoder": {
            "_target_": "nemo.collections.asr.modules.ConvASRDecoder",
            "feat_in": 512,
            "num_classes": -1,
            "vocabulary": [],
        },
        "decoding": {"strategy": "greedy"},
    }


def titanet_l_config(work: Path) -> dict:
    """titanet-large.yaml (module docstring)."""
    cfg = speaker_nemo.titanet_config(filters=1024, out_filters=3072, emb=192)
    blocks = cfg["encoder"]["jasper"]
    blocks[1:3] = [dict(blocks[1], kernel=[k], repeat=3) for k in (7, 11, 15)]
    cfg["decoder"].update(num_classes=16681, attention_channels=128)
    return cfg


def sortformer_config(work: Path) -> dict:
    """diar_sortformer_4spk-v1's sizes (module docstring)."""
    cfg = speaker_nemo.sortformer_config(fc_d_model=512, tf_d_model=192)
    cfg["encoder"] = fastconformer(80, 18, 512)
    cfg["transformer_encoder"].update(num_layers=18, inner_size=768, num_attention_heads=8)
    return cfg


CANARY_LANGUAGES = ("en", "de", "es", "fr")


def canary_tokenizer(work: Path) -> dict:
    """A CanaryTokenizer's config: canary-1b's special tokens, and a 1024-token SentencePiece
    model per language (each trained on the docs: the sizes are canary-1b's, not the pieces)."""
    from nemo.collections.common.tokenizers.canary_tokenizer import CanaryTokenizer

    special = work / "spl_tokens"
    CanaryTokenizer.build_special_tokenizer(["transcribe", "translate", *CANARY_LANGUAGES], special)
    langs = {"spl_tokens": {"dir": str(special), "type": "bpe"}}
    shared = tokenizer(work / "lang")
    langs |= {lang: {"dir": str(shared), "type": "bpe"} for lang in CANARY_LANGUAGES}
    return {
        "dir": None,
        "type": "agg",
        "langs": langs,
        "custom_tokenizer": {
            "_target_": "nemo.collections.common.tokenizers.canary_tokenizer.CanaryTokenizer",
            "tokenizers": None,
        },
    }


def canary_config(work: Path) -> dict:
    """canary-1b's layout: a 24-layer FastConformer of d_model 1024 (128 mels), a 24-layer
    pre-LN Transformer decoder of 1024 (FFN 4096, 8 heads), canary-1 prompts."""
    from nemo.utils.app_state import AppState

    AppState().model_restore_path = None  # else the build looks for files in the last restored model
    decoder = {"max_sequence_length": 512, "num_token_types": 0, "hidden_size": 1024, "inner_size": 4096}
    decoder |= {"num_layers": 24, "num_attention_heads": 8, "pre_ln": True, "vocab_size": None}
    return {
        "sample_rate": 16000,
        "prompt_format": "canary",
        "model_defaults": {"asr_enc_hidden": 1024, "lm_enc_hidden": 1024, "lm_dec_hidden": 1024},
        "preprocessor": preprocessor(128),
        "encoder": fastconformer(128, 24, 1024),
        "transf_decoder": {
            "_target_": "nemo.collections.asr.modules.transformer.get_nemo_transformer",
            "model_name": None,
            "pretrained": False,
            "encoder": None,
            "pre_ln_final_layer_norm": True,
            "config_dict": decoder,
        },
        "head": {
            "_target_": "nemo.collections.asr.parts.submodules.token_classifier.TokenClassifier",
            "num_layers": 1,
            "activation": "relu",
            "log_softmax": True,
            "hidden_size": 1024,
            "num_classes": None,
        },
        "decoding": {"strategy": "beam", "beam": {"beam_size": 1, "max_generation_delta": 50}},
        "loss": {
            "_target_": "nemo.collections.common.losses.smoothed_cross_entropy.SmoothedCrossEntropyLoss",
            "label_smoothing": 0.0,
        },
        "tokenizer": canary_tokenizer(work),
    }


# name: (NeMo class, config(a work directory for its tokenizers), file name)
MODELS = {
    "parakeet-tdt-0.6b": ("EncDecRNNTBPEModel", tdt_config, "parakeet_tdt_0.6b_random.nemo"),
    "fastconformer-ctc-large": ("EncDecCTCModelBPE", ctc_config, "fastconformer_ctc_large_random.nemo"),
    "canary-1b": ("EncDecMultiTaskModel", canary_config, "canary_1b_random.nemo"),
    "titanet-l": ("EncDecSpeakerLabelModel", titanet_l_config, "titanet_large_random.nemo"),
    "sortformer": ("SortformerEncLabelModel", sortformer_config, "sortformer_4spk_random.nemo"),
}


def build(name: str, out: Path, seed: int = SEED) -> Path:
    """``out``: the model ``name`` (one of ``MODELS``), weights drawn from ``seed``, written
    atomically (a temporary name beside it, then renamed)."""
    import torch
    from nemo.collections.asr import models
    from omegaconf import OmegaConf

    cls_name, config, _ = MODELS[name]
    with tempfile.TemporaryDirectory() as work, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(models, cls_name)(cfg=OmegaConf.create(config(Path(work)))).eval()
        return save_nemo(model, out)  # the tokenizer goes into the archive
