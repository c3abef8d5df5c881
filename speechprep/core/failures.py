"""The systematic-failure rule: a job whose model fails on (nearly) everything fails.

One bad segment is rejected ``model_error`` and the shard goes on. But a model
that raises on every segment (a wrong prompt, a broken checkpoint, a missing
dependency inside the model) would otherwise turn a whole corpus into rejects
while every job exits 0. Every stage that calls a model counts its model
outcomes here, and the job fails, naming the model and the first error:

* at once, when the first ``first_errors`` model outcomes of the job are all
  errors (no success yet);
* at the end of the shard, when errors are more than ``max_error_share`` of
  the outcomes (and there was at least one).

Audio rejects (unreadable, too short, ...) are the input's fault, not the
model's: they are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SpeechprepError

EXIT_CODE = 4


class SystematicFailure(SpeechprepError):
    """The model failed on too much of the shard: the job must fail."""

    exit_code = EXIT_CODE


@dataclass(frozen=True)
class FailureRule:
    first_errors: int
    max_error_share: float

    @classmethod
    def from_dict(cls, d: dict) -> FailureRule:
        return cls(first_errors=int(d["first_errors"]), max_error_share=float(d["max_error_share"]))


class ModelFailures:
    """Counts a job's model outcomes and raises :class:`SystematicFailure` per the rule."""

    def __init__(self, stage: str, model: str, rule: FailureRule):
        self.stage, self.model, self.rule = stage, model, rule
        self.ok = 0
        self.errors = 0
        self.first: str | None = None  # "<item id>: <error>"
        self._counted: set[str] = set()  # an item is counted once, however often it is reported

    def success(self, item_id: str) -> None:
        if item_id not in self._counted:
            self._counted.add(item_id)
            self.ok += 1

    def error(self, item_id: str, message: str) -> None:
        """Count a model error; raises :class:`SystematicFailure` at once when the
        job's first ``first_errors`` outcomes are all errors."""
        if item_id in self._counted:
            return
        self._counted.add(item_id)
        self.errors += 1
        if self.first is None:
            self.first = f"{item_id}: {message}"
        if self.ok == 0 and self.errors >= self.rule.first_errors:
            raise SystematicFailure(self._message(f"the first {self.errors} segments all failed"))

    def finish(self) -> None:
        total = self.ok + self.errors
        if self.errors and self.errors / total > self.rule.max_error_share:
            raise SystematicFailure(
                self._message(
                    f"{self.errors} of {total} segments failed ({self.errors / total:.0%}, more than "
                    f"model_failure.max_error_share = {self.rule.max_error_share:.0%})"
                )
            )

    def _message(self, what: str) -> str:
        return f"{self.stage}: the model {self.model} fails systematically: {what}. First error: {self.first}"
