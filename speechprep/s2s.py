"""S2S stage: HuBERT units (legacy fairseq checkpoints) and unit HiFi-GAN resynthesis.

textlesslib's dense model -> quantizer -> vocoder chain, on fairseq directly:

* dense features from layer ``s2s.layer`` of a HuBERT checkpoint loaded through
  :mod:`speechprep.fairseq_legacy`, audio normalised when the checkpoint's task
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
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import safe_pickle
from .audio import AudioError, read_segment
from .batching import BatchRunner, is_oom, resolve_device
from .checkpoint import Checkpoint, fingerprint
from .jsonio import atomic_open, read_jsonl, reject, write_jsonl
from .failures import FailureRule, ModelFailures
from .models import sha256_cached
from .names import file_stem
from .progress import Progress

STAGE = "s2s"
ALGORITHM_VERSION = "1"
SAMPLE_RATE = 16000


@dataclass(frozen=True)
class S2sParams:
    hubert: str
    kmeans: str
    vocoder: str
    vocoder_config: str
    layer: int = 6
    device: str = "auto"
    batch_seconds: float = 60.0        # padded audio seconds per feature batch
    max_chunk_seconds: float = 100.0   # fairseq's feature reader: 1,600,000 samples
    min_duration: float = 0.1
    max_duration: float = 60.0
    dur_prediction: str = "auto"       # auto: when the vocoder has a duration predictor
    # the shared rule (config `model_failure`): a job whose models fail on (nearly) every segment fails
    model_failure: dict[str, Any] = field(default_factory=lambda: {"first_errors": 10, "max_error_share": 0.5})
    hash_cache: str | None = None      # directory of cached model sha256 digests (None: hash every time)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "S2sParams":
        """From the stage's params JSON; keys S2S has no use for (``dataset_language``) are left out."""
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


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
            x[i, :len(f)] = f
        x = model.layer_norm(x)
        if model.post_extract_proj is not None:
            x = model.post_extract_proj(x)
        pad = torch.arange(x.size(1), device=device)[None, :] >= torch.tensor(lens, device=device)[:, None]
        out, _ = model.encoder(x, padding_mask=pad if pad.any() else None, layer=layer - 1)
    return [out[i, :n] for i, n in enumerate(lens)]


# ---------------------------------------------------------------------------
# quantizer
# ---------------------------------------------------------------------------
class KmeansError(ValueError):
    """A k-means file that cannot or must not be loaded."""


# What a textlesslib k-means file (joblib.dump of a scikit-learn KMeans or
# MiniBatchKMeans, compressed or not) holds: the estimator, read as an inert
# state holder without importing scikit-learn; numpy arrays, through joblib's
# NumpyArrayWrapper; numpy scalars and dtypes; builtin containers.
_SKLEARN_KMEANS = frozenset({"KMeans", "MiniBatchKMeans"})
KMEANS_ALLOWED: safe_pickle.Allowlist = {
    "sklearn.cluster._kmeans": _SKLEARN_KMEANS,   # scikit-learn >= 0.22
    "sklearn.cluster.k_means_": _SKLEARN_KMEANS,  # older
    "joblib.numpy_pickle": frozenset({"NumpyArrayWrapper"}),
    "builtins": frozenset({"dict", "list", "tuple", "set", "frozenset"}),
    **safe_pickle.NUMPY,
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
                raise KmeansError(f"refusing to load {path}: its pickle names {module}.{name}, which "
                                  "speechprep.s2s.KMEANS_ALLOWED does not allow (nothing of it was run)")
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
        self.cnorm = (self.c ** 2).sum(0, keepdim=True)

    def __call__(self, x) -> np.ndarray:
        dist = (x ** 2).sum(1, keepdim=True) - 2 * x @ self.c + self.cnorm
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
        raise LegacyCheckpointError(f"{checkpoint}: not a unit HiFi-GAN checkpoint (no 'generator'; keys: "
                                    f"{', '.join(map(str, state))})")
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
        wav = vocoder({"code": torch.tensor(code, dtype=torch.long, device=device).view(1, -1)},
                      dur_prediction)
    return wav.float().cpu().numpy().reshape(-1)


# ---------------------------------------------------------------------------
# a shard
# ---------------------------------------------------------------------------
class Models:
    def __init__(self, p: S2sParams, device: str, log=sys.stderr):
        import torch

        from . import fairseq_legacy

        t = time.monotonic()
        self.device = device
        self.hubert, _, task, report = fairseq_legacy.load(p.hubert)
        self.hubert.to(device)
        self.normalize = bool(getattr(task.cfg, "normalize", False))
        self.frame_rate = frame_rate(self.hubert)
        self.quantizer = Quantizer(load_kmeans_centers(p.kmeans), device)
        self.vocoder, self.vocoder_cfg = load_vocoder(p.vocoder, p.vocoder_config, device)
        has_dur = self.vocoder.model.dur_predictor is not None
        self.dur_prediction = has_dur if p.dur_prediction == "auto" else p.dur_prediction == "true"
        self.hop = vocoder_hop(self.vocoder_cfg)
        self.layer = p.layer
        n_layers = len(self.hubert.encoder.layers)
        if not 1 <= p.layer <= n_layers:
            raise SystemExit(f"s2s.layer is {p.layer}, but the HuBERT checkpoint has layers 1..{n_layers}")
        print(f"s2s: HuBERT {p.hubert} ({n_layers} layers, using {p.layer}, {self.frame_rate:g} Hz, "
              f"normalize={self.normalize}); legacy: {'; '.join(report.lines()[1:])}", file=log)
        print(f"s2s: k-means {p.kmeans} ({self.quantizer.c.shape[1]} units); vocoder {p.vocoder} "
              f"(hop {self.hop}, duration prediction {self.dur_prediction}); loaded in "
              f"{time.monotonic() - t:.1f} s on {device}", file=log, flush=True)
        torch.set_grad_enabled(False)


def identity(p: S2sParams) -> dict[str, str]:
    out = {}
    for key in ("hubert", "kmeans", "vocoder", "vocoder_config"):
        path = getattr(p, key)
        out[f"{key}"] = os.path.abspath(path)
        out[f"{key}_sha256"] = sha256_cached(path, p.hash_cache)
    return out


def units_for_batch(models: Models, segs: list[dict], audios: list[np.ndarray], max_chunk: int) -> list[list[int]]:
    """Units per segment; segments longer than ``max_chunk`` samples go in chunks, as fairseq does."""
    pieces, owner = [], []
    for i, a in enumerate(audios):
        for start in range(0, len(a), max_chunk):
            pieces.append(a[start:start + max_chunk])
            owner.append(i)
    feats = dense_features(models.hubert, pieces, models.layer, models.normalize)
    units: list[list[int]] = [[] for _ in segs]
    for i, f in zip(owner, feats):
        units[i].extend(models.quantizer(f).tolist())
    return units


class SegmentBatcher:
    """``infer`` for :class:`BatchRunner`: read each segment, then units and a WAV for
    each. A model exception on a batch (OOM aside: BatchRunner halves the batch)
    falls back to one segment at a time, so only a segment that fails alone gets
    ``{"error": ...}``."""

    def __init__(self, models: Models, p: S2sParams, log=sys.stderr):
        self.models, self.p, self.log = models, p, log
        self.max_chunk = int(p.max_chunk_seconds * SAMPLE_RATE)

    def __call__(self, batch: list[dict]) -> list[dict]:
        results: list[dict] = [{} for _ in batch]
        good, audios = [], []
        for i, s in enumerate(batch):
            try:
                audios.append(read_segment(s, SAMPLE_RATE, self.p.min_duration, "s2s.min_duration"))
                good.append(i)
            except AudioError as e:
                results[i] = {"reject": reject(s["id"], s["audio_filepath"], STAGE, e.reason, e.detail)}
        if audios:
            for i, r in zip(good, self._isolating([batch[i] for i in good], audios)):
                results[i] = r
        return results

    def _run(self, segs: list[dict], audios: list[np.ndarray]) -> list[dict]:
        m = self.models
        return [{"units": u, "wav": synthesize(m.vocoder, u, m.dur_prediction, m.device)}
                for u in units_for_batch(m, segs, audios, self.max_chunk)]

    def _isolating(self, segs: list[dict], audios: list[np.ndarray]) -> list[dict]:
        try:
            return self._run(segs, audios)
        except Exception as e:  # noqa: BLE001
            if is_oom(e):
                raise
            if len(segs) == 1:
                return [self._error(segs[0], e)]
            print(f"s2s: model error on a batch of {len(segs)} ({_describe(e)}); "
                  "retrying one segment at a time", file=self.log, flush=True)
        out = []
        for s, a in zip(segs, audios):
            try:
                out += self._run([s], [a])
            except Exception as e:  # noqa: BLE001
                if is_oom(e):
                    raise
                out.append(self._error(s, e))
        return out

    def _error(self, seg: dict, e: Exception) -> dict:
        error = _describe(e)
        print(f"s2s: {seg['id']}: model error: {error}", file=self.log, flush=True)
        return {"error": error}


def _describe(e: Exception) -> str:
    from .fairseq_legacy import first_line

    return f"{type(e).__name__}: {first_line(e)}"


def run_shard(segments_path: str, units_out: str, wav_dir: str, rejects_out: str, p: S2sParams,
              scratch: str, models: Models | None = None, log=sys.stderr) -> dict[str, Any]:
    """Units and resynthesised WAVs for every segment of a shard (resumable).

    Raises :class:`~speechprep.failures.SystematicFailure` when the models fail on
    too many segments (config ``model_failure``); the scratch checkpoint is kept,
    as on any exception."""
    import soundfile as sf

    segments = list(read_jsonl(segments_path))
    name = Path(segments_path).name.split(".")[0]
    models = models or Models(p, resolve_device(p.device), log)
    ident = identity(p)
    scratch_dir = Path(scratch).with_suffix("")  # WAVs wait here until the shard is done
    ck = Checkpoint(scratch, fingerprint(segments_path, {**asdict(p), **ident}, ALGORITHM_VERSION))
    done = ck.load()
    todo = []
    for s in segments:
        if s["id"] in done and ("reject" in done[s["id"]] or (scratch_dir / f"{file_stem(s['id'])}.wav").exists()):
            continue
        done.pop(s["id"], None)
        d = float(s["duration"])
        if d > p.max_duration:
            done[s["id"]] = {"id": s["id"], "reject": reject(s["id"], s["audio_filepath"], STAGE, "too_long",
                                                             f"{d:.2f} s exceeds s2s.max_duration ({p.max_duration} s)")}
        else:
            todo.append(s)
    print(f"s2s[{name}]: {len(segments)} segments, {len(segments) - len(todo)} already done "
          f"(checkpoint {scratch}), {len(todo)} to process", file=log, flush=True)
    progress = Progress(f"s2s[{name}]", len(todo), log=log, unit="segments")
    failures = ModelFailures(STAGE, f"{p.hubert} (k-means {p.kmeans}, vocoder {p.vocoder})",
                             FailureRule.from_dict(p.model_failure))
    runner = BatchRunner(budget=p.batch_seconds, duration=lambda s: float(s["duration"]),
                         infer=SegmentBatcher(models, p, log),
                         logger=lambda m: print(f"s2s[{name}]: {m}", file=log, flush=True))
    scratch_dir.mkdir(parents=True, exist_ok=True)
    ck.start()
    try:
        for o in runner.run(todo):
            s, r = o.item, o.result
            if o.oom:
                ck.append({"id": s["id"], "reject": reject(s["id"], s["audio_filepath"], STAGE, "oom",
                                                           f"does not fit in device memory even alone ({s['duration']} s)")})
            elif "reject" in r:
                ck.append({"id": s["id"], **r})
            elif "error" in r:
                # not checkpointed: a resumed job (say, after a systematic failure was fixed) retries it
                done[s["id"]] = {"id": s["id"], "reject": reject(
                    s["id"], s["audio_filepath"], STAGE, "model_error", f"the model raised on this segment alone: {r['error']}")}
                failures.error(s["id"], r["error"])
            else:
                with atomic_open(scratch_dir / f"{file_stem(s['id'])}.wav", "wb") as f:
                    sf.write(f, r["wav"], SAMPLE_RATE, format="WAV", subtype="PCM_16")
                ck.append({"id": s["id"], "units": r["units"], "wav_samples": int(len(r["wav"]))})
                failures.success()
            progress.update(audio_seconds=float(s["duration"]))
        failures.finish()
    except BaseException:
        ck.close(remove=False)
        raise
    progress.finish()

    lines, rejects = [], []
    Path(wav_dir).mkdir(parents=True, exist_ok=True)
    for s in segments:
        r = done[s["id"]]
        if "reject" in r:
            rejects.append(r["reject"])
            continue
        units = r["units"]
        dd, durs = dedup(units)
        lines.append({"id": s["id"], "units": units, "frame_rate": models.frame_rate, "dedup_units": dd,
                      "durations": durs, "wav": str(Path(wav_dir).resolve() / f"{file_stem(s['id'])}.wav"),
                      "wav_samples": r["wav_samples"], **ident})
    for s in lines:
        os.replace(scratch_dir / f"{file_stem(s['id'])}.wav", s["wav"])
    write_jsonl(units_out, lines)
    write_jsonl(rejects_out, rejects)
    ck.close(remove=True)
    try:
        scratch_dir.rmdir()
    except OSError:
        pass
    counts = {"segments": len(segments), "ok": len(lines), "rejected": len(rejects)}
    print(f"s2s[{name}]: done {counts}", file=log, flush=True)
    return counts
