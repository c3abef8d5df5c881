"""S2S dense features through ONNX Runtime on CPU: HuBERT's conv extractor and transformer
up to ``s2s.layer``, exported once per checkpoint and layer and checked against eager PyTorch.

What the S2S stage and the export rule call (nothing heavy is imported until used):

* ``resolve_runtime(runtime, device)``: ``auto | torch | onnxruntime`` -> ``"torch"`` or
  ``"onnxruntime"`` (``auto``: onnxruntime on CPU, PyTorch on GPU).
* ``build_export(checkpoint, layer, out, threads)`` (rule ``s2s_export``): exports ``out`` (ONNX, dynamic time
  axis, one (1, T) waveform in, (frames, dim) features out; the task's waveform
  normalisation inside) and its sidecar ``out + ".json"``; refuses (``ModelFileError``)
  an export that differs from eager by more than :data:`TOLERANCE` on fixed waveforms.
* ``export_metadata(path, checkpoint_sha256, layer)``: the sidecar, or ``ModelFileError``
  when the export is for another checkpoint/layer/environment, damaged or unchecked.
* ``load_encoder(path, checkpoint_sha256, layer, threads, spinning=False, arena=True)``
  -> :class:`OnnxEncoder`, whose ``dense_features(wavs)`` returns what
  :func:`speechprep.s2s.models.dense_features` returns (a (frames, dim) float32 tensor per
  waveform) within TOLERANCE; ``meta`` has ``frame_rate``, ``normalize``, ``dim``.

One waveform per run: the conv extractor's GroupNorm is over the whole segment, and
batching the transformer gains little on CPU. Chunking (``max_chunk_seconds``) stays the caller's.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from ..errors import EnvironmentMismatch, ModelFileError, UsageError
from ..io.jsonio import write_json
from ..io.modelfiles import sha256_file

log = logging.getLogger("speechprep.s2s")

RUNTIMES = ("auto", "torch", "onnxruntime")
FORMAT = 1  # bump when the exported graph or the sidecar changes meaning
TOLERANCE = 1e-4  # max |export - eager| over the check waveforms
OPSET = 18
EXPORTER = "torchscript"  # torch.onnx.export(dynamo=False); see build_export


def resolve_runtime(runtime: str, device: str) -> str:
    """The runtime a job uses: ``auto`` is onnxruntime on CPU and PyTorch elsewhere."""
    if runtime not in RUNTIMES:
        raise UsageError(f"s2s.runtime is {runtime!r}; expected one of {', '.join(RUNTIMES)}")
    if runtime == "auto":
        runtime = "onnxruntime" if device == "cpu" else "torch"
    if runtime == "onnxruntime" and device != "cpu":
        raise UsageError(f"s2s.runtime onnxruntime runs on the CPU only; this job's device is {device!r}")
    return runtime


def _versions() -> dict[str, str]:
    try:
        import onnx
        import onnxruntime
    except ImportError as e:
        raise EnvironmentMismatch(f"s2s.runtime onnxruntime needs onnxruntime and onnx in the S2S env ({e})") from None
    import torch

    return {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__}


def _mean(x, block: int = 512):
    """Mean over the last axis as block sums, then a sum of those: onnxruntime's ReduceMean
    over a whole segment adds up one float at a time (1.5e-4 off at 60 s through a HuBERT;
    eager PyTorch is within 5e-6 of float64, and so is this). The zero padding to whole
    blocks is computed from the traced length, so the time axis stays symbolic."""
    import torch.nn.functional as F

    t = x.shape[-1]
    blocks = F.pad(x, (0, (block - t % block) % block)).reshape(*x.shape[:-1], -1, block)
    return blocks.sum(-1).sum(-1, keepdim=True) / t


def _group_norm(gn, x):
    """``gn(x)`` (HuBERT base's GroupNorm over time in the first conv block), statistics by :func:`_mean`."""
    import torch

    y = x.reshape(x.shape[0], gn.num_groups, -1)
    y = y - _mean(y)
    y = (y / torch.sqrt(_mean(y * y) + gn.eps)).view_as(x)
    if not gn.affine:
        return y
    shape = (-1,) + (1,) * (x.dim() - 2)
    return y * gn.weight.reshape(shape) + gn.bias.reshape(shape)


def _conv_features(fe, wav):
    """``fe(wav)`` (fairseq's conv feature extractor), with its 1-D convolutions run as 2-D ones
    of height 1: onnxruntime gives those its blocked (NCHWc) kernels, 1.1-1.4x faster here."""
    import torch
    import torch.nn.functional as F

    x = wav[:, None, None, :]
    for block in fe.conv_layers:
        for mod in block:
            if isinstance(mod, torch.nn.Conv1d):
                x = F.conv2d(
                    x,
                    mod.weight[:, :, None],
                    mod.bias,
                    stride=(1, mod.stride[0]),
                    padding=(0, mod.padding[0]),
                    dilation=(1, mod.dilation[0]),
                    groups=mod.groups,
                )
            elif isinstance(mod, torch.nn.GroupNorm):
                x = _group_norm(mod, x)
            elif isinstance(mod, (torch.nn.Dropout, torch.nn.GELU)):
                x = mod(x)
            else:  # layer_norm mode's (TransposeLast, LayerNorm, TransposeLast)
                x = mod(x[:, :, 0])[:, :, None]
    return x[:, :, 0]


def _encoder_module(model, layer: int, normalize: bool):
    """One (1, T) waveform -> (frames, dim) features of ``layer`` (1-based), as
    ``model.extract_features(..., output_layer=layer)`` computes them, but with statistics
    over time by :func:`_mean`, and without fairseq's pad-to-even step (a masked pad frame:
    no effect on the result, but not traceable)."""
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, wav):
            m, enc = self.model, self.model.encoder
            if normalize:  # F.layer_norm(wav, wav.shape)
                wav = wav - _mean(wav)
                wav = wav / torch.sqrt(_mean(wav * wav) + 1e-5)
            x = m.layer_norm(_conv_features(m.feature_extractor, wav).transpose(1, 2))
            if m.post_extract_proj is not None:
                x = m.post_extract_proj(x)
            x = x + enc.pos_conv(x.transpose(1, 2)).transpose(1, 2)
            if not enc.layer_norm_first:
                x = enc.layer_norm(x)
            x = x.transpose(0, 1)
            for block in enc.layers[:layer]:
                x, _ = block(x, self_attn_padding_mask=None, need_weights=False)
            return x[:, 0]

    return Encoder().eval()


def _eager(model, wav, layer: int, normalize: bool):
    """The reference: fairseq's own ``extract_features``, as ``s2s.dense_features`` matches it."""
    import torch
    import torch.nn.functional as F

    w = torch.as_tensor(wav, dtype=torch.float32)
    if normalize:
        w = F.layer_norm(w, w.shape)
    with torch.no_grad():
        return model.extract_features(w[None], padding_mask=None, mask=False, output_layer=layer)[0][0].numpy()


def check_waveforms() -> list:
    """Fixed waveforms for the build check: seeded noise (an even frame count), 30 s of a
    speech-like harmonic sweep with amplitude modulation and noise (odd; long, as errors
    that grow with length show there), the shortest input (one frame)."""
    import numpy as np

    rng = np.random.default_rng(1234)
    t = np.arange(30 * 16000) / 16000
    f0 = 110 + 60 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / 16000
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return [
        (0.1 * rng.standard_normal(40000)).astype(np.float32),
        (0.2 * voiced + 0.01 * rng.standard_normal(len(t))).astype(np.float32),
        (0.1 * rng.standard_normal(400)).astype(np.float32),
    ]


def _session(path: str | os.PathLike, threads: int, spinning: bool, arena: bool):
    """intra-op threads = the job's, sequential, all graph optimisations (the optimised graph
    is not saved: its NCHWc layout is specific to the CPU); idle threads sleep rather than
    spin (same speed here, less CPU taken from other jobs); the arena (kept at its peak) or not."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.enable_cpu_mem_arena = bool(arena)
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """A checked export in an onnxruntime session (CPU, ``threads`` intra-op threads).
    ``arena=False``: peak RSS at 60-s segments 1.3-1.6 GB lower, about 15% slower (measured here)."""

    def __init__(self, path, meta: dict[str, Any], threads: int = 1, spinning: bool = False, arena: bool = True):
        self.path, self.meta = Path(path), meta
        self.layer, self.dim, self.min_samples = meta["layer"], meta["dim"], meta["min_samples"]
        self.session = _session(path, threads, spinning, arena)

    def __call__(self, wav) -> Any:
        """(frames, dim) float32 array; no frames for a waveform shorter than the receptive field."""
        import numpy as np

        w = np.ascontiguousarray(np.asarray(wav, dtype=np.float32).reshape(1, -1))
        if w.shape[1] < self.min_samples:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.session.run(None, {"wav": w})[0]

    def dense_features(self, wavs: list) -> list:
        """What ``s2s.dense_features(model, wavs, layer, normalize)`` returns: CPU tensors."""
        import torch

        return [torch.from_numpy(self(w)) for w in wavs]


def _export(module, example, path: Path, exporter: str) -> None:
    """``torch.onnx.export`` with a dynamic time axis: the TorchScript exporter (deprecated in
    torch, but it needs only ``onnx``), or ``dynamo`` (also needs onnxscript and onnx-ir)."""
    import torch

    if exporter == "dynamo":
        samples = torch.export.Dim("samples", min=400)
        kw = {"dynamo": True, "verbose": False, "external_data": False, "dynamic_shapes": {"wav": {1: samples}}}
    elif exporter == "torchscript":
        kw = {"dynamo": False, "dynamic_axes": {"wav": {1: "samples"}, "features": {0: "frames"}}}
    else:
        raise UsageError(f"unknown ONNX exporter {exporter!r}: torchscript or dynamo")
    with torch.no_grad():
        torch.onnx.export(
            module, (example,), str(path), input_names=["wav"], output_names=["features"], opset_version=OPSET, **kw
        )


def _receptive_field(model) -> tuple[int, int]:
    """``(min_samples, hop)`` of the conv feature extractor: the fewest samples that give a
    frame, and the samples per frame."""
    convs = [block[0] for block in model.feature_extractor.conv_layers]
    min_samples, hop = 1, 1
    for c in reversed(convs):
        min_samples = (min_samples - 1) * c.stride[0] + c.kernel_size[0]
    for c in convs:
        hop *= c.stride[0]
    return min_samples, hop


def _check_export(path: Path, model, checkpoint, layer: int, normalize: bool, meta: dict, threads: int) -> float:
    """The export's largest |difference| from eager PyTorch over the check waveforms; a
    shape mismatch is refused."""
    enc = OnnxEncoder(path, meta, threads, arena=False)
    diff = 0.0
    for w in check_waveforms():
        ref, got = _eager(model, w, layer, normalize), enc(w)
        if ref.shape != got.shape:
            raise ModelFileError(
                f"{checkpoint}: the ONNX export gives {got.shape} features for {len(w)} "
                f"samples, eager PyTorch {ref.shape}; refused"
            )
        diff = max(diff, float(abs(ref - got).max()))
    return diff


def build_export(
    checkpoint: str | os.PathLike,
    layer: int,
    out: str | os.PathLike,
    threads: int = 1,
    exporter: str = EXPORTER,
    tolerance: float = TOLERANCE,
) -> dict[str, Any]:
    """Export layer ``layer`` of ``checkpoint`` to ``out`` (+ ``out.json``), checked against eager."""
    import torch

    from . import fairseq_legacy

    out, versions, sha = Path(out), _versions(), sha256_file(checkpoint)
    model, _, task, _ = fairseq_legacy.load(checkpoint)
    model = model.float().cpu().eval()
    n_layers = len(model.encoder.layers)
    if not 1 <= layer <= n_layers:
        raise UsageError(f"s2s.layer is {layer}, but the HuBERT checkpoint has layers 1..{n_layers}")
    normalize = bool(getattr(task.cfg, "normalize", False))
    min_samples, hop = _receptive_field(model)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    wavs = check_waveforms()
    try:
        _export(_encoder_module(model, layer, normalize), torch.from_numpy(wavs[0])[None], tmp, exporter)
        meta = {"layer": layer, "dim": model.encoder.embedding_dim, "min_samples": min_samples}
        diff = _check_export(tmp, model, checkpoint, layer, normalize, meta, threads)
        if not diff <= tolerance:
            raise ModelFileError(
                f"{checkpoint}: the ONNX export of layer {layer} differs from eager PyTorch by "
                f"{diff:.3g} (> {tolerance:g}) on the check waveforms; refused"
            )
        Path(f"{out}.json").unlink(missing_ok=True)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    meta.update(format=FORMAT, checkpoint=os.path.abspath(checkpoint), checkpoint_sha256=sha, normalize=normalize)
    meta.update(frame_rate=16000 / hop, onnx_sha256=sha256_file(out), max_abs_diff=diff, tolerance=tolerance)
    meta.update(check_samples=[len(w) for w in wavs], opset=OPSET, exporter=exporter, versions=versions)
    write_json(f"{out}.json", meta)
    size = out.stat().st_size / 1e6
    log.info("s2s: exported layer %d of %s to %s (%.0f MB); max |export - eager| %.2e on %d check waveforms",
             layer, checkpoint, out, size, diff, len(wavs))  # fmt: skip
    return meta


def load_encoder(
    path: str | os.PathLike,
    checkpoint_sha256: str | None = None,
    layer: int | None = None,
    threads: int = 1,
    spinning: bool = False,
    arena: bool = True,
) -> OnnxEncoder:
    """The export at ``path`` in a session, refused as :func:`export_metadata` refuses."""
    return OnnxEncoder(path, export_metadata(path, checkpoint_sha256, layer), threads, spinning, arena)


def export_metadata(
    path: str | os.PathLike, checkpoint_sha256: str | None = None, layer: int | None = None
) -> dict[str, Any]:
    """The sidecar of the export at ``path``; ``ModelFileError`` unless it says the export was built
    and checked for this checkpoint, this layer and this environment, and the file is intact."""
    path, versions = Path(path), _versions()
    try:
        with open(f"{path}.json", encoding="utf-8") as f:
            meta = json.load(f)
        wanted = {"format": FORMAT, "versions": versions}
        if checkpoint_sha256 is not None:
            wanted["checkpoint_sha256"] = checkpoint_sha256
        if layer is not None:
            wanted["layer"] = layer
        wrong = {k: (meta.get(k), v) for k, v in wanted.items() if meta.get(k) != v}
    except (OSError, ValueError, AttributeError) as e:
        raise ModelFileError(f"{path}: no readable sidecar {path}.json ({e}); rebuild the export") from None
    if wrong:
        raise ModelFileError(
            f"{path}: built for another checkpoint, layer or environment "
            f"({'; '.join(f'{k}: {a} != {b}' for k, (a, b) in wrong.items())}); rebuild the export"
        )
    if not path.is_file() or sha256_file(path) != meta.get("onnx_sha256"):
        raise ModelFileError(f"{path}: missing or not the file its sidecar was written for; rebuild the export")
    return meta
