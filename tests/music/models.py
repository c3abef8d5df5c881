"""Separation models built from code, in the formats the music stage loads (random or
identity weights): they prove the loading and the plumbing, not separation quality."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# a small MDX-Net shape: n_fft 1024 (513 bins, the first 512 kept), 32 frames a chunk, hop 256
MDX_SMALL = {
    "mdx_dim_f_set": 512,
    "mdx_dim_t_set": 5,
    "mdx_n_fft_scale_set": 1024,
    "hop_length": 256,
    "segment_size": 32,
    "sample_rate": 44100,
}


def mdx_onnx(path: Path, dim_f: int, dim_t: int, kind: str = "mask", seed: int = 0) -> Path:
    """An ONNX model of UVR MDX-Net's interface: input ``input`` ``(batch, 4, dim_f, dim_t)``
    (real and imaginary planes of two channels), output of the same shape. ``identity``:
    the spectrogram as it came; ``mask``: a random 1x1 convolution through a sigmoid,
    times the input (a soft mask, as the real models' last step is)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4, dim_f, dim_t])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4, dim_f, dim_t])
    if kind == "identity":
        nodes, inits = [helper.make_node("Identity", ["input"], ["output"])], []
    else:
        rng = np.random.default_rng(seed)
        w = numpy_helper.from_array(rng.normal(0, 0.5, (4, 4, 1, 1)).astype(np.float32), "w")
        b = numpy_helper.from_array(rng.normal(0, 0.5, (4,)).astype(np.float32), "b")
        nodes = [
            helper.make_node("Conv", ["input", "w", "b"], ["z"]),
            helper.make_node("Sigmoid", ["z"], ["m"]),
            helper.make_node("Mul", ["input", "m"], ["output"]),
        ]
        inits = [w, b]
    graph = helper.make_graph(nodes, "mdx_like", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def htdemucs_th(path: Path, seed: int = 0) -> Path:
    """A random HT-Demucs at a tiny size, saved as demucs saves a model
    (``demucs.states.serialize_model``'s dict: class, arguments, state)."""
    import torch
    from demucs.htdemucs import HTDemucs
    from demucs.states import get_state

    torch.manual_seed(seed)
    model = HTDemucs(
        sources=["drums", "bass", "other", "vocals"], audio_channels=2, channels=8, depth=2, nfft=512,
        t_layers=1, t_heads=2, bottom_channels=0, segment=2, samplerate=16000, t_hidden_scale=1.0,
        t_max_positions=1000,
    )  # fmt: skip
    args, kwargs = model._init_args_kwargs
    package = {"klass": HTDemucs, "args": args, "kwargs": kwargs, "state": get_state(model, None, half=False)}
    torch.save({**package, "training_args": {}}, str(path))
    return path
