"""The diarization step's parameters (``diarize`` in config/config.yaml, what each means
is written there; standard library only: the Snakefile selects them), and which datasets
the step runs for (:func:`runs_for`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.config import BatchBudget, StageParams, from_config, from_dataset, nested

# a dataset whose text is given belongs to whole manifest lines: never cut (docs/stages/diarize.md)
GIVEN_TEXT = ("given", "verify")


def runs_for(config: dict[str, Any], dataset: str) -> bool:
    """Whether the step runs for ``dataset``: never with ``diarize.enabled: false``, nor for a
    dataset that says ``single_speaker: true`` or whose text is given; for a dataset that says
    ``single_speaker: false``, always (else); otherwise with ``enabled: true`` for every
    dataset, with ``auto`` for the ``audio_dir`` ones (a manifest lists utterances)."""
    d = config["datasets"][dataset]
    enabled = config["diarize"]["enabled"]
    text = d.get("text", config.get("ingest", {}).get("text", "asr"))
    if enabled is False or d.get("single_speaker") is True or text in GIVEN_TEXT:
        return False
    if d.get("single_speaker") is False or enabled is True:
        return True
    return bool(d.get("audio_dir"))


@dataclass(frozen=True)
class DiarizeParams(StageParams):
    """Per-file diarization: windows, pieces, clustering, turns, cuts, overlaps; with the keys
    it shares: the speaker model and its distances (``speakers``: its linkage and threshold
    join local speakers), and VAD's shortest speech (shorter pieces of a cut segment are dropped)."""

    SECTION = "diarize"
    model: str | None = from_dataset("diarize_model", "diarize.model")  # a Sortformer .nemo; None: clustering
    window: float
    onset: float
    offset: float
    device: str
    batch: BatchBudget = nested(BatchBudget)  # audio seconds of windows per forward
    hop: float
    change_context: float
    change_threshold: float = from_config("speakers.diarize.change_threshold")
    threshold: float = from_config("speakers.diarize.threshold")
    min_speaker: float
    switch_penalty: float = from_config("speakers.diarize.switch_penalty")
    snap: float
    pause_db: float
    min_turn: float
    overlap_db_weight: float = from_config("speakers.diarize.overlap_db_weight")
    overlap_floor: float = from_config("speakers.diarize.overlap_floor")
    overlap_peak: float = from_config("speakers.diarize.overlap_peak")
    overlap_windows: int
    overlap_max: float
    overlap_pad: float
    bandwidth: str
    narrowband_hz: float
    narrowband_threshold: float = from_config("speakers.diarize.narrowband_threshold")
    narrowband_merge: float = from_config("speakers.diarize.narrowband_merge")
    speaker_model: str = from_config("speakers.model")
    speaker_model_sha256: str | None = from_config(None)  # the rule's: the model file's, or "resemblyzer"
    speaker_linkage: str = from_config("speakers.linkage")
    speaker_threshold: float = from_config("speakers.threshold")
    min_speech: float = from_config("vad.min_speech")
    bandwidth_floor_db: float = from_config("curate.bandwidth_floor_db")

    def for_band(self, narrow: bool) -> DiarizeParams:
        """The parameters a file of that band is diarized with: a telephone-band file's pieces
        are cut at ``narrowband_threshold`` and its local speakers joined under
        ``narrowband_merge`` (voices sit closer through 4 kHz: docs/stages/diarize.md, "Diarization")."""
        if not narrow:
            return self
        return replace(self, threshold=self.narrowband_threshold, speaker_threshold=self.narrowband_merge)


@dataclass(frozen=True)
class DiarizeJobParams(DiarizeParams):
    """The per-shard job (rule ``diarize``): the diarization's parameters, and when a shard whose
    encoder keeps failing fails (``model_failure``; a file it fails on passes through)."""

    model_failure: dict = from_config("model_failure", run_only=True)
    hash_cache: str | None = from_config(None, run_only=True)


@dataclass(frozen=True)
class RttmParams(StageParams):
    """The RTTM job: a file's local speaker without a measured segment takes the run's nearest
    speaker when within curation's ``max_speaker_distance`` (null: never)."""

    SECTION = "diarize"
    max_speaker_distance: float | None = from_config("speakers.max_distance")
