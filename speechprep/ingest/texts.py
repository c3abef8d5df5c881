"""A manifest line's text: inline ``text``, or ``text_filepath`` (a UTF-8 file read at ingest).

A line may name its transcript's file instead of carrying it (LibriTTS's
``.normalized.txt`` per utterance, a book's text for a long recording). Ingest
reads each such file once, in its thread pool (10^6 files are read in
parallel, as their audio headers are probed), puts its content in the line's
``text`` (surrounding whitespace stripped, paragraphs kept) and keeps the
absolute ``text_filepath``. A file that cannot be read is rejected
``missing``, one that is not UTF-8 ``bad_encoding``, naming the text file; a
UTF-8 byte-order mark is dropped. With ``text: given`` or ``verify`` a line
without text (none given, or only whitespace) is rejected ``no_text``: its
utterance could never be kept with its text.
"""

from __future__ import annotations

import codecs
from concurrent.futures import ThreadPoolExecutor
from typing import Any

TRANSCRIBED = ("given", "verify")


def text_file_problem(rec: dict[str, Any]) -> str | None:
    """Why a line's ``text_filepath`` cannot be used, or None (a line without one: None)."""
    path = rec.get("text_filepath")
    if path is None:
        return None
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        return "text_filepath must be a non-empty string (the path of a UTF-8 text file)"
    if rec.get("text") is not None:
        return "the line has both text and text_filepath: give one"
    return None


def read_text_file(path: str) -> tuple[str | None, str, str]:
    """``(text, "", "")``, or ``(None, reason, detail)`` when the file is unusable."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        return None, "missing", f"text_filepath {path}: {e.strerror or e}"
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        shown = raw[max(0, e.start - 20) : e.end + 20]
        return None, "bad_encoding", f"text_filepath {path}: invalid UTF-8 byte at offset {e.start}: {shown!r}"
    return text.strip(), "", ""


def read_texts(entries: list[dict], threads: int) -> tuple[list[dict], list[tuple[dict, str, str]]]:
    """Every entry's ``text_filepath`` read into its ``text``: ``(usable entries, [(entry,
    reason, detail)])`` in input order. Only the lines that name a file go to the thread pool
    (a future costs ~30 us: half a minute at 10^6 lines of inline text)."""
    files = [e for e in entries if e.get("text_filepath") is not None]
    if not files:
        return entries, []
    with ThreadPoolExecutor(max(1, threads)) as pool:
        read = dict(zip(map(id, files), pool.map(read_text_file, [e["text_filepath"] for e in files]), strict=True))
    ok, bad = [], []
    for e in entries:
        text, reason, detail = read.get(id(e), ("", "", ""))
        if text is None:
            bad.append((e, reason, detail))
            continue
        if id(e) in read:
            e["text"] = text
        ok.append(e)
    return ok, bad


def without_text(entries: list[dict], mode: str) -> tuple[list[dict], list[dict]]:
    """``(entries with text, entries without)``; with ``text: asr`` every entry is kept."""
    if mode not in TRANSCRIBED:
        return entries, []
    ok, missing = [], []
    for e in entries:
        (ok if isinstance(e.get("text"), str) and e["text"].strip() else missing).append(e)
    return ok, missing
