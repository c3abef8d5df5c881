"""The reuse store of a shard job: each item's outcome, kept after the job, keyed to the item.

A shard job runs again when its input file changed: its shard gained or lost a file,
a file was excluded, or an upstream step rewrote the lines (Snakemake deletes the
job's outputs first). Most of its items are then the same as last time. The store
keeps, beside the job's resume file (``<resume stem>.reuse/``), the outcome of every
item of the job's last commit under a key of what decides it:

* the item's own line (its id, audio path, bounds, upstream fields), or what the
  stage says decides it (:meth:`ModelStage.keyed`: say, the line and its S2S units),
* the audio file's size and modification time (a replaced file is a new item),

and under a fingerprint of the job's parameters, model digests and algorithm version (a
store of other parameters is not read). A rerun takes each item whose key is unchanged
from the store as a resumed job takes its saved outcomes, and runs the models on the
rest only; with nothing left, it loads no model. The store holds the last commit's
items only (the outcomes' JSON, and the per-segment arrays of a stage that writes them,
hard links to the placed files where the job wrote a file per segment), so it is as
large as one shard's outputs at most; deleting it costs a recomputation, nothing else.
A store is replaced whole (a new directory renamed into place, the old one set aside
and removed), so a job killed while it writes one leaves the old one or none.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..io.jsonio import atomic_open, dumps
from ..io.npyio import parse_ref, ref

OUTCOMES = "outcomes.jsonl"


def item_key(keyed: Any, audio_filepath: str | None) -> str:
    """The digest of what decides an item's outcome besides the job's parameters: ``keyed``
    (the item's line, or what the stage says decides it) and its audio file's size and mtime
    (None when missing)."""
    try:
        st = os.stat(audio_filepath) if audio_filepath else None
        audio = [st.st_size, st.st_mtime_ns] if st else None
    except OSError:
        audio = None
    blob = json.dumps([keyed, audio], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def link(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to ``src`` (a copy where links are not possible)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def store_dir(resume_path: str | os.PathLike) -> Path:
    """Where the store of the job whose resume file is ``resume_path`` lives
    (``shard-0001.jsonl``: ``shard-0001.reuse``; ``shard-0001.align.jsonl``: ``shard-0001.align.reuse``)."""
    return Path(resume_path).with_suffix(".reuse")


class ReuseStore:
    """The outcomes (and arrays) of a shard job's last commit, keyed per item."""

    def __init__(self, root: str | os.PathLike, fingerprint: str):
        self.root = Path(root)
        self.fingerprint = fingerprint
        self.new = self.root.with_name(self.root.name + ".new")
        self.found: dict[str, dict[str, Path]] = {}  # item -> kind -> its array in the store
        self.arrays: dict[str, dict[str, str]] = {}  # item -> kind -> its array in the new store

    def load(self, keys: dict[str, str]) -> dict[str, dict]:
        """The saved outcome lines (resume-file lines) of the items whose key is ``keys[id]``;
        where their arrays are in :attr:`found`."""
        self.found: dict[str, dict[str, Path]] = {}
        try:
            with open(self.root / OUTCOMES, encoding="utf-8") as f:
                head, *rest = f.read().splitlines()
            if json.loads(head).get("fingerprint") != self.fingerprint:
                return {}
            saved = {}
            for text in rest:
                r = json.loads(text)
                if keys.get(r["line"]["id"]) == r["key"]:
                    saved[r["line"]["id"]] = r["line"]
                    self.found[r["line"]["id"]] = {k: self.root / k / v for k, v in (r.get("arrays") or {}).items()}
            return saved
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.found = {}
            return {}  # no store, or one cut short or of another format: nothing to reuse

    def keep_array(self, item_id: str, kind: str, where: str) -> None:
        """Keep an item's placed array in the store being written: a file, or a slice
        ``<file>#<start>:<n>`` of a packed file, by a hard link to that file (once)."""
        packed = parse_ref(where)
        src = Path(packed[0] if packed else where)
        dst = self.new / kind / src.name
        if not dst.exists():
            link(src, dst)
        self.arrays.setdefault(item_id, {})[kind] = ref(dst.name, *packed[1:]) if packed else dst.name

    def save(self, lines: Iterable[tuple[str, dict]]) -> None:
        """Replace the store with ``(key, outcome line)`` pairs and the arrays staged."""
        self.new.mkdir(parents=True, exist_ok=True)
        with atomic_open(self.new / OUTCOMES) as f:
            f.write(json.dumps({"fingerprint": self.fingerprint}) + "\n")
            for key, line in lines:
                f.write(dumps({"key": key, "line": line, "arrays": self.arrays.get(line["id"])}) + "\n")
        old = self.root.with_name(f"{self.root.name}.old-{os.getpid()}")
        if self.root.exists():  # set aside first: a file still open (mapped) may not go at once (NFS)
            os.replace(self.root, old)
        os.replace(self.new, self.root)
        shutil.rmtree(old, ignore_errors=True)

    def discard_new(self) -> None:
        """Remove what a job killed while it wrote its store left (a new store, an old one set aside)."""
        for left in (self.new, *self.root.parent.glob(f"{glob.escape(self.root.name)}.old-*")):
            shutil.rmtree(left, ignore_errors=True)


def keys_of(items: Iterable[dict], keyed: Callable[[dict], Any] | None) -> dict[str, str]:
    """``item_key`` of each item by id (``keyed``: what decides an item; default its line)."""
    return {i["id"]: item_key(keyed(i) if keyed else i, i.get("audio_filepath")) for i in items}
