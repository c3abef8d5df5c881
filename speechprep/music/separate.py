"""Separation: the vocals of a segment the detector flags, by the model ``separate.model`` names.

* A UVR MDX-Net ``.onnx`` file (:class:`MdxSeparator`), run by onnxruntime with the framing
  audio-separator gives such a model (its ``MDXSeparator.demix`` and ``run_model``, and its
  ``STFT``): stereo audio at ``separate.sample_rate`` cut into chunks of
  ``hop_length * (segment_size - 1)`` samples, ``n_fft // 2`` of zeros before the first,
  each chunk's STFT (Hann window, centred; real and imaginary parts of both channels as
  four planes, the first ``dim_f`` bins) with its lowest three bins zeroed, the model run on
  it (with ``enable_denoise``: on it and on its negation, halved), the inverse STFT, the
  chunks overlapped by ``overlap`` under a Hann window and divided by the window's sum, the
  padding trimmed. The model's primary stem is the vocals, or (``primary_stem:
  Instrumental``) what it leaves of the mix: ``mix - compensate * primary``. The keys are
  audio-separator's own (its model data per model file: ``compensate``, ``mdx_dim_f_set``,
  ``mdx_dim_t_set``, ``mdx_n_fft_scale_set``, ``primary_stem``; its MDX parameters:
  ``hop_length``, ``segment_size``, ``overlap``, ``enable_denoise``). audio-separator
  itself is not imported: it looks a model's data up by the file's hash in a list it
  downloads, and its package pulls in a converter (onnx2torch) this stage does not need;
  where ``segment_size`` is not ``2 ** mdx_dim_t_set`` it converts the model to PyTorch,
  which is refused here. The vocals keep the mix's level (audio-separator scales its
  stems by the input's peak and normalises them on writing).
* A Demucs model saved as demucs saves one (``.th``: the model's class, its arguments and
  its state; HT-Demucs, Hybrid Demucs or Demucs) (:class:`DemucsSeparator`), built by
  ``demucs.states.load_model`` and run by ``demucs.apply.apply_model`` (split into the
  model's segments, overlapped by ``overlap``, no random shifts), its input normalised as
  ``demucs.separate`` does; the ``vocals`` source is the vocals. The file's pickle is read
  with ``torch.load(weights_only=True)`` allowing only the Demucs model classes and
  ``fractions.Fraction`` (a segment length): nothing else it names is looked up or run.

Both give mono float32 vocals at the model's rate (:meth:`Separator.vocals`).
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

import numpy as np

from ..errors import ModelFileError, UsageError, describe
from .params import SeparateParams

log = logging.getLogger("speechprep.music")

# the globals a Demucs model file may name: its model classes, and Fraction (HT-Demucs's segment)
DEMUCS_CLASSES = {
    "demucs.htdemucs": ("HTDemucs",),
    "demucs.hdemucs": ("HDemucs",),
    "demucs.demucs": ("Demucs",),
    "fractions": ("Fraction",),
}


class Separator(Protocol):
    rate: int  # the rate the model runs at

    def vocals(self, audio: np.ndarray) -> np.ndarray:
        """The vocals of ``audio`` (float32 mono at :attr:`rate`), as long as it."""


def load(p: SeparateParams, device: str = "cpu", threads: int = 1) -> Separator:
    """The separator ``p.model`` names (by its suffix: ``.th`` Demucs, else MDX-Net ONNX)."""
    path = os.path.expanduser(str(p.model))
    if not os.path.isfile(path):
        raise UsageError(f"separate.model {p.model}: no such file")
    if p.kind == "demucs":
        return DemucsSeparator(path, p, device, threads)
    return MdxSeparator(path, p, device, threads)


def _stereo(audio: np.ndarray) -> np.ndarray:
    """Mono to the two equal channels a stereo model reads (audio-separator's prepare_mix)."""
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    return np.stack([x, x])


class MdxStft:
    """audio-separator's MDX STFT: ``(batch, 2, samples)`` to ``(batch, 4, dim_f, frames)`` and back."""

    def __init__(self, n_fft: int, hop: int, dim_f: int):
        import torch

        self.n_fft, self.hop, self.dim_f = n_fft, hop, dim_f
        self.window = torch.hann_window(window_length=n_fft, periodic=True)

    def __call__(self, x):
        import torch

        batch, (channels, t) = x.shape[:-2], x.shape[-2:]
        spec = torch.stft(
            x.reshape([-1, t]), n_fft=self.n_fft, hop_length=self.hop, window=self.window, center=True,
            return_complex=True,
        )  # fmt: skip
        spec = torch.view_as_real(spec).permute([0, 3, 1, 2])
        spec = spec.reshape([*batch, channels, 2, -1, spec.shape[-1]]).reshape(
            [*batch, channels * 2, -1, spec.shape[-1]]
        )
        return spec[..., : self.dim_f, :]

    def inverse(self, spec):
        import torch

        batch, (c, f, t) = spec.shape[:-3], spec.shape[-3:]
        bins = self.n_fft // 2 + 1
        spec = torch.cat([spec, torch.zeros([*batch, c, bins - f, t], dtype=spec.dtype)], -2)
        spec = spec.reshape([*batch, c // 2, 2, bins, t]).reshape([-1, 2, bins, t]).permute([0, 2, 3, 1])
        wave = torch.istft(
            torch.complex(spec[..., 0].contiguous(), spec[..., 1].contiguous()),
            n_fft=self.n_fft, hop_length=self.hop, window=self.window, center=True,
        )  # fmt: skip
        return wave.reshape([*batch, 2, -1])


class MdxSeparator:
    """A UVR MDX-Net ONNX model (module docstring)."""

    def __init__(self, path: str, p: SeparateParams, device: str = "cpu", threads: int = 1):
        import onnxruntime as ort

        self.p, self.rate = p, int(p.sample_rate)
        self.n_fft, self.hop, self.dim_f = int(p.mdx_n_fft_scale_set), int(p.hop_length), int(p.mdx_dim_f_set)
        self.dim_t = 2 ** int(p.mdx_dim_t_set)
        if int(p.segment_size) != self.dim_t:
            raise UsageError(
                f"separate.segment_size {p.segment_size} is not 2 ** separate.mdx_dim_t_set ({self.dim_t}): "
                "audio-separator would convert the model to PyTorch for that; give segment_size "
                f"{self.dim_t}, the model's own frame count"
            )
        if p.primary_stem not in ("Vocals", "Instrumental"):
            raise UsageError(f"separate.primary_stem {p.primary_stem!r}: Vocals or Instrumental")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = max(1, int(threads)), 1
        opts.log_severity_level = 3
        providers = ["CPUExecutionProvider"]
        if device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        try:
            self.session = ort.InferenceSession(path, opts, providers=providers)
        except Exception as e:
            raise ModelFileError(
                f"separate.model {path}: not an ONNX model onnxruntime can load ({describe(e)})"
            ) from e
        inputs = self.session.get_inputs()
        if len(inputs) != 1:
            raise ModelFileError(f"separate.model {path}: one input (the spectrogram) expected, got {len(inputs)}")
        self.input = inputs[0].name
        shape = inputs[0].shape
        want = [4, self.dim_f, self.dim_t]
        given = [d if isinstance(d, int) else None for d in shape[1:]]
        if len(shape) != 4 or any(g is not None and g != w for g, w in zip(given, want, strict=True)):
            raise ModelFileError(
                f"separate.model {path}: its input is {shape}, not (batch, 4, {self.dim_f}, {self.dim_t}) "
                "(separate.mdx_dim_f_set and mdx_dim_t_set are the model's: UVR's model data gives them)"
            )
        self.stft = MdxStft(self.n_fft, self.hop, self.dim_f)
        self.trim = self.n_fft // 2
        self.chunk_size = self.hop * (self.dim_t - 1)
        self.gen_size = self.chunk_size - 2 * self.trim
        if self.gen_size <= 0:
            raise UsageError(
                f"separate.hop_length {self.hop} x segment_size is shorter than the FFT (n_fft {self.n_fft})"
            )

    def _model(self, spec):
        import torch

        out = self.session.run(None, {self.input: spec.numpy()})[0]
        return torch.from_numpy(np.asarray(out, dtype=np.float32))

    def run_model(self, chunk: np.ndarray) -> np.ndarray:
        """One ``(1, 2, chunk_size)`` chunk through the STFT, the model and back (audio-separator's run_model)."""
        import torch

        with torch.no_grad():
            spec = self.stft(torch.from_numpy(chunk))
            spec[:, :, :3, :] *= 0
            if self.p.enable_denoise:
                pred = self._model(-spec) * -0.5 + self._model(spec) * 0.5
            else:
                pred = self._model(spec)
            return self.stft.inverse(pred).numpy()

    def demix(self, mix: np.ndarray) -> np.ndarray:
        """The model's primary stem of ``mix`` (``(2, samples)``), as audio-separator's demix frames it."""
        n = mix.shape[-1]
        overlap, chunk_size, trim = float(self.p.overlap), self.chunk_size, self.trim
        pad = self.gen_size + trim - (n % self.gen_size)
        mixture = np.concatenate(
            (np.zeros((2, trim), np.float32), mix.astype(np.float32), np.zeros((2, pad), np.float32)), 1
        )
        step = int((1 - overlap) * chunk_size)
        result = np.zeros((1, 2, mixture.shape[-1]), np.float32)
        divider = np.zeros((1, 2, mixture.shape[-1]), np.float32)
        for start in range(0, mixture.shape[-1], step):
            end = min(start + chunk_size, mixture.shape[-1])
            actual = end - start
            window = np.tile(np.hanning(actual)[None, None, :], (1, 2, 1)) if overlap != 0 else None
            part = mixture[:, start:end]
            if end != start + chunk_size:
                part = np.concatenate((part, np.zeros((2, start + chunk_size - end), np.float32)), axis=-1)
            out = self.run_model(part[None])
            if window is not None:
                out[..., :actual] *= window
                divider[..., start:end] += window
            else:
                divider[..., start:end] += 1
            result[..., start:end] += out[..., :actual]
        with np.errstate(divide="ignore", invalid="ignore"):  # the window's zero ends, in the trimmed padding
            waves = result / divider
        return waves[0, :, trim:-trim][:, :n]

    def vocals(self, audio: np.ndarray) -> np.ndarray:
        mix = _stereo(audio)
        primary = self.demix(mix)
        if self.p.primary_stem == "Instrumental":
            primary = mix - primary * float(self.p.compensate)
        return primary.mean(axis=0).astype(np.float32)


def _demucs_globals(path: str) -> list:
    """The classes a Demucs file may name, imported, after checking it names no other."""
    import importlib

    import torch

    try:
        names = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except Exception as e:  # noqa: BLE001 (not a zip checkpoint, damaged: one clear line)
        raise ModelFileError(f"separate.model {path}: not a torch checkpoint torch can read ({describe(e)})") from None
    allowed, refused = [], []
    for full in names:
        module, _, name = full.rpartition(".")
        if name in DEMUCS_CLASSES.get(module, ()):
            allowed.append(getattr(importlib.import_module(module), name))
        else:
            refused.append(full)
    if refused:
        raise ModelFileError(
            f"refusing to load separate.model {path}: its pickle names {', '.join(refused)}, which is not a "
            "Demucs model class (speechprep.music.separate.DEMUCS_CLASSES; nothing was unpickled)"
        )
    return allowed


class DemucsSeparator:
    """A Demucs model file (module docstring)."""

    def __init__(self, path: str, p: SeparateParams, device: str = "cpu", threads: int = 1):
        import torch
        from demucs.states import load_model

        torch.set_num_threads(max(1, int(threads)))
        self.p, self.device = p, device
        allow = _demucs_globals(path)
        try:
            with torch.serialization.safe_globals(allow):
                package = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 (weights-only refusal or damaged data)
            raise ModelFileError(f"separate.model {path}: cannot be loaded: {describe(e)}") from None
        if not isinstance(package, dict) or not {"klass", "args", "kwargs", "state"} <= set(package):
            raise ModelFileError(
                f"separate.model {path}: not a Demucs model file (klass, args, kwargs, state), as "
                "demucs.states.serialize_model writes one; a bag of models (.yaml) is not read"
            )
        if package["klass"] not in allow:
            raise ModelFileError(f"separate.model {path}: its klass {package['klass']!r} is not a Demucs model")
        try:
            self.model = load_model(package, strict=True).to(device).eval()
        except Exception as e:  # noqa: BLE001 (arguments or state that do not fit the class)
            raise ModelFileError(f"separate.model {path}: the model does not build: {describe(e)}") from None
        if "vocals" not in self.model.sources:
            raise ModelFileError(f"separate.model {path}: its sources {self.model.sources} have no 'vocals'")
        self.index = list(self.model.sources).index("vocals")
        self.rate = int(self.model.samplerate)
        self.channels = int(self.model.audio_channels)

    def vocals(self, audio: np.ndarray) -> np.ndarray:
        import torch
        from demucs.apply import apply_model

        x = np.asarray(audio, dtype=np.float32).reshape(-1)
        wav = torch.from_numpy(_stereo(x) if self.channels == 2 else x[None].copy())
        ref = wav.mean(0)
        mean, std = float(ref.mean()), float(ref.std())
        std = std if std > 1e-8 else 1.0  # digital silence: nothing to scale
        with torch.no_grad():
            out = apply_model(
                self.model, ((wav - mean) / std)[None], shifts=0, split=True, overlap=float(self.p.overlap),
                device=self.device, progress=False,
            )  # fmt: skip
        voc = out[0, self.index] * std + mean
        return voc.mean(0).cpu().numpy().astype(np.float32)
