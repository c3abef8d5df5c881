"""The run's ``exclude`` file (a takedown, a withdrawn licence) and its removal ledger.

The file lists, one a line (UTF-8; blank lines and lines starting with ``#`` skipped),
ids, audio files and speakers to leave out of every output and export: ingest drops the
ids and files, curation the speakers. Each removal of something an earlier run had
produced is a line of the dataset's ``removed.jsonl`` (``id``, ``reason``, ``when``,
``by``), appended, never rewritten.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from .jsonio import append_jsonl, read_jsonl


def read_exclude(path: str | None, roots: Iterable[str] = ()) -> set[str]:
    """The entries of ``path``; a relative one also in its absolute form under each of
    ``roots`` (a dataset's ``audio_dir``, its manifest's folder)."""
    if not path:
        return set()
    listed = set()
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        x = raw.strip()
        if x and not x.startswith("#"):
            listed.add(x)
            listed.update(os.path.normpath(os.path.join(r, x)) for r in roots)
    return listed


def record_removals(ledger: str | os.PathLike, removed: Iterable[tuple[str, str]], by: str) -> int:
    """Append ``(id, reason)`` removals the ledger does not hold yet; how many were new."""
    have = {(r["id"], r["reason"]) for r in read_jsonl(ledger)} if Path(ledger).exists() else set()
    new = [(i, r) for i, r in dict.fromkeys(removed) if (i, r) not in have]
    if new:
        when = datetime.now(UTC).isoformat(timespec="seconds")
        append_jsonl(ledger, [{"id": i, "reason": r, "when": when, "by": by} for i, r in new])
    return len(new)
