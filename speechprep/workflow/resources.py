"""Memory requests of the shard jobs (the rules' ``mem_mb``), from what each job will hold.

A shard job's peak memory, per job (its :class:`Memory`, declared with the job; docs/cluster.md,
"Memory requests"):

    JOB_MB + fixed + its model files + max(its model files (the restore's second copy),
    MB per audio second x the seconds it holds at once) + MB per audio second of the shard x
    the shard's seconds (the lines and results it keeps until the shard is written)

* **JOB_MB**: the snakemake process that runs the job inside its allocation (on SLURM it
  counts against the job's memory: about 100 MB, 190 MB in an array task);
* **fixed**: the interpreter and the stage's libraries: the stage's job on a demo shard
  (tiny models), measured as the peak of its SLURM memory cgroup, less ``JOB_MB``, with
  headroom (``Memory.fixed_mb``; docs/cluster.md has the figures);
* **models**: the model files' size on disk once (the module's tensors), and once more
  while it is restored (``RESTORE_COPIES``: the checkpoint's tensors copied into the
  module's), which is collected before the first batch: the job asks for the larger of that
  copy and what it holds at once. A model named by a hub id rather than a file counts
  ``HUB_MODEL_MB``;
* **held at once**: a model stage holds one batch: its budget in audio seconds, or the
  shard's longest segment when that is longer (a segment is never split across batches).
  On the CPU (``device: cpu``) the batch's activations are in the job's memory:
  ``batch_mb_per_s`` x ``batch.cpu_seconds``. On a GPU (``device: cuda``) they are on the
  GPU, and the job's memory holds the CUDA context (``CUDA_HOST_MB``) and the batch's audio
  and padded copies (``host_mb_per_s`` x ``batch.max_seconds``, the most a GPU batch takes).
  ``device: auto`` asks for the larger of the two, since the job may land on either;
  VAD workers each hold one decode block of one file (every channel, float32, with its
  mono mix and resampled copy); export holds the shard's FLAC bytes and Parquet table.

The request is rounded up to ``ROUND_MB``: the SLURM executor submits a rule's ready jobs as
one job array with the first job's request for every task, so shards of similar size must ask
for the same (ingest makes them similar: ``shard_hours``). For the same reason VAD sizes its
decode blocks by the dataset's widest file, not the shard's. A retry multiplies the request by
the attempt (SLURM's out-of-memory kill is retried with twice, then three times as much).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache

from ..core.config import BatchBudget
from ..core.jobs import Memory
from ..io.modelfiles import is_local_model

# copies of a model's file in memory at once while it is restored (the checkpoint's tensors and
# the module's, one copied into the other): at real size the restore's peak is the fixed part
# plus twice the file (parakeet-size TDT 5,467 MB for a 2,474 MB file, HuBERT-large 2,785 for
# 1,267: docs/benchmarks/real_size.md, "Real-size models"). The second copy is collected before the
# first batch (speechprep.core.modelstage), so a job holds the larger of it and its batch.
RESTORE_COPIES = 2
JOB_MB = 250
ROUND_MB = 256
HUB_MODEL_MB = 4000  # a pretrained model by name: its size is not known before the download
VAD_WORKER_MB = 100
# Host memory of a job whose model runs on a GPU: torch's CUDA context and kernels. An
# estimate, not measured on this project's CPU machines (docs/cluster.md, "Memory requests").
CUDA_HOST_MB = 2000
# Copies of a VAD decode block held at once: the block (every channel), its mono mix, its resampling.
VAD_BLOCK_COPIES = 3


@dataclass(frozen=True)
class ShardContent:
    """What a shard file lists: its lines, their total and longest duration (s), and for a
    file shard the largest channels x sample rate of one file; ``undated``: lines without a
    duration (a manifest read without probing)."""

    lines: int = 0
    seconds: float = 0.0
    longest: float = 0.0
    max_channel_rate: int = 0
    undated: int = 0


@lru_cache(maxsize=4096)
def _content(path: str, mtime_ns: int, size: int) -> ShardContent:
    lines, seconds, longest, channel_rate, undated = 0, 0.0, 0.0, 0, 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            x = json.loads(line)
            d = float(x.get("duration") or 0.0)
            lines, seconds, longest = lines + 1, seconds + d, max(longest, d)
            undated += x.get("duration") is None
            channel_rate = max(channel_rate, int(x.get("channels") or 1) * int(x.get("sample_rate") or 16000))
    return ShardContent(lines, seconds, longest, channel_rate, undated)


def shard_content(path: str | os.PathLike) -> ShardContent:
    """The shard's content (read once per version of the file); empty when it is not there yet."""
    try:
        st = os.stat(path)
    except OSError:
        return ShardContent()
    return _content(str(path), st.st_mtime_ns, st.st_size)


def model_mb(models: list[str]) -> float:
    """The models' size on disk in MB: ``HUB_MODEL_MB`` for a hub name; nothing for a local
    file not built yet (a rule builds it; the request is computed again when the job is ready)."""
    total = 0.0
    for m in models:
        if os.path.isfile(m):
            total += os.path.getsize(m) / 1e6
        elif not is_local_model(m):
            total += HUB_MODEL_MB
    return total


def batch_mb(memory: Memory, batch: BatchBudget | dict | None, device: str, longest: float = 0.0) -> float:
    """The MB a model stage's batch takes in the job's memory on ``device`` (the module's
    docstring): on the CPU its activations, on a GPU the CUDA context and the batch's
    audio, on ``auto`` the larger. No ``batch``: one segment (or chunk) at a time."""
    b = BatchBudget(**batch) if isinstance(batch, dict) else batch or BatchBudget(0.0, 0.0, 0.0, 0.0)
    cpu = memory.batch_mb_per_s * max(b.cpu_seconds, longest)
    gpu = CUDA_HOST_MB + memory.host_mb_per_s * max(b.max_seconds, longest)
    if device == "cpu":
        return cpu
    return gpu if device.startswith("cuda") else max(cpu, gpu)


def memory_mb(
    memory: Memory,
    shard: ShardContent,
    models: list[str] = (),
    batch: BatchBudget | dict | None = None,
    device: str = "cpu",
    threads: int = 1,
    block_seconds: float = 60.0,
) -> int:
    """The MB a job of ``memory``'s model needs for ``shard`` at attempt 1, rounded up to
    ``ROUND_MB`` (see the module's docstring; for VAD, ``shard`` is the dataset's manifest;
    ``batch`` and ``device``: a model stage's ``batch`` block and ``device``)."""
    files = model_mb(list(models))
    mb = JOB_MB + memory.fixed_mb + files + memory.shard_mb_per_s * shard.seconds
    held = 0.0
    if memory.workers:
        block = shard.max_channel_rate * min(block_seconds, shard.longest or block_seconds) * 4 / 1e6
        held = max(1, threads) * (VAD_WORKER_MB + VAD_BLOCK_COPIES * block)
    elif memory.batch_mb_per_s is not None:
        held = batch_mb(memory, batch, device, shard.longest)
    mb += max((RESTORE_COPIES - 1) * files, held)  # the restore's second copy is gone before a batch
    return int(-(-mb // ROUND_MB) * ROUND_MB)
