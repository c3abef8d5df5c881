"""Model files: local-or-named, and their identity (path + sha256). Standard library only."""
from __future__ import annotations

import hashlib
import os


def is_local_model(spec: str) -> bool:
    """A path (has a separator, a model file suffix, or exists) rather than a hub name."""
    return spec.endswith((".nemo", ".pt", ".model", ".joblib")) or os.sep in spec or os.path.exists(spec)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
