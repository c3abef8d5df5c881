"""The ingest job's parameters (standard library only: the Snakefile selects them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.config import StageParams, from_config, from_dataset
from .sources import FORMATS


@dataclass(frozen=True)
class IngestParams(StageParams):
    """A dataset's input and sharding: its own keys over the ``ingest`` defaults."""

    SECTION = "ingest"
    name: str = from_config(None)  # the dataset's name (the rule gives it)
    audio_dir: str | None = from_dataset("audio_dir")
    manifest: str | None = from_dataset("manifest")
    # a corpus in its own layout (speechprep.ingest.sources; docs/sources.md): at most one is set
    kaldi: str | None = from_dataset("kaldi")
    common_voice: str | dict | None = from_dataset("common_voice")
    lhotse: dict | None = from_dataset("lhotse")
    lhotse_recipe: dict | None = from_dataset("lhotse_recipe")
    hf: dict | None = from_dataset("hf")
    pilot_ids: str | None = from_dataset("pilot_ids")  # the plan's pilot: the source ids read (one a line)
    probe: bool = from_dataset("probe", "ingest.probe")
    shards: int | None = from_dataset("shards")
    shard_hours: float = from_dataset("shard_hours", "ingest.shard_hours")
    replan: bool = from_dataset("replan", "ingest.replan")  # deal every file out again (speechprep.ingest.plan)
    extensions: list = from_dataset("extensions", "ingest.extensions")
    text: str = from_dataset("text", "ingest.text")  # given/verify: a line without text is rejected no_text
    exclude: str | None = from_config("exclude")  # ids and files left out (speechprep.io.exclude)

    def source(self) -> tuple[str, str | dict] | None:
        """``(key, spec)`` of the dataset's source format (``kaldi``, ``common_voice``, ...), or
        ``None`` for an ``audio_dir`` or a ``manifest``."""
        for key in FORMATS:
            spec = getattr(self, key)
            if spec:
                return key, spec
        return None
