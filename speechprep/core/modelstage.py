"""The model-batch runner: what every model stage (ASR, S2S, TTS features, curation
measures) runs on.

A model stage is a :class:`ModelStage` that supplies only what is its own: how to
load its models (:meth:`~ModelStage.load`), how to run them over a batch of
prepared inputs (:meth:`~ModelStage.infer`), what an accepted segment keeps
(:meth:`~ModelStage.accept`) and its output line (:meth:`~ModelStage.line`).
:func:`run` owns the rest, on a :class:`~speechprep.core.shardjob.ShardJob`:

* the job: a resume file keyed to the stage's parameters and model identity,
  the reuse store (:mod:`speechprep.core.reuse`: a shard run again takes each
  unchanged segment's outcome and arrays of its last commit), progress, the
  systematic-failure rule (``model_failure``), accounting and the atomic commit of
  the outputs;
* what is left to do: segments screened out from the manifest alone
  (:meth:`~ModelStage.screen`), saved outcomes kept while their arrays load;
* the models are loaded only when something is left to do, on the stage's device;
* batches of duration-sorted segments of one group within a seconds budget, the
  first a probe that measures the memory per batch-second and sizes the rest
  (:mod:`speechprep.core.memprobe`; the job's stats' ``batch_probe``),
  halved on out of memory (:class:`~speechprep.core.batching.BatchRunner`);
* reading each segment's audio (:meth:`~ModelStage.prepare`): a segment that
  cannot be read is rejected for its reason and never reaches a model; a model
  exception on a batch reruns it one segment at a time, so only the guilty
  segment is rejected (:func:`~speechprep.core.batching.isolate`);
* the mapping of a result to an outcome: ``oom``, the audio's reason, the
  model's error (``error_reason``), or what :meth:`~ModelStage.accept` says;
* per-segment arrays in scratch and their placement, a file each or packed
  (:mod:`speechprep.core.artifacts`);
* a watchdog over each batch where the stage sets ``batch_timeout``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import time
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from ..io.audio import SAMPLE_RATE, AudioError, read_segment
from ..io.jsonio import read_jsonl, write_jsonl
from . import logs
from .artifacts import Kind, Scratch
from .batching import BatchRunner, isolate, resolve_device, seconds_budget
from .failures import FailureRule
from .memprobe import GUARD_ENV, Probe, guard, job_limit_mb, trim
from .shardjob import Accepted, Outcome, Rejected, ShardJob, model_rejected
from .watchdog import Watchdog

log = logging.getLogger("speechprep.modelstage")

# parameters that say how a job runs, not what it writes: not in the resume fingerprint


@dataclass(frozen=True)
class ShardFiles:
    """A model job's files: its segments, its outputs, its resume file, and where the
    per-segment arrays go (``arrays``: kind -> directory, laid out by ``layout``);
    ``passed``: an earlier job's rejects of the same stage, written first into ``rejects``."""

    items: str
    out: str
    rejects: str
    resume: str
    arrays: dict[str, str] = field(default_factory=dict)
    layout: str = "files"
    passed: str | None = None

    def passed_rejects(self) -> list[dict]:
        return list(read_jsonl(self.passed)) if self.passed else []


class ModelStage:
    """What a model stage supplies to :func:`run`; ``p`` is its parameters object."""

    stage: ClassVar[str]  # the stage name (rejects' ``stage``, config section, log)
    version: ClassVar[str]  # bump when outputs change for the same inputs (stale resume files)
    kinds: ClassVar[tuple[Kind, ...]] = ()  # per-segment arrays it writes through the scratch
    error_reason: ClassVar[str] = "model_error"  # reason of a segment the model raised on alone
    reject_fields: ClassVar[tuple[str, ...]] = ()  # segment fields every reject line carries
    sample_rate: int = SAMPLE_RATE  # the rate :meth:`prepare` reads audio at

    def __init__(self, p: Any):
        self.p = p

    # -- what the outputs depend on ---------------------------------------------------
    @cached_property
    def identity(self) -> dict[str, Any]:
        """What the outputs depend on besides the parameters (model files' digests, packages)."""
        return {}

    def fingerprint(self) -> dict[str, Any]:
        params = self.p.identity()
        return {**params, **self.identity}

    def model_name(self) -> str:
        """How error messages name the models."""
        return self.stage

    def keyed(self, item: dict) -> Any:
        """What decides ``item``'s outcome besides its audio and the parameters, as JSON: its
        reuse key. The line, and what else the stage reads for it (say, its S2S units)."""
        return item

    @property
    def batch_timeout(self) -> float | None:
        """Seconds a batch may make no progress before the job fails (None: no watchdog)."""
        return None

    # -- per segment, before any model ---------------------------------------------------
    def screen(self, item: dict) -> Rejected | None:
        """A reject decided from the manifest line alone (no audio read), or None."""
        return None

    def prepare(self, item: dict) -> Any:
        """The model input of one segment (raises :class:`AudioError` for unusable audio)."""
        return read_segment(item, self.sample_rate, self.p.min_duration, f"{self.stage}.min_duration")

    # -- the models ---------------------------------------------------------------------
    def load(self, device: str, threads: int) -> None:
        raise NotImplementedError

    def budget(self, device: str) -> float:
        """Padded audio seconds per batch (the stage's ``batch`` block)."""
        return seconds_budget(device, self.p.batch)

    def group(self, item: dict) -> Hashable:
        """Segments of one group go in a batch together (e.g. a language)."""
        return None

    def infer(self, inputs: list) -> list:
        """One result per prepared input; raising makes the runner isolate the guilty one."""
        raise NotImplementedError

    # -- after the models ------------------------------------------------------------------
    def accept(self, item: dict, prepared: Any, result: Any, scratch: Scratch) -> Outcome:
        """The outcome of a segment the models ran on: its data (JSON, kept for resume), its
        arrays saved in ``scratch``; or a reject."""
        raise NotImplementedError

    def line(self, item: dict, data: dict) -> dict:
        """The output line of an accepted segment (fields of ``kinds`` are placed afterwards)."""
        return {**item, **data}

    def written(self, line: dict, row: int) -> None:
        """Sees each output line, in order, as it is written (its arrays placed; ``row``: its
        index among the lines); may set its fields. The runner holds one line at a time."""

    def finish(self, ids: list[str], scratch: Scratch) -> dict[str, Any]:
        """Last work once the shard's lines are written (``ids``: theirs, in order), before the
        commit of the rejects and the reuse store; extra counts for the log."""
        return {}


def too_short(item: dict, min_duration: float, key: str) -> Rejected | None:
    """``too_short`` for a segment whose manifest ``duration`` is under ``min_duration``
    (config key ``key``): a :meth:`ModelStage.screen` that reads no audio."""
    d = item.get("duration")
    if d is not None and float(d) < min_duration:
        return Rejected("too_short", f"{float(d):.3f} s is below {key} ({min_duration} s)")
    return None


def _with_fields(stage: ModelStage, item: dict, o: Outcome | None) -> Outcome | None:
    """A reject carrying the segment fields the stage wants on every reject line."""
    if isinstance(o, Rejected) and stage.reject_fields:
        extra = {k: item[k] for k in stage.reject_fields if k in item}
        return Rejected(o.reason, o.detail, o.model_error, {**o.extra, **extra})
    return o


def _infer(stage: ModelStage, job: ShardJob, batch: list[dict]) -> list:
    """Per segment: its AudioError, the model's exception, or ``(prepared, result)``."""
    prepared: list[Any] = []
    for item in batch:
        try:
            prepared.append(stage.prepare(item))
        except AudioError as e:
            prepared.append(e)
    good = [i for i, x in enumerate(prepared) if not isinstance(x, AudioError)]
    results: list[Any] = list(prepared)
    if good:
        failed = lambda k, e: job.model_error(batch[good[k]], e)
        outs = isolate(stage.infer, [prepared[i] for i in good], f"{stage.stage} model", failed)
        for i, r in zip(good, outs, strict=True):
            results[i] = r if isinstance(r, Exception) else (prepared[i], r)
    return results


def _outcome(stage: ModelStage, item: dict, result: Any, oom: bool, scratch: Scratch) -> Outcome:
    if oom:
        return Rejected("oom", f"does not fit in device memory even alone ({float(item['duration']):.1f} s)")
    if isinstance(result, AudioError):
        return Rejected(result.reason, result.detail)
    if isinstance(result, Exception):
        return model_rejected(result, stage.error_reason)
    return stage.accept(item, result[0], result[1], scratch)


def _describe(batch: list[dict]) -> str:
    ids = ", ".join(s["id"] for s in batch[:20]) + (" ..." if len(batch) > 20 else "")
    return f"of {len(batch)} segments ({sum(float(s['duration']) for s in batch):.1f} s): {ids}"


# segments run before the memory guard and the probe (:func:`_run_batches`)
WARMUP = 2


def _probe(stage: ModelStage, device: str) -> Probe:
    """The probe that sizes the job's batches after its first (:mod:`speechprep.core.memprobe`)."""
    b = stage.p.batch
    limit, source = job_limit_mb()
    return Probe(device, limit, b.max_seconds, b.gpu_reserve_gib * 1024, stage.batch_timeout, source)


def _limited(probe: Probe) -> guard | None:
    """On the CPU under an enforced limit (a cgroup's; the rule's ``mem_mb`` where
    ``SPEECHPREP_MEM_GUARD=1``): allocations past it raise (halved), not kill the job."""
    enforced = probe.source == "cgroup" or (probe.source == "mem_mb" and os.environ.get(GUARD_ENV) == "1")
    return guard(probe.limit_mb) if enforced and not probe.cuda else None


def _batch_start(batch: list[dict], wd: Watchdog | None, limited: guard | None) -> None:
    if wd is not None:
        wd.batch(_describe(batch))
    if limited is not None:
        limited.rearm()


def _run_batches(stage: ModelStage, job: ShardJob, todo: list[dict], scratch: Scratch, wd: Any) -> BatchRunner:
    """Every segment of ``todo`` through the loaded models, in batches, the first the probe
    that sizes the others. Under a memory guard the ``WARMUP`` shortest go first, in a
    batch outside it: lazy imports, thread pools and kernel caches are made then (under the
    guard a refused allocation could leave them half made)."""
    device = resolve_device(stage.p.device)
    budget, probe = stage.budget(device), _probe(stage, device)
    log.info("first batch (the probe) %.1f padded s; job memory %.0f MB (%s)", budget, probe.limit_mb, probe.source)
    runner = BatchRunner(budget, lambda s: float(s["duration"]), lambda b: _infer(stage, job, b), group=stage.group)
    limited = _limited(probe)
    runner.on_batch_start = lambda batch: _batch_start(batch, wd, limited)
    warm = sorted(todo, key=lambda s: float(s["duration"]))[:WARMUP] if limited is not None else []
    rest = [s for s in todo if all(s is not w for w in warm)]
    if limited is not None:
        runner.relief, runner.on_oom = limited.lift, limited.refused
    for part, guarded, probing in ((warm, None, None), (rest, limited, probe)):
        runner.probe = probing
        with guarded or contextlib.nullcontext():
            for o in runner.run(part):
                job.emit(o.item, _with_fields(stage, o.item, _outcome(stage, o.item, o.result, o.oom, scratch)))
    runner.probe = probe
    return runner


def _process(stage: ModelStage, job: ShardJob, todo: list[dict], scratch: Scratch, threads: int) -> dict[str, Any]:
    """Run the models over ``todo``, emitting every segment's outcome; counts for the log."""
    t0 = time.monotonic()
    runner = None
    watchdog = Watchdog(stage.batch_timeout) if stage.batch_timeout else contextlib.nullcontext()
    with job.running(todo), watchdog as wd:
        if todo:
            t, device = time.monotonic(), resolve_device(stage.p.device)
            stage.load(device, threads)
            gc.collect()  # the restore's second copy of the weights (NeMo's lingers until a collection)
            trim()
            logs.ready()
            log.info("%s loaded on %s in %.1f s", stage.model_name(), device, time.monotonic() - t)
            runner = _run_batches(stage, job, todo, scratch, wd)
        if wd is not None:
            wd.done()
    wall = time.monotonic() - t0
    audio = sum(float(s["duration"]) for s in todo)
    return {
        "ooms": runner.ooms if runner else 0,
        "audio_seconds": round(audio, 2),
        "wall_seconds": round(wall, 2),
        "audio_seconds_per_second": round(audio / wall, 1) if wall > 0 and audio else None,
        "batch_probe": runner.probe.result if runner else None,
    }


def _lines(stage: ModelStage, job: ShardJob, scratch: Scratch, files: ShardFiles, ids: list[str]) -> Iterator[dict]:
    """The output lines, one at a time in input order, each as it is written: its arrays placed
    (``files.arrays``, ``files.layout``) and seen by the stage (:meth:`ModelStage.written`).
    Then the lines' arrays go into the reuse store being written: links to the placed ones, the
    kinds that are not placed packed one file per kind (a packed file is there once placed)."""
    placed = files.arrays
    kept = {k: job.store.new / k for k in scratch.kinds if k not in placed} if job.store is not None else {}
    where: list[tuple[str, str, str]] = []  # (item, kind, its array): for the store
    with scratch.placing(placed, files.layout, ids) as place, scratch.placing(kept, "packed", ids) as keep:
        for row, (item, data) in enumerate(job.accepted()):
            line = stage.line(item, data)
            place(line)
            stage.written(line, row)
            if job.store is not None:
                copy = {"id": line["id"]}
                keep(copy)
                where += [(line["id"], k, (line if k in placed else copy)[k]) for k in scratch.kinds]
            yield line
    for item_id, kind, array in where:
        job.store.keep_array(item_id, kind, array)


def run(stage: ModelStage, files: ShardFiles, threads: int = 1) -> dict[str, Any]:
    """Every segment of ``files.items`` through ``stage``; each ends in ``files.out`` or
    ``files.rejects``. Raises :class:`~speechprep.core.failures.SystematicFailure` (resume
    file kept, no outputs) when the models fail on too many segments."""
    scratch = Scratch(Path(files.resume).with_suffix(""), stage.kinds)
    job = ShardJob(
        stage.stage,
        files.items,
        files.resume,
        stage.fingerprint(),
        stage.version,
        failure_rule=FailureRule.from_dict(stage.p.model_failure),
        model=stage.model_name(),
        reuse=stage.keyed,
    )
    for item_id in job.reused:
        scratch.take(item_id, job.store.found.get(item_id, {}))
    todo = job.todo(
        lambda item: _with_fields(stage, item, stage.screen(item)),
        keep=lambda item, saved: isinstance(saved, Rejected) or scratch.complete(item["id"]),
    )
    counts = _process(stage, job, todo, scratch, threads)
    ids = [item["id"] for item in job.items if isinstance(job.outcomes[item["id"]], Accepted)]
    written = {Path(files.out).name: write_jsonl(files.out, _lines(stage, job, scratch, files, ids))}
    counts.update(stage.finish(ids, scratch))
    summary = job.commit({}, files.rejects, files.passed_rejects(), written, **counts)
    scratch.clear()
    return summary


__all__ = ["Accepted", "Kind", "ModelStage", "Rejected", "Scratch", "ShardFiles", "run"]
