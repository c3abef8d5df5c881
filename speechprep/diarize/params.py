"""The diarization step's parameters (what each means: :data:`PROPOSED`'s comments).

Phase 1 of issue #25: the step is not in the workflow yet, so config/config.yaml
has no ``diarize:`` section. :data:`PROPOSED` holds the defaults proposed for it;
when the section lands, :meth:`DiarizeParams.defaults` reads it from there and
:data:`PROPOSED` goes (each default once). ``speaker_linkage``, ``speaker_threshold`` and
``min_speech`` are not new keys: the rule will pass ``curate.speaker_linkage``,
``curate.speaker_threshold`` and ``vad.min_speech``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from ..config import StageParams
from ..config import defaults as config_defaults

PROPOSED: dict[str, Any] = {
    "device": "auto",  # Resemblyzer: auto | cpu | cuda | cuda:N
    "batch": 64,  # windows per LSTM forward
    "hop": 0.25,  # s between window starts (windows are Resemblyzer's 1.6 s partials)
    "change_context": 2.4,  # s of windows pooled on each side of a candidate change
    "change_threshold": 0.3,  # pooled cosine distance at a local peak that starts a new piece
    "threshold": 0.22,  # within a file, pieces' average-linkage cosine distance cut (curate's scale)
    "min_speaker": 2.0,  # s of windows a local speaker needs; fewer: joined to the nearest
    "switch_penalty": 0.3,  # Viterbi cost (in cosine similarity) of a change of speaker
    "snap": 0.2,  # s around an estimated change searched for a pause to cut in
    "pause_db": 15.0,  # a pause: 20 ms frames this many dB under the loud frames around
    "min_turn": 1.6,  # s: two changes closer than this in one segment: multi_speaker
    # overlap evidence of a window: its pair score (cosine to its two nearest speakers' normalised sum minus
    # cosine to the nearest) above its speaker's median pair score, plus overlap_db_weight per dB it is
    # louder than its speaker's median window; runs of windows at or above overlap_floor that peak at
    # overlap_peak or more, with the same speaker on both sides, are overlaps
    "overlap_db_weight": 0.015,
    "overlap_floor": 0.03,
    "overlap_peak": 0.08,
    "overlap_windows": 5,  # consecutive windows (hops) an overlap's run lasts at least
    # another voice's stretch inside one speaker's speech (no pause either side): shorter than min_turn it
    # is flagged overlap; up to overlap_max when its mean evidence reaches overlap_floor (a mix the encoder
    # took for the other voice); longer, it is a turn
    "overlap_max": 4.0,
    "overlap_pad": 0.3,  # s added on each side of an overlap's window centres
    "speaker_linkage": "average",  # curate.speaker_linkage
    "speaker_threshold": 0.18,  # curate.speaker_threshold: local speakers closer than this are joined
    "min_speech": 0.25,  # vad.min_speech: shorter pieces of a cut segment are dropped
}


@dataclass(frozen=True)
class DiarizeParams(StageParams):
    """Per-file diarization: windows, pieces, clustering, turns, cuts, overlaps."""

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
    speaker_linkage: str
    speaker_threshold: float
    min_speech: float

    @classmethod
    def defaults(cls, **overrides: Any) -> Self:
        cfg = config_defaults()
        base = dict(PROPOSED)
        if "diarize" in cfg:  # phase 2: the config's own section, and the keys it shares
            base.update(cfg["diarize"])
            base["speaker_linkage"] = cfg["curate"]["speaker_linkage"]
            base["speaker_threshold"] = cfg["curate"]["speaker_threshold"]
            base["min_speech"] = cfg["vad"]["min_speech"]
        return cls.from_dict({**base, **overrides})
