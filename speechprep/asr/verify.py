"""The ``asr run`` job (:func:`run`: ``text: asr`` or ``verify``), and what ``verify`` adds:
the given text, checked by the ASR model.

Every utterance is transcribed as in a ``text: asr`` dataset (batches, word
timestamps, confidence, trimming: :class:`~.stage.AsrStage`), but its line keeps
the given ``text`` (``text_source: "given"``) and gains the model's transcript as
``asr_text`` and the comparison of the two (:func:`~.compare.verify_fields`):
``wer``, ``cer``, ``word_errors``, ``ref_words``, ``char_errors``, the characters
inserted and deleted at each edge, and ``text_compare`` (how the given text was
normalised: both sides in spoken form with the TTS grammars of its language,
``grammars``, where it has them). Curation drops ``transcript_mismatch`` by
``curate.max_wer``, ``max_cer`` and ``max_edge_chars``.
"""

from __future__ import annotations

from typing import Any

from ..core import modelstage
from ..core.modelstage import Accepted, ShardFiles
from ..errors import UsageError
from ..text.spoken import SpokenNormalizer, grammar_stamps
from .compare import CompareNormalizer, verify_fields
from .params import AsrParams
from .stage import AsrStage


class VerifyStage(AsrStage):
    """Transcripts of a shard's utterances, compared with their given text. ``grammars``:
    language -> its built text-normalisation grammars (rule ``tts_grammars``)."""

    def __init__(self, p: AsrParams, grammars: dict[str, str], transcribe=None, sample_rate: int | None = None):
        super().__init__(p, transcribe, sample_rate)
        self.grammars = dict(grammars)
        self.compare = CompareNormalizer(SpokenNormalizer(self.grammars) if self.grammars else None)
        self.wers: list[float] = []  # each written line's (finish: their median)
        self.empty_asr_text = 0

    def fingerprint(self) -> dict[str, Any]:
        return {**super().fingerprint(), "compare_languages": grammar_stamps(self.grammars)}

    def accept(self, seg: dict, prepared: Any, result: Any, scratch) -> Accepted:
        data = dict(super().accept(seg, prepared, result, scratch).data)
        heard = data.pop("text")
        data.update(verify_fields(self.compare, seg.get("text") or "", heard, self.language(seg)))
        return Accepted(data)

    def line(self, seg: dict, data: dict) -> dict:
        return {**super().line(seg, data), "text_source": "given"}

    def written(self, line: dict, row: int) -> None:
        super().written(line, row)
        self.wers.append(line["wer"])
        self.empty_asr_text += line["asr_text"] == ""

    def finish(self, ids: list[str], scratch) -> dict[str, Any]:
        wer = sorted(self.wers)
        return {
            **super().finish(ids, scratch),
            "empty_asr_text": self.empty_asr_text,
            "median_wer": wer[len(wer) // 2] if wer else None,
        }


def run(files: ShardFiles, p: AsrParams, threads: int = 1, grammars: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``asr run`` job: transcribe the shard of ``files.items`` (``text: asr``), or
    transcribe and compare with the given text (``verify``, with ``grammars``: language ->
    built grammars). A ``text: given`` dataset is the ``asr given`` job (:mod:`.given`, no
    model): the workflow's plan picks the job (speechprep.workflow.plan), once."""
    if p.text not in ("asr", "verify"):
        raise UsageError(f"asr run transcribes text: asr or verify datasets, not {p.text!r} (that is `asr given`)")
    import torch

    torch.set_num_threads(max(1, threads))
    stage = VerifyStage(p, grammars or {}) if p.text == "verify" else AsrStage(p)
    return modelstage.run(stage, files, threads)
