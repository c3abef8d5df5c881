"""Atomic ``.npy`` writes, and a loader that treats a truncated or wrong-typed file as absent,
so a killed job never leaves an array that later counts as done."""

from __future__ import annotations

import os

import numpy as np

from .jsonio import atomic_open


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    with atomic_open(path, "wb") as f:
        np.save(f, array, allow_pickle=False)


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
