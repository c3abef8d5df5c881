"""The jobs that build models from code (:mod:`speechprep.core.jobs`): run by hand, no rule."""

from pathlib import Path

from ..core.jobs import job


@job("models build-tiny", "asr", options="out")
def build_tiny(f, p):
    """Write tiny random speaker models of every kind speakers.model takes (TitaNet, ECAPA and
    Sortformer .nemo; WeSpeaker and 3D-Speaker .onnx) into --out: for tests, never a default."""
    import json

    from . import speaker_nemo, speaker_onnx

    out = Path(f.out)
    built = {**speaker_nemo.build_tiny(out), **speaker_onnx.build_tiny(out)}
    print(json.dumps({k: str(v) for k, v in built.items()}, indent=1))


@job("models build-real-size", "asr", options="out? only*")
def build_real_size(f, p):
    """Write every stage's model at its real architecture and size, random weights (NeMo
    FastConformer TDT and CTC, Canary-style AED, TitaNet-L, Sortformer; fairseq HuBERT base
    and large, unit HiFi-GAN, and a 1000-unit k-means over HuBERT base) into --out (default
    ~/.cache/speechprep/real_size), skipping those already there, and print their parameter
    counts and sizes: for bench/workflow/real_size.py, never a default."""
    from . import real_size

    real_size.main(f.out, f.only)
