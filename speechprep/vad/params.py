"""The VAD job's parameters (standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import StageParams, from_dataset

SAMPLE_RATE = 16000  # TEN-VAD's rate


@dataclass(frozen=True)
class VadParams(StageParams):
    """``vad`` in config/config.yaml (what each means is written there)."""

    SECTION = "vad"
    threshold: float
    hop_size: int
    min_silence: float
    min_speech: float
    pad: float
    max_segment: float
    block_seconds: float
    narrowband_rate: int
    narrowband_threshold: float
    narrowband_release: float
    narrowband_window: float
    narrowband_music_prob: float
    narrowband_music_slope: float
    narrowband_music_cap: float
    text: str = from_dataset("text", "ingest.text")  # given/verify: one utterance per line, trimmed, not cut

    @property
    def hop_s(self) -> float:
        return self.hop_size / SAMPLE_RATE
