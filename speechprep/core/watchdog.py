"""A watchdog for model batches: no progress for ``timeout`` s -> stack dump, job fails.

A hung preprocessor or a stuck device call must not hold a cluster job
silently until its walltime. The stage calls :meth:`Watchdog.batch` when a
batch starts (naming it) and :meth:`Watchdog.done` when it ends; a
background thread dumps every thread's stack to the log and ends the process
with :data:`EXIT_CODE` when a batch runs longer than ``timeout``.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
import time

EXIT_CODE = 124  # what timeout(1) uses


log = logging.getLogger("speechprep.watchdog")


class Watchdog:
    def __init__(self, timeout: float, label: str = "batch"):
        self.timeout = float(timeout)
        self.label = label
        self._desc: str | None = None
        self._since = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="speechprep-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        if self.timeout > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def batch(self, description: str) -> None:
        with self._lock:
            self._desc = description
            self._since = time.monotonic()

    def done(self) -> None:
        with self._lock:
            self._desc = None
            self._since = time.monotonic()

    def _watch(self) -> None:
        step = min(1.0, self.timeout / 4)
        while not self._stop.wait(step):
            with self._lock:
                desc, since = self._desc, self._since
            if desc is not None and time.monotonic() - since > self.timeout:
                self._fire(desc, time.monotonic() - since)

    def _fire(self, desc: str, stalled: float) -> None:
        msg = (
            f"WATCHDOG: no progress for {stalled:.0f} s (limit {self.timeout:.0f} s) on {self.label} "
            f"{desc}; stacks of every thread follow, then the job fails (exit {EXIT_CODE})"
        )
        log.error("%s", msg)
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
        log.error("%s: job failed", msg.split(";")[0])
        for h in logging.getLogger("speechprep").handlers:
            h.flush()
        os._exit(EXIT_CODE)
