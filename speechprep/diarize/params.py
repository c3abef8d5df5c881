"""The diarization step's parameters (``diarize`` in config/config.yaml, what each means
is written there; standard library only: the Snakefile selects them), and which datasets
the step runs for (:func:`runs_for`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.config import BatchBudget, StageParams, from_config, nested

# a dataset whose text is given belongs to whole manifest lines: never cut (docs/stages.md)
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
    it shares: curation's speaker linkage and threshold (local speakers closer than it are
    joined) and VAD's shortest speech (shorter pieces of a cut segment are dropped)."""

    SECTION = "diarize"
    device: str
    batch: BatchBudget = nested(BatchBudget)  # audio seconds of windows per LSTM forward
    hop: float
    change_context: float
    change_threshold: float
    threshold: float
    min_speaker: float
    switch_penalty: float
    snap: float
    pause_db: float
    min_turn: float
    overlap_db_weight: float
    overlap_floor: float
    overlap_peak: float
    overlap_windows: int
    overlap_max: float
    overlap_pad: float
    bandwidth: str
    narrowband_hz: float
    narrowband_threshold: float
    narrowband_merge: float
    speaker_linkage: str = from_config("curate.speaker_linkage")
    speaker_threshold: float = from_config("curate.speaker_threshold")
    min_speech: float = from_config("vad.min_speech")
    bandwidth_floor_db: float = from_config("curate.bandwidth_floor_db")

    def for_band(self, narrow: bool) -> DiarizeParams:
        """The parameters a file of that band is diarized with: a telephone-band file's pieces
        are cut at ``narrowband_threshold`` and its local speakers joined under
        ``narrowband_merge`` (voices sit closer through 4 kHz: docs/stages.md, "Diarization")."""
        if not narrow:
            return self
        return replace(self, threshold=self.narrowband_threshold, speaker_threshold=self.narrowband_merge)


@dataclass(frozen=True)
class DiarizeJobParams(DiarizeParams):
    """The per-shard job (rule ``diarize``): the diarization's parameters, and when a shard whose
    encoder keeps failing fails (``model_failure``; a file it fails on passes through)."""

    model_failure: dict = from_config("model_failure", run_only=True)


@dataclass(frozen=True)
class RttmParams(StageParams):
    """The RTTM job: a file's local speaker without a measured segment takes the run's nearest
    speaker when within curation's ``max_speaker_distance`` (null: never)."""

    SECTION = "diarize"
    max_speaker_distance: float | None = from_config("curate.max_speaker_distance")
