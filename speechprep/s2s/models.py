"""The S2S models: HuBERT units (legacy fairseq checkpoints) and unit HiFi-GAN resynthesis.

textlesslib's dense model -> quantizer -> vocoder chain, on fairseq directly:

* dense features from layer ``s2s.layer`` of a HuBERT checkpoint loaded through
  :mod:`speechprep.s2s.fairseq_legacy`, audio normalised when the checkpoint's task
  says so, long segments chunked as fairseq's feature reader does, segments
  batched with padding masks; :func:`dense_features` gives the same features as
  one segment at a time;
* a textlesslib k-means (joblib-pickled scikit-learn model, compressed or
  not) read through an explicit allowlist without importing scikit-learn and
  applied as nearest centroid in torch;
* fairseq's ``CodeHiFiGANVocoder`` from a checkpoint (loaded as strictly as
  the HuBERT one) + config JSON, with or without duration prediction, writing
  16 kHz WAVs.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from ..errors import ModelFileError, UsageError
from ..io import safe_pickle
from ..io.audio import SAMPLE_RATE
from ..io.modelfiles import sha256_cached
from .params import S2sParams

log = logging.getLogger("speechprep.s2s")


# ---------------------------------------------------------------------------
# dense features
# ---------------------------------------------------------------------------
def frame_rate(model) -> float:
    hop = 1
    for block in model.feature_extractor.conv_layers:
        hop *= block[0].stride[0]
    return SAMPLE_RATE / hop


def dense_features(model, wavs: list, layer: int, normalize: bool) -> list:
    """Features of layer ``layer`` (1-based) for each waveform: the transformer runs
    batched with a padding mask; the conv extractor runs per waveform, which keeps
    its GroupNorm (over time, in HuBERT base) exact and its memory small.

    Equal (to float rounding) to ``model.extract_features`` on each waveform alone.
    """
    import torch
    import torch.nn.functional as F

    device = next(model.parameters()).device
    feats = []
    with torch.no_grad():
        for w in wavs:
            w = torch.as_tensor(w, dtype=torch.float32, device=device)
            if normalize:
                w = F.layer_norm(w, w.shape)
            feats.append(model.feature_extractor(w[None])[0].t())  # (frames, channels)
        lens = [len(f) for f in feats]
        x = feats[0].new_zeros(len(feats), max(lens), feats[0].shape[1])
        for i, f in enumerate(feats):
            x[i, : len(f)] = f
        x = model.layer_norm(x)
        if model.post_extract_proj is not None:
            x = model.post_extract_proj(x)
        pad = torch.arange(x.size(1), device=device)[None, :] >= torch.tensor(lens, device=device)[:, None]
        out, _ = model.encoder(x, padding_mask=pad if pad.any() else None, layer=layer - 1)
    return [out[i, :n] for i, n in enumerate(lens)]


# ---------------------------------------------------------------------------
# quantizer
# ---------------------------------------------------------------------------
class KmeansError(ModelFileError):
    """A k-means file that cannot or must not be loaded."""


# What a textlesslib k-means file (joblib.dump of a scikit-learn KMeans or
# MiniBatchKMeans, compressed or not) holds: the estimator, read as an inert
# state holder without importing scikit-learn; numpy arrays, through joblib's
# NumpyArrayWrapper; numpy scalars and dtypes; builtin containers; the
# estimator's RandomState (scikit-learn 0.24's MiniBatchKMeans keeps one).
_SKLEARN_KMEANS = frozenset({"KMeans", "MiniBatchKMeans"})
KMEANS_ALLOWED: safe_pickle.Allowlist = {
    "sklearn.cluster._kmeans": _SKLEARN_KMEANS,  # scikit-learn >= 0.22
    "sklearn.cluster.k_means_": _SKLEARN_KMEANS,  # older
    "joblib.numpy_pickle": frozenset({"NumpyArrayWrapper"}),
    "builtins": frozenset({"dict", "list", "tuple", "set", "frozenset"}),
    **safe_pickle.NUMPY,
    **safe_pickle.NUMPY_RANDOM,
}


class _Estimator:
    """Stands in for a pickled scikit-learn estimator: keeps its state, runs nothing."""

    def __setstate__(self, state):
        self.__dict__.update(state)


def load_kmeans_centers(path: str | os.PathLike) -> np.ndarray:
    """Cluster centres of a textlesslib k-means (``joblib.dump`` of a scikit-learn
    KMeans/MiniBatchKMeans, uncompressed or with any compressor joblib reads)
    without importing scikit-learn: no version coupling. The pickle may name
    only what :data:`KMEANS_ALLOWED` lists; anything else is refused, naming it,
    before it is looked up, so nothing in the file runs."""
    import joblib.numpy_pickle as jnp
    from joblib.numpy_pickle_utils import _validate_fileobject_and_memmap

    path = Path(path)

    class Unpickler(jnp.NumpyUnpickler):
        # joblib routes the nested pickle of an object array through this too
        def find_class(self, module, name):
            if not safe_pickle.allowed(KMEANS_ALLOWED, module, name):
                raise KmeansError(
                    f"refusing to load {path}: its pickle names {module}.{name}, which "
                    "speechprep.s2s.stage.KMEANS_ALLOWED does not allow (nothing of it was run)"
                )
            if module.startswith("sklearn."):
                return _Estimator
            return safe_pickle.resolve(module, name)

    if not path.is_file():
        raise KmeansError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    try:
        with open(path, "rb") as f, _validate_fileobject_and_memmap(f, str(path)) as (fobj, _):
            if isinstance(fobj, str):
                raise KmeansError(f"{path}: written by joblib < 0.10, a format this loader does not read")
            obj = Unpickler(str(path), fobj, ensure_native_byte_order=True).load()
    except KmeansError:
        raise
    except Exception as e:  # noqa: BLE001 (truncated, not a pickle, a compressor not installed)
        raise KmeansError(f"{path}: not a readable joblib k-means file ({type(e).__name__}: {e})") from None
    centers = getattr(obj, "cluster_centers_", None)
    if centers is None:
        raise KmeansError(f"{path}: no cluster_centers_ in the pickled object ({type(obj).__name__})")
    return np.asarray(centers, dtype=np.float32)


class Quantizer:
    """Nearest centroid, computed as fairseq's ApplyKmeans does."""

    def __init__(self, centers: np.ndarray, device="cpu"):
        import torch

        self.c = torch.as_tensor(centers, device=device).t().contiguous()  # (D, K)
        self.cnorm = (self.c**2).sum(0, keepdim=True)

    def __call__(self, x) -> np.ndarray:
        dist = (x**2).sum(1, keepdim=True) - 2 * x @ self.c + self.cnorm
        return dist.argmin(dim=1).cpu().numpy()


def dedup(units: list[int]) -> tuple[list[int], list[int]]:
    out, durs = [], []
    for u in units:
        if out and out[-1] == u:
            durs[-1] += 1
        else:
            out.append(u)
            durs.append(1)
    return out, durs


# ---------------------------------------------------------------------------
# vocoder
# ---------------------------------------------------------------------------
def load_vocoder(checkpoint: str, config: str, device: str):
    """fairseq's ``CodeHiFiGANVocoder`` from a checkpoint + config JSON. The checkpoint
    is loaded as strictly as the HuBERT one (:func:`fairseq_legacy.safe_load`);
    fairseq's class, which would ``torch.load`` the path itself, gets the generator
    weights from memory."""
    import io

    import torch
    from fairseq.models.text_to_speech.vocoder import CodeHiFiGANVocoder

    from .fairseq_legacy import LegacyCheckpointError, safe_load

    with open(config, encoding="utf-8") as f:
        cfg = json.load(f)
    state, _ = safe_load(checkpoint)
    if "generator" not in state:
        raise LegacyCheckpointError(
            f"{checkpoint}: not a unit HiFi-GAN checkpoint (no 'generator'; keys: {', '.join(map(str, state))})"
        )
    weights = io.BytesIO()
    torch.save({"generator": state["generator"]}, weights)
    weights.seek(0)
    voc = CodeHiFiGANVocoder(weights, cfg).to(device).eval()
    return voc, cfg


def vocoder_hop(cfg: dict) -> int:
    return int(np.prod(cfg["upsample_rates"]))


def synthesize(vocoder, units: list[int], dur_prediction: bool, device: str) -> np.ndarray:
    import torch

    code = dedup(units)[0] if dur_prediction else units
    with torch.no_grad():
        wav = vocoder({"code": torch.tensor(code, dtype=torch.long, device=device).view(1, -1)}, dur_prediction)
    return wav.float().cpu().numpy().reshape(-1)


# ---------------------------------------------------------------------------
# a shard
# ---------------------------------------------------------------------------
class Models:
    """HuBERT (legacy checkpoints loaded exactly; on CPU through ONNX Runtime when
    ``s2s.runtime`` says so, from the checked ``export``), the k-means quantizer
    and the vocoder."""

    def __init__(self, p: S2sParams, device: str, export: str | None = None, threads: int = 1):
        import torch

        from . import fairseq_legacy
        from . import runtime as s2s_runtime

        t = time.monotonic()
        self.device = device
        self.runtime = s2s_runtime.resolve_runtime(p.runtime, device)
        self.hubert, _, task, report = fairseq_legacy.load(p.hubert)
        self.hubert.to(device)
        self.normalize = bool(getattr(task.cfg, "normalize", False))
        self.frame_rate = frame_rate(self.hubert)
        self.encoder = None
        if self.runtime == "onnxruntime":
            if export is None:
                raise UsageError("s2s.runtime is onnxruntime here, but no export of the HuBERT was given (--export)")
            sha = sha256_cached(p.hubert, p.hash_cache)
            self.encoder = s2s_runtime.load_encoder(export, checkpoint_sha256=sha, layer=p.layer, threads=threads)
            self.hubert = self.hubert.cpu()  # kept for its layer count; features come from the export
        self.quantizer = Quantizer(load_kmeans_centers(p.kmeans), device)
        self.vocoder, self.vocoder_cfg = load_vocoder(p.vocoder, p.vocoder_config, device)
        has_dur = self.vocoder.model.dur_predictor is not None
        self.dur_prediction = has_dur if p.dur_prediction == "auto" else p.dur_prediction == "true"
        self.hop = vocoder_hop(self.vocoder_cfg)
        self.layer = p.layer
        n_layers = len(self.hubert.encoder.layers)
        if not 1 <= p.layer <= n_layers:
            raise UsageError(f"s2s.layer is {p.layer}, but the HuBERT checkpoint has layers 1..{n_layers}")
        log.info("features through %s%s", self.runtime, f" ({export})" if export else "")
        log.info(
            "HuBERT %s (%d layers, using %d, %g Hz, normalize=%s); legacy: %s",
            p.hubert,
            n_layers,
            p.layer,
            self.frame_rate,
            self.normalize,
            "; ".join(report.lines()[1:]),
        )
        log.info(
            "k-means %s (%d units); vocoder %s (hop %d, duration prediction %s); loaded in %.1f s on %s",
            p.kmeans,
            self.quantizer.c.shape[1],
            p.vocoder,
            self.hop,
            self.dur_prediction,
            time.monotonic() - t,
            device,
        )
        torch.set_grad_enabled(False)


def units_for_batch(models: Models, audios: list[np.ndarray], max_chunk: int) -> list[list[int]]:
    """Units per segment; segments longer than ``max_chunk`` samples go in chunks, as fairseq does."""
    pieces, owner = [], []
    for i, a in enumerate(audios):
        for start in range(0, len(a), max_chunk):
            pieces.append(a[start : start + max_chunk])
            owner.append(i)
    if models.encoder is not None:
        feats = models.encoder.dense_features(pieces)
    else:
        feats = dense_features(models.hubert, pieces, models.layer, models.normalize)
    units: list[list[int]] = [[] for _ in audios]
    for i, f in zip(owner, feats):
        units[i].extend(models.quantizer(f).tolist())
    return units
