"""librosa with its numba kernels compiled, one process at a time.

librosa compiles its gufuncs (YIN's parabolic interpolation, local minima and maxima, zero
crossings) when ``librosa.core`` and ``librosa.util`` are first imported, and caches them on
disk (``cache=True``, in the package's ``__pycache__``). Two processes that compile the same
gufunc at once can leave a cache pair that does not match (numba issue 10128, open in numba
0.68): the next process that loads it dies of a segmentation fault. That is a fresh
environment whose first measure jobs start together, or a test run beside a run. So
:func:`librosa` imports those modules holding an exclusive lock next to the cache: the
first process compiles and writes, the others wait and then load. ``scripts/setup.sh`` calls
it once in every env that has librosa, so the cache is written before any job starts.

Every speechprep import of librosa goes through here (``speechprep.encoders``' Resemblyzer
reaches librosa too, and calls it first).
"""

from __future__ import annotations

import fcntl
import functools
import importlib
import importlib.util
import os
import tempfile
from pathlib import Path
from types import ModuleType

# the modules whose gufuncs are compiled (or loaded from the cache) when they are imported
COMPILED_ON_IMPORT = ("librosa.core", "librosa.util.utils")


def lock_path() -> Path:
    """The lock where numba writes the cache: ``NUMBA_CACHE_DIR`` when it is set, else beside
    librosa's package, or in the temp dir when the package is read-only (numba then caches
    under the user's home)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]) / ".speechprep-numba.lock"
    spec = importlib.util.find_spec("librosa")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("librosa is not installed in this environment")
    here = Path(spec.origin).parent
    if os.access(here, os.W_OK):
        return here / ".speechprep-numba.lock"
    return Path(tempfile.gettempdir()) / f"speechprep-numba-{os.getuid()}.lock"


@functools.cache
def librosa() -> ModuleType:
    """``librosa``, its compiled-on-import modules loaded under the lock."""
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for name in COMPILED_ON_IMPORT:
                importlib.import_module(name)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return importlib.import_module("librosa")


if __name__ == "__main__":  # scripts/setup.sh: compile and cache them once
    librosa()
