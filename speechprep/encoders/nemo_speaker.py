"""Speaker models a lab brings as NeMo ``.nemo`` files, restored from a local file only
(never a pretrained name: nothing is downloaded):

* :class:`NemoSpeakerEncoder`: any ``EncDecSpeakerLabelModel`` (TitaNet, ECAPA-TDNN,
  SpeakerNet): clips -> L2-normalised speaker embeddings;
* :class:`NemoSortformer`: a ``SortformerEncLabelModel``: a clip -> per-frame speaker
  probabilities, and NeMo's own turns of them.

Nothing heavy (NeMo, torch) is imported until an encoder is made.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from ..errors import ModelFileError, UsageError, describe
from ..io.audio import SAMPLE_RATE, AudioError
from . import unit_vector

log = logging.getLogger("speechprep.encoders")

SPEAKER_CLASS = "EncDecSpeakerLabelModel"
SORTFORMER_CLASS = "SortformerEncLabelModel"
SPEAKER_LABEL, SORTFORMER_LABEL = "speaker model", "diarization model"  # what a message calls the file
LANGUAGE_LABEL = "curate.language_model"
# 25 ms, one analysis window (as the ONNX encoders); under 10 ms (one feature frame) NeMo's
# per-feature normalisation makes every output NaN
MIN_SAMPLES = 400
BATCH_SAMPLES = 120 * SAMPLE_RATE  # padded audio per forward on a GPU
# on the CPU a large convolutional model runs fastest at a few clips a forward: TitaNet-L
# (real size) 5.36 embeddings/s at one 1.6 s window a forward, 6.97 at 4, 6.40 at 8, 4.05 at
# 64 (bench/speakers/embeddings.py --per-forward; docs/benchmarks/speakers.md, "Speaker embeddings")
CPU_BATCH_SAMPLES = 8 * SAMPLE_RATE


def _refused(label: str, path: str, reason: str) -> ModelFileError:
    return ModelFileError(f"{label}: {path} {reason}")


def _check_file(label: str, path: str) -> None:
    """The checks of a ``.nemo`` archive the ASR stage makes, its message starting with ``label``."""
    from ..io.modelfiles import check_nemo_file

    check_nemo_file(path, label)


def _config_target(path: str) -> str | None:
    """The model class (``target``) that the archive's ``model_config.yaml`` names, if it names one."""
    import tarfile

    import yaml

    try:
        with tarfile.open(path, "r:*") as tar:
            member = next(m for m in tar.getmembers() if os.path.normpath(m.name) == "model_config.yaml")
            f = tar.extractfile(member)
            cfg = yaml.safe_load(f) if f is not None else None
    except Exception:  # noqa: BLE001 (an odd config: NeMo's restore says what is wrong with it)
        return None
    if isinstance(cfg, dict) and isinstance(cfg.get("model"), dict):
        cfg = cfg["model"]
    target = cfg.get("target") if isinstance(cfg, dict) else None
    return target if isinstance(target, str) else None


def restore(path: str, device: str, class_name: str, label: str):
    """``<class_name>.restore_from(path)`` (a class of ``nemo.collections.asr.models``) on
    ``device``, in eval mode. A file that is not a ``.nemo`` archive, or one of another
    model class, raises :class:`~speechprep.errors.ModelFileError` (a UsageError), one
    line starting with ``label`` (what the file should be) and naming the file; the class
    is read from the archive's config before anything is restored. Only the local file
    is read: never a pretrained name."""
    from ..core.batching import is_oom

    path = os.path.abspath(os.path.expanduser(path))
    _check_file(label, path)
    import torch

    try:
        from nemo.collections.asr import models
    except ImportError as e:
        raise UsageError(
            f"{label}: {path} is a NeMo model, and this job's environment has no NeMo ({describe(e)}); "
            'NeMo is in the asr env (docs/stages/speakers.md, "Speaker models")'
        ) from None

    expected = getattr(models, class_name)
    target = _config_target(path)
    if target is not None and target.startswith("nemo."):
        from nemo.utils.model_utils import import_class_by_path

        try:
            cls = import_class_by_path(target)
        except Exception:  # noqa: BLE001 (a class this NeMo lacks: the restore below reports it)
            cls = None
        if isinstance(cls, type) and not issubclass(cls, expected):
            raise _refused(label, path, f"holds a model of class {cls.__name__}, not {class_name}")
    try:
        model = expected.restore_from(path, map_location=torch.device(device))
    except Exception as e:
        if is_oom(e):
            raise
        raise _refused(label, path, f"is not a valid .nemo file (NeMo could not restore it: {describe(e)})") from None
    if not isinstance(model, expected):
        raise _refused(label, path, f"holds a model of class {type(model).__name__}, not {class_name}")
    return model.eval()


def load_speaker_model(path: str, device: str):
    """An ``EncDecSpeakerLabelModel`` from a local ``.nemo`` (:func:`restore`)."""
    return restore(path, device, SPEAKER_CLASS, SPEAKER_LABEL)


class NemoSpeakerEncoder:
    """A NeMo speaker model (``EncDecSpeakerLabelModel``: TitaNet, ECAPA-TDNN) from a local
    ``.nemo``: 16 kHz mono float32 clips -> one float32 vector each, the embedding of the
    model's own ``forward`` L2-normalised (cosine similarity is then a dot product, as
    NeMo's ``verify_speakers`` compares them), or an :class:`AudioError` for a clip it
    cannot embed (empty, under 25 ms, NaN/Inf samples, a zero or non-finite embedding).

    Clips run sorted by length in zero-padded batches with their lengths (the model
    masks the padding), at most ``BATCH_SAMPLES`` padded samples each on a GPU and
    ``CPU_BATCH_SAMPLES`` on the CPU, under
    ``torch.inference_mode()``. ``dim``: the embedding's size; ``threads``: torch's CPU threads."""

    package = "nemo_toolkit"
    label = SPEAKER_LABEL  # what a message calls the file

    def __init__(self, path: str, device: str, threads: int):
        import torch

        from ..core.batching import resolve_device

        torch.set_num_threads(max(1, int(threads)))
        self.path = os.path.abspath(os.path.expanduser(str(path)))
        self.device = resolve_device(device)
        self.model = restore(self.path, self.device, SPEAKER_CLASS, self.label)
        rate = self.model.cfg.get("preprocessor", {}).get("sample_rate", SAMPLE_RATE)
        if int(rate) != SAMPLE_RATE:
            raise _refused(
                SPEAKER_LABEL, self.path, f"reads {rate} Hz audio; the speaker encoders take {SAMPLE_RATE} Hz"
            )
        _, embs = self._forward([np.zeros(SAMPLE_RATE, dtype=np.float32)])  # 1 s of silence: the embedding's size
        if embs is None or embs.ndim != 2:
            raise _refused(self.label, self.path, "gives no speaker embedding from its forward (logits only)")
        self.dim = int(embs.shape[1])
        log.info(
            "NeMo %s from %s on %s, %d-dim embeddings", type(self.model).__name__, self.path, self.device, self.dim
        )

    def __repr__(self) -> str:
        return f"NemoSpeakerEncoder({self.path!r}, dim={self.dim})"

    def _forward(self, clips: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
        """The model's logits and embeddings of ``clips`` in one zero-padded batch, (B, classes) and
        (B, D) float64 (None: it gives no embedding)."""
        import torch

        lengths = torch.tensor([len(c) for c in clips], dtype=torch.long)
        x = torch.zeros(len(clips), int(lengths.max()), dtype=torch.float32)
        for i, c in enumerate(clips):
            x[i, : len(c)] = torch.from_numpy(c)
        with torch.inference_mode():
            logits, embs = self.model.forward(
                input_signal=x.to(self.device), input_signal_length=lengths.to(self.device)
            )
        logits = logits.reshape(len(clips), -1).double().cpu().numpy()
        return logits, None if embs is None else embs.reshape(len(clips), -1).double().cpu().numpy()

    def _output(self, logits: np.ndarray, emb: np.ndarray) -> np.ndarray | AudioError:
        """One clip's result: its embedding, L2-normalised."""
        return unit_vector(emb, self.path)

    def __call__(self, clips: list[np.ndarray]) -> list[np.ndarray | AudioError]:
        out: list = [None] * len(clips)
        todo: list[tuple[int, np.ndarray]] = []
        for i, clip in enumerate(clips):
            w = np.asarray(clip, dtype=np.float32)
            if w.ndim != 1:
                raise ValueError(f"clip {i}: shape {w.shape}; a speaker encoder takes mono clips (1-D)")
            if len(w) == 0:
                out[i] = AudioError("empty", "no samples")
            elif not np.isfinite(w).all():
                out[i] = AudioError("non_finite", f"NaN/Inf sample at {np.argmin(np.isfinite(w)) / SAMPLE_RATE:.3f} s")
            elif len(w) < MIN_SAMPLES:
                out[i] = AudioError(
                    "too_short", f"{len(w)} samples: a speaker vector needs at least {MIN_SAMPLES} (25 ms)"
                )
            else:
                todo.append((i, w))
        todo.sort(key=lambda item: len(item[1]))
        start, budget = 0, BATCH_SAMPLES if self.device.startswith("cuda") else CPU_BATCH_SAMPLES
        while start < len(todo):
            end = start + 1  # the longest clips that fit the padded budget together (a longer one alone)
            while end < len(todo) and (end - start + 1) * len(todo[end][1]) <= budget:
                end += 1
            part = todo[start:end]
            logits, embs = self._forward([w for _, w in part])
            for k, (i, _) in enumerate(part):
                out[i] = self._output(logits[k], embs[k])
            start = end
        return out


class NemoLanguageId(NemoSpeakerEncoder):
    """A NeMo language-ID model: an ``EncDecSpeakerLabelModel`` whose classes are languages (as
    AmberNet; its ``train_ds.labels`` name them, as NeMo's ``get_label`` reads them), from a
    local ``.nemo``: 16 kHz clips -> ``{language: probability}`` (the softmax of its own
    ``forward``'s logits), batched and screened as the speaker encoder's clips are."""

    label = LANGUAGE_LABEL

    def __init__(self, path: str, device: str, threads: int):
        super().__init__(path, device, threads)
        labels = (self.model.cfg.get("train_ds") or {}).get("labels")
        classes = int(self.model.cfg.decoder.num_classes)
        if not labels or len(labels) != classes:
            raise _refused(
                self.label, self.path, f"names no language for each of its {classes} classes (train_ds.labels)"
            )
        self.labels = [str(x) for x in labels]

    def __repr__(self) -> str:
        return f"NemoLanguageId({self.path!r}, {len(self.labels)} languages)"

    def _output(self, logits: np.ndarray, emb: np.ndarray) -> dict[str, float] | AudioError:
        z = np.exp(logits - logits.max())
        if not np.isfinite(z).all():
            return AudioError("non_finite", f"the language model gives non-finite logits ({self.path})")
        return dict(zip(self.labels, (z / z.sum()).tolist(), strict=True))


class NemoSortformer:
    """A NeMo Sortformer diarization model (``SortformerEncLabelModel``) from a local
    ``.nemo``: a 16 kHz mono float32 clip -> its per-frame speaker probabilities, a
    (frames, ``speakers``) float32 array, one frame every ``frame_seconds`` (80 ms in
    NVIDIA's models), from the model's own ``forward`` as its ``diarize()`` calls it;
    or an :class:`AudioError` (empty, shorter than a frame, NaN/Inf samples).

    One clip per forward: the model scales its input batch by the batch's peak
    sample, so a clip's probabilities would depend on the clips beside it."""

    package = "nemo_toolkit"

    def __init__(self, path: str, device: str, threads: int):
        import torch

        from ..core.batching import resolve_device

        torch.set_num_threads(max(1, int(threads)))
        self.path = os.path.abspath(os.path.expanduser(str(path)))
        self.device = resolve_device(device)
        self.model = restore(self.path, self.device, SORTFORMER_CLASS, SORTFORMER_LABEL)
        cfg = self.model.cfg
        rate = int(cfg.preprocessor.sample_rate)
        if rate != SAMPLE_RATE:
            raise _refused(SORTFORMER_LABEL, self.path, f"reads {rate} Hz audio; the diarizer takes {SAMPLE_RATE} Hz")
        self.speakers = int(cfg.max_num_of_spks)
        self.subsampling = int(cfg.encoder.subsampling_factor)  # 10 ms feature frames per output frame
        self.frame_seconds = self.subsampling * float(cfg.preprocessor.window_stride)
        self.min_samples = round(self.frame_seconds * SAMPLE_RATE)

    def __repr__(self) -> str:
        return f"NemoSortformer({self.path!r}, {self.speakers} speakers)"

    def __call__(self, clip: np.ndarray) -> np.ndarray | AudioError:
        import torch

        w = np.asarray(clip, dtype=np.float32)
        if w.ndim != 1:
            raise ValueError(f"shape {w.shape}; the diarizer takes a mono clip (1-D)")
        if len(w) == 0:
            return AudioError("empty", "no samples")
        if not np.isfinite(w).all():
            return AudioError("non_finite", f"NaN/Inf sample at {np.argmin(np.isfinite(w)) / SAMPLE_RATE:.3f} s")
        if len(w) < self.min_samples:
            return AudioError(
                "too_short", f"{len(w)} samples: the diarizer needs at least {self.min_samples} (one frame)"
            )
        with torch.inference_mode():
            preds = self.model.forward(
                audio_signal=torch.from_numpy(w)[None].to(self.device),
                audio_signal_length=torch.tensor([len(w)], device=self.device),
            )
        return preds[0].float().cpu().numpy()

    def turns(self, probs: np.ndarray, onset: float = 0.5, offset: float = 0.5) -> list[tuple[float, float, int]]:
        """:func:`sortformer_turns` of this model's ``probs``."""
        return sortformer_turns(probs, self.subsampling, onset, offset)


def sortformer_turns(
    probs: np.ndarray, subsampling: int, onset: float = 0.5, offset: float = 0.5
) -> list[tuple[float, float, int]]:
    """``(start s, end s, speaker)`` of each speaker's turns in a Sortformer's frame
    probabilities ``probs`` (frames, speakers), one frame every ``subsampling`` 10 ms feature
    frames (sorted by speaker, then start), by NeMo's own post-processing as ``diarize()``
    applies it (``ts_vad_post_processing``, its thresholds ``onset``/``offset``, no padding or
    filtering)."""
    import torch
    from nemo.collections.asr.parts.utils.vad_utils import PostProcessingParams, ts_vad_post_processing
    from omegaconf import OmegaConf

    params = OmegaConf.structured(PostProcessingParams(onset=onset, offset=offset))
    out = []
    for spk in range(probs.shape[1]):
        segs = ts_vad_post_processing(torch.from_numpy(np.ascontiguousarray(probs[:, spk])), params, subsampling)
        out += [(round(float(a), 2), round(float(b), 2), spk) for a, b in segs.tolist()]
    return out
