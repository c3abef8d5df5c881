"""Tiny NeMo ASR models of every class the ASR stage supports, built from code.

Test support, shared by any test that needs a real ``.nemo`` file: each model
is a real NeMo class with random weights (a one-layer Conformer encoder with
depthwise-striding subsampling), its tokenizers trained here with the real
SentencePiece trainer on a few sentences, and saved with NeMo's own
``save_to``. They load through ``speechprep.asr.stage.load_model`` and transcribe
through NeMo's ``transcribe()``; their output text is meaningless.

    CTC       EncDecCTCModelBPE
    RNNT      EncDecRNNTBPEModel
    TDT       EncDecRNNTBPEModel with the TDT loss and decoding
    TDT char  EncDecRNNTModel (a character vocabulary) with the TDT loss and decoding
    hybrid    EncDecHybridRNNTCTCBPEModel
    canary    EncDecMultiTaskModel, canary-1 prompt format (no prompt defaults)
    canary2   EncDecMultiTaskModel, canary-2 prompt format (special-token prompt
              defaults, as canary-1b-flash and later ship)

The AED (canary) models use a CanaryTokenizer: an aggregate of a special-token
SentencePiece model and one SentencePiece model per language (``LANGUAGES``).
"""

from __future__ import annotations

import json
from pathlib import Path

from speechprep.io.model_archive import save_nemo

REPO = Path(__file__).resolve().parents[2]
KINDS = ("ctc", "rnnt", "tdt", "tdt_char", "hybrid", "canary", "canary2")
# the character vocabulary of ``tdt_char``: the letters, the space and the apostrophe, as
# NeMo's character models list them (the blank is not in it)
CHARS = [" ", *"abcdefghijklmnopqrstuvwxyz", "'"]
LANGUAGES = ("en", "de")
FEATURES = 64
HIDDEN = 32
TDT_DURATIONS = [0, 1, 2, 3, 4]

GERMAN = [
    "die katze sitzt auf der matte",
    "ein roter bus faehrt in die stadt",
    "der hund spielt im garten",
    "wir trinken heute tee am fenster",
    "das wetter ist kalt und nass",
    "meine schwester liest ein buch",
    "der zug kommt um acht uhr an",
    "bitte schliess die tuer leise",
]


def english() -> list[str]:
    truth = json.loads((REPO / "resources" / "demo" / "truth.json").read_text(encoding="utf-8"))
    return sorted({sp["text"] for info in truth["files"].values() for sp in info.get("speech", []) if sp.get("text")})


def sentencepiece(lines: list[str], out_dir: Path, vocab_size: int) -> Path:
    """A SentencePiece tokenizer dir (tokenizer.model, tokenizer.vocab, vocab.txt)."""
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import create_spt_model

    out_dir.mkdir(parents=True, exist_ok=True)
    text = out_dir / "text.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    create_spt_model(
        str(text),
        vocab_size=vocab_size,
        sample_size=-1,
        do_lower_case=True,
        tokenizer_type="bpe",
        output_dir=str(out_dir),
    )
    return out_dir


def special_tokenizer(out_dir: Path, canary2: bool) -> Path:
    """The ``spl_tokens`` SentencePiece model of a CanaryTokenizer."""
    from nemo.collections.common.tokenizers.canary_tokenizer import CanaryTokenizer

    tokens = ["transcribe", "translate", *LANGUAGES]
    if canary2:
        tokens += [
            "startofcontext",
            "emo:undefined",
            "emo:neutral",
            "emo:angry",
            "emo:happy",
            "emo:sad",
            "itn",
            "noitn",
            "timestamp",
            "notimestamp",
            "diarize",
            "nodiarize",
        ]
    CanaryTokenizer.build_special_tokenizer(tokens, out_dir, force_rebuild=False)
    return out_dir


def preprocessor() -> dict:
    return {
        "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
        "sample_rate": 16000,
        "features": FEATURES,
        "window_size": 0.025,
        "window_stride": 0.01,
        "normalize": "per_feature",
        "dither": 0.0,
        "pad_to": 0,
    }


def encoder() -> dict:
    return {
        "_target_": "nemo.collections.asr.modules.ConformerEncoder",
        "feat_in": FEATURES,
        "n_layers": 1,
        "d_model": HIDDEN,
        "subsampling": "dw_striding",
        "subsampling_factor": 4,
        "subsampling_conv_channels": 16,
        "ff_expansion_factor": 2,
        "self_attention_model": "rel_pos",
        "n_heads": 2,
        "conv_kernel_size": 9,
        "dropout": 0.0,
        "dropout_pre_encoder": 0.0,
        "dropout_emb": 0.0,
        "dropout_att": 0.0,
    }


def ctc_decoder() -> dict:
    return {
        "_target_": "nemo.collections.asr.modules.ConvASRDecoder",
        "feat_in": HIDDEN,
        "num_classes": -1,
        "vocabulary": [],
    }


def transducer(tdt: bool) -> dict:
    """Decoder, joint, loss and decoding of an RNNT (or TDT) model."""
    joint = {
        "_target_": "nemo.collections.asr.modules.RNNTJoint",
        "fuse_loss_wer": False,
        "jointnet": {"joint_hidden": HIDDEN, "activation": "relu", "dropout": 0.0},
    }
    loss = {"loss_name": "default"}
    decoding = {"strategy": "greedy_batch", "greedy": {"max_symbols": 5}}
    if tdt:
        joint["num_extra_outputs"] = len(TDT_DURATIONS)
        loss = {"loss_name": "tdt", "tdt_kwargs": {"durations": TDT_DURATIONS, "sigma": 0.02, "omega": 0.1}}
        decoding |= {"model_type": "tdt", "durations": TDT_DURATIONS}
    return {
        "model_defaults": {"enc_hidden": HIDDEN, "pred_hidden": HIDDEN},
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "blank_as_pad": True,
            "prednet": {"pred_hidden": HIDDEN, "pred_rnn_layers": 1, "dropout": 0.0},
        },
        "joint": joint,
        "loss": loss,
        "decoding": decoding,
    }


def aed(tokenizer_dirs: dict[str, Path], canary2: bool) -> dict:
    """An EncDecMultiTaskModel config: Conformer encoder, transformer decoder, CanaryTokenizer."""
    cfg = {
        "prompt_format": "canary2" if canary2 else "canary",
        "model_defaults": {"asr_enc_hidden": HIDDEN, "lm_enc_hidden": HIDDEN, "lm_dec_hidden": HIDDEN},
        "transf_decoder": {
            "_target_": "nemo.collections.asr.modules.transformer.get_nemo_transformer",
            "model_name": None,
            "pretrained": False,
            "encoder": None,
            "pre_ln_final_layer_norm": True,
            "config_dict": {
                "max_sequence_length": 128,
                "num_token_types": 0,
                "hidden_size": HIDDEN,
                "inner_size": 2 * HIDDEN,
                "num_layers": 1,
                "num_attention_heads": 2,
                "pre_ln": True,
                "vocab_size": None,
            },
        },
        "head": {
            "_target_": "nemo.collections.asr.parts.submodules.token_classifier.TokenClassifier",
            "num_layers": 1,
            "activation": "relu",
            "log_softmax": True,
            "hidden_size": HIDDEN,
            "num_classes": None,
        },
        "decoding": {"strategy": "beam", "beam": {"beam_size": 1, "max_generation_delta": 8}},
        "loss": {
            "_target_": "nemo.collections.common.losses.smoothed_cross_entropy.SmoothedCrossEntropyLoss",
            "label_smoothing": 0.0,
        },
        "tokenizer": {
            "dir": None,
            "type": "agg",
            "langs": {lang: {"dir": str(d), "type": "bpe"} for lang, d in tokenizer_dirs.items()},
            "custom_tokenizer": {
                "_target_": "nemo.collections.common.tokenizers.canary_tokenizer.CanaryTokenizer",
                "tokenizers": None,
            },
        },
    }
    if canary2:
        # as canary-1b-flash ships them: every slot a special token
        cfg["prompt_defaults"] = [
            {
                "role": "user",
                "slots": {
                    "decodercontext": "",
                    "source_lang": "<|en|>",
                    "target_lang": "<|en|>",
                    "emotion": "<|emo:undefined|>",
                    "pnc": "<|pnc|>",
                    "itn": "<|noitn|>",
                    "diarize": "<|nodiarize|>",
                    "timestamp": "<|notimestamp|>",
                },
            }
        ]
    return cfg


def build(kind: str, out_dir: Path) -> Path:
    """``out_dir/<kind>.nemo``: a tiny random-weight model of ``kind`` (one of ``KINDS``)."""
    import torch
    from nemo.collections.asr import models
    from omegaconf import OmegaConf

    torch.manual_seed(0)
    work = out_dir / f"{kind}-build"
    cfg = {"sample_rate": 16000, "preprocessor": preprocessor(), "encoder": encoder()}
    if kind in ("canary", "canary2"):
        from nemo.utils.app_state import AppState

        # NeMo's global AppState keeps the path of the last model restored in this process; an AED
        # model built from code would look for external timestamp-model files in it
        AppState().model_restore_path = None
        dirs = {
            "spl_tokens": special_tokenizer(work / "spl_tokens", canary2=kind == "canary2"),
            "en": sentencepiece(english(), work / "en", 48),
            "de": sentencepiece(GERMAN, work / "de", 48),
        }
        cfg |= aed(dirs, canary2=kind == "canary2")
        cls = models.EncDecMultiTaskModel
    elif kind == "tdt_char":
        cfg["labels"] = CHARS
        cfg |= transducer(tdt=True)
        cls = models.EncDecRNNTModel
    else:
        cfg["tokenizer"] = {"dir": str(sentencepiece(english(), work / "en", 48)), "type": "bpe"}
        if kind == "ctc":
            cfg |= {"decoder": ctc_decoder(), "decoding": {"strategy": "greedy"}}
            cls = models.EncDecCTCModelBPE
        elif kind in ("rnnt", "tdt"):
            cfg |= transducer(tdt=kind == "tdt")
            cls = models.EncDecRNNTBPEModel
        elif kind == "hybrid":
            cfg |= transducer(tdt=False)
            cfg["aux_ctc"] = {
                "ctc_loss_weight": 0.3,
                "use_cer": False,
                "ctc_reduction": "mean_batch",
                "decoder": ctc_decoder(),
                "decoding": {"strategy": "greedy"},
            }
            cls = models.EncDecHybridRNNTCTCBPEModel
        else:
            raise ValueError(f"unknown model kind {kind!r} (known: {', '.join(KINDS)})")
    model = cls(cfg=OmegaConf.create(cfg))
    model.eval()
    if kind == "tdt_char":
        # random weights emit two or three letters; a trained English model emits the whole
        # alphabet, "y" and the apostrophe (the vocabulary's tail) included: lean towards those
        with torch.no_grad():
            for c in "y'":
                model.joint.joint_net[-1].bias[CHARS.index(c)] += 2.0
    return save_nemo(model, out_dir / f"{kind}.nemo")
