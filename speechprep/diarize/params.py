"""The diarization step's parameters (``diarize`` in config/config.yaml, what each means
is written there; standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import StageParams, from_config


@dataclass(frozen=True)
class DiarizeParams(StageParams):
    """Per-file diarization: windows, pieces, clustering, turns, cuts, overlaps; with the keys
    it shares: curation's speaker linkage and threshold (local speakers closer than it are
    joined) and VAD's shortest speech (shorter pieces of a cut segment are dropped)."""

    SECTION = "diarize"
    device: str
    batch: int
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
    speaker_linkage: str = from_config("curate.speaker_linkage")
    speaker_threshold: float = from_config("curate.speaker_threshold")
    min_speech: float = from_config("vad.min_speech")
