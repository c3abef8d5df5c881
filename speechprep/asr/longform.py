"""The align job of a shard (rule ``asr_align``): long recordings with their text, cut into
utterances, next to the shard's other utterances.

Its input is VAD's segments file of a ``text: given`` or ``verify`` dataset. A
line VAD marked ``long_form`` (its speech spans more than ``vad.max_segment``)
is aligned to its text (:func:`~.align.align_recording`: the ASR model's CTC
output in chunks, ctc-segmentation, sentences in spoken form) and replaced by
its utterances, each with its ``align_score``, the recording's ``file_id``,
``speaker``, ``language``, ``source_id`` and ``channel``, and the model it was aligned
with (``align_model``, ``align_model_sha256``). A recording that is a stretch of its
file (a source's utterance: ``offset``, ``duration``) is read alone, on the channel the
source names, and its utterances' times are on the file's clock. Every other line passes through
unchanged. The output, ``asr/<shard>.utterances.jsonl``, is what the shard's
ASR job reads.

Rejects (``asr/<shard>.align_rejects.jsonl``, written into the ASR job's
rejects): a sentence that did not align and a stretch of speech the text lacks
(``misaligned``), a clause longer than ``vad.max_segment`` (``too_long``), each
with the recording's ``file_id``; a recording whose audio cannot be read (its
reason) or that the aligner raised on (``align_error``, which counts for the
systematic-failure rule). A model without a CTC output fails the job, naming
its class. The job is resumable per recording (``ShardJob``): a killed job
aligns only the recordings it had not finished. The model is loaded only when
a recording is left to align.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.batching import resolve_device
from ..core.failures import FailureRule
from ..core.language import segment_language
from ..core.rejects import reject
from ..core.shardjob import Accepted, Outcome, Rejected, ShardJob, model_rejected
from ..errors import SpeechprepError
from ..io.audio import AudioError
from ..io.jsonio import read_jsonl
from ..text.spoken import SpokenNormalizer, grammar_stamps
from .align import align_recording
from .model import load_model, model_identity
from .params import AlignJobParams

log = logging.getLogger("speechprep.asr")
STAGE = "asr"
VERSION = "3"  # 2: bounds on the 10 ms grid; 3: a source's stretch and channel read alone
# a recording's fields its utterances keep (a source's own id, and the channel it names)
CARRIED = ("speaker", "language", "gender", "source_id", "channel")


class Aligner:
    """The model's CTC head, the grammars, and one recording at a time."""

    def __init__(self, p: AlignJobParams, grammars: dict[str, str], threads: int = 1):
        self.p, self.threads = p, threads
        self.spoken = SpokenNormalizer(dict(grammars)) if grammars else None
        self.head = None
        self.identity = model_identity(p.model, p.hash_cache)

    def load(self) -> None:
        import torch

        from .ctc import CtcHead

        torch.set_num_threads(max(1, self.threads))
        device = resolve_device(self.p.device)
        self.head = CtcHead(load_model(self.p.model, device), device)  # UsageError without a CTC output
        log.info("%s from %s loaded on %s for alignment", self.head.model_class, self.p.model, device)

    def __call__(self, rec: dict[str, Any]) -> Outcome:
        if self.head is None:
            self.load()
        language = segment_language(rec, self.p.dataset_language, self.p.language)
        target = {"id": rec.get("file_id", rec["id"]), "audio_filepath": rec["audio_filepath"]}
        target |= {k: rec[k] for k in ("offset", "duration", "channel") if rec.get(k) is not None}
        try:
            out = align_recording(target, rec.get("text") or "", self.head, self.p, self.spoken, language)
        except AudioError as e:
            return Rejected(e.reason, e.detail, extra={"file_id": target["id"]})
        except FileNotFoundError:
            return Rejected("missing", "file does not exist", extra={"file_id": target["id"]})
        except SpeechprepError:
            raise  # a setting or a model that cannot work: the job fails, naming it
        except Exception as e:  # noqa: BLE001 (one recording never aborts the shard)
            o = model_rejected(e, "align_error")
            return Rejected(o.reason, o.detail, True, {"file_id": target["id"]})
        carried = {k: rec[k] for k in CARRIED if rec.get(k) is not None}
        lines = [{**u, **carried, **_renamed(self.identity)} for u in out["utterances"]]
        return Accepted({"utterances": lines, "rejects": out["rejects"], "figures": out["figures"]})


def _renamed(identity: dict[str, str]) -> dict[str, str]:
    """``asr_model`` -> ``align_model`` (an aligned line's text is given, not the model's)."""
    return {k.replace("asr_", "align_", 1): v for k, v in identity.items()}


def _reject_line(r: dict[str, Any]) -> dict[str, Any]:
    rest = {k: v for k, v in r.items() if k not in ("id", "audio_filepath", "reason", "detail")}
    return reject(r["id"], r["audio_filepath"], STAGE, r["reason"], r["detail"], **rest)


def run(
    segments: str, out: str, rejects: str, resume: str | None, p: AlignJobParams, grammars: dict[str, str], threads=1
) -> dict[str, Any]:
    """Align the long recordings of a shard's segments file; write every utterance (module docstring)."""
    lines = list(read_jsonl(segments))
    aligner = Aligner(p, grammars, threads)
    job = ShardJob(
        STAGE, segments, resume, {**p.identity(), **aligner.identity, "grammars": grammar_stamps(grammars)}, VERSION,
        unit="recordings",
        failure_rule=FailureRule.from_dict(p.model_failure), model=p.model,
        items=[x for x in lines if x.get("long_form")], reuse=True,
    )  # fmt: skip
    todo = job.todo()
    with job.running(todo):
        for rec in todo:
            job.emit(rec, aligner(rec), audio_seconds=float(rec.get("duration") or 0.0))
    cut = {rec["id"]: data for rec, data in job.accepted()}
    utterances = []
    for x in lines:  # in the shard's order: a recording's utterances where it was
        if not x.get("long_form"):
            utterances.append(x)
        elif x["id"] in cut:
            utterances += cut[x["id"]]["utterances"]
    passed = [_reject_line(r) for data in cut.values() for r in data["rejects"]]
    aligned = sum(len(d["utterances"]) for d in cut.values())
    return job.commit({out: utterances}, rejects, passed, utterances=aligned, sentence_rejects=len(passed))
