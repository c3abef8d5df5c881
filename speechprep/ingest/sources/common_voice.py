"""A Common Voice release's language directory (``common_voice: DIR`` or ``{dir, split}``).

As Mozilla publishes it: ``<split>.tsv`` (``validated`` unless ``split`` names another:
``train``, ``dev``, ``test``, ``other``, ...) with a header naming its columns (``path``,
``sentence``, ``client_id``, ``gender``, ``locale``, ...), the clips in ``clips/``, and
``clip_durations.tsv`` (``clip``, ``duration[ms]``) in releases that have it.

The TSVs are read with the csv module as Common Voice writes them: tab-separated, no
quoting (``csv.QUOTE_NONE``: a sentence's quotation marks are text), one row a line.
Each line is decoded on its own, so a line that is not UTF-8 costs only its row.

A row is an utterance: ``source_id`` its ``path``, ``audio_filepath`` ``clips/<path>``,
``text`` its ``sentence``, ``speaker`` its ``client_id``, ``gender`` (``male_masculine`` ->
``male``, ``female_feminine`` -> ``female``, others as given), ``language`` its
``locale``, ``duration`` from ``clip_durations.tsv`` (else probed by ingest). Rejected:
``bad_line`` (a row with another number of fields than the header), ``bad_encoding``,
``duplicate_id`` (a path given twice: the first row is read), ``missing`` (no such clip).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from ...errors import UsageError
from . import Sink, wanted

GENDERS = {"male_masculine": "male", "female_feminine": "female"}
DURATIONS = "clip_durations.tsv"


def _rows(path: Path, out: Sink | None):
    """``(line number, fields)`` of each row after the header, and the header; a line that is
    not UTF-8 is rejected into ``out`` (its ``path`` field, shown with escapes, as its id)."""
    with open(path, "rb") as f:
        first = f.readline()
        header = _split(first.decode("utf-8-sig").rstrip("\r\n"))
        rows = []
        for n, raw in enumerate(f, 2):
            raw = raw.rstrip(b"\r\n")
            if not raw.strip():
                continue
            try:
                rows.append((n, _split(raw.decode("utf-8"))))
            except UnicodeDecodeError as e:
                if out is not None:
                    fields = _split(raw.decode("utf-8", "backslashreplace"))
                    key = fields[header.index("path")] if "path" in header and len(fields) == len(header) else None
                    sid = key or f"{path.name}:{n}"
                    out.reject(sid, str(path), "bad_encoding", f"{path.name} line {n}: invalid UTF-8 byte at {e.start}")
    return header, rows


def _split(line: str) -> list[str]:
    return next(csv.reader([line], delimiter="\t", quoting=csv.QUOTE_NONE), [])


def _durations(d: Path) -> dict[str, float]:
    """Seconds by clip from ``clip_durations.tsv`` (empty when the release has none)."""
    path = d / DURATIONS
    if not path.is_file():
        return {}
    header, rows = _rows(path, None)
    if "clip" not in header or "duration[ms]" not in header:
        return {}
    c, m = header.index("clip"), header.index("duration[ms]")
    out = {}
    for _, f in rows:
        if len(f) == len(header):
            try:
                ms = float(f[m])
            except ValueError:
                continue
            if ms > 0:
                out[f[c]] = ms / 1000.0
    return out


def read(spec: str | dict, out: Sink) -> None:
    """Every row of the release's split into ``out`` (module docstring)."""
    d = Path(spec if isinstance(spec, str) else spec["dir"]).absolute()
    split = "validated" if isinstance(spec, str) else spec.get("split", "validated")
    tsv = d / f"{split}.tsv"
    if not tsv.is_file():
        raise UsageError(f"common_voice: {d} has no {tsv.name} (a Common Voice release's language directory)")
    header, rows = _rows(tsv, out)
    if "path" not in header or "sentence" not in header:
        raise UsageError(f"common_voice: {tsv} has no path/sentence columns (its header: {header})")
    col = {name: i for i, name in enumerate(header)}
    durations = _durations(d)
    clips = d / "clips"
    seen: dict[str, int] = {}
    for n, f in rows:
        where = f"{tsv.name} line {n}"
        if len(f) != len(header):
            sid = f[col["path"]] if len(f) > col["path"] and f[col["path"]].strip() else f"{tsv.name}:{n}"
            out.reject(sid, str(tsv), "bad_line", f"{where}: {len(f)} fields, the header has {len(header)}")
            continue
        path = f[col["path"]]
        if not path.strip():
            out.reject(f"{tsv.name}:{n}", str(tsv), "bad_line", f"{where}: empty path")
            continue
        if path in seen:
            out.reject(path, str(tsv), "duplicate_id", f"{where}: {path!r} is also on line {seen[path]}")
            continue
        seen[path] = n
        if not wanted(out, path):  # outside the pilot's selection: no file checked
            continue
        audio = os.path.join(clips, path)
        if out.check_files and not os.path.isfile(audio):
            out.reject(path, audio, "missing", f"{where}: clips/{path} does not exist")
            continue
        rec = {"source_id": path, "audio_filepath": audio, "text": f[col["sentence"]]}
        if path in durations:
            rec["duration"] = durations[path]
        for key, name in (("speaker", "client_id"), ("gender", "gender"), ("language", "locale")):
            value = f[col[name]].strip() if name in col else ""
            if value:
                rec[key] = GENDERS.get(value, value) if key == "gender" else value
        out.line(rec)
