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
