"""Progress lines for a job's log: items done, rate, audio speed, ETA."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("speechprep.progress")


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    def __init__(self, total: int, unit: str, every: float = 5.0):
        self.total, self.unit, self.every = total, unit, every
        self.done = 0
        self.audio = 0.0
        self.t0 = time.monotonic()
        self._last = self.t0

    def line(self) -> str:
        dt = max(time.monotonic() - self.t0, 1e-9)
        rate = self.done / dt
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        eta_s = _hms(eta) if eta == eta else "?"
        return (
            f"{self.done}/{self.total} {self.unit} ({pct:.1f}%) | "
            f"{rate:.2f} {self.unit}/s, {self.audio / dt:.1f}x realtime | "
            f"elapsed {_hms(dt)} ETA {eta_s}"
        )

    def update(self, n: int = 1, audio_seconds: float = 0.0) -> None:
        self.done += n
        self.audio += audio_seconds
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            log.info(self.line())

    def finish(self) -> None:
        log.info(self.line())
