"""Explicit pickle allowlists, shared by every loader of a pickle in speechprep.

An allowlist maps a module to the names a pickle may look up in it: classes,
by name, numpy's two reconstruction functions (``_reconstruct`` for arrays,
``scalar`` for scalars), which only build numpy objects from bytes, and
numpy's two random-state constructors (:data:`NUMPY_RANDOM`).
Every other global a pickle names is refused before anything is unpickled
(torch checkpoints) or at the lookup itself (joblib files), so nothing it
names can run.
"""

from __future__ import annotations

import importlib

Allowlist = dict[str, frozenset[str]]

# numpy arrays, scalars and dtypes. numpy 1.x pickles name numpy.core.multiarray,
# numpy 2 pickles numpy._core.multiarray.
NUMPY: Allowlist = {
    "numpy": frozenset({"dtype", "ndarray"}),
    "numpy.core.multiarray": frozenset({"_reconstruct", "scalar"}),
    "numpy._core.multiarray": frozenset({"_reconstruct", "scalar"}),
}
# numpy's legacy random state, which a fitted scikit-learn estimator of 2021 carries
# (MiniBatchKMeans keeps its ``RandomState``): the state and its bit generator, and the
# two constructors numpy pickles them with. They build only a ``RandomState`` around a
# bit generator named by a string, or given as a class or a callable that the pickle
# must itself name (and so pass this allowlist); the state is then set through the
# classes' own ``__setstate__``. Nothing else of numpy.random is allowed (not Generator).
NUMPY_RANDOM: Allowlist = {
    "numpy.random._pickle": frozenset({"__randomstate_ctor", "__bit_generator_ctor"}),
    "numpy.random.mtrand": frozenset({"RandomState"}),
    "numpy.random._mt19937": frozenset({"MT19937"}),
    "numpy.random._pcg64": frozenset({"PCG64", "PCG64DXSM"}),
    "numpy.random._philox": frozenset({"Philox"}),
    "numpy.random._sfc64": frozenset({"SFC64"}),
}
# the only allowed names that are not classes
NUMPY_FUNCTIONS = frozenset(
    {
        "numpy.core.multiarray._reconstruct",
        "numpy.core.multiarray.scalar",
        "numpy._core.multiarray._reconstruct",
        "numpy._core.multiarray.scalar",
        "numpy.random._pickle.__randomstate_ctor",
        "numpy.random._pickle.__bit_generator_ctor",
    }
)

# numpy 2 moved numpy.core to numpy._core; the old path imports only with a deprecation warning
_MOVED = {"numpy.core.multiarray": "numpy._core.multiarray"}


def allowed(allowlist: Allowlist, module: str, name: str) -> bool:
    return name in allowlist.get(module, ())


def resolve(module: str, name: str):
    """The object ``module.name`` as the pickle spells it (imported, never called)."""
    return getattr(importlib.import_module(_MOVED.get(module, module)), name)


def split_global(full_name: str) -> tuple[str, str]:
    module, _, name = full_name.rpartition(".")
    return module, name
