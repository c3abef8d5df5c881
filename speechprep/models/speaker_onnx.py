"""Demo ONNX speaker models, built from code (no download). NOT real models: random weights.

:func:`build_tiny` exports two tiny torch networks (a few convolutions, statistics
pooling, a linear layer) in the conventions :mod:`speechprep.encoders.onnx_speaker` reads:
``wespeaker.onnx`` (``feats`` -> ``embs``) and ``campplus.onnx`` (3D-Speaker's
``feature`` -> ``embedding``), batch and time axes dynamic. :func:`tiny_model` rebuilds
the same torch module (seeded), so tests can compare the export with its forward.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from ..encoders.onnx_speaker import CONVENTIONS, NUM_MEL_BINS
from ..io.model_archive import save_model

OPSET = 18  # as speechprep.s2s.runtime exports HuBERT
# file name, seed and vector size of each convention's tiny model
TINY = {"wespeaker": ("wespeaker.onnx", 1, 32), "3d-speaker": ("campplus.onnx", 2, 24)}


class _StatsPool(nn.Module):
    """Mean and standard deviation over time: (B, C, T) -> (B, 2C)."""

    def forward(self, h):
        mean = h.mean(dim=-1)
        std = torch.sqrt(((h - mean.unsqueeze(-1)) ** 2).mean(dim=-1) + 1e-5)
        return torch.cat([mean, std], dim=-1)


class TinyWeSpeaker(nn.Module):
    """(B, T, 80) -> (B, dim): 1-D convolutions over time (TDNN-like), statistics pooling, linear."""

    def __init__(self, dim: int, channels: int = 32):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv1d(NUM_MEL_BINS, channels, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 3, dilation=2, padding=2),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 1),
        )
        self.pool, self.linear = _StatsPool(), nn.Linear(2 * channels, dim)

    def forward(self, feats):
        return self.linear(self.pool(self.convs(feats.transpose(1, 2))))


class TinyCamPlus(nn.Module):
    """(B, T, 80) -> (B, dim): a 2-D convolution front (as CAM++'s), 1-D convolutions, statistics pooling, linear."""

    def __init__(self, dim: int, channels: int = 4, hidden: int = 32):
        super().__init__()
        self.front = nn.Sequential(nn.Conv2d(1, channels, 3, stride=(2, 1), padding=1), nn.ReLU())
        self.convs = nn.Sequential(
            nn.Conv1d(channels * (NUM_MEL_BINS // 2), hidden, 3, padding=1), nn.ReLU(), nn.Conv1d(hidden, hidden, 1)
        )
        self.pool, self.linear = _StatsPool(), nn.Linear(2 * hidden, dim)

    def forward(self, feature):
        h = self.front(feature.transpose(1, 2).unsqueeze(1)).flatten(1, 2)  # (B, C * 40, T)
        return self.linear(self.pool(self.convs(h)))


def tiny_model(convention: str) -> nn.Module:
    """The tiny torch model of ``convention`` (``wespeaker`` or ``3d-speaker``), seeded, in eval mode."""
    _, seed, dim = TINY[convention]
    cls = TinyWeSpeaker if convention == "wespeaker" else TinyCamPlus
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return cls(dim).eval()


def export_onnx(module: nn.Module, path: Path, input_name: str, output_name: str) -> Path:
    """``module`` ((B, T, 80) -> (B, D)) as ONNX at ``path``, batch and time axes dynamic,
    written atomically (:func:`~speechprep.io.model_archive.save_model`). The TorchScript exporter
    (``dynamo=False``), as :mod:`speechprep.s2s.runtime` uses: it needs only ``onnx``."""
    example = torch.zeros(2, 150, NUM_MEL_BINS)
    axes = {input_name: {0: "batch", 1: "frames"}, output_name: {0: "batch"}}

    def export(tmp: Path) -> None:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter is deprecated, on purpose
            torch.onnx.export(
                module.eval(),
                (example,),
                str(tmp),
                input_names=[input_name],
                output_names=[output_name],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )

    return save_model(path, export)


def build_tiny(out_dir: Path) -> dict[str, Path]:
    """``wespeaker.onnx`` and ``campplus.onnx`` under ``out_dir``: {convention: path}."""
    out = {}
    for convention, (name, _, _) in TINY.items():
        c = CONVENTIONS[convention]
        out[convention] = export_onnx(tiny_model(convention), Path(out_dir) / name, c.input, c.output)
    return out
