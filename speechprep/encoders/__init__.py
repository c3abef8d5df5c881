"""Speaker and emotion encoders (TTS conditioning, curation's speakers, diarization):
a list of 16 kHz float32 clips -> one float32 vector each.

Every encoder is an :class:`Encoder` made by :func:`make_encoder` from its
config spec (``tts.condition``, ``tts.emotion``):

* ``resemblyzer``: Resemblyzer's pretrained ``VoiceEncoder`` (weights inside
  the wheel), ``embed_utterance`` batched across clips;
* ``egemaps``: openSMILE eGeMAPSv02 functionals (88 values), clips in a thread pool;
* ``torchscript:<path>``: a lab's own scripted module;
* a path ending ``.nemo``: a NeMo ``EncDecSpeakerLabelModel`` (TitaNet, ECAPA,
  SpeakerNet) restored from the file, its own ``forward``
  (:mod:`.nemo_speaker`; NeMo must be in the job's environment);
* a path ending ``.onnx``: a WeSpeaker or 3D-Speaker ONNX speaker model with its
  project's Kaldi fbank (:mod:`.onnx_speaker`).

An encoder may return an :class:`~speechprep.io.audio.AudioError` in place of a
vector for a clip it finds unusable (no speech in it).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np

from ..core import spectral
from ..errors import UsageError
from ..io.audio import SAMPLE_RATE, AudioError
from ..io.modelfiles import sha256_cached

log = logging.getLogger("speechprep.encoders")


class Encoder(Protocol):
    def __call__(self, clips: list[np.ndarray]) -> list[np.ndarray | AudioError]: ...


def unit_vector(v: np.ndarray, model: str) -> np.ndarray | AudioError:
    """``v`` L2-normalised as float32 (cosine similarity is then a dot product), or an
    :class:`AudioError` where ``model`` gave a zero or non-finite vector."""
    norm = float(np.linalg.norm(v))
    if not (np.isfinite(norm) and norm > 0):
        return AudioError("no_embedding", f"the speaker model gives a zero or non-finite vector ({model})")
    return (v / norm).astype(np.float32)


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise UsageError(f"package {package!r} is not installed in this environment")
    return Path(spec.origin).parent.joinpath(*parts)


def resemblyzer_mel(wav: np.ndarray) -> np.ndarray:
    """Resemblyzer's ``audio.wav_to_mel_spectrogram`` (frames x 40 mel power bands, float32;
    25 ms windows every 10 ms, its ``hparams``), without the librosa import it costs there."""
    from resemblyzer import hparams as h

    n_fft, hop = h.sampling_rate * h.mel_window_length // 1000, h.sampling_rate * h.mel_window_step // 1000
    return spectral.melspectrogram(wav, h.sampling_rate, n_fft, hop, h.mel_n_channels).astype(np.float32).T


class ResemblyzerEncoder:
    """Resemblyzer's ``VoiceEncoder.embed_utterance``, batched across clips: every
    clip's 1.6 s partials go through the LSTM in one forward, then each clip's
    partial embeddings are averaged and L2-normalised (equal to the per-clip call)."""

    package = "resemblyzer"
    dim = 256  # the speaker vector's size
    rate, min_coverage = 1.3, 0.75

    @staticmethod
    def model_file() -> Path:
        return _package_file("resemblyzer", "pretrained.pt")

    def __init__(self, device: str, threads: int):
        from resemblyzer import VoiceEncoder

        self.model = VoiceEncoder(device, verbose=False, weights_fpath=self.model_file()).eval()
        self.device = device

    def __call__(self, wavs: list[np.ndarray]) -> list[np.ndarray | AudioError]:
        import torch
        from resemblyzer import preprocess_wav

        mels, owner, out = [], [], [None] * len(wavs)
        for i, w in enumerate(wavs):
            with np.errstate(all="ignore"):
                w = preprocess_wav(w)  # volume normalisation, long silences trimmed
            if len(w) == 0 or not np.isfinite(w).all():
                out[i] = AudioError("no_speech", "Resemblyzer's voice detector finds no speech in it")
                continue
            wav_slices, mel_slices = self.model.compute_partial_slices(len(w), self.rate, self.min_coverage)
            if wav_slices[-1].stop >= len(w):
                w = np.pad(w, (0, wav_slices[-1].stop - len(w)), "constant")
            mel = resemblyzer_mel(w)
            mels += [mel[s] for s in mel_slices]
            owner += [i] * len(mel_slices)
        if not mels:
            return out
        with torch.no_grad():
            partial = self.model(torch.from_numpy(np.stack(mels)).to(self.device)).cpu().numpy()
        owner_a = np.asarray(owner)
        for i in set(owner):
            raw = partial[owner_a == i].mean(axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[i] = (raw / np.linalg.norm(raw)).astype(np.float32)
        return out


class EgemapsEncoder:
    """openSMILE eGeMAPSv02 functionals (88 values per clip); clips run in a thread
    pool (the engine releases the GIL), one ``Smile`` per thread."""

    package = "opensmile"

    @staticmethod
    def model_file() -> Path:
        return _package_file("opensmile", "core", "config", "egemaps", "v02", "eGeMAPSv02.conf")

    def __init__(self, device: str, threads: int):
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="egemaps")

    def one(self, wav: np.ndarray) -> np.ndarray:
        import opensmile

        smile = getattr(self.local, "smile", None)
        if smile is None:
            smile = self.local.smile = opensmile.Smile(
                feature_set=opensmile.FeatureSet.eGeMAPSv02, feature_level=opensmile.FeatureLevel.Functionals
            )
        return smile.process_signal(wav, SAMPLE_RATE).to_numpy(dtype=np.float32).reshape(-1)

    def __call__(self, wavs: list[np.ndarray]) -> list[np.ndarray | AudioError]:
        return list(self.pool.map(self.one, wavs))


class TorchScriptEncoder:
    """A lab's own encoder: ``torch.jit.load(path)``. ``forward(wav)`` takes (1, T)
    float32 16 kHz audio and returns (1, D) or (D,): called clip by clip; a module
    whose ``forward(wav, lengths)`` also takes the lengths gets zero-padded
    (B, T) batches and returns (B, D)."""

    PREFIX = "torchscript:"

    def __init__(self, path: str, device: str):
        import torch

        self.module = torch.jit.load(path, map_location=device).eval()
        self.device = device
        self.batched = len(self.module.forward.schema.arguments) >= 3  # self, wav, lengths

    def __call__(self, wavs: list[np.ndarray]) -> list[np.ndarray | AudioError]:
        import torch

        with torch.no_grad():
            if not self.batched:
                return [self._vector(self.module(torch.from_numpy(w)[None].to(self.device))) for w in wavs]
            lens = torch.tensor([len(w) for w in wavs])
            x = torch.zeros(len(wavs), int(lens.max()))
            for i, w in enumerate(wavs):
                x[i, : len(w)] = torch.from_numpy(w)
            out = self.module(x.to(self.device), lens.to(self.device))
            return [self._vector(out[i]) for i in range(len(wavs))]

    @staticmethod
    def _vector(t) -> np.ndarray:
        return t.detach().float().cpu().numpy().reshape(-1)


BUILTIN = {"resemblyzer": ResemblyzerEncoder, "egemaps": EgemapsEncoder}
# a speaker model a lab brings, by its file's suffix: (module of this package, class)
BY_SUFFIX = {".nemo": ("nemo_speaker", "NemoSpeakerEncoder"), ".onnx": ("onnx_speaker", "OnnxSpeakerEncoder")}


def encoder_kind(spec: str) -> str:
    """``builtin``, ``torchscript``, ``nemo`` or ``onnx``: which class an encoder spec names."""
    if spec in BUILTIN:
        return "builtin"
    if spec.startswith(TorchScriptEncoder.PREFIX):
        return "torchscript"
    suffix = Path(spec).suffix.lower()
    if suffix in BY_SUFFIX:
        return suffix[1:]
    raise UsageError(
        f"unknown encoder {spec!r}: use {', '.join(BUILTIN)}, torchscript:<path>, "
        "or the path of a NeMo speaker model (.nemo) or a WeSpeaker/3D-Speaker ONNX model (.onnx)"
    )


def encoder_file(spec: str) -> Path:
    """The model file behind an encoder spec (its weights, or openSMILE's config)."""
    kind = encoder_kind(spec)
    if kind == "builtin":
        return BUILTIN[spec].model_file()
    return Path(spec.removeprefix(TorchScriptEncoder.PREFIX)).expanduser()


def make_encoder(spec: str, device: str, threads: int = 1) -> Encoder:
    """The one factory: an encoder from its config spec."""
    kind, path = encoder_kind(spec), encoder_file(spec)
    if kind == "builtin":
        return BUILTIN[spec](device, threads)
    if kind == "torchscript":
        return TorchScriptEncoder(str(path), device)
    module, cls = BY_SUFFIX[f".{kind}"]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(str(path), device, threads)


def encoder_identity(spec: str, hash_cache: str | None = None) -> dict[str, str]:
    """What provenance records of an encoder: spec, model file path + sha256, package version."""
    path = encoder_file(spec)
    ident = {"spec": spec, "path": str(path.resolve()), "sha256": sha256_cached(path, hash_cache)}
    if encoder_kind(spec) == "builtin":
        package = BUILTIN[spec].package
        ident["package"] = f"{package}=={importlib.metadata.version(package)}"
    return ident


class Encoders:
    """The condition and emotion encoders of a run; ``__call__`` runs both on a batch
    of clips, the emotion encoder in a second thread while the first runs. Given
    the ``condition`` vectors already (the curation stage stores Resemblyzer's),
    only the emotion encoder runs; the condition encoder is loaded on first need."""

    def __init__(self, condition: str, emotion: str, device: str, threads: int = 1):
        self.spec, self.device, self.threads = condition, device, threads
        self._condition: Encoder | None = None
        self.emotion = make_encoder(emotion, device, threads)
        self.side = ThreadPoolExecutor(1, thread_name_prefix="emotion")
        log.info("condition encoder %s, emotion encoder %s, on %s", condition, emotion, device)

    @property
    def condition(self) -> Encoder:
        if self._condition is None:
            self._condition = make_encoder(self.spec, self.device, self.threads)
        return self._condition

    def __call__(
        self, wavs: list[np.ndarray], condition: list[np.ndarray] | None = None
    ) -> list[tuple[np.ndarray | AudioError, np.ndarray | AudioError]]:
        emo = self.side.submit(self.emotion, wavs)
        try:
            cond = condition if condition is not None else self.condition(wavs)
        finally:
            emo_vecs = emo.result()
        if not len(cond) == len(emo_vecs) == len(wavs):
            raise RuntimeError(f"encoders returned {len(cond)} and {len(emo_vecs)} vectors for {len(wavs)} clips")
        return list(zip(cond, emo_vecs))
