"""The MDX-Net framing of speechprep.music.separate against audio-separator's own, on one
model built from code (tests/music/models.py: a random 1x1-convolution mask of MDX-Net's
interface) and a real voice over real music at 10 dB (the LibriVox reader over hyperrogue):
the largest difference between the two stems, and their correlation.

audio-separator is not a dependency of the stage: run this with it on the path, e.g.

    pip install --target /tmp/as --no-deps audio-separator==0.47.1 pydub audioread six
    PYTHONPATH=/tmp/as:. .venvs/curate/bin/python bench/music/mdx_framing.py

(the curate env has its other imports: torch, onnx, onnxruntime, librosa, scipy). Its
onnx2torch import, used only where segment_size is not the model's frame count, is given
an empty module here: onnx2torch imports torchvision, which no env here holds.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

sys.modules.setdefault("onnx2torch", types.ModuleType("onnx2torch"))  # see the docstring

from audio_separator.separator.architectures.mdx_separator import MDXSeparator  # noqa: E402

from speechprep.music import separate  # noqa: E402
from speechprep.music.params import SeparateParams  # noqa: E402
from tests.music.models import MDX_SMALL, mdx_onnx  # noqa: E402
from tests.music.test_separate import real_mix  # noqa: E402
from tests.support import config  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        model = mdx_onnx(Path(d) / "mdx.onnx", MDX_SMALL["mdx_dim_f_set"], 2 ** MDX_SMALL["mdx_dim_t_set"])
        p = SeparateParams(**{**config()["separate"], **MDX_SMALL, "model": str(model), "compensate": 1.0})
        mix = real_mix(6.0)
        ours = separate.load(p).demix(np.stack([mix, mix]))
        theirs_sep = MDXSeparator(
            {
                "logger": logging.getLogger("audio_separator"), "log_level": logging.WARNING, "torch_device": "cpu",
                "torch_device_cpu": "cpu", "onnx_execution_provider": ["CPUExecutionProvider"],
                "model_name": "mdx", "model_path": str(model), "output_dir": d, "output_format": "flac",
                "normalization_threshold": 0.9, "amplification_threshold": 0.0, "sample_rate": p.sample_rate,
                "model_data": {
                    "compensate": p.compensate, "mdx_dim_f_set": p.mdx_dim_f_set, "mdx_dim_t_set": p.mdx_dim_t_set,
                    "mdx_n_fft_scale_set": p.mdx_n_fft_scale_set, "primary_stem": p.primary_stem,
                },
            },
            {"segment_size": p.segment_size, "overlap": p.overlap, "batch_size": 1, "hop_length": p.hop_length,
             "enable_denoise": p.enable_denoise},
        )  # fmt: skip
        theirs = theirs_sep.demix(np.stack([mix, mix]).astype(np.float32))
    inner = slice(p.mdx_n_fft_scale_set, -p.mdx_n_fft_scale_set)
    diff = float(np.abs(ours[:, inner] - theirs[:, inner]).max())
    corr = float(np.corrcoef(ours[0, inner], theirs[0, inner])[0, 1])
    peak = float(np.abs(theirs[:, inner]).max())
    print(f"samples {mix.shape[-1]}: max |ours - audio-separator's| {diff:.2e} (stem peak {peak:.3f}); corr {corr:.6f}")


if __name__ == "__main__":
    main()
