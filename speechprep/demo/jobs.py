"""The demo models' jobs (:mod:`speechprep.core.jobs`): built by the workflow from code."""

from pathlib import Path

from ..core.jobs import job, torch_threads


@job("demo asr-model", "asr", inputs="truth", outputs="out")
def asr_model(f, p):
    """Train the demo ASR model (NOT a recognizer) on the demo corpus."""
    from . import asr_model

    asr_model.build(Path(f.truth), Path(f.out))


@job("demo s2s-models", "s2s", inputs="truth", options="out-dir threads?")
def s2s_models(f, p):
    """Build the demo S2S models (random weights) from code."""
    from . import s2s_models

    torch_threads(f.threads)
    s2s_models.build_demo(Path(f.truth), Path(f.out_dir))
