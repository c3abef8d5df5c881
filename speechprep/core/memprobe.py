"""Batches sized by measurement: what one batch-second of a model costs on its device, and
the job's memory it is sized against.

A model job's first batch is a probe of known padded seconds (the stage's ``batch`` block
gives its size). :class:`Probe` measures the memory that batch took above what the job
held before it (on the CPU the process's peak resident memory, ``VmHWM``, reset before the
batch through ``/proc/self/clear_refs``; on CUDA ``torch.cuda.max_memory_allocated``), per
padded second, and sizes the batches after it to what is left of the job's memory
(:func:`job_limit_mb`) less a margin, never over the block's ``max_seconds``. Where the
probe's growth is under measurement noise (a demo model) the block's budget stays, and
the job's stats say so. A stage with a watchdog also keeps a batch's expected time, at
the probe's seconds per padded second, under half the watchdog's timeout.

The job's memory on the CPU: the cgroup limit of this process (``memory.max``, cgroup v2,
or ``memory.limit_in_bytes``, v1: what SLURM and containers enforce), else what the
workflow tells the job (``SPEECHPREP_MEM_MB``: the rule's ``mem_mb``), else the system's
available memory. Under an enforced limit (a cgroup's, or ``mem_mb`` with
``SPEECHPREP_MEM_GUARD=1``) :func:`guard` sets ``RLIMIT_DATA`` so that an
allocation past it raises (torch's ``DefaultCPUAllocator: can't allocate memory``, numpy's
``MemoryError``) instead of the kernel killing the job: the batch runner then halves the
batch (:mod:`speechprep.core.batching`), as on a GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("speechprep.memprobe")

MB = 2**20
# what a job's shell line sets to the rule's mem_mb (speechprep.core.jobs)
MEM_ENV = "SPEECHPREP_MEM_MB"
# "1": the guard holds the job to that mem_mb too, as to a cgroup's limit (a limit no one
# enforces is otherwise only what batches are sized to: an allocation past it is not refused)
GUARD_ENV = "SPEECHPREP_MEM_GUARD"
# batches after the probe fill this share of the memory left after the model; the rest is
# for the allocator's fragmentation, the batch's outputs and what the probe did not see
HEADROOM = 0.7
# a probe batch that grew the job by less than this (MB) measured nothing: the block's budget stays
NOISE_MB = 16.0
UNLIMITED = 2**60  # a cgroup limit at or above this is none (v1 writes 9223372036854771712)


def _status() -> dict[str, int]:
    """``/proc/self/status``'s memory lines, in kB."""
    out = {}
    with contextlib.suppress(OSError), open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("Vm"):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0])
    return out


def rss_mb() -> float:
    """This process's resident memory now (MB)."""
    return _status().get("VmRSS", 0) / 1024


def reset_peak() -> bool:
    """Reset this process's peak resident memory (``VmHWM``) to now; False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_mb() -> float:
    """This process's peak resident memory since the last :func:`reset_peak` (MB)."""
    return _status().get("VmHWM", 0) / 1024


def _cgroup_limit_bytes() -> int | None:
    """This process's cgroup memory limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            names, root = ["memory.max"], Path("/sys/fs/cgroup")
        elif "memory" in controllers.split(","):
            names, root = ["memory.limit_in_bytes"], Path("/sys/fs/cgroup/memory")
        else:
            continue
        # the cgroup's own directory where it is visible, else the namespace's root
        for d in (root / path.lstrip("/"), root):
            value = next((d / n for n in names if (d / n).is_file()), None)
            if value is not None:
                text = value.read_text(encoding="utf-8").strip()
                if text.isdigit() and int(text) < UNLIMITED:
                    limits.append(int(text))
                break
    return min(limits) if limits else None


def trim() -> None:
    """Give the C heap's free memory back to the system (glibc ``malloc_trim``), so that
    memory freed after a refused allocation counts no more against the job's limit."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def _available_mb() -> float:
    with contextlib.suppress(OSError), open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("inf")


def job_limit_mb() -> tuple[float, str]:
    """The job's memory (MB) on the CPU, and where it comes from: ``cgroup``, ``mem_mb``
    (the rule's, from ``SPEECHPREP_MEM_MB``; the smaller of the two where both are set), or
    ``available`` (resident memory now plus the system's available memory)."""
    found = []
    cgroup = _cgroup_limit_bytes()
    if cgroup is not None:
        found.append((cgroup / MB, "cgroup"))
    told = os.environ.get(MEM_ENV, "")
    with contextlib.suppress(ValueError):
        if float(told) > 0:
            found.append((float(told), "mem_mb"))
    if found:
        return min(found)
    return rss_mb() + _available_mb(), "available"


_guarded = [False]


def guarded() -> bool:
    """Whether this process runs under :func:`guard` now (a refused allocation may then
    surface as another error: oneDNN's ``could not create a primitive``)."""
    return _guarded[0]


def _start_threads() -> None:
    """Start torch's CPU thread pool now: a thread's stack counts against ``RLIMIT_DATA``,
    and OpenMP ends the process where it cannot start one under the limit."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.ones(2**20).add_(1)


class guard:
    """Within (a context manager): ``RLIMIT_DATA`` (private writable memory, Linux >= 4.7)
    set so that the job's resident memory cannot grow past ``limit_mb`` by allocation: an
    allocation past it raises instead of the job being killed. Private writable memory
    runs ahead of resident memory (reserved, never touched, or given back by
    :func:`trim`), so :meth:`rearm` anchors the limit again to what is resident before
    each batch. ``data_mb``: the data limit set (None where none could be)."""

    def __init__(self, limit_mb: float):
        self.limit_mb = limit_mb
        self.data_mb: float | None = None
        self.saved: tuple[int, int] | None = None
        self.lifted = 0  # items that ran with the guard lifted (:meth:`lift`)
        self.onednn_off = False  # oneDNN turned off by :meth:`refused`
        self._skip = False

    def __enter__(self) -> guard:
        _start_threads()
        with contextlib.suppress(AttributeError, ValueError, OSError):
            self.saved = resource.getrlimit(resource.RLIMIT_DATA)
        if self.saved is not None and self.saved[0] == resource.RLIM_INFINITY:
            self.rearm()
        return self

    def rearm(self) -> None:
        """The data limit anchored to now (the C heap's free memory given back first): private
        writable memory now plus what is left of ``limit_mb`` over resident memory now."""
        if self.saved is None or self.saved[0] != resource.RLIM_INFINITY:
            return
        if self._skip:  # the item it was lifted for runs now, unguarded
            self._skip = False
            return
        trim()  # what earlier batches freed, given back: resident memory is what is live
        data = _status().get("VmData", 0) / 1024
        if not data:
            return
        want = int((data + max(0.0, self.limit_mb - rss_mb())) * MB)
        if self.saved[1] != resource.RLIM_INFINITY:
            want = min(want, self.saved[1])
        resource.setrlimit(resource.RLIMIT_DATA, (want, self.saved[1]))
        self.data_mb = want / MB
        _guarded[0] = True

    def refused(self) -> None:
        """An allocation was refused under the guard: torch's oneDNN off for the rest of the job
        (once). A refusal inside oneDNN can leave it failing every later call with "could not
        create a primitive", guarded or not, or end the process (SIGSEGV): measured with the
        real-size HuBERT-large (docs/benchmarks/real_size.md, "A real-size job under a memory limit").
        Without it a HuBERT-large batch took 786 MB where it took 950, at 22 % more CPU."""
        torch = sys.modules.get("torch")
        if _guarded[0] and not self.onednn_off and torch is not None and torch.backends.mkldnn.enabled:
            torch.backends.mkldnn.enabled = False
            self.onednn_off = True
            log.warning("an allocation refused under the memory guard: oneDNN off for the rest of the job")

    def lift(self) -> bool:
        """Off for the next batch only: an item that does not fit alone under it (private
        writable memory runs ahead of resident memory, so the data limit can refuse an item
        that fits under the job's; or a limit too low for one item) is tried once more without
        it, and the batch after it is guarded again (:meth:`rearm`). False where it was not on
        (the item was refused unguarded: it does not fit)."""
        on = self.data_mb is not None and self.saved is not None and _guarded[0]
        self._release()
        if on:
            self._skip, self.lifted = True, self.lifted + 1
        return on

    def _release(self) -> None:
        if self.data_mb is not None and self.saved is not None:
            resource.setrlimit(resource.RLIMIT_DATA, self.saved)
        _guarded[0] = False

    def __exit__(self, *exc) -> None:
        self._release()
        if self.onednn_off:
            sys.modules["torch"].backends.mkldnn.enabled = True
            self.onednn_off = False


def _cuda(device: str) -> Any:
    torch = sys.modules["torch"]
    return torch.cuda, torch.device(device)


@dataclass
class Probe:
    """The first batch's measurement and the budget it sets (module docstring).
    ``limit_mb``: the job's memory on the CPU (ignored on CUDA, where the free device memory
    less ``reserve_mb`` is); ``ceiling``: the ``max_seconds`` no batch goes over;
    ``timeout``: the watchdog's seconds (None: none)."""

    device: str
    limit_mb: float
    ceiling: float
    reserve_mb: float = 0.0
    timeout: float | None = None
    source: str = ""
    before_mb: float = 0.0
    started: float = 0.0
    result: dict[str, Any] | None = None

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def start(self) -> None:
        """Before the probe batch: what the job holds."""
        if self.cuda:
            cuda, dev = _cuda(self.device)
            cuda.synchronize(dev)
            cuda.reset_peak_memory_stats(dev)
            self.before_mb = cuda.memory_allocated(dev) / MB
        else:  # heap memory freed earlier would be reused unseen: given back first
            trim()
            reset_peak()
            self.before_mb = rss_mb()
        self.started = time.monotonic()

    def _measure(self) -> tuple[float, float]:
        """(peak MB the batch took above the start, MB left for batches now)."""
        if self.cuda:
            cuda, dev = _cuda(self.device)
            cuda.synchronize(dev)
            peak = cuda.max_memory_allocated(dev) / MB
            free, _total = cuda.mem_get_info(dev)
            cached = (cuda.memory_reserved(dev) - cuda.memory_allocated(dev)) / MB
            return peak - self.before_mb, free / MB + cached - self.reserve_mb
        # what the job held before the batch: what a batch took is freed after it (the
        # allocator may keep it, resident, for the next batch to reuse)
        return peak_mb() - self.before_mb, self.limit_mb - self.before_mb

    def cap(self) -> float | None:
        """On the CPU after a measured probe: the padded seconds a batch may have now, from what
        is left of the job's memory over its resident memory now (the allocator keeps what
        earlier batches freed, and a job's memory creeps after its probe). None: no cap."""
        r = self.result
        if self.cuda or not r or not r["measured"] or r["mb_per_second"] <= 0:
            return None
        trim()
        return max(0.0, self.limit_mb - rss_mb()) * HEADROOM / r["mb_per_second"]

    def size(self, probe_seconds: float, budget: float) -> float:
        """After the probe batch of ``probe_seconds`` padded seconds: the budget for the rest
        (``budget``, the block's, where the probe measured nothing); records :attr:`result`."""
        wall = time.monotonic() - self.started
        grew, left = self._measure()
        per_s = grew / probe_seconds if probe_seconds > 0 else 0.0
        measured = grew >= NOISE_MB
        chosen = budget
        if measured:
            chosen = min(self.ceiling, max(0.0, left) * HEADROOM / per_s)
        if not self.cuda:  # on the CPU a bigger batch is no faster (docs/configuration.md, "Batches")
            chosen = min(chosen, budget)
        if self.timeout and wall > 0 and probe_seconds > 0:
            chosen = min(chosen, 0.5 * self.timeout * probe_seconds / wall)
        chosen = max(chosen, 1e-9)
        self.result = {
            "device": self.device,
            "mb_per_second": round(per_s, 3),
            "probe_seconds": round(probe_seconds, 2),
            "probe_mb": round(grew, 1),
            "seconds_chosen": round(chosen, 2),
            "limit_mb": None if self.cuda else round(self.limit_mb),
            "limit_from": "gpu_free" if self.cuda else self.source,
            "measured": measured,
        }
        if not measured:
            self.result["note"] = f"the probe grew the job by under {NOISE_MB:g} MB: the configured budget stays"
        log.info("batch probe: %s", self.result)
        return chosen
