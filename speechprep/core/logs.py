"""One log format for every job: ``time level stage[shard]: message``."""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(stage)s[%(shard)s]: %(message)s"


class _Context(logging.Filter):
    def __init__(self, stage: str, shard: str):
        super().__init__()
        self.stage, self.shard = stage, shard

    def filter(self, record: logging.LogRecord) -> bool:
        record.stage, record.shard = self.stage, self.shard
        return True


def setup(stage: str, shard: str = "-", level: int = logging.INFO, stream=None) -> None:
    """Send the ``speechprep`` loggers to ``stream`` (stderr: the rule's log) in :data:`FORMAT`."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT, datefmt="%H:%M:%S"))
    handler.addFilter(_Context(stage, shard))
    root = logging.getLogger("speechprep")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


USED = "job used "  # the line a finished job's log ends with (speechprep.workflow.pilot reads it)
READY = "job ready "  # a job's CPU and wall seconds until its model is loaded (the plan's fixed part)
FILE_COSTS = "file costs "  # a job's cost per file: [seconds, CPU seconds] pairs (the pilot fits them)
MOST_FILE_COSTS = 2000  # pairs logged at most (every k-th file where a job did more)


def _process_seconds() -> float | None:
    """Seconds since this process started (Linux: /proc), imports included."""
    import os

    try:
        with open("/proc/self/stat", encoding="utf-8") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="utf-8") as f:
            return float(f.read().split()[0]) - start / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def ready() -> dict:
    """Log the CPU and wall seconds of the process so far, once a job is ready to process its
    items (its imports done, its model loaded): the fixed part of the job's cost, which the
    plan cannot tell from its part per audio hour where a pilot has few jobs of one size."""
    import json
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    out = {"cpu_s": round(me.ru_utime + me.ru_stime, 3), "wall_s": round(_process_seconds() or 0.0, 3)}
    logging.getLogger("speechprep.job").info(READY + json.dumps(out))
    return out


def used(seconds: float, threads: int) -> dict:
    """Log what the job used: wall seconds since the process started (``seconds`` where that
    is unknown), CPU seconds of the process and of the worker processes it waited for, the
    process's peak resident memory and its largest worker's (MB)."""
    import json
    import resource

    me, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {
        "wall_s": round(_process_seconds() or seconds, 3),
        "cpu_s": round(me.ru_utime + me.ru_stime + workers.ru_utime + workers.ru_stime, 3),
        "rss_mb": round(me.ru_maxrss / 1024, 1),
        "worker_rss_mb": round(workers.ru_maxrss / 1024, 1),
        "threads": threads,
    }
    logging.getLogger("speechprep.job").info(USED + json.dumps(out))
    return out


def file_costs(points: list[tuple[float, float]]) -> None:
    """Log each file's length and the CPU seconds the job spent on it (at most
    :data:`MOST_FILE_COSTS` pairs, evenly spread), for the plan's fit of cost by file length."""
    import json

    step = max(1, -(-len(points) // MOST_FILE_COSTS))
    pairs = [[round(s, 3), round(c, 4)] for s, c in points[::step]]
    logging.getLogger("speechprep.job").info(FILE_COSTS + json.dumps(pairs))
