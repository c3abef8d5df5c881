"""The resumable shard job: what every per-shard stage runs on.

A stage supplies only what is its own: which items the manifest alone rejects
(``screen``), whether a saved outcome still holds (``keep``), how to process
the items (calling :meth:`ShardJob.emit` with one :class:`Accepted` or
:class:`Rejected` per item, in any order), and the lines it writes. The job
owns the rest:

* the resume file (:mod:`speechprep.core.resume`): outcomes are appended as they
  complete, so a job killed even with SIGKILL restarts with only the
  unfinished items; a resume file of another input or other parameters is
  ignored;
* progress lines with rate and ETA, and the closing counts;
* the systematic-failure rule (:mod:`speechprep.core.failures`) over the
  outcomes a stage marks ``model_error`` (those are not saved for resume: a
  resumed job retries them);
* with ``reuse``, the reuse store (:mod:`speechprep.core.reuse`): a job run
  again on a changed shard takes each unchanged item's outcome of its last
  commit, and processes only the rest;
* results in input order, every item either accepted or rejected (the
  rejects format of ``docs/outputs.md``), and the atomic writes of the
  outputs, after which the resume file goes (and the reuse store is replaced).

An accepted item's data is not kept in memory once it is saved: the job keeps its byte
offset in the resume file and reads it back when the outputs are written
(:meth:`ShardJob.accepted`), so what a job holds per item is its input line and an offset,
not its results (bench/workflow/shard_memory.py). A job without a resume file keeps them.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import describe
from ..io.jsonio import read_jsonl, write_jsonl
from . import logs
from .failures import FailureRule, ModelFailures
from .progress import Progress
from .rejects import reject
from .resume import NoResume, ResumeFile, fingerprint
from .reuse import ReuseStore, keys_of, store_dir

log = logging.getLogger("speechprep.shardjob")

KEY = "_key"  # a resume line's item key, where the job keeps a reuse store
# rejects of the machine's state, not the item's (a busy device, a worker killed): the store
# keeps none of them, so a rerun tries the item again
TRANSIENT = frozenset({"oom", "worker_crash"})


@dataclass(frozen=True)
class Accepted:
    """An item the stage could use: ``data`` is what it keeps (JSON, saved for resume)."""

    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rejected:
    """An item the stage could not use, with a stable ``reason`` code and a ``detail``.
    ``model_error``: the model's fault, not the input's (counts for the failure rule)."""

    reason: str
    detail: str
    model_error: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


Outcome = Accepted | Rejected
SAVED = Accepted()  # an accepted outcome whose data is in the resume file (ShardJob.saved_at)


def model_rejected(e: Exception, reason: str = "model_error") -> Rejected:
    """The outcome of an item the model raised on by itself (the batch isolated it)."""
    return Rejected(reason, f"the model raised on this segment alone: {describe(e)}", model_error=True)


def shard_name(path: str | os.PathLike) -> str:
    """``shard-0001`` from ``.../shard-0001.segments.jsonl`` (the name before the first dot)."""
    return Path(path).name.split(".")[0]


def outcome_line(item_id: str, o: Outcome) -> dict:
    """An outcome as a resume-file line."""
    if isinstance(o, Accepted):
        return {"id": item_id, **o.data}
    return {"id": item_id, "reject": o.reason, "detail": o.detail, "model_error": o.model_error, "extra": o.extra}


def outcome_from_line(line: dict) -> Outcome:
    if isinstance(line.get("reject"), str):
        return Rejected(line["reject"], line["detail"], line["model_error"], line["extra"])
    return Accepted({k: v for k, v in line.items() if k != "id"})


class ShardJob:
    """One shard of one stage: items from a JSONL file, each ending accepted or rejected."""

    def __init__(
        self,
        stage: str,
        items_path: str | os.PathLike,
        resume_path: str | os.PathLike | None,
        params: Any,
        version: str,
        unit: str = "segments",
        failure_rule: FailureRule | None = None,
        model: str | None = None,
        items: list[dict] | None = None,
        reuse: Callable[[dict], Any] | bool = False,
    ):
        """``items``: the shard's items when a stage selects them itself (say, the
        lines of ``items_path`` that another file keeps); ``params`` must then
        hold whatever decides them, as the resume fingerprint covers only
        ``items_path``, ``params`` and ``version``. ``resume_path`` None: a job too cheap
        to resume (it starts over). ``reuse``: keep a reuse store beside the resume file
        (a callable: what decides an item's outcome, keyed instead of its line)."""
        self.stage, self.unit = stage, unit
        self.name = shard_name(items_path)
        self.items = list(read_jsonl(items_path)) if items is None else items
        fp = fingerprint(items_path, params, version)
        self.resume = ResumeFile(resume_path, fp) if resume_path is not None else NoResume(fp)
        self.store: ReuseStore | None = None
        self.keys: dict[str, str] = {}  # with a store: each item's key, on its resume lines too
        if reuse and resume_path is not None:
            self.store = ReuseStore(store_dir(resume_path), fingerprint(None, params, version))
            self.store.discard_new()
            self.keys = keys_of(self.items, reuse if callable(reuse) else None)
        saved = {k: v for k, v in self.resume.load().items() if k in {item["id"] for item in self.items}}
        self.reused: set[str] = set()
        if self.store is not None:  # a resumed item whose key changed (say, its units) is redone
            saved = {k: v for k, v in saved.items() if v.pop(KEY, None) == self.keys[k]}
            stored = self.store.load({k: v for k, v in self.keys.items() if k not in saved})
            self.reused = set(stored)
            saved.update(stored)
        self.outcomes: dict[str, Outcome] = {k: outcome_from_line(v) for k, v in saved.items()}
        self.saved_at: dict[str, int] = {}  # an accepted item's line in the resume file, its data not held
        self.failures = ModelFailures(stage, model or "?", failure_rule) if failure_rule else None
        self.progress: Progress | None = None

    # -- before ----------------------------------------------------------------
    def todo(
        self,
        screen: Callable[[dict], Rejected | None] | None = None,
        keep: Callable[[dict, Outcome], bool] | None = None,
    ) -> list[dict]:
        """The items still to process. A saved outcome is kept unless ``keep(item,
        outcome)`` says it no longer holds (say, its file is gone); ``screen(item)``
        rejects an item from the manifest alone, before any processing."""
        todo = []
        for item in self.items:
            saved = self.outcomes.get(item["id"])
            if saved is not None and (keep is None or keep(item, saved)):
                continue
            self.outcomes.pop(item["id"], None)
            screened = screen(item) if screen else None
            if screened is not None:
                self.outcomes[item["id"]] = screened
            else:
                todo.append(item)
        log.info(
            "%d %s, %d already done or screened out (resume file %s), %d to process",
            len(self.items),
            self.unit,
            len(self.items) - len(todo),
            self.resume.path,
            len(todo),
        )
        if self.store is not None:
            kept = len(self.reused & set(self.outcomes))
            log.info("%d of %d %s reused from the store %s", kept, len(self.items), self.unit, self.store.root)
        return todo

    # -- during ----------------------------------------------------------------
    @contextlib.contextmanager
    def running(self, todo: list[dict]) -> Iterator[ShardJob]:
        """Process ``todo`` inside this block, calling :meth:`emit` per item. On any
        exception the resume file is kept for the next attempt. What the job cost until now is
        logged (:func:`~speechprep.core.logs.ready`; a model job logs it again once its model is
        loaded)."""
        logs.ready()
        self.progress = Progress(len(todo), self.unit)
        offsets = self.resume.start(self._saved(k, o) for k, o in self.outcomes.items())
        for (k, o), at in zip(list(self.outcomes.items()), offsets, strict=True):
            self._hold(k, o, at)
        if self.failures:  # what a resumed job already did counts for the share
            for k, o in self.outcomes.items():
                if isinstance(o, Accepted):
                    self.failures.success(k)
        try:
            yield self
            if self.failures:
                self.failures.finish()
        except BaseException:
            self.resume.close(remove=False)
            raise
        self.progress.finish()

    def emit(self, item: dict, outcome: Outcome, audio_seconds: float | None = None) -> None:
        """Record one item's outcome, saved at once for resume; a model error is not
        saved, so a resumed job (say, after a systematic failure was fixed) retries it."""
        self.outcomes[item["id"]] = outcome
        self.saved_at.pop(item["id"], None)
        if not (isinstance(outcome, Rejected) and outcome.model_error):
            self._hold(item["id"], outcome, self.resume.append(self._saved(item["id"], outcome)))
        if audio_seconds is None:
            audio_seconds = float(item.get("duration") or 0.0)
        self.progress.update(audio_seconds=audio_seconds)
        if isinstance(outcome, Accepted):
            if self.failures:
                self.failures.success(item["id"])
        elif outcome.model_error:
            self.model_error(item, outcome.detail)

    def _hold(self, item_id: str, o: Outcome, at: int) -> None:
        """An outcome saved at byte ``at`` of the resume file: an accepted one's data is read
        back from there (:meth:`outcome`), not held."""
        if self.resume.keeps and isinstance(o, Accepted) and o.data:
            self.outcomes[item_id] = SAVED
            self.saved_at[item_id] = at

    def outcome(self, item_id: str) -> Outcome:
        """The item's outcome, an accepted one's data read back from the resume file."""
        at = self.saved_at.get(item_id)
        if at is None:
            return self.outcomes[item_id]
        return outcome_from_line({k: v for k, v in self.resume.read_at(at).items() if k != KEY})

    def _saved(self, item_id: str, o: Outcome) -> dict:
        """A resume-file line: the outcome, and with a store the item's key."""
        line = outcome_line(item_id, o)
        return {**line, KEY: self.keys[item_id]} if self.keys else line

    def model_error(self, item: dict, error: Exception | str) -> None:
        """Count a model error as soon as it is known (before the item's outcome is
        emitted), so a model that fails on everything stops the job after the first
        few items, not after a whole batch was retried one at a time."""
        if self.failures:
            self.failures.error(item["id"], error if isinstance(error, str) else describe(error))

    # -- after -----------------------------------------------------------------
    def accepted(self) -> Iterator[tuple[dict, dict]]:
        """``(item, data)`` of every accepted item, in input order (each item's data read when
        it is taken: a caller that writes them one by one holds one)."""
        for item in self.items:
            if isinstance(self.outcomes[item["id"]], Accepted):
                yield item, self.outcome(item["id"]).data

    def reject_lines(self) -> list[dict]:
        """The rejects lines, in input order."""
        out = []
        for item in self.items:
            o = self.outcomes[item["id"]]
            if isinstance(o, Rejected):
                out.append(reject(item["id"], item.get("audio_filepath"), self.stage, o.reason, o.detail, **o.extra))
        return out

    def commit(
        self,
        outputs: dict[str | os.PathLike, Iterable[dict]],
        rejects_path: str | os.PathLike,
        passed: Iterable[dict] = (),
        written: dict[str, int] | None = None,
        **counts: Any,
    ) -> dict[str, Any]:
        """Write ``outputs`` and the rejects atomically (``passed``: an earlier job's rejects
        lines of the same stage, written first), replace the reuse store, drop the resume
        file, log the counts (``written``: the lines of outputs the caller wrote itself)."""
        written = {**(written or {}), **{Path(p).name: write_jsonl(p, lines) for p, lines in outputs.items()}}
        passed = list(passed)
        rejected = write_jsonl(rejects_path, passed + self.reject_lines()) - len(passed)
        if self.store is not None:
            self.store.save(
                (self.keys[k], outcome_line(k, self.outcome(k)))
                for k, o in self.outcomes.items()
                if not (isinstance(o, Rejected) and (o.model_error or o.reason in TRANSIENT))
            )
        self.resume.close(remove=True)
        summary = {self.unit: len(self.items), "ok": len(self.items) - rejected, "rejected": rejected, **counts}
        log.info("done %s; wrote %s", summary, written)
        return summary
