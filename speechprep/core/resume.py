"""The resume file of a shard job in progress, so a killed job resumes.

Outcomes are appended (one JSON line each) as they complete; the first line
fingerprints the shard's input and the stage's parameters, so a resume file
left by a different input is discarded, not reused. A line cut short by a kill
is ignored (that item is simply redone).
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

    def __init__(self, path: str | os.PathLike, fingerprint: str):
        self.path = Path(path)
        self.fingerprint = fingerprint
        self._f = None

    def load(self) -> dict[str, dict]:
        """The saved lines of a resume file with this fingerprint (none otherwise)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return {}
        try:
            if json.loads(lines[0]).get("fingerprint") != self.fingerprint:
                return {}
        except (json.JSONDecodeError, AttributeError):
            return {}
        saved = {}
        for line in lines[1:]:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                break  # the tail a kill cut short
            saved[r["id"]] = r
        return saved

    def start(self, lines: Iterable[dict]) -> None:
        """Rewrite the file with ``lines`` (dropping a truncated tail), then append."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(self.path) as f:
            f.write(json.dumps({"fingerprint": self.fingerprint}) + "\n")
            for r in lines:
                f.write(dumps(r) + "\n")
        self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (open while the job runs; close())

    def append(self, line: dict) -> None:
        self._f.write(dumps(line) + "\n")
        self._f.flush()

    def close(self, remove: bool) -> None:
        if self._f:
            self._f.close()
            self._f = None
        if remove:
            self.path.unlink(missing_ok=True)


class NoResume(ResumeFile):
    """For a job too cheap to resume: it saves nothing and finds nothing saved."""

    def __init__(self, fingerprint: str = ""):
        super().__init__(os.devnull, fingerprint)

    def load(self) -> dict[str, dict]:
        return {}

    def start(self, lines: Iterable[dict]) -> None:
        pass

    def append(self, line: dict) -> None:
        pass

    def close(self, remove: bool) -> None:
        pass
