"""librosa with its numba kernels compiled, one process at a time.

librosa compiles its gufuncs (YIN's parabolic interpolation in ``librosa.core.pitch``, zero
crossings in ``librosa.core.audio``, local minima and maxima in ``librosa.util.utils``) when
those modules are first imported (``librosa.core`` itself loads them lazily), and caches
them on disk (``cache=True``, in the package's ``__pycache__``). Two processes that compile
the same gufunc at once can leave a cache pair that does not match (numba issue 10128, open
in numba 0.68): the next process that loads it dies of a segmentation fault. That is a fresh
environment whose first jobs that reach librosa start together (NeMo's preprocessor takes
its mel filters from librosa), or a test run beside a run. So
:func:`librosa` imports those modules holding an exclusive lock where numba writes the cache:
the first process compiles and writes, the others wait and then load. ``scripts/setup.sh``
calls it once in every env that has librosa, so the cache is written before any job starts
(a node with another CPU compiles its own entries: numba keys them by the CPU).

speechprep's jobs do not import librosa (:mod:`speechprep.core.spectral` computes what they
took from it; only the diarization benchmark's per-window baseline still calls Resemblyzer's
own mel); NeMo does, in the ASR jobs, without this lock: setup's warm-up covers them on
the CPU it ran on, and a node with another CPU compiles its entries at its first ASR jobs,
unlocked. Where the lock cannot be taken (a file system
without ``flock``, a cache dir that cannot be written) the modules are imported without it,
with a warning.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

log = logging.getLogger("speechprep.kernels")

# the modules whose gufuncs are compiled (or loaded from the cache) when they are imported
COMPILED_ON_IMPORT = ("librosa.core.audio", "librosa.core.pitch", "librosa.util.utils")
LOCK_NAME = ".speechprep-numba.lock"


def lock_path() -> Path:
    """The lock where numba writes the cache: ``NUMBA_CACHE_DIR`` when it is set, else beside
    librosa's package, else (a read-only package) numba's cache dir in the user's home."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]) / LOCK_NAME
    spec = importlib.util.find_spec("librosa")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("librosa is not installed in this environment")
    here = Path(spec.origin).parent
    if os.access(here, os.W_OK):
        return here / LOCK_NAME
    from numba.misc.appdirs import AppDirs

    return Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / LOCK_NAME


@contextlib.contextmanager
def _held(path: Path) -> Iterator[None]:
    """``path`` locked exclusively while inside (released when the file closes)."""
    with contextlib.ExitStack() as stack:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fcntl.flock(stack.enter_context(open(path, "a", encoding="utf-8")), fcntl.LOCK_EX)
        except OSError as e:
            log.warning("librosa's numba kernels loaded without a lock (%s: %s)", path, e)
        yield


@functools.cache
def librosa() -> ModuleType:
    """``librosa``, its compiled-on-import modules loaded under the lock."""
    importlib.import_module("numba")  # outside the lock: the lock is held only for librosa's own
    with _held(lock_path()):
        for name in COMPILED_ON_IMPORT:
            importlib.import_module(name)
    return importlib.import_module("librosa")


if __name__ == "__main__":  # scripts/setup.sh: compile and cache them once, in an env with librosa
    if importlib.util.find_spec("librosa") is not None:
        librosa()
