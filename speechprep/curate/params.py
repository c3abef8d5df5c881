"""The parameters of the curation jobs: one frozen dataclass per job, each a subset
of the flat ``curate`` section of config/config.yaml (what each key means is
written there). A job selects only its own keys (:mod:`speechprep.jobs`), so
changing a decision threshold reruns neither the measurements nor the speaker
and duplicate jobs. Standard library only: the Snakefile imports this."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import ModelParams, StageParams, from_config, from_dataset


@dataclass(frozen=True)
class MeasureParams(ModelParams):
    """The per-shard measure job: audio, DNSMOS, loudness, SNR, bandwidth, rates,
    speaker embedding, PCM hash, MinHash signature, acoustic fingerprint."""

    SECTION = "curate"
    dnsmos_personalized: bool
    clip_level: float
    bandwidth_floor_db: float
    snr_band_hz: list
    snr_noise_seconds: float
    minhash_perm: int
    minhash_ngram: int
    language_model: str | None
    speaker_model: str = from_config("speakers.model")
    speaker_model_sha256: str | None = from_config(None)  # the rule's: the model file's, or "resemblyzer"


@dataclass(frozen=True)
class AnnotateParams(ModelParams):
    """The per-shard annotate job: pitch, monotony and reverberation for the captions (a job
    of its own, so these settings rerun neither DNSMOS nor the speaker encoder)."""

    SECTION = "curate"
    pitch_range_hz: list
    pitch_voicing: float


@dataclass(frozen=True)
class SpeakerParams(StageParams):
    """The dataset-level speakers job: clustering of the embeddings into pseudo speakers (the
    ``speakers`` section: the model whose embeddings they are, and its thresholds)."""

    SECTION = "speakers"
    speaker_model: str = from_config("speakers.model")
    speaker_model_sha256: str | None = from_config(None)  # the rule's: the model file's, or "resemblyzer"
    speaker_unit: str = from_config("speakers.unit")
    speaker_sample: int = from_config("speakers.sample")
    speaker_linkage: str = from_config("speakers.linkage")
    speaker_threshold: float = from_config("speakers.threshold")
    speaker_min_size: int = from_config("speakers.min_size")
    speaker_seed: int = from_config("speakers.seed")
    speaker_chunk: int = from_config("speakers.chunk")
    speaker_recluster: bool = from_config("speakers.recluster")


@dataclass(frozen=True)
class DuplicateParams(StageParams):
    """The dataset-level duplicates job."""

    SECTION = "curate"
    near_duplicate_jaccard: float
    acoustic_duplicate_score: float
    fingerprint_band_bits: int
    fingerprint_bands: int
    fingerprint_sketch_max_diff: int
    duplicate_max_run: int


@dataclass(frozen=True)
class SummaryParams(StageParams):
    """The per-dataset summary job: counts, and the annotations' bins."""

    SECTION = "curate"
    annotation_bins: int


@dataclass(frozen=True)
class DecideParams(StageParams):
    """The per-shard decide job: thresholds (``null``: that check is off) and tiers."""

    SECTION = "curate"
    min_dnsmos_ovrl: float | None
    min_snr_db: float | None
    max_clipping_ratio: float | None
    min_bandwidth_hz: float | None
    min_chars_per_s: float | None
    max_chars_per_s: float | None
    min_text_unit_ratio: float | None
    max_text_unit_ratio: float | None
    min_confidence: float | None
    max_speaker_distance: float | None = from_config("speakers.max_distance")
    max_wer: float | None
    max_cer: float | None
    max_edge_chars: int | None
    min_declared_language_prob: float | None
    min_language_chars: int
    max_repeated_ngram_share: float | None
    min_repetition_words: int
    max_music_prob: float | None
    tier_premium: float
    tier_standard: float
    dataset_language: str | None = from_dataset("language")
