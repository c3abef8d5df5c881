"""The demo S2S models are right on any CPU: random weights drawn the same everywhere, and a
k-means build that meets its criterion or fails saying so (speechprep.demo.s2s_models)."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from speechprep.demo import s2s_models
from speechprep.demo.asr_model import CriterionUnmet
from tests.support import DEMO, REPO

# The sha256 of the demo HuBERT's and vocoder's saved tensors, then of a float32 normal_ draw
# (which takes the CPU's vector kernel or the scalar one): run here and in a subprocess.
DRAW = """
import hashlib, tempfile, warnings
from pathlib import Path
import torch
warnings.simplefilter("ignore")
from speechprep.demo.s2s_models import tiny_hubert, tiny_vocoder

def sha(sd):
    h = hashlib.sha256()
    for k, v in sorted(sd.items()):
        h.update(k.encode() + str(v.dtype).encode() + v.contiguous().numpy().tobytes())
    return h.hexdigest()

with tempfile.TemporaryDirectory() as tmp:
    model = tiny_hubert(Path(tmp) / "labels")[0]
    tiny_vocoder(Path(tmp) / "v.pt", Path(tmp) / "v.json", 50)
    vocoder = torch.load(Path(tmp) / "v.pt")["generator"]
torch.manual_seed(0)
DIGESTS = [sha(model.state_dict()), sha(vocoder), sha({"x": torch.empty(4096).normal_()})]
"""
# an older CPU's kernels (no AVX: torch, OpenBLAS, MKL)
SCALAR = {"ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Nehalem", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}


@pytest.mark.slow  # builds the models
def test_random_weights_identical_whatever_the_cpu_kernels():
    """This CPU's best kernels (here) and scalar ones (a subprocess) draw the same weights."""
    env = {**os.environ, **SCALAR, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    p = subprocess.run(
        [sys.executable, "-c", DRAW + "print(*DIGESTS)"], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    scalar, here = p.stdout.split(), {}
    exec(DRAW, here)
    assert here["DIGESTS"][:2] == scalar[:2]  # HuBERT, vocoder: byte for byte
    if torch.backends.cpu.get_cpu_capability() != "DEFAULT":  # the subprocess did take other kernels
        assert here["DIGESTS"][2] != scalar[2]


def test_nearest_gaps():
    centers = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 4.0]])
    frames = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.0]])  # a tie; 1 vs sqrt(5); 0.5 vs 1.5
    assert np.allclose(s2s_models.nearest_gaps(centers, frames), [0.0, np.sqrt(5) - 1, 2.0])


@pytest.mark.slow  # builds the HuBERT, reads its features of the demo
def test_an_unmet_kmeans_criterion_fails_the_build_saying_so(tmp_path, caplog):
    """No frame is a whole norm nearer one centre than the next: every fit fails, then the build."""
    caplog.set_level(logging.INFO, logger="speechprep.demo")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the rule runs it (threads: 1)
    try:
        with pytest.raises(CriterionUnmet, match="none of 2 seeds from 0 gives every demo frame") as e:
            s2s_models.build_demo(DEMO / "truth.json", tmp_path, min_gap=1.0, max_fits=2)
    finally:
        torch.set_num_threads(threads)
    assert e.value.exit_code == 4
    assert "'seed': 0" in str(e.value) and "'seed': 1" in str(e.value)
    fits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("k-means fit")]
    assert len(fits) == 2 and "min_gap" in fits[0] and "copy_jaccard" in fits[1]
    assert not (tmp_path / "demo_km.bin").exists()
