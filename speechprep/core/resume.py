"""The resume file of a shard job in progress, so a killed job resumes.

Outcomes are appended (one JSON line each) as they complete; the first line
fingerprints the shard's input and the stage's parameters, so a resume file
left by a different input is discarded, not reused. A line cut short by a kill
is ignored (that item is simply redone). While the job runs, a saved line is read
back by its byte offset (:meth:`ResumeFile.read_at`): the job keeps the offset,
not the outcome (:class:`~speechprep.core.shardjob.ShardJob`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..io.jsonio import atomic_open, dumps


def fingerprint(input_path: str | os.PathLike | None, params: Any, version: str) -> str:
    """Digest of an input file's bytes (None: of no input), the parameters (JSON) and an
    algorithm version."""
    h = hashlib.sha256(Path(input_path).read_bytes() if input_path is not None else b"")
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    h.update(version.encode())
    return h.hexdigest()


class ResumeFile:
    """Saved lines keyed by ``id``, appended as they complete."""

    keeps = True  # a saved line can be read back (read_at)

    def __init__(self, path: str | os.PathLike, fingerprint: str):
        self.path = Path(path)
        self.fingerprint = fingerprint
        self._f = None
        self._r = None  # the file opened for reading back (read_at)
        self._end = 0  # the file's length in bytes: the next line's offset

    def load(self) -> dict[str, dict]:
        """The saved lines of a resume file with this fingerprint (none otherwise)."""
        try:
            f = open(self.path, encoding="utf-8")  # noqa: SIM115 (closed below)
        except FileNotFoundError:
            return {}
        saved = {}
        with f:  # line by line: the file's text is never held whole
            try:
                if json.loads(f.readline()).get("fingerprint") != self.fingerprint:
                    return {}
            except (json.JSONDecodeError, AttributeError):
                return {}
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    break  # the tail a kill cut short
                saved[r["id"]] = r
        return saved

    def _write(self, f, line: dict) -> int:
        """Write one line; its byte offset."""
        text = (dumps(line) + "\n").encode("utf-8")
        at, self._end = self._end, self._end + len(text)
        f.write(text)
        return at

    def start(self, lines: Iterable[dict]) -> list[int]:
        """Rewrite the file with ``lines`` (dropping a truncated tail), then append; each
        line's byte offset."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._end = 0
        with atomic_open(self.path, "wb") as f:
            self._write(f, {"fingerprint": self.fingerprint})
            offsets = [self._write(f, r) for r in lines]
        self._f = open(self.path, "ab")  # noqa: SIM115 (open while the job runs; close())
        return offsets

    def append(self, line: dict) -> int:
        """Save ``line`` at once (flushed); its byte offset."""
        at = self._write(self._f, line)
        self._f.flush()
        return at

    def read_at(self, offset: int) -> dict:
        """The line saved at byte ``offset`` (:meth:`start`, :meth:`append`)."""
        if self._r is None:
            self._r = open(self.path, "rb")  # noqa: SIM115 (open while the job runs; close())
        self._r.seek(offset)
        return json.loads(self._r.readline().decode("utf-8"))

    def close(self, remove: bool) -> None:
        for f in (self._f, self._r):
            if f:
                f.close()
        self._f = self._r = None
        if remove:
            self.path.unlink(missing_ok=True)


class NoResume(ResumeFile):
    """For a job too cheap to resume: it saves nothing and finds nothing saved (its job
    keeps its outcomes in memory)."""

    keeps = False

    def __init__(self, fingerprint: str = ""):
        super().__init__(os.devnull, fingerprint)

    def load(self) -> dict[str, dict]:
        return {}

    def start(self, lines: Iterable[dict]) -> list[int]:
        return [-1 for _ in lines]  # nothing saved: every outcome stays held

    def append(self, line: dict) -> int:
        return -1

    def close(self, remove: bool) -> None:
        pass
