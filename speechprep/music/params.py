"""The music stage's parameters (``music`` and ``separate`` in config/config.yaml, what each
means is written there; standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.config import StageParams, from_config

# the separation models by file suffix (speechprep.music.separate)
MDX_SUFFIX = ".onnx"  # a UVR MDX-Net model as audio-separator loads it
DEMUCS_SUFFIX = ".th"  # a Demucs model (HT-Demucs) as demucs saves it


@dataclass(frozen=True)
class SeparateParams(StageParams):
    """Separation where the detector flags music (``separate``): ``model`` a UVR MDX-Net
    ``.onnx`` or a Demucs ``.th`` file (None: no separation); a file any of whose segments
    has ``music_prob`` over ``min_music_prob`` has each of its segments separated. The MDX
    keys are audio-separator's: its model data (``compensate``, ``mdx_dim_f_set``,
    ``mdx_dim_t_set``, ``mdx_n_fft_scale_set``, ``primary_stem``, which UVR's model list
    gives per model file) and its MDX parameters (``hop_length``, ``segment_size``,
    ``overlap``, ``enable_denoise``) at ``sample_rate``; Demucs reads ``overlap``."""

    SECTION = "separate"
    model: str | None
    min_music_prob: float
    sample_rate: int
    compensate: float
    mdx_dim_f_set: int
    mdx_dim_t_set: int
    mdx_n_fft_scale_set: int
    primary_stem: str
    hop_length: int
    segment_size: int
    overlap: float
    enable_denoise: bool

    @property
    def kind(self) -> str | None:
        """``mdx``, ``demucs`` (by the model file's suffix) or None (no model)."""
        if not self.model:
            return None
        return "demucs" if str(self.model).endswith(DEMUCS_SUFFIX) else "mdx"


@dataclass(frozen=True)
class MusicParams(StageParams):
    """The per-shard job (rule ``music``): the detector (``music.detector``, its model and
    outputs), what it drops (``drop_prob``: music with no speech), where it runs, separation
    (``separate``), and when a shard whose models keep failing fails (``model_failure``)."""

    SECTION = "music"
    detector: str
    model: str | None
    output_index: int
    speech_index: int | None
    model_rate: int
    drop_prob: float | None  # None: nothing dropped here
    device: str
    separate: SeparateParams = field(metadata={"key": "separate", "nested": SeparateParams})
    model_failure: dict = from_config("model_failure", run_only=True)
    hash_cache: str | None = from_config(None, run_only=True)
