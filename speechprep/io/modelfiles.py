"""Model files: local-or-named, and their identity (path + sha256). Standard library only."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from pathlib import Path

from ..errors import ModelFileError, describe

MODEL_SUFFIXES = (".nemo", ".pt", ".ckpt", ".model", ".joblib", ".pkl", ".json")


def is_local_model(spec: str) -> bool:
    """A file path rather than a hub name such as ``nvidia/parakeet-tdt-0.6b-v2``:
    it exists, has a model file suffix, or is written as a path (absolute, ./, ../, ~)."""
    return (
        os.path.exists(spec)
        or spec.endswith(MODEL_SUFFIXES)
        or os.path.isabs(spec)
        or spec.startswith(("./", "../", "~"))
    )


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_cached(path: str | os.PathLike, cache_dir: str | os.PathLike | None) -> str:
    """``sha256_file(path)``, computed once per file version: the digest is kept in
    ``cache_dir`` under a key of the file's absolute path, size and mtime, so
    hundreds of shard jobs reading one 2 GB model hash it once. Without a
    ``cache_dir`` it is computed every time."""
    if cache_dir is None:
        return sha256_file(path)
    path = os.path.abspath(path)
    st = os.stat(path)
    key = hashlib.sha256(f"{path}\0{st.st_size}\0{st.st_mtime_ns}".encode("utf-8", "surrogateescape"))
    entry = Path(cache_dir) / f"{key.hexdigest()[:32]}.json"
    try:
        cached = json.loads(entry.read_text(encoding="utf-8"))
        if cached.get("path") == path and cached.get("size") == st.st_size and cached.get("mtime_ns") == st.st_mtime_ns:
            return cached["sha256"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    digest = sha256_file(path)
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    tmp.write_text(
        json.dumps({"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}) + "\n",
        encoding="utf-8",
    )
    os.replace(tmp, entry)
    return digest


def tree_stamp(root: str | os.PathLike) -> str:
    """A digest of every file under ``root``: its path there, size and mtime (a rebuilt
    directory, say text-normalisation grammars, gets another stamp; its bytes are not read)."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted(Path(root).rglob("*")):
        if path.is_file():
            st = path.stat()
            h.update(f"{path.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def check_nemo_file(path: str, setting: str = "asr.model") -> None:
    """Cheap checks before NeMo's restore: a complete tar archive with a ``model_config.yaml``;
    :class:`ModelFileError` naming ``setting`` (the config key that gave the file) otherwise."""

    def invalid(reason: str) -> ModelFileError:
        return ModelFileError(f"{setting}: {path} is not a valid .nemo file ({reason})")

    if not os.path.isfile(path):
        raise ModelFileError(f"{setting}: no such file {path!r}")
    size = os.path.getsize(path)
    if size == 0:
        raise invalid("empty file, 0 bytes")
    try:
        tar = tarfile.open(path, "r:*")  # noqa: SIM115 (closed by the with below, once open worked)
    except (tarfile.TarError, OSError, EOFError):
        raise invalid(f"not a tar archive, {size} bytes") from None
    try:
        with tar:
            names = [os.path.normpath(m.name) for m in tar.getmembers()]
    except (tarfile.TarError, OSError, EOFError) as e:
        raise invalid(f"the archive is truncated or damaged, {size} bytes: {describe(e)}") from None
    if "model_config.yaml" not in names:
        names = [n for n in names if n != "."]
        listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise invalid(f"no model_config.yaml in the archive, which holds: {listed or 'nothing'}")
