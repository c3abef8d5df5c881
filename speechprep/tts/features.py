"""The audio-feature job of a shard (rule ``tts_features``), on the model-batch runner
(:mod:`speechprep.core.modelstage`).

For every segment with text: its S2S units as int32 ``codes``, a ``condition``
vector and an ``emo_vec`` (float32), from the encoders of
:mod:`speechprep.encoders` (a segment's Resemblyzer vector stored by curation is
used, not recomputed). A segment without text after normalisation is rejected
``no_text``, one without S2S units ``no_codes``; an encoder that raises on a
clip alone rejects it ``encoder_error``. The arrays are laid out by ``tts.layout``.
"""

from __future__ import annotations

import hashlib
import logging
from functools import cached_property
from typing import Any

import numpy as np

from ..core import modelstage
from ..core.artifacts import Kind
from ..core.language import declared_language
from ..core.modelstage import Accepted, ModelStage, Outcome, Rejected, ShardFiles
from ..encoders import Encoders, encoder_identity
from ..io.audio import SAMPLE_RATE, AudioError, read_segment
from ..io.jsonio import read_jsonl
from ..text.normalize import TextNormalizer
from .params import TtsParams

log = logging.getLogger("speechprep.tts")
STAGE = "tts"
FEATURES = ("codes", "condition", "emo_vec")
LENGTHS = ("codes_len", "condition_dim", "emo_vec_dim")
DTYPES = {"text_ids": "int32", "codes": "int32", "condition": "float32", "emo_vec": "float32"}


class FeaturesStage(ModelStage):
    """Codes, condition and emotion vectors of a shard's segments. ``units_path``: the
    shard's S2S units, ``s2s_rejects_path``: its S2S rejects (why a segment has none);
    ``encoders``: loaded encoders (tests)."""

    stage = STAGE
    version = "1"
    kinds = tuple(Kind(k, DTYPES[k]) for k in FEATURES)
    error_reason = "encoder_error"

    def __init__(self, p: TtsParams, units_path: str, s2s_rejects_path: str, encoders=None):
        super().__init__(p)
        self.units = {u["id"]: u["units"] for u in read_jsonl(units_path)}
        self.s2s_rejects = {r["id"]: r for r in read_jsonl(s2s_rejects_path)}
        self.normalize = TextNormalizer(p.languages)
        self.encoders = encoders
        self.stored_rows: dict[str, np.ndarray] = {}  # curation's embeddings files, memory-mapped

    @cached_property
    def identity(self) -> dict[str, Any]:
        return {
            "condition": encoder_identity(self.p.condition, self.p.hash_cache),
            "emotion": encoder_identity(self.p.emotion, self.p.hash_cache),
        }

    def keyed(self, s: dict) -> Any:
        """The line but where the curation's vector is (its row moves when the shard loses
        a segment), that vector's digest, the units and why S2S rejected the segment."""
        v = self.stored(s)
        return {
            "line": {k: x for k, x in s.items() if k not in ("embedding_file", "embedding_row")},
            "units": self.units.get(s["id"]),
            "s2s_reject": self.s2s_rejects.get(s["id"]),
            "stored": hashlib.sha256(v.tobytes()).hexdigest() if v is not None else None,
        }

    def model_name(self) -> str:
        return f"{self.p.condition} + {self.p.emotion}"

    def text(self, s: dict) -> str:
        return self.normalize(s.get("text") or "", declared_language(s, self.p.dataset_language))

    def screen(self, s: dict) -> Rejected | None:
        if not self.text(s):
            return Rejected("no_text", f"no text after normalisation (transcript: {s.get('text')!r})")
        if s["id"] not in self.units:
            why = self.s2s_rejects.get(s["id"])
            return Rejected(
                "no_codes",
                f"S2S rejected it ({why['reason']}: {why['detail']})" if why else "no S2S units for this segment",
            )
        return None

    def load(self, device: str, threads: int) -> None:
        if self.encoders is None:
            self.encoders = Encoders(self.p.condition, self.p.emotion, device, threads)

    def stored(self, s: dict) -> np.ndarray | None:
        """The curation stage's vector of ``s``, when it has one and the condition is
        ``speakers.model`` (Resemblyzer, or the lab's model named the same): not recomputed."""
        if self.p.condition != self.p.speaker_model or "embedding_file" not in s:
            return None
        if s["embedding_file"] not in self.stored_rows:
            self.stored_rows[s["embedding_file"]] = np.load(s["embedding_file"], mmap_mode="r")
        return np.array(self.stored_rows[s["embedding_file"]][s["embedding_row"]], dtype=np.float32)

    def prepare(self, s: dict) -> tuple[np.ndarray, np.ndarray | None]:
        return read_segment(s, SAMPLE_RATE, self.p.min_duration, "tts.min_duration"), self.stored(s)

    def infer(self, inputs: list) -> list:
        clips, given = [c for c, _ in inputs], [v for _, v in inputs]
        if any(v is None for v in given):
            return self.encoders(clips)
        return self.encoders(clips, condition=given)

    def accept(self, s: dict, prepared: Any, result: Any, scratch) -> Outcome:
        cond, emo = result
        for what, v in (("condition", cond), ("emotion", emo)):
            if isinstance(v, AudioError):
                return Rejected(v.reason, f"{what} encoder: {v.detail}")
            if v.size == 0 or not np.isfinite(v).all():
                why = f"the {what} vector is not finite (silent or degenerate audio?)"
                return Rejected("non_finite", why, model_error=True)
        units = self.units[s["id"]]
        for kind, array in zip(FEATURES, (units, cond, emo)):
            scratch.save(kind, s["id"], np.asarray(array).reshape(-1))
        return Accepted({"codes_len": len(units), "condition_dim": int(cond.size), "emo_vec_dim": int(emo.size)})

    def line(self, s: dict, data: dict) -> dict:
        seg = {**s, "text": self.text(s)}
        line = {k: seg[k] for k in ("id", "text", "audio_filepath", "offset", "duration") if k in seg}
        # text_source: asr or given; source_id: the corpus's own id; channel: the source's, of its file
        for k in ("speaker", "language", "text_source", "align_score", "source_id", "channel"):
            if s.get(k) is not None:
                line[k] = s[k]
        if "language" not in line and self.p.dataset_language:
            line["language"] = self.p.dataset_language
        for kind, length in zip(FEATURES, LENGTHS):
            line[kind] = None  # placed by the runner
            line[length] = data[length]
        return line


def run(
    files: ShardFiles, p: TtsParams, units: str, s2s_rejects: str, threads: int = 1, encoders=None
) -> dict[str, Any]:
    """Codes, condition and emotion vectors for every segment of a shard (resumable), under
    ``files.arrays`` (one file each, or packed: ``p.layout``), with the index ``files.out``."""
    return modelstage.run(FeaturesStage(p, units, s2s_rejects, encoders), files, threads)
