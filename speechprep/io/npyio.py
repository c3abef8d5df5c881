"""Atomic ``.npy`` writes, and a loader that treats a truncated or wrong-typed file as absent,
so a killed job never leaves an array that later counts as done."""

from __future__ import annotations

import os

import numpy as np

from ..errors import UsageError
from .jsonio import atomic_open


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    with atomic_open(path, "wb") as f:
        np.save(f, array, allow_pickle=False)


def save_npz(path: str | os.PathLike, **arrays: np.ndarray) -> None:
    """Several named arrays in one ``.npz`` (numbers and strings: read back without pickle)."""
    with atomic_open(path, "wb") as f:
        np.savez(f, **arrays)


def save_named_rows(path: str | os.PathLike, names: list[str], rows: np.ndarray) -> None:
    """Rows of float32 with a name each (a speaker's centroid) as one ``.npy`` structured
    array of ``name`` and ``row``: the same names and rows give the same bytes."""
    width = max([len(n) for n in names] + [1])
    table = np.zeros(len(names), dtype=[("name", f"<U{width}"), ("row", "<f4", (rows.shape[1],))])
    table["name"], table["row"] = names, rows
    save_npy(path, table)


def load_named_rows(path: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    """The names and rows :func:`save_named_rows` wrote."""
    table = np.load(path, allow_pickle=False)
    return table["name"].tolist(), np.ascontiguousarray(table["row"], dtype=np.float32)


def load_npy(path: str | os.PathLike, dtype=None, ndim: int | None = None) -> np.ndarray | None:
    """The array, or ``None`` when the file is missing, truncated or not of ``dtype``/``ndim``."""
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if dtype is not None and a.dtype != np.dtype(dtype):
        return None
    if ndim is not None and a.ndim != ndim:
        return None
    return a


# --- the packed layout (config tts.layout: packed) ------------------------------------------
# One 1-D array file per shard and kind holds every segment's array end to end; a manifest
# line names its slice as "<file>#<offset>:<length>" (elements). A plain path is a whole file.
LAYOUTS = ("files", "packed")
PACKED = "packed"  # the packed file's stem inside a shard's per-kind directory


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise UsageError(f"layout {layout!r} is not one of {', '.join(LAYOUTS)} (tts.layout)")
    return layout


def ref(path: str | os.PathLike, offset: int, length: int) -> str:
    return f"{path}#{offset}:{length}"


def parse_ref(s: str) -> tuple[str, int, int] | None:
    """``(path, offset, length)`` of a packed reference; ``None`` for a plain path."""
    path, sep, span = str(s).rpartition("#")
    if not sep:
        return None
    offset, colon, length = span.partition(":")
    if not (colon and offset.isdigit() and length.isdigit()):
        return None
    return path, int(offset), int(length)


def pack_npy(path: str | os.PathLike, arrays: list[np.ndarray], dtype) -> list[str]:
    """Write ``arrays`` (each 1-D) end to end into one ``.npy`` atomically; their references."""
    arrays = [np.asarray(a, dtype=dtype).reshape(-1) for a in arrays]
    save_npy(path, np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype))
    refs, offset = [], 0
    for a in arrays:
        refs.append(ref(path, offset, len(a)))
        offset += len(a)
    return refs


_mapped: dict[str, tuple[tuple[int, int], np.ndarray]] = {}
MAPPED_FILES = 64  # packed files kept mapped at once (a reader touches a shard's few at a time)


def _mapped_file(path: str) -> np.ndarray | None:
    """The packed file memory-mapped, once per version of the file (mtime, size)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (st.st_mtime_ns, st.st_size)
    hit = _mapped.get(path)
    if hit is None or hit[0] != key:
        try:
            hit = (key, np.load(path, mmap_mode="r", allow_pickle=False))
        except (OSError, ValueError, EOFError):
            return None
        _mapped.pop(path, None)
        if len(_mapped) >= MAPPED_FILES:  # the least recently mapped goes
            del _mapped[next(iter(_mapped))]
        _mapped[path] = hit
    return hit[1]


def load_ref(s: str, dtype=None, ndim: int | None = None) -> np.ndarray | None:
    """The array a manifest field names, a whole ``.npy`` or a packed slice; ``None`` when
    missing, truncated, out of range or not of ``dtype``/``ndim``."""
    packed = parse_ref(s)
    if packed is None:
        return load_npy(s, dtype, ndim)
    path, offset, length = packed
    a = _mapped_file(path)
    if a is None or a.ndim != 1 or offset + length > len(a):
        return None
    if dtype is not None and a.dtype != np.dtype(dtype):
        return None
    if ndim is not None and ndim != 1:
        return None
    return np.array(a[offset : offset + length])
