"""The demo S2S models on other CPUs: the same weights, the k-means criterion, the build's cost.

    .venvs/s2s/bin/python bench/demo/s2s_models.py [--settings all] [--moves] [--code DIR]

Builds the demo S2S models (the workflow's job, ``python -m speechprep demo s2s-models``,
on one thread as its rule runs it) under each setting of :data:`SETTINGS`, in a process of
its own (each changes the floating-point kernels as another CPU would), and prints the
sha256 of the saved HuBERT's and vocoder's tensors, the k-means fits the build tried with
their criterion measures (smallest nearest-centre gap over a frame's norm, the re-encoded
copies' and the closest two phrases' unit Jaccard), and the job's CPU seconds (user +
system of the process, ``getrusage``) and wall time. ``--code`` runs the job from another
tree of the package (``git archive <commit> speechprep | tar -x -C DIR``), e.g. the code
before its weights were drawn in float64.

``--moves`` measures what the criterion's gap must exceed: how far ONNX Runtime (the
checked export, as the stage runs it) and batching (``dense_features``) move each frame
that the criterion reads from eager PyTorch one waveform at a time, over the frame's norm.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRUTH = REPO / "resources" / "demo" / "truth.json"
SETTINGS = {
    "default": {},
    "older CPU": {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "OPENBLAS_CORETYPE": "Nehalem",
    },
    "AVX2 kernels, Haswell BLAS": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
    },
}


def tensors_sha(state: dict) -> str:
    import torch

    h = hashlib.sha256()
    for k, v in sorted(state.items()):
        if isinstance(v, torch.Tensor):
            h.update(k.encode() + str(v.dtype).encode() + v.contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


def build(setting: dict, code: Path, out: Path) -> dict:
    """The job under ``setting``: its criterion lines, weights' sha256, CPU and wall seconds."""
    import torch

    env = {**os.environ, **setting, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "speechprep", "demo", "s2s-models", "--truth", str(TRUTH), "--out-dir", str(out)]
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=code)  # -m: cwd first on sys.path
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        return {"failed": p.returncode, "error": p.stderr.strip().splitlines()[-1]}
    lines = p.stderr.splitlines()
    hubert = torch.load(out / "demo_hubert_legacy.pt", weights_only=False)["model"]
    vocoder = torch.load(out / "demo_vocoder.pt")["generator"]
    return {
        "hubert_sha": tensors_sha(hubert),
        "vocoder_sha": tensors_sha(vocoder),
        "fits": [line.split(": ", 2)[2] for line in lines if "k-means fit" in line],
        "met": next((line.split("criterion met: ")[1] for line in lines if "criterion met: " in line), None),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        "wall_s": round(time.monotonic() - t0, 1),
    }


def worst_move(got: list, ref: list) -> float:
    """The largest ``|got - ref|`` of a frame over ``|ref|``."""
    import numpy as np

    return max(float((np.linalg.norm(g - r, axis=1) / np.linalg.norm(r, axis=1)).max()) for g, r in zip(got, ref))


def moves(out: Path) -> dict:
    """The largest move of a criterion frame from eager PyTorch (one waveform at a time), over
    its norm: through ONNX Runtime, and batched (``dense_features``)."""
    import torch

    from speechprep.demo.s2s_models import build_demo, criterion_audio
    from speechprep.io.modelfiles import sha256_file
    from speechprep.s2s import fairseq_legacy
    from speechprep.s2s import runtime as rt
    from speechprep.s2s.models import dense_features

    torch.set_num_threads(1)
    ckpt = build_demo(TRUTH, out)["hubert"]
    model = fairseq_legacy.load(ckpt)[0]
    meta = rt.build_export(ckpt, 2, out / "hubert.onnx")
    enc = rt.load_encoder(out / "hubert.onnx", sha256_file(ckpt), 2, threads=1)
    result = {"export_max_abs_diff": meta["max_abs_diff"]}
    for group, wavs in criterion_audio(TRUTH).items():
        with torch.no_grad():
            ref = [
                model.extract_features(torch.from_numpy(w)[None], None, mask=False, output_layer=2)[0][0].numpy()
                for w in wavs
            ]
        result[group] = {
            "frames": sum(map(len, ref)),
            "onnx": worst_move([enc(w) for w in wavs], ref),
            "batched": worst_move([f.numpy() for f in dense_features(model, wavs, 2, False)], ref),
        }
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", nargs="*", default=["default"], help=f"'all' or names of {list(SETTINGS)}")
    ap.add_argument("--code", type=Path, default=REPO, help="the tree whose speechprep package builds them")
    ap.add_argument("--moves", action="store_true")
    a = ap.parse_args()
    names = list(SETTINGS) if a.settings == ["all"] else a.settings
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{name} {SETTINGS[name]}: {json.dumps(build(SETTINGS[name], a.code, Path(tmp)))}", flush=True)
    if a.moves:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"moves over the frame's norm: {json.dumps(moves(Path(tmp)))}", flush=True)


if __name__ == "__main__":
    main()
