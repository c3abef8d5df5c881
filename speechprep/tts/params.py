"""The TTS jobs' parameters (standard library only: the Snakefile selects them). Each job
reads only its own keys of ``tts``, so a tokenizer or split change does not rerun the
audio features, and a normalisation change reruns only the text side."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import ModelParams, StageParams, from_config, from_dataset


@dataclass(frozen=True)
class TextParams(StageParams):
    """The normalise job: spoken-form text of a shard's transcripts."""

    SECTION = "tts"
    languages: dict
    normalize: bool
    normalize_languages: list
    dataset_language: str | None = from_dataset("language")
    default_language: str = from_config("asr.language")


@dataclass(frozen=True)
class TokenizerParams(StageParams):
    """The tokenizer job (trained when ``tts.tokenizer`` is null)."""

    SECTION = "tts"
    vocab_size: int
    retrain_tokenizer: bool


@dataclass(frozen=True)
class TtsParams(ModelParams):
    """The features job: codes, condition and emotion vectors of a shard."""

    SECTION = "tts"
    condition: str
    emotion: str
    languages: dict
    # curation's vectors are the condition's only when both are Resemblyzer's
    speaker_model: str = from_config("speakers.model")
    # where the arrays go, not what they hold: a new layout reruns the job, which takes every
    # segment from its reuse store
    layout: str = from_config("tts.layout", run_only=True)
    dataset_language: str | None = from_dataset("language")


@dataclass(frozen=True)
class TextIdsParams(StageParams):
    """The text-ids job: SentencePiece ids, and with ``phonemes`` each segment's phonemes in
    the voice of its language (:mod:`speechprep.tts.phonemes`)."""

    SECTION = "tts"
    layout: str
    phoneme_voices: dict
    no_phonemes: str  # reject or keep a segment espeak-ng gives no phonemes for
    phonemes: str | None = from_dataset("phonemes", "tts.phonemes")  # the dataset's own, else tts.phonemes
    dataset_language: str | None = from_dataset("language")
    default_language: str = from_config("asr.language")


@dataclass(frozen=True)
class ManifestParams(StageParams):
    """A dataset's train/val manifests and stats.json."""

    SECTION = "tts"
    val_ratio: float
    split_by_speaker: bool
    condition: str
    emotion: str
    phoneme_voices: dict
    captions: dict | None
    phonemes: str | None = from_dataset("phonemes", "tts.phonemes")
    name: str = from_config(None)  # the dataset's name
    config_sha256: str = from_config(None)  # the run's config digest (speechprep.core.config.digest)
    hash_cache: str | None = from_config(None, run_only=True)
