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
  budget that worked.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import describe
from .config import BatchBudget

log = logging.getLogger("speechprep.batching")


def is_oom(exc: BaseException) -> bool:
    """CUDA (or other device) out-of-memory, whichever way torch raised it."""
    name = type(exc).__name__
    return name == "OutOfMemoryError" or (isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


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

    def run(self, items: list) -> Iterator[Outcome]:
        """Outcomes for every item (each exactly once), batch by batch."""
        pending = self.plan(items)
        while pending:
            batch = pending.pop(0)
            stack = [batch]
            shrunk = False
            while stack:
                b = stack.pop()
                self.on_batch_start(b)
                try:
                    results = self.infer(b)
                except Exception as e:
                    if not is_oom(e):
                        raise
                    self.ooms += 1
                    self.free_cache()
                    secs = len(b) * max(self.duration(x) for x in b)
                    if len(b) == 1:
                        self.logger(f"OOM on a single item ({secs:.1f} s): rejected oom")
                        yield Outcome(b[0], oom=True)
                        continue
                    half = len(b) // 2
                    self.logger(
                        f"OOM on a batch of {len(b)} ({secs:.1f} padded s): halving to {half} + {len(b) - half}"
                    )
                    stack += [b[half:], b[:half]]
                    shrunk = True
                    continue
                if len(results) != len(b):
                    raise RuntimeError(f"model returned {len(results)} results for a batch of {len(b)}")
                if shrunk:
                    # plan what is left with the budget that just worked
                    worked = len(b) * max(self.duration(x) for x in b)
                    if worked < self.budget:
                        self.budget = worked
                        rest = [x for bb in stack for x in bb] + [x for bb in pending for x in bb]
                        stack, pending = [], self.plan(rest)
                        self.logger(f"batch budget lowered to {self.budget:.1f} padded s")
                    shrunk = False
                for x, r in zip(b, results):
                    yield Outcome(x, r)
