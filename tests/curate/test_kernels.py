"""speechprep.core.kernels: librosa's numba kernels compiled by one process at a time,
so jobs that start together on a fresh environment all run (numba issue 10128)."""

import os
import subprocess
import sys

# YIN of a 200 Hz tone: it runs the compiled parabolic interpolation and local minima
# (and says first whether the modules that compile on import were loaded before it: under the lock)
PITCH = """
import sys
import numpy as np
from speechprep.core import kernels
{librosa}
print(all(m in sys.modules for m in kernels.COMPILED_ON_IMPORT))
t = np.arange(16000) / 16000
f0 = librosa.yin(np.sin(2 * np.pi * 200 * t).astype(np.float32), fmin=60, fmax=500, sr=16000)
print(float(np.median(f0)))
"""
LOCKED = PITCH.format(librosa="librosa = kernels.librosa()")


def _run_together(code: str, n: int, env: dict) -> list[subprocess.CompletedProcess]:
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(n)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=900)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout.decode("utf-8"), stderr.decode("utf-8")))
    return out


def test_processes_started_together_on_a_cold_cache_all_run(tmp_path):
    """Three processes find no cache and start at once; then one more loads what they
    wrote. Without the lock the later ones die of a segmentation fault (a cache pair
    written by two processes); with it every one gives the tone's pitch."""
    cache = tmp_path / "numba"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    runs = _run_together(LOCKED, 3, env) + _run_together(LOCKED, 1, env)
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
        loaded, pitch = r.stdout.split()
        assert loaded == "True" and abs(float(pitch) - 200) < 2, r.stdout
    written = {p.name for p in cache.rglob("guf-*.nbi")}
    for kernel in ("pitch._pi_wrapper", "audio._zc_wrapper", "utils._localmin"):  # YIN's, and what it calls
        assert any(kernel in n for n in written), written
    assert (cache / ".speechprep-numba.lock").exists()


def test_a_lock_that_cannot_be_taken_warns_and_loads_anyway(tmp_path):
    """A cache dir that cannot be made (here under a plain file): numba falls back to another
    place for its cache, and the kernels load without the lock, with a warning."""
    (tmp_path / "file").write_text("", encoding="utf-8")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "file" / "numba")}
    code = "import logging\nlogging.basicConfig()\n" + LOCKED
    (r,) = _run_together(code, 1, env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "loaded without a lock" in r.stderr and r.stdout.split()[0] == "True"
