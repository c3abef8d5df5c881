"""The ASR job's parameters (standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import ModelParams, StageParams, from_config, from_dataset, run_only


@dataclass(frozen=True)
class AsrParams(ModelParams):
    """``asr`` in config/config.yaml (what each means is written there), with the
    dataset's language."""

    SECTION = "asr"
    model: str
    language: str
    max_duration: float
    batch_timeout: float = run_only()
    timestamps: bool
    trim: bool
    trim_pad: float
    dataset_language: str | None = from_dataset("language")
    text: str = from_dataset("text", "ingest.text")  # asr, given (no model), verify


@dataclass(frozen=True)
class GivenParams(StageParams):
    """The ASR job of a ``text: given`` dataset (``asr given``): no model is loaded, only the
    checks made before any model, so no model setting reruns it."""

    SECTION = "asr"
    min_duration: float
    max_duration: float


@dataclass(frozen=True)
class AlignParams(StageParams):
    """What long-form alignment reads (``align`` in config/config.yaml, and ``vad.max_segment``:
    the longest utterance it cuts); :mod:`speechprep.asr.align` says what each does."""

    SECTION = "align"
    max_segment: float = from_config("vad.max_segment")
    min_align_score: float
    chunk_seconds: float
    context_seconds: float
    window_seconds: float
    score_seconds: float
    min_untranscribed: float
    gap_logprob: float
    start_pad: float
    end_pad: float


@dataclass(frozen=True)
class AlignJobParams(AlignParams):
    """The align job (``asr align``): the alignment's settings, the ASR model whose CTC output
    it reads, the dataset's language, the shared ``model_failure`` rule."""

    model: str = from_config("asr.model")
    device: str = from_config("asr.device")
    language: str = from_config("asr.language")
    dataset_language: str | None = from_dataset("language")
    model_failure: dict = from_config("model_failure", run_only=True)
    hash_cache: str | None = from_config(None, run_only=True)
