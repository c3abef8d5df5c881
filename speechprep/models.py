"""Model files: local-or-named, and their identity (path + sha256). Standard library only."""
from __future__ import annotations

import hashlib
import os


MODEL_SUFFIXES = (".nemo", ".pt", ".ckpt", ".model", ".joblib", ".pkl", ".json")


def is_local_model(spec: str) -> bool:
    """A file path rather than a hub name such as ``nvidia/parakeet-tdt-0.6b-v2``:
    it exists, has a model file suffix, or is written as a path (absolute, ./, ../, ~)."""
    return (os.path.exists(spec) or spec.endswith(MODEL_SUFFIXES) or os.path.isabs(spec)
            or spec.startswith(("./", "../", "~")))


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
