"""Model files built from code: written atomically, the same bytes at every build.

Every model file the workflow and its builders make from code (the demo models, the tiny and
real-size builders' files) is written by :func:`save_model`, a ``.nemo`` by :func:`save_nemo`:
a model's sha256 is part of every downstream fingerprint, so a rebuild that changes no weight
must change no byte.

* The file is written under its own name in a fresh directory beside ``out``, then renamed
  over ``out``: ``torch.save`` names its zip records after the file it writes (``<stem>/data.pkl``),
  so a temporary name would put the temporary name into the file. torch's zip writer stores no
  time (every entry's DOS date is zero) and a ``.data/serialization_id`` made from the records'
  CRC-32s, so the same tensors give the same bytes.
* A tar archive (a ``.nemo``: NeMo's ``save_to`` tars a temporary directory) is packed again
  (:func:`repack`): members in name order, each with mtime :data:`FIXED_MTIME`, owner 0/0
  without names, mode 0644 (0755 for directories and executables), no PAX attributes; a gzip
  stream (older ``.nemo`` files) gets no name and no time in its header. Members' bytes are
  unchanged but for what :func:`save_nemo` fixes.

Standard library only, but :func:`save_nemo` (NeMo's environment).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

FIXED_MTIME = 0
_UMASK = os.umask(0o022)
os.umask(_UMASK)
_SMALL = 64 << 20  # members read into memory to be rewritten (configs, tokenizers); larger ones are streamed
# what NeMo names an artifact it packs: uuid4().hex, "_", the file's own name
_ARTIFACT = re.compile(r"^(?P<dir>(?:\./)?)(?P<uuid>[0-9a-f]{32})_(?P<base>[^/]+)$")


def save_model(out: str | os.PathLike, save: Callable[[Path], object]) -> Path:
    """``save(path)`` writes the model file (``torch.save``, ``joblib.dump``, NeMo's ``save_to``,
    ``torch.onnx.export``) at ``path``, a file of ``out``'s name in a new directory beside it;
    a tar archive is then :func:`repack`-ed; the file is renamed over ``out``. Nothing is left
    behind when ``save`` fails. Returns ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        path = work / out.name
        save(path)
        if tarfile.is_tarfile(path):
            packed = work / f"{out.name}.packed"
            repack(path, packed)
            path = packed
        os.chmod(path, 0o666 & ~_UMASK)
        os.replace(path, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def save_nemo(model, out: str | os.PathLike) -> Path:
    """NeMo's ``model.save_to`` through :func:`save_model`, three things of the build left out:

    * each tokenizer's ``dir`` (the build's temporary directory, which NeMo keeps in the config
      beside the ``nemo:`` paths of the files it packs and reads instead) is null in the file;
    * each packed file's name, ``<uuid4>_<name>``, takes a digest of its place in the config,
      its name and its bytes instead of the random uuid (the config's ``nemo:`` paths follow);
    * a SentencePiece model forgets the paths it was trained from (``trainer_spec.input``,
      ``model_prefix``), which it records but never reads.

    The file restores with NeMo's ``restore_from``."""
    with _tokenizer_dirs_cleared(model):
        return save_model(out, lambda path: model.save_to(str(path)))


@contextlib.contextmanager
def _tokenizer_dirs_cleared(model):
    """``model``'s config with ``dir`` null in each tokenizer whose ``model_path`` NeMo packs
    (an artifact of the model's), put back on exit."""
    from omegaconf import OmegaConf, open_dict

    cleared = []
    for key in getattr(model, "artifacts", None) or {}:
        parent, _, field = key.rpartition(".")
        node = OmegaConf.select(model.cfg, parent) if field == "model_path" and parent else None
        if node is not None and node.get("dir") is not None and all(node is not n for n, _ in cleared):
            cleared.append((node, node.dir))
    for node, _ in cleared:
        with open_dict(node):
            node.dir = None
    try:
        yield
    finally:
        for node, value in cleared:
            with open_dict(node):
                node.dir = value


def repack(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Tar archive ``src`` (plain or gzip) written again to ``dst`` deterministically (module
    docstring): NeMo's packed files renamed by content (:func:`save_nemo`), SentencePiece
    models without their training paths, the configs' references following the names."""
    with open(src, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    with tarfile.open(src, "r:*") as tar:
        members = tar.getmembers()
        small = {m.name: _rewritten(m.name, tar.extractfile(m).read()) for m in members if _is_small(m)}
        names = _artifact_names(members, small)
        for m in members:
            if m.name.endswith(".yaml") and m.name in small:
                text = small[m.name].decode("utf-8")
                for old, new in names.items():
                    text = text.replace(f"nemo:{_basename(old)}", f"nemo:{_basename(new)}")
                small[m.name] = text.encode("utf-8")
        with open(dst, "wb") as raw:
            stream = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=FIXED_MTIME) if gzipped else raw
            with stream, tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as out:
                for m in sorted(members, key=lambda m: names.get(m.name, m.name)):
                    info = _fixed(m, names.get(m.name, m.name))
                    if m.name in small:
                        info.size = len(small[m.name])
                        out.addfile(info, io.BytesIO(small[m.name]))
                    else:
                        out.addfile(info, tar.extractfile(m) if m.isfile() else None)


def _is_small(m: tarfile.TarInfo) -> bool:
    return m.isfile() and m.size <= _SMALL and (m.name.endswith((".yaml", ".model")) or _ARTIFACT.match(m.name))


def _basename(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _fixed(m: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    """``m`` named ``name``, without the build's time, owner and permissions."""
    if not (m.isfile() or m.isdir()):
        raise ValueError(f"{m.name}: a model archive holds files and directories only")
    info = tarfile.TarInfo(name)
    info.type = m.type
    info.size = m.size if m.isfile() else 0
    info.mode = 0o755 if m.isdir() or m.mode & 0o111 else 0o644
    info.mtime, info.uid, info.gid, info.uname, info.gname = FIXED_MTIME, 0, 0, "", ""
    return info


def _artifact_names(members: list[tarfile.TarInfo], small: dict[str, bytes]) -> dict[str, str]:
    """{old name: new name} of NeMo's packed files (``<uuid>_<name>``): ranked by where the
    configs first name them (then by name and bytes), each new uuid a digest of its rank,
    name and bytes."""
    configs = "".join(small[n].decode("utf-8", "replace") for n in sorted(small) if n.endswith(".yaml"))
    found = []
    for m in members:
        match = _ARTIFACT.match(m.name) if m.isfile() else None
        if match and m.name in small:
            at = configs.find(f"nemo:{_basename(m.name)}")
            digest = hashlib.sha256(small[m.name]).hexdigest()
            found.append((at if at >= 0 else len(configs), match["base"], digest, m.name, match["dir"]))
    names = {}
    for rank, (_, base, digest, old, prefix) in enumerate(sorted(found)):
        uuid = hashlib.sha256(f"{rank}\0{base}\0{digest}".encode()).hexdigest()[:32]
        names[old] = f"{prefix}{uuid}_{base}"
    return names


def _rewritten(name: str, data: bytes) -> bytes:
    """A SentencePiece model (``*.model``) without the paths it was trained from; anything else as it is."""
    if not name.endswith(".model"):
        return data
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:
        return data
    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception:  # noqa: BLE001 (protobuf's DecodeError: not a SentencePiece model)
        return data
    if not proto.pieces or not proto.HasField("trainer_spec"):
        return data
    del proto.trainer_spec.input[:]
    proto.trainer_spec.ClearField("model_prefix")
    return proto.SerializeToString(deterministic=True)
