"""Batches sized by audio seconds, fitted to free GPU memory, with OOM back-off.

Shared by every stage that runs a model over segments (ASR, S2S, curation, TTS features, diarization):

* :func:`seconds_budget` turns free GPU memory (``torch.cuda.mem_get_info``)
  into a padded-seconds budget with a per-model factor, or takes the CPU
  budget from config;
* :class:`BatchRunner` sorts items by duration and fills each batch up to the
  budget (counting padding: ``len(batch) * longest``), optionally keeping
  groups apart (one group per batch, e.g. a language). When a batch raises an
  out-of-memory error it frees the cache, halves the batch and retries, down
  to single items; an item that still does not fit is reported ``oom`` and
  the run goes on. After an OOM, later batches are planned with the smaller
  budget that worked. With a :class:`~speechprep.core.memprobe.Probe`, the first
  batch is a probe of the configured size that measures the memory per padded
  second, and the rest is planned with the budget it sets.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import describe
from .config import BatchBudget
from .memprobe import guarded, trim

log = logging.getLogger("speechprep.batching")


def is_oom(exc: BaseException) -> bool:
    """Out of memory, whichever way it was raised: CUDA's (or another device's), or an
    allocation in the job's own memory refused under its limit
    (:func:`speechprep.core.memprobe.guard`: torch's ``DefaultCPUAllocator: can't allocate
    memory``, numpy's ``MemoryError``; under the guard also oneDNN's ``could not create a
    primitive``, which is how it reports an allocation refused)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    refused = "out of memory" in text or "can't allocate memory" in text
    return isinstance(exc, RuntimeError) and (refused or (guarded() and "could not create a primitive" in text))


def isolate(
    call: Callable[[list], Sequence[Any]],
    items: list,
    what: str = "model",
    on_failure: Callable[[int, Exception], None] | None = None,
) -> list:
    """``call(items)``, one result per item. When it raises (out of memory
    aside, which propagates so that :class:`BatchRunner` halves the batch), each
    item is run alone, so only an item that fails by itself gets its exception
    in place of a result and the rest of the batch is unharmed.
    ``on_failure(index, exception)`` hears of each such item at once."""

    def one(i: int) -> Any:
        try:
            out = list(call([items[i]]))
            if len(out) != 1:
                raise RuntimeError(f"{what} returned {len(out)} results for 1 item")
            return out[0]
        except Exception as e:
            if is_oom(e):
                raise
            log.warning("%s error: %s", what, describe(e))
            if on_failure:
                on_failure(i, e)
            return e

    if len(items) == 1:
        return [one(0)]
    try:
        out = list(call(items))
        if len(out) != len(items):
            raise RuntimeError(f"{what} returned {len(out)} results for {len(items)} items")
        return out
    except Exception as e:
        if is_oom(e):
            raise
        log.warning("%s error on a batch of %d (%s); retrying one at a time", what, len(items), describe(e))
    return [one(i) for i in range(len(items))]


def free_device_cache() -> None:
    """After an OOM: the device's cached blocks and the C heap's free memory given back."""
    trim()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def resolve_device(device: str) -> str:
    """``auto``: CUDA when torch sees a GPU, else CPU (a stage without torch runs on ``cpu``)."""
    if device == "cpu":
        return device
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        from ..errors import UsageError

        raise UsageError(f"device {device!r} was asked for, but no CUDA device is visible to this job")
    return device


def seconds_budget(device: str, batch: BatchBudget) -> float:
    """Padded audio seconds per batch (:class:`~speechprep.core.config.BatchBudget`).

    On CUDA: (free memory - ``gpu_reserve_gib``) * ``seconds_per_gib`` (a per-model
    factor: how many padded seconds of audio one GiB of activations holds).
    On CPU: ``cpu_seconds``. Never over ``max_seconds``.
    """
    if not device.startswith("cuda"):
        budget = batch.cpu_seconds
    else:
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        budget = max(0.0, free / 2**30 - batch.gpu_reserve_gib) * batch.seconds_per_gib
    return max(min(budget, batch.max_seconds), 1e-9)


@dataclass
class Outcome:
    item: Any
    result: Any = None
    oom: bool = False


@dataclass
class BatchRunner:
    """Run ``infer(batch) -> results`` over items in seconds-budget batches, each of one ``group``."""

    budget: float
    duration: Callable[[Any], float]
    infer: Callable[[list], Sequence[Any]]
    free_cache: Callable[[], None] = free_device_cache
    logger: Callable[[str], None] = field(default=lambda msg: log.info(msg))
    on_batch_start: Callable[[list], None] = field(default=lambda batch: None)
    group: Callable[[Any], Hashable] = field(default=lambda item: None)
    # measures the first batch and sizes the rest (speechprep.core.memprobe.Probe)
    probe: Any = None
    # an item that does not fit alone: True where that lifted a limit of this process's own
    # (speechprep.core.memprobe.guard), and the item is tried again
    relief: Callable[[], bool] = field(default=lambda: False)
    # told of every OOM before the batch is halved or retried (memprobe.guard.refused)
    on_oom: Callable[[], None] = field(default=lambda: None)
    ooms: int = 0

    def plan(self, items: list) -> list[list]:
        """Batches of duration-sorted (longest first) items of one group within the budget,
        the groups in order of their first item."""
        groups: dict[Hashable, list] = {}
        for it in items:
            groups.setdefault(self.group(it), []).append(it)
        batches: list[list] = []
        for members in groups.values():
            current: list = []
            for it in sorted(members, key=self.duration, reverse=True):
                longest = self.duration(current[0]) if current else self.duration(it)
                if current and (len(current) + 1) * longest > self.budget:
                    batches.append(current)
                    current = []
                current.append(it)
            if current:
                batches.append(current)
        return batches

    def padded(self, batch: list) -> float:
        """A batch's padded seconds: its length times its longest item."""
        return len(batch) * max(self.duration(x) for x in batch)

    def _resize(self, budget: float, rest: list[list], why: str) -> list[list]:
        """Batches of what is left (``rest``) planned anew with ``budget``, where it changed."""
        if abs(budget - self.budget) <= 1e-6 * max(budget, self.budget):
            return rest
        self.budget = budget
        self.logger(f"batch budget {why} to {self.budget:.1f} padded s")
        return self.plan([x for b in rest for x in b])

    def _halve(self, b: list, stack: list[list]) -> Outcome | None:
        """After an OOM on ``b``: its halves onto ``stack``, or a single item's ``oom`` outcome."""
        self.ooms += 1
        self.free_cache()
        self.on_oom()
        secs = self.padded(b)
        if len(b) == 1 and self.relief():
            self.logger(f"OOM on a single item ({secs:.1f} s) under the memory guard: retried once without it")
            stack.append(b)
            return None
        if len(b) == 1:
            self.logger(f"OOM on a single item ({secs:.1f} s): rejected oom")
            return Outcome(b[0], oom=True)
        half = len(b) // 2
        self.logger(f"OOM on a batch of {len(b)} ({secs:.1f} padded s): halving to {half} + {len(b) - half}")
        stack += [b[half:], b[:half]]
        return None

    def run(self, items: list) -> Iterator[Outcome]:
        """Outcomes for every item (each exactly once), batch by batch. With a ``probe``, the
        first batch that succeeds measures the budget of the rest
        (:class:`~speechprep.core.memprobe.Probe`)."""
        pending = self.plan(items)
        armed = self.probe is not None
        while pending:
            cap = self.probe.cap() if self.probe is not None and not armed else None
            if cap is not None and cap < 0.9 * self.budget:  # the job's memory crept since the probe
                pending = self._resize(max(cap, 1e-9), pending, "lowered to the memory left")
            stack, shrunk = [pending.pop(0)], False
            while stack:
                b = stack.pop()
                self.on_batch_start(b)
                if armed:
                    self.probe.start()
                try:
                    results = self.infer(b)
                except Exception as e:
                    if not is_oom(e):
                        raise
                    out = self._halve(b, stack)
                    if out is None:  # halved; or retried alone without the guard: it was not the size
                        shrunk = len(b) > 1
                    else:
                        yield out
                    continue
                if len(results) != len(b):
                    raise RuntimeError(f"model returned {len(results)} results for a batch of {len(b)}")
                # after an OOM, what is left is planned with no more than what just worked
                worked = min(self.budget, self.padded(b)) if shrunk else float("inf")
                if armed:
                    armed = False
                    sized = min(self.probe.size(self.padded(b), self.budget), worked)
                    why = "lowered" if sized < self.budget else "raised"
                    stack, pending = [], self._resize(sized, stack + pending, f"{why} by the probe")
                elif shrunk:
                    stack, pending = [], self._resize(worked, stack + pending, "lowered")
                shrunk = False
                for x, r in zip(b, results):
                    yield Outcome(x, r)
