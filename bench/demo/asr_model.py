"""The demo ASR model: what building it costs and how well it transcribes the demo.

    .venvs/asr/bin/python bench/demo/asr_model.py [--steps 1500 400] [--model PATH ...]
    .venvs/asr/bin/python bench/demo/asr_model.py --settings all [--workflow]

Builds the model (``speechprep.demo.asr_model.build``) with each ``--steps`` (the
schedule; the build adds batches until its criterion is met), in a process of its
own, and reports the batches it took, its CPU seconds (user + system, the process's
own ``getrusage``) and wall time; then transcribes, with NeMo's ``transcribe`` as the ASR
job calls it, every clean phrase of the demo corpus (resources/demo/truth.json) cut at
its true boundaries and again 0.1 s wider each side (VAD's pads and jitter), and the
phrases of its other readable files (noise, clipping, 8 kHz, 44.1 kHz, stereo), and
prints word errors over words. ``--model`` also
scores models built elsewhere (e.g. by an older version of the code).

``--settings`` builds it under each setting of :data:`SETTINGS` instead, each of which
changes the floating-point path of the training as another CPU would (thread count,
oneDNN off, ATen's and MKL's vector kernels, OpenBLAS's kernel family); ``--workflow``
then also runs ``tests/workflow/test_asr_workflow.py`` under that setting (its demo run
builds the model again, under the setting, and reads its words).
"""

from __future__ import annotations

import argparse
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

BUILD = """
import json, sys
from pathlib import Path
from speechprep.demo.asr_model import build
print(json.dumps(build(Path(sys.argv[1]), Path(sys.argv[2]), steps=int(sys.argv[3]))))
"""
# Environment settings that change the training's floating-point path on one machine.
SETTINGS = {
    "default": {},
    "2 threads": {"SPEECHPREP_DEMO_TRAIN_THREADS": "2"},
    "4 threads": {"SPEECHPREP_DEMO_TRAIN_THREADS": "4"},
    "oneDNN off": {"SPEECHPREP_DEMO_TRAIN_MKLDNN": "0"},
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


def build(steps: int, out: Path, env: dict | None = None) -> dict:
    """Build in a child process (``env`` added to its environment); its own CPU seconds from
    ``getrusage(RUSAGE_CHILDREN)``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-c", BUILD, str(TRUTH), str(out), str(steps)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    info = json.loads(p.stdout.strip().splitlines()[-1])
    return {**info, "cpu_s": round(cpu, 1), "wall_s": round(time.monotonic() - t0, 1)}


def phrases(pad: float, clean: bool) -> list[tuple[str, float, float, str]]:
    """``(path, start, end, text)`` of every phrase of the demo's clean clips (``clean``) or of
    its other readable files (noise, clipping, 8 kHz, 44.1 kHz, stereo, copies)."""
    truth = json.loads(TRUTH.read_text(encoding="utf-8"))
    out = []
    for rel, info in sorted(truth["files"].items()):
        if bool(info.get("clean")) == clean and info.get("speech"):
            for sp in info["speech"]:
                a, b = max(0.0, sp["start"] - pad), min(info["duration"], sp["end"] + pad)
                out.append((str(TRUTH.parent / "audio" / rel), a, b, sp["text"]))
    return out


def wer(model_path: Path) -> dict[str, float]:
    """Word error rate of the model over the demo's phrases (clean clips, the other files),
    as cut and 0.1 s wider, read as the ASR job reads a segment (16 kHz mono)."""
    import editdistance
    from nemo.collections.asr.models import ASRModel

    from speechprep.io.audio import read_segment

    model = ASRModel.restore_from(str(model_path), map_location="cpu")
    model.eval()
    out = {}
    for clean in (True, False):
        for pad in (0.0, 0.1):
            cuts = phrases(pad, clean)
            audio = [read_segment({"audio_filepath": f, "offset": a, "duration": b - a}) for f, a, b, _ in cuts]
            hyps = model.transcribe(audio, batch_size=8, verbose=False)
            hyps = [h.text if hasattr(h, "text") else str(h) for h in hyps]
            errors = sum(editdistance.eval(t.split(), h.split()) for (*_, t), h in zip(cuts, hyps))
            words = sum(len(t.split()) for *_, t in cuts)
            out[f"{'clean' if clean else 'other'} pad {pad}"] = f"{errors}/{words}"
    return out


PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE")


def workflow_test(env: dict) -> str:
    """``tests/workflow/test_asr_workflow.py`` under ``env``: its closing line and wall seconds."""
    t0 = time.monotonic()
    p = subprocess.run(
        [str(REPO / ".venvs" / "workflow" / "bin" / "python"), *PYTEST, "tests/workflow/test_asr_workflow.py"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
        env={**os.environ, **env},
    )
    failures = [x for x in p.stdout.splitlines() if x.startswith(("FAILED", "ERROR"))]
    return f"{p.stdout.strip().splitlines()[-1]} ({time.monotonic() - t0:.0f} s){''.join(f'; {x}' for x in failures)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, nargs="*", default=[1500])
    ap.add_argument("--model", type=Path, nargs="*", default=[])
    ap.add_argument("--settings", nargs="*", default=[], help=f"'all' or names of {list(SETTINGS)}")
    ap.add_argument("--workflow", action="store_true", help="also run the ASR workflow tests under each setting")
    a = ap.parse_args()
    names = list(SETTINGS) if a.settings == ["all"] else a.settings
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = Path(tmp) / "demo_asr.nemo"
            info = build(600, out, SETTINGS[name])
            line = f"{name} {SETTINGS[name]}: {info}; WER {wer(out)}"
            if a.workflow:
                line += f"; workflow: {workflow_test(SETTINGS[name])}"
            print(line, flush=True)
        if names:
            return
        for steps in a.steps:
            out = Path(tmp) / f"demo_asr_{steps}.nemo"
            info = build(steps, out)
            print(f"{steps} steps: {info}; WER {wer(out)}", flush=True)
        for path in a.model:
            print(f"{path}: WER {wer(path)}", flush=True)


if __name__ == "__main__":
    main()
