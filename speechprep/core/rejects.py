"""The rejects format (docs/outputs.md, "Rejects"): one line per input a stage could not use."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..io.jsonio import read_jsonl


def reject(id_: Any, audio_filepath: str | None, stage: str, reason: str, detail: str, **extra: Any) -> dict[str, Any]:
    """A rejects line: ``id`` (or the input line number), ``audio_filepath``, ``stage``, ``reason``, ``detail``."""
    rec = {"id": id_, "audio_filepath": audio_filepath, "stage": stage, "reason": reason, "detail": detail}
    rec.update(extra)
    return rec


def count_reasons(paths: Iterable[str | os.PathLike]) -> dict[str, int]:
    """Rejects per reason over rejects files, sorted by reason."""
    n: Counter = Counter(r["reason"] for p in paths for r in read_jsonl(p))
    return dict(sorted(n.items()))
