"""JSON(L) reading and atomic writing.

Every output is written to a temporary file in the target's directory and
renamed over the target, so a killed job never leaves a truncated output that
a later run could take for finished. All text is UTF-8.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

_UMASK = os.umask(0o022)
os.umask(_UMASK)
_NAME_MAX = 255  # bytes in a file name on common file systems
_TEMP_DECORATION = 12  # mkstemp's 8 random characters + ".tmp"


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w"):
    """Open a temp file next to ``path``; on clean exit fsync it and rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}."
    if len(os.fsencode(prefix)) + _TEMP_DECORATION > _NAME_MAX:
        prefix = ".atomic-"  # a long target name: a short temp name, still hidden, still in the same directory
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get the usual mode
        if "b" in mode:
            f = os.fdopen(fd, mode)
        else:
            f = os.fdopen(fd, mode, encoding="utf-8", newline="\n")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


def write_jsonl(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> int:
    """Atomically write ``records`` as JSONL; returns the line count."""
    n = 0
    with atomic_open(path) as f:
        for r in records:
            f.write(dumps(r))
            f.write("\n")
            n += 1
    return n


def write_text_if_changed(path: str | os.PathLike, text: str) -> bool:
    """Atomically write ``text`` unless ``path`` already holds exactly it.

    Leaving an unchanged file untouched keeps its mtime, so Snakemake does not
    see it as updated. Returns whether the file was written.
    """
    path = Path(path)
    data = text.encode("utf-8")
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    with atomic_open(path, "wb") as f:
        f.write(data)
    return True


def read_jsonl(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file we wrote ourselves (strict: errors raise)."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not valid JSON: {e}") from None


def append_jsonl(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> None:
    """Atomically add ``records`` to the end of JSONL file ``path`` (a ledger kept across runs)."""
    path = Path(path)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    with atomic_open(path) as f:
        f.write(old + "".join(dumps(r) + "\n" for r in records))


def write_json(path: str | os.PathLike, obj: Any, indent: int = 1) -> None:
    """Atomically write ``obj`` as indented JSON (a summary, stats)."""
    with atomic_open(path) as f:
        f.write(json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")
