"""Hugging Face datasets on disk: ``hf: {path, split, audio_column, text_column, speaker_column}``.

``path`` is a dataset saved by ``datasets``' ``save_to_disk`` (a ``Dataset`` or a
``DatasetDict``: ``split`` picks one, needed when it has several) or Parquet files (one
file, or a directory of them: those named ``<split>-*.parquet`` / ``<split>.parquet`` or
under a ``<split>/`` folder when ``split`` is given, as the Hub lays them out). Saved
datasets are opened by ``datasets.load_from_disk`` and read in Arrow record batches with
the audio column cast to ``Audio(decode=False)``; Parquet files by pyarrow. No audio is
decoded by ``datasets`` (its Audio decoding needs torchcodec): the bytes are read by
soundfile.

* ``audio_column`` (default ``audio``): an ``Audio`` column, ``{bytes, path}``. Bytes are
  **written out once**, under the dataset's ``audio/hf/`` (:func:`audio_path`), atomically,
  losslessly: FLAC as it is, 8/16/24-bit PCM as FLAC of the same depth and rate, anything
  FLAC cannot hold without loss (MP3, Ogg, float WAV, A-law, ...) as its own bytes in its
  own format. The file name holds a digest of the bytes, so a resumed or grown ingest finds
  a row's file there and writes nothing again, and a row whose audio changed gets a new
  file. A row with a ``path`` and no bytes takes that file where it is (relative paths from
  ``path``'s directory). A row outside the sink's selection (``out.only``) writes nothing; in
  a listing (``out.write_audio`` false) no row does, and its line names the file it would.
* ``text_column``, ``speaker_column``, ``gender_column``, ``language_column`` (optional):
  kept as given (a speaker id that is a number is written as a string).
* ``source_id``: the row's ``id_column`` (default: a column named ``id`` if there is one),
  else ``<split>/<row index>`` (``rows/<index>`` without a split).
* A row's duration is its audio's frames over its rate, read from the bytes' header.

Each rejected row's reason: ``duplicate_id``, ``no_audio`` (neither bytes nor a path),
``unreadable`` (bytes soundfile cannot read), ``missing`` (a path that is not there),
``bad_encoding`` (text bytes that are not UTF-8), ``bad_line`` (a value of the wrong
type).
"""

from __future__ import annotations

import glob
import hashlib
import io
import os
from collections.abc import Iterator
from typing import Any

from ...core.names import file_stem, id_digest, utf8_encodable
from ...errors import UsageError
from ...io.jsonio import atomic_open
from ..plan import shard_name
from . import wanted

KEYS = (
    "path",
    "split",
    "audio_column",
    "text_column",
    "speaker_column",
    "gender_column",
    "language_column",
    "id_column",
)
FIELDS = {"text": "text_column", "speaker": "speaker_column", "gender": "gender_column", "language": "language_column"}
AUDIO_FOLDERS = 256  # audio/hf/shard-0000 .. shard-0255: a row's folder from its id alone, so it never moves
BATCH_ROWS = 256
LOSSLESS_PCM = {"PCM_S8": "PCM_S8", "PCM_U8": "PCM_S8", "PCM_16": "PCM_16", "PCM_24": "PCM_24"}
EXTENSIONS = {"WAV": ".wav", "WAVEX": ".wav", "FLAC": ".flac", "OGG": ".ogg", "MP3": ".mp3", "AIFF": ".aiff"}


class Bad(Exception):
    def __init__(self, reason: str, detail: str, path: str | None = None):
        super().__init__(detail)
        self.reason, self.detail, self.path = reason, detail, path


# -- the rows ---------------------------------------------------------------------------------
def parquet_files(path: str, split: str | None) -> list[str]:
    if os.path.isfile(path):
        return [path]
    files = sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))
    if split:
        files = [
            f
            for f in files
            if os.path.basename(f).startswith((f"{split}-", f"{split}.", f"{split}_"))
            or split in os.path.relpath(f, path).split(os.sep)[:-1]
        ]
    return files


def batches(spec: dict, columns: list[str]) -> Iterator[Any]:
    """The dataset's rows in pyarrow record batches of ``columns`` (missing ones: a usage error)."""
    path, split = os.path.abspath(spec["path"]), spec.get("split")
    if not os.path.exists(path):
        raise UsageError(f"hf.path: no such file or directory {path!r}")
    saved = os.path.isdir(path) and any(
        os.path.isfile(os.path.join(path, f)) for f in ("dataset_dict.json", "state.json", "dataset_info.json")
    )
    if saved:
        yield from _saved(path, split, columns, spec.get("audio_column", "audio"))
        return
    import pyarrow.parquet as pq

    files = parquet_files(path, split)
    if not files:
        raise UsageError(
            f"hf.path: {path!r} is neither a dataset saved by save_to_disk nor Parquet files (split {split!r})"
        )
    for f in files:
        pf = pq.ParquetFile(f)
        _check_columns(pf.schema_arrow.names, columns, f)
        yield from pf.iter_batches(batch_size=BATCH_ROWS, columns=columns)


def _check_columns(have: list[str], want: list[str], where: str) -> None:
    missing = [c for c in want if c not in have]
    if missing:
        raise UsageError(f"hf: {where} has no column(s) {missing}; it has {have}")


def _saved(path: str, split: str | None, columns: list[str], audio_column: str) -> Iterator[Any]:
    from datasets import Audio, DatasetDict, load_from_disk

    ds = load_from_disk(path)
    if isinstance(ds, DatasetDict):
        if split is None and len(ds) == 1:
            split = next(iter(ds))
        if split not in ds:
            raise UsageError(f"hf.split: {path!r} has splits {sorted(ds)}; name one (got {split!r})")
        ds = ds[split]
    elif split is not None and ds.split is not None and str(ds.split) != split:
        raise UsageError(f"hf.split: {path!r} is one split, {ds.split!r}, not {split!r}")
    _check_columns(ds.column_names, columns, path)
    ds = ds.select_columns(columns)
    if isinstance(ds.features.get(audio_column), Audio):
        ds = ds.cast_column(audio_column, Audio(decode=False))
    for table in ds.with_format("arrow").iter(batch_size=BATCH_ROWS):
        yield from table.to_batches()


def id_column(spec: dict) -> str | None:
    """The column of row ids: ``id_column``, else ``id`` when the dataset has one."""
    if spec.get("id_column"):
        return spec["id_column"]
    try:
        names = next(iter(_names(spec)))
    except StopIteration:
        return None
    return "id" if "id" in names else None


def _names(spec: dict) -> Iterator[list[str]]:
    path, split = os.path.abspath(spec["path"]), spec.get("split")
    if os.path.isdir(path) and any(os.path.isfile(os.path.join(path, f)) for f in ("dataset_dict.json", "state.json")):
        from datasets import DatasetDict, load_from_disk

        ds = load_from_disk(path)
        if isinstance(ds, DatasetDict):
            ds = ds[split] if split in ds else next(iter(ds.values()))
        yield ds.column_names
        return
    import pyarrow.parquet as pq

    for f in parquet_files(path, split)[:1]:
        yield pq.ParquetFile(f).schema_arrow.names


# -- audio written out once -------------------------------------------------------------------
def audio_path(audio_dir: str, source_id: str, data: bytes, ext: str) -> str:
    """Where a row's audio bytes go: ``audio_dir/hf/shard-NNNN/<id>-<digest>.<ext>``, the
    folder from the id's digest (:func:`speechprep.core.names.id_digest`), the name from the
    id and 12 hex digits of the bytes' BLAKE2b."""
    folder = shard_name(id_digest(source_id) % AUDIO_FOLDERS)
    digest = hashlib.blake2b(data, digest_size=6).hexdigest()
    return os.path.join(os.path.abspath(audio_dir), "hf", folder, f"{file_stem(source_id)}-{digest}{ext}")


def write_audio(audio_dir: str, source_id: str, data: bytes, write: bool = True) -> tuple[str, float | None]:
    """The row's bytes as a file every stage reads (see the module's docstring), written
    unless it is already there (or ``write`` is false: a listing); ``(path, duration)``."""
    import soundfile as sf

    try:
        info = sf.info(io.BytesIO(data))
    except Exception as e:  # noqa: BLE001 (libsndfile's errors: RuntimeError, LibsndfileError, TypeError)
        raise Bad("unreadable", f"row {source_id!r}: soundfile cannot read its audio bytes: {e}") from None
    if info.samplerate <= 0 or info.channels <= 0:
        raise Bad("unreadable", f"row {source_id!r}: invalid audio header (rate {info.samplerate}, {info.channels} ch)")
    duration = info.frames / info.samplerate if info.frames > 0 else None
    recode = info.format != "FLAC" and info.subtype in LOSSLESS_PCM
    ext = ".flac" if info.format == "FLAC" or recode else EXTENSIONS.get(info.format, "." + info.format.lower())
    path = audio_path(audio_dir, source_id, data, ext)
    if not write or os.path.isfile(path):
        return path, duration
    with atomic_open(path, "wb") as f:
        if recode:
            subtype = LOSSLESS_PCM[info.subtype]
            x, sr = sf.read(io.BytesIO(data), dtype="int32" if subtype == "PCM_24" else "int16", always_2d=True)
            sf.write(f, x, sr, format="FLAC", subtype=subtype)
        else:
            f.write(data)
    return path, duration


# -- read -------------------------------------------------------------------------------------
def _spec(spec: Any) -> dict:
    if isinstance(spec, str):
        spec = {"path": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("path"), str) or not spec["path"]:
        raise UsageError(f"hf: expected {{path: ..., split: ..., audio_column: ..., text_column: ...}}, got {spec!r}")
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        raise UsageError(f"hf: unknown key(s) {unknown}; the keys are {list(KEYS)}")
    return spec


def _text(value: Any, what: str, sid: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as e:
            shown = value[max(0, e.start - 20) : e.end + 20]
            raise Bad("bad_encoding", f"row {sid!r}: its {what} is not UTF-8 (byte {e.start + 1}: {shown!r})") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and what != "text":
        value = str(value)
    if not isinstance(value, str):
        raise Bad("bad_line", f"row {sid!r}: its {what} is a {type(value).__name__}, not text")
    if not utf8_encodable(value):
        raise Bad("bad_encoding", f"row {sid!r}: its {what} holds a character UTF-8 cannot encode")
    return value if value.strip() else None


def read(spec: Any, out) -> None:
    """Every row of the dataset's split: its audio written out once, a line with its text and
    speaker, or a reject."""
    spec = _spec(spec)
    audio_column = spec.get("audio_column") or "audio"
    ids = id_column(spec)
    columns = [audio_column, *(spec[c] for c in FIELDS.values() if spec.get(c)), *([ids] if ids else [])]
    columns = list(dict.fromkeys(columns))
    base = (
        os.path.dirname(os.path.abspath(spec["path"]))
        if os.path.isfile(spec["path"])
        else os.path.abspath(spec["path"])
    )
    label = spec.get("split") or "rows"
    seen: set[str] = set()
    n = 0
    for batch in batches(spec, columns):
        for row in batch.to_pylist():
            sid = f"{label}/{n}"
            n += 1
            if ids and row.get(ids) is not None and str(row[ids]).strip():
                sid = str(row[ids])
            if sid in seen:
                out.reject(sid, None, "duplicate_id", f"row {n - 1}: id {sid!r} given again: the first is kept")
                continue
            seen.add(sid)
            if not wanted(out, sid):  # outside the pilot's selection: no audio written for it
                continue
            try:
                out.line(_row(row, sid, spec, audio_column, base, out))
            except Bad as e:
                out.reject(sid, e.path, e.reason, e.detail)


def _row(row: dict, sid: str, spec: dict, audio_column: str, base: str, out) -> dict:
    if not utf8_encodable(sid):
        raise Bad("bad_encoding", f"row id {sid!r} holds a character UTF-8 cannot encode")
    rec: dict[str, Any] = {"source_id": sid}
    for field, key in FIELDS.items():
        if spec.get(key):
            v = _text(row.get(spec[key]), field, sid)
            if v is not None:
                rec[field] = v
    audio = row.get(audio_column)
    if isinstance(audio, str):
        audio = {"path": audio, "bytes": None}
    if not isinstance(audio, dict):
        raise Bad("no_audio" if audio is None else "bad_line", f"row {sid!r}: no audio in {audio_column!r}")
    if audio.get("bytes"):
        if not out.audio_dir:
            raise UsageError("hf: the ingest sink has no audio_dir to write the dataset's audio to")
        path, duration = write_audio(out.audio_dir, sid, audio["bytes"], out.write_audio)
        rec["audio_filepath"] = path
        if duration:
            rec["duration"] = round(duration, 6)
        return rec
    src = audio.get("path")
    if not src:
        raise Bad("no_audio", f"row {sid!r}: its {audio_column!r} has neither bytes nor a path")
    path = os.path.normpath(src if os.path.isabs(src) else os.path.join(base, src))
    if not os.path.isfile(path):
        raise Bad("missing", f"row {sid!r}: no audio bytes, and no such file {path}", path)
    rec["audio_filepath"] = path
    return rec
