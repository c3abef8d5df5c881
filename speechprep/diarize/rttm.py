"""RTTM, the format diarization tools and scorers read: one line per speaker turn,

    SPEAKER <file id> 1 <start> <duration> <NA> <NA> <speaker> <NA> <NA>

(seconds, 3 decimals, fields separated by one space). A field cannot hold
whitespace, so a file id or speaker name with whitespace (or ``%``) is written
percent-encoded (``a b`` -> ``a%20b``) and decoded on reading: ids from paths
with spaces survive the round trip; any other id is written as it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..io.jsonio import atomic_open

_UNSAFE = re.compile(r"[\s%]")


@dataclass(frozen=True)
class RttmTurn:
    file_id: str
    start: float
    duration: float
    speaker: str


def _field(s: str) -> str:
    if not s:
        raise ValueError("an RTTM field cannot be empty")
    return quote(s, safe="") if _UNSAFE.search(s) else s


def format_line(t: RttmTurn) -> str:
    return f"SPEAKER {_field(t.file_id)} 1 {t.start:.3f} {t.duration:.3f} <NA> <NA> {_field(t.speaker)} <NA> <NA>\n"


def write_rttm(path: str | os.PathLike, turns: Iterable[RttmTurn]) -> int:
    """Atomically write ``turns`` (in the order given); returns the line count. An empty file
    is a shard without speech."""
    n = 0
    with atomic_open(path) as f:
        for t in turns:
            f.write(format_line(t))
            n += 1
    return n


def read_rttm(path: str | os.PathLike) -> list[RttmTurn]:
    """The ``SPEAKER`` lines of an RTTM file (other line types and blank lines skipped)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for k, line in enumerate(f, 1):
            parts = line.split()
            if not parts or parts[0] != "SPEAKER":
                continue
            if len(parts) < 8:
                raise ValueError(f"{path}:{k}: an RTTM SPEAKER line has 10 fields, this one {len(parts)}")
            fid, spk = parts[1], parts[7]
            out.append(RttmTurn(unquote(fid), float(parts[3]), float(parts[4]), unquote(spk)))
    return out
