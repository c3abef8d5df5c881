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
