"""What a dataset's input is made of: the audio files below ``audio_dir``.

Standard library only: the Snakefile imports this in the driver environment to
decide whether ingest must rerun (a file added, removed or modified changes
:func:`inventory_digest`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator


def walk_audio(root: str, extensions: Iterable[str]) -> Iterator[tuple[str, os.stat_result | None]]:
    """``(path relative to root, stat)`` of every audio file below ``root``, sorted.

    Follows directory links (corpora are often assembled from links), never
    twice into the same directory; skips hidden files and directories.
    """
    exts = {"." + e.lower().lstrip(".") for e in extensions}
    seen: set[tuple[int, int]] = set()

    def walk(rel: str) -> Iterator[tuple[str, os.stat_result]]:
        path = os.path.join(root, rel) if rel else root
        st = os.stat(path)
        if (st.st_dev, st.st_ino) in seen:
            return
        seen.add((st.st_dev, st.st_ino))
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            if e.name.startswith("."):
                continue
            child = os.path.join(rel, e.name) if rel else e.name
            try:
                if e.is_dir():
                    yield from walk(child)
                elif os.path.splitext(e.name)[1].lower() in exts:
                    yield child, e.stat()
            except OSError:
                # a dangling link or a file that vanished: ingest reports it
                yield child, None

    yield from walk("")


def inventory_digest(root: str, extensions: Iterable[str]) -> str:
    """A digest of the audio files below ``root``: names, sizes, modification times."""
    h = hashlib.sha1()
    for rel, st in walk_audio(root, extensions):
        size, mtime = (st.st_size, st.st_mtime_ns) if st else (-1, -1)
        h.update(os.fsencode(rel) + b"\0" + f"{size}:{mtime}".encode() + b"\n")
    return h.hexdigest()
