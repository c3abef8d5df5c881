"""ASR stage: NeMo transcripts of VAD segments, on the model-batch runner.

Per shard: every segment is read straight from its source file
(``offset``/``duration``), mixed to mono and resampled to the model's rate,
validated (readable, non-empty, finite, not too short or too long) before it
reaches the model, and transcribed in duration-sorted batches of one language
each, filled up to a padded-seconds budget (:mod:`speechprep.core.batching`: from
free GPU memory on CUDA, from config on CPU; out-of-memory batches are halved
and retried). A multitask (Canary) model gets the prompt for the batch's
language. The runner (:mod:`speechprep.core.modelstage`) isolates a segment the
model fails on, fails a job whose model fails on (nearly) every segment, keeps
finished segments for resume and runs a watchdog over each batch, which fails
the job with every thread's stack in the log when a batch makes no progress.

Word timestamps and confidences: :mod:`.words`. With ``asr.trim`` the line's
``offset``/``duration`` are cut to its words (plus ``asr.trim_pad``), the VAD
bounds kept as ``vad_offset``/``vad_duration``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Hashable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from ..core.language import segment_language
from ..core.modelstage import Accepted, ModelStage, Rejected
from ..core.rejects import count_reasons
from ..io.audio import read_segment
from ..io.jsonio import atomic_open, read_jsonl, write_json
from .given import duration_screen
from .given import screen as given_screen
from .model import load_model, model_identity, model_sample_rate
from .params import AsrParams
from .words import NemoTranscriber, Transcriber, on_source_clock, trimmed

log = logging.getLogger("speechprep.asr")
STAGE = "asr"


class AsrStage(ModelStage):
    """Transcripts of a shard's segments. ``transcribe``/``sample_rate``: a loaded
    transcriber (tests); otherwise the model of ``p.model`` is loaded when there is work."""

    stage = STAGE
    version = "2"  # 2: trimmed bounds on the 10 ms grid

    def __init__(self, p: AsrParams, transcribe: Transcriber | None = None, sample_rate: int | None = None):
        super().__init__(p)
        self.transcribe, self.sample_rate = transcribe, sample_rate or self.sample_rate
        self.empty_text = 0  # of the lines written

    @cached_property
    def identity(self) -> dict[str, Any]:
        return model_identity(self.p.model, self.p.hash_cache)

    def model_name(self) -> str:
        return self.p.model

    @property
    def batch_timeout(self) -> float:
        return self.p.batch_timeout

    def language(self, seg: dict) -> str:
        return segment_language(seg, self.p.dataset_language, self.p.language)

    def screen(self, seg: dict) -> Rejected | None:
        if seg.get("long_form"):  # a long recording with its text that the align job did not cut
            return given_screen(seg, self.p)
        return duration_screen(seg.get("duration"), self.p, "VAD's max_segment should cut it")

    def load(self, device: str, threads: int) -> None:
        if self.transcribe is not None:
            return
        from nemo.utils import logging as nemo_logging

        nemo_logging.setLevel(logging.ERROR)
        model = load_model(self.p.model, device)
        self.sample_rate = model_sample_rate(model)
        self.transcribe = NemoTranscriber(model, self.p.timestamps)
        log.info("%s from %s, %d Hz", type(model).__name__, self.p.model, self.sample_rate)

    def group(self, seg: dict) -> Hashable:
        return self.language(seg)

    def prepare(self, seg: dict) -> tuple[np.ndarray, str]:
        return read_segment(seg, self.sample_rate, self.p.min_duration, "asr.min_duration"), self.language(seg)

    def infer(self, inputs: list[tuple[np.ndarray, str]]) -> list:
        return self.transcribe([audio for audio, _ in inputs], inputs[0][1])  # a batch is of one language

    def accept(self, seg: dict, prepared: Any, result: Any, scratch) -> Accepted:
        return Accepted(on_source_clock(result, seg) if isinstance(result, dict) else {"text": result})

    def line(self, seg: dict, data: dict) -> dict:
        line = {**seg, **data, **self.identity, "text_source": "asr"}
        return trimmed(line, self.p.trim_pad) if self.p.trim else line

    def written(self, line: dict, row: int) -> None:
        self.empty_text += line["text"] == ""

    def finish(self, ids: list[str], scratch) -> dict[str, Any]:
        return {"empty_text": self.empty_text}


def merge(
    shard_files: Sequence[str], rejects_files: Sequence[str], manifest_out: str, summary_out: str
) -> dict[str, Any]:
    """``asr/manifest.jsonl`` (every shard, in shard order) and ``asr/summary.json``."""
    n = empty = 0
    audio = 0.0
    models: set[str] = set()
    sources: Counter = Counter()
    with atomic_open(manifest_out) as f:
        for path in shard_files:
            for r in read_jsonl(path):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
                n += 1
                empty += r["text"] == ""
                audio += float(r["duration"])
                sources[r.get("text_source", "asr")] += 1
                if r.get("asr_model"):  # a given text heard no model
                    models.add(r["asr_model"])
    reasons = count_reasons(rejects_files)
    summary = {
        "stage": STAGE,
        "shards": len(shard_files),
        "transcribed": n,
        "empty_text": empty,
        "rejected": sum(reasons.values()),
        "rejects_by_reason": reasons,
        "audio_hours": round(audio / 3600, 4),
        "models": sorted(models),
        "text_source": dict(sorted(sources.items())),
    }
    write_json(summary_out, summary)
    return summary
