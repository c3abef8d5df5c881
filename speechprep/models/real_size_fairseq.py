"""fairseq S2S models at the real models' architecture and size, random weights: NOT real models.

Built by fairseq from its own dataclasses and task (``HubertConfig``,
``hubert_pretraining``) with the published models' settings, and saved as the
S2S stage loads them (:mod:`speechprep.s2s.fairseq_legacy`, :func:`speechprep.s2s.models.load_vocoder`):

    hubert-base    HuBERT Base (hubert_base_ls960): 12 layers of 768, FFN 3072, 12 heads,
                   group-norm conv extractor, 500 k-means labels at 50 Hz, final_dim 256
    hubert-large   HuBERT Large (hubert_large_ll60k): 24 layers of 1024, FFN 4096, 16 heads,
                   layer-norm conv extractor, pre-LN, normalised audio, final_dim 768
    hifigan-unit   the unit HiFi-GAN of fairseq's speech-to-speech examples and textlesslib
                   (hop 5*4*4*2*2 = 320 samples, 512 initial channels, resblocks 3/7/11,
                   128-d unit embeddings of 1000 units, with the duration predictor)
    kmeans-1000    a textlesslib-style k-means of 1000 units over hubert-base's layer-6 features
                   (768-d): scikit-learn's MiniBatchKMeans fitted on those features of ~260 s of
                   real calibration speech (tests/real_speech.py ``distinct_voices(12)``), so the
                   units of real speech change as a real k-means's do; needs this checkout's tests/

Each checkpoint is a fairseq ``.pt`` with its config as a dict and the task's state
(its label dictionary), as fairseq's own trainer saves it; the k-means is ``joblib.dump`` of
the estimator, as textlesslib ships it. Seeded; written atomically.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..io.model_archive import save_model

SEED = 0
N_LABELS = 500
HUBERT = {  # HubertConfig fields of the published checkpoints
    "hubert-base": dict(
        extractor_mode="default",
        encoder_layers=12,
        encoder_embed_dim=768,
        encoder_ffn_embed_dim=3072,
        encoder_attention_heads=12,
        final_dim=256,
        layer_norm_first=False,
    ),
    "hubert-large": dict(
        extractor_mode="layer_norm",
        encoder_layers=24,
        encoder_embed_dim=1024,
        encoder_ffn_embed_dim=4096,
        encoder_attention_heads=16,
        final_dim=768,
        layer_norm_first=True,
    ),
}
VOCODER = {
    "resblock": "1",
    "upsample_rates": [5, 4, 4, 2, 2],
    "upsample_kernel_sizes": [11, 8, 8, 4, 4],
    "upsample_initial_channel": 512,
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "model_in_dim": 128,
    "num_embeddings": 1000,
    "embedding_dim": 128,
    "dur_predictor_params": {
        "encoder_embed_dim": 128,
        "var_pred_hidden_dim": 128,
        "var_pred_kernel_size": 3,
        "var_pred_dropout": 0.5,
    },
}
FILES = {
    "hubert-base": "hubert_base_random.pt",
    "hubert-large": "hubert_large_random.pt",
    "hifigan-unit": "unit_hifigan_random.pt",
    "kmeans-1000": "hubert_base_random_L6_km1000.bin",
}
KMEANS = {"units": 1000, "layer": 6, "clips_per_voice": 12}  # kmeans-1000: on hubert-base, layer 6


def hubert(name: str, label_dir: Path, seed: int = SEED):
    """``(model, task, task_cfg, model_cfg)`` of HuBERT ``name``, built by fairseq."""
    import torch
    from fairseq.models.hubert.hubert import HubertConfig
    from fairseq.tasks.hubert_pretraining import HubertPretrainingConfig, HubertPretrainingTask
    from omegaconf import OmegaConf

    torch.manual_seed(seed)
    label_dir.mkdir(parents=True, exist_ok=True)
    (label_dir / "dict.km.txt").write_text("".join(f"{i} 1\n" for i in range(N_LABELS)), encoding="utf-8")
    large = name == "hubert-large"
    task_cfg = HubertPretrainingConfig(
        data=str(label_dir),
        label_dir=str(label_dir),
        labels=["km"],
        label_rate=50.0,
        sample_rate=16000,
        normalize=large,
        enable_padding=False,
        max_sample_size=250000,
    )
    task = HubertPretrainingTask.setup_task(task_cfg)
    model_cfg = HubertConfig(label_rate=50.0, **HUBERT[name])
    model_cfg._name = "hubert"
    model = task.build_model(OmegaConf.structured(model_cfg)).eval()
    return model, task, task_cfg, model_cfg


def build_hubert(name: str, out: Path, seed: int = SEED) -> Path:
    """``out``: HuBERT ``name`` as a fairseq checkpoint (config dict, the task's dictionary)."""
    import torch

    from ..demo.s2s_models import checkpoint_state, recorded_labels

    with tempfile.TemporaryDirectory() as tmp:
        model, task, task_cfg, model_cfg = hubert(name, Path(tmp) / "labels", seed)
        state = checkpoint_state(model, task, recorded_labels(task_cfg), model_cfg)
        state["task_state"] = {"dictionaries": task.dictionaries}  # as fairseq's trainer saves it
        save_model(out, lambda path: torch.save(state, path))
    return out


def build_vocoder(out: Path, seed: int = SEED) -> Path:
    """``out`` (the generator's weights) and ``out`` with ``.json`` (its config), as textlesslib ships them."""
    import torch
    from fairseq.models.text_to_speech.codehifigan import CodeGenerator

    torch.manual_seed(seed)
    gen = CodeGenerator(VOCODER)
    text = json.dumps(VOCODER, indent=1) + "\n"
    save_model(out.with_suffix(".json"), lambda path: path.write_text(text, encoding="utf-8"))
    save_model(out, lambda path: torch.save({"generator": gen.state_dict()}, path))
    return out


def calibration_speech() -> list:
    """Real speech at 16 kHz (float32 arrays): tests/real_speech.py's ``distinct_voices`` (the
    LibriVox reader, the cards speaker, the ALSA voice, the first ``clips_per_voice`` clips of
    each distinct klettres voice), calibration sources only, never the held-apart prompts."""
    import sys

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    import real_speech

    voices = real_speech.distinct_voices(KMEANS["clips_per_voice"])
    return [np.ascontiguousarray(real_speech.read(u.path, 16000)[0], dtype=np.float32) for u in voices]


def build_kmeans(out: Path, seed: int = SEED) -> Path:
    """``out``: a 1000-unit MiniBatchKMeans (joblib) over hubert-base's layer-6 features of
    :func:`calibration_speech`, the hubert-base beside it (built first if missing) loaded as
    the S2S stage loads it."""
    import joblib
    import numpy as np
    import torch
    from sklearn.cluster import MiniBatchKMeans

    from ..s2s import fairseq_legacy
    from ..s2s.models import dense_features

    hubert_path = out.parent / FILES["hubert-base"]
    if not hubert_path.is_file():
        build_hubert("hubert-base", hubert_path, seed)
    torch.manual_seed(seed)
    model = fairseq_legacy.load(hubert_path)[0].eval()
    feats = [dense_features(model, [w], KMEANS["layer"], normalize=False)[0].numpy() for w in calibration_speech()]
    train = np.concatenate(feats).astype(np.float32)
    km = MiniBatchKMeans(n_clusters=KMEANS["units"], random_state=seed, n_init=1, batch_size=4096).fit(train)
    save_model(out, lambda path: joblib.dump(km, path))
    return out


def build(name: str, out: Path, seed: int = SEED) -> Path:
    if name == "kmeans-1000":
        return build_kmeans(out, seed)
    return build_vocoder(out, seed) if name == "hifigan-unit" else build_hubert(name, out, seed)
