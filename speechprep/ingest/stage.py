"""Ingest: a dataset (``audio_dir``, input ``manifest`` or a corpus in its own layout:
:mod:`speechprep.ingest.sources`) -> manifest, shards, rejects.

* every audio file is probed from its header (duration, rate, channels)
  unless ``probe: false``, in which case durations are trusted from the input
  manifest and unreadable files are caught later by VAD;
* ids are stable: the input manifest's ``id``, a source's own id (``source_id``,
  kept on the line) or the path relative to the dataset root; collisions are
  resolved deterministically;
* a source's utterance inside a recording (``offset`` + ``duration``) keeps its
  bounds: probing checks the file's header and rejects ``segment_out_of_range``;
  without probing, the durations the source records are used, and only lines
  without one are probed;
* a file keeps its shard from one run to the next, new files fill new shards
  (:mod:`speechprep.ingest.plan`); a file gone from the corpus leaves its shard
  with a line in ``removed.jsonl``;
* nothing is lost: every input file or manifest line ends in the manifest or in
  ``rejects/ingest.jsonl`` with a reason code.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..core.names import utf8_encodable
from ..core.rejects import reject
from ..errors import UsageError
from ..io.exclude import read_exclude, record_removals
from ..io.inventory import walk_audio
from ..io.jsonio import dumps, write_jsonl, write_text_if_changed
from .params import IngestParams
from .plan import Planned, shard_name
from .plan import load as load_plan
from .plan import plan as plan_shards
from .plan import save as save_plan
from .sources import SinkSettings
from .texts import read_texts, text_file_problem, without_text

log = logging.getLogger("speechprep.ingest")
STAGE = "ingest"
PASSTHROUGH = ("text", "speaker", "language", "gender")
PLAN_FILE = "shard_plan.json"  # beside the manifest: results/<ds>/ (speechprep.ingest.plan)
REMOVED_FILE = "removed.jsonl"  # the removal ledger: one line per file that left the plan
SOURCE_AUDIO = "audio"  # beside the manifest: audio a source reader wrote out (speechprep.ingest.sources)


def derive_id(rel: str) -> str:
    """Id from a path relative to the dataset root: extension dropped, separators -> ``__``."""
    stem = os.path.splitext(rel)[0]
    return stem.replace(os.sep, "__").replace("/", "__").replace("\\", "__")


def printable_path(p: str) -> str:
    """A path as valid UTF-8 text, undecodable bytes shown as \\xNN."""
    return os.fsencode(p).decode("utf-8", "backslashreplace")


def _absolute(path: str, base: str) -> str:
    """A manifest's path, absolute (relative paths are relative to the manifest's directory)."""
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(base, path))


def _short(e: object, limit: int = 200) -> str:
    text = str(e)
    return text if len(text) <= limit else text[:limit] + "..."


_SCALARS = (str, int, float, bool, type(None))


def _not_utf8(rec) -> str | None:
    """Why a parsed line could never be written out as UTF-8 (a lone UTF-16 surrogate
    from a ``\\ud83d`` escape), or ``None``. A flat line (every value a scalar: a source reader's,
    most manifests') has its strings encoded one by one, at a tenth of a JSON dump's cost."""
    try:
        if isinstance(rec, dict) and all(type(v) in _SCALARS for v in rec.values()):
            for s in (*rec, *(v for v in rec.values() if type(v) is str)):
                str(s).encode("utf-8")
        else:
            json.dumps(rec, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        return f"holds {e.object[e.start : e.end]!r}, a lone UTF-16 surrogate, which UTF-8 cannot encode"
    return None


def _line_problem(rec) -> str | None:
    """Why a parsed manifest line cannot be used, or ``None``."""
    if not isinstance(rec, dict):
        return f"expected a JSON object, got {type(rec).__name__}"
    path = rec.get("audio_filepath")
    if not isinstance(path, str) or not path.strip():
        return "no audio_filepath (a non-empty string is required)"
    if "\0" in path:
        return "audio_filepath contains a NUL byte"
    if "id" in rec:
        i = rec["id"]
        if not (isinstance(i, (str, int)) and not isinstance(i, bool) and str(i).strip()):
            return f"id must be a non-empty string, got {_short(repr(i), 80)}"
        if "\0" in str(i):
            return "id contains a NUL byte"
    d = rec.get("duration")
    if d is not None and not (isinstance(d, (int, float)) and not isinstance(d, bool) and math.isfinite(d) and d > 0):
        return f"duration must be a positive number, got {_short(repr(d), 80)}"
    for k in PASSTHROUGH:
        if k in rec and rec[k] is not None and not isinstance(rec[k], str):
            return f"{k} must be a string, got {type(rec[k]).__name__}"
    return text_file_problem(rec)


def _source_problem(rec: dict) -> str | None:
    """Why a source reader's line (:mod:`.sources`) cannot be used beyond what
    :func:`_line_problem` checks, or ``None``."""
    sid = rec.get("source_id")
    if not isinstance(sid, str) or not sid.strip():
        return f"source_id must be a non-empty string, got {_short(repr(sid), 80)}"
    if "\0" in sid:
        return "source_id contains a NUL byte"
    if not os.path.isabs(rec["audio_filepath"]):
        return f"audio_filepath must be absolute, got {_short(rec['audio_filepath'], 120)}"
    o = rec.get("offset")
    if o is not None:
        if not (isinstance(o, (int, float)) and not isinstance(o, bool) and math.isfinite(o) and o >= 0):
            return f"offset must be a number >= 0, got {_short(repr(o), 80)}"
        if rec.get("duration") is None:
            return "an offset needs a duration (the utterance's end)"
    c = rec.get("channel")
    if c is not None and not (isinstance(c, int) and not isinstance(c, bool) and c >= 0):
        return f"channel must be an integer >= 0, got {_short(repr(c), 80)}"
    return None


def source_id_to_id(source_id: str) -> str:
    """A manifest id from a source's own id: path separators -> ``__`` (ids name files)."""
    return source_id.replace("/", "__").replace("\\", "__")


class _SourceSink(SinkSettings):
    """The :class:`~.sources.Sink` a source reader writes into: each line checked as a
    manifest line is (:meth:`Ingest.source_line`), each reject kept with its source id. With a
    selection (``only``: the pilot's ``pilot_ids``), the lines and rejects of those ids alone,
    and each id it names (``seen``) that the reader never gave is rejected ``not_in_source``
    (:meth:`unseen`): every selected id ends in the manifest or the rejects."""

    def __init__(self, ing: Ingest, key: str, audio_dir: str, check_files: bool, only=None, write_audio=True):
        super().__init__(audio_dir, check_files, only, write_audio)
        self.ing, self.key = ing, key
        self.seen: set[str] = set()

    def _taken(self, sid) -> bool:
        if self.only is None:
            return True
        self.seen.add(sid)
        return sid in self.only

    def line(self, rec: dict) -> None:
        if self._taken(rec.get("source_id") if isinstance(rec, dict) else None):
            self.ing.source_line(self.key, rec)

    def reject(self, source_id: str, path: str | None, reason: str, detail: str) -> None:
        sid = str(source_id)
        if self._taken(sid):
            self.ing.add_reject(source_id_to_id(sid), path, reason, detail, source_id=sid)

    def unseen(self) -> None:
        for sid in sorted((self.only or set()) - self.seen):
            detail = f"the pilot's selection (pilot_ids) names {sid!r}; the {self.key} source has no such item"
            self.ing.add_reject(source_id_to_id(sid), None, "not_in_source", detail, source_id=sid)


class Ingest:
    """Collects candidates and rejects for one dataset."""

    def __init__(self, name: str):
        self.name = name
        self.entries: list[dict[str, Any]] = []  # each has _source, _explicit
        self.rejects: list[dict[str, Any]] = []
        self.ignored = 0

    def warn(self, msg: str) -> None:
        log.warning("%s", msg)

    def add_reject(self, id_, path, reason, detail, **extra) -> None:
        self.rejects.append(reject(id_, path, STAGE, reason, detail, **extra))

    # -- sources ---------------------------------------------------------------
    def scan_dir(self, root: str, extensions: list[str]) -> None:
        root = os.path.abspath(root)
        if not os.path.isdir(root):
            raise UsageError(f"dataset {self.name!r}: audio_dir {root!r} is not a directory")
        for rel, st in walk_audio(root, extensions):
            path = os.path.join(root, rel)
            if not utf8_encodable(rel):
                shown = printable_path(rel)
                self.warn(f"file name is not valid UTF-8: {shown}")
                self.add_reject(
                    derive_id(shown), printable_path(path), "bad_encoding", f"file name is not valid UTF-8: {shown}"
                )
                continue
            entry = {"_source": rel, "_explicit": False, "id": derive_id(rel), "audio_filepath": path}
            if st is None:
                entry["_missing"] = True
            self.entries.append(entry)

    def read_manifest(self, manifest: str) -> None:
        manifest = os.path.abspath(manifest)
        base = os.path.dirname(manifest)
        with open(manifest, "rb") as f:
            for n, raw in enumerate(f, 1):
                if n == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8) :]  # a manifest saved on Windows
                self._manifest_line(manifest, base, n, raw)

    def _manifest_line(self, manifest: str, base: str, n: int, raw: bytes) -> None:
        where = f"{os.path.basename(manifest)} line {n}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            shown = raw[max(0, e.start - 20) : e.end + 20]
            self.warn(f"{where}: not valid UTF-8, skipped")
            self.add_reject(
                n, None, "bad_encoding", f"{where}: invalid UTF-8 byte at column {e.start + 1}: {shown!r}", line=n
            )
            return
        if not line.strip():
            return
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, too many digits, too deep
            self.warn(f"{where}: not valid JSON, skipped")
            self.add_reject(n, None, "malformed_line", f"{where}: not valid JSON: {_short(e)}", line=n)
            return
        bad = _not_utf8(rec)
        if bad is not None:
            self.warn(f"{where}: {bad}, skipped")
            self.add_reject(n, None, "bad_encoding", f"{where}: {bad}", line=n)
            return
        problem = _line_problem(rec)
        if problem:
            rid = rec.get("id") if isinstance(rec, dict) else None
            if not (isinstance(rid, (str, int)) and not isinstance(rid, bool) and "\0" not in str(rid)):
                rid = n
            path = rec.get("audio_filepath") if isinstance(rec, dict) else None
            path = _absolute(path, base) if isinstance(path, str) and path.strip() and "\0" not in path else None
            self.warn(f"{where}: {problem}, skipped")
            self.add_reject(rid, path, "malformed_line", f"{where}: {problem}", line=n)
            return
        path = _absolute(rec["audio_filepath"], base)
        explicit = "id" in rec
        if explicit:
            id_ = derive_id(str(rec["id"]))  # path separators would make ids into directories
        else:
            rel = os.path.relpath(path, base)
            id_ = derive_id(rel if not rel.startswith("..") else path.lstrip(os.sep))
        entry = {"_source": f"{where}:{path}", "_explicit": explicit, "_line": n, "id": id_, "audio_filepath": path}
        if rec.get("duration") is not None:
            entry["duration"] = float(rec["duration"])
        for k in PASSTHROUGH:
            if rec.get(k) is not None:
                entry[k] = rec[k]
        if rec.get("text_filepath") is not None:
            entry["text_filepath"] = _absolute(rec["text_filepath"], base)
        self.entries.append(entry)

    def read_source(
        self,
        key: str,
        spec: str | dict,
        audio_dir: str,
        check_files: bool = True,
        only: frozenset[str] | None = None,
        write_audio: bool = True,
    ) -> None:
        """A corpus in its own layout, read by its reader (:data:`.sources.READERS`); ``check_files``:
        the reader checks that each audio file is there (``probe``); ``only``: the source ids read
        (the pilot's selection, :func:`read_selection`); ``write_audio`` false: a listing
        (:func:`items`), no audio written."""
        from .sources import READERS

        sink = _SourceSink(self, key, audio_dir, check_files, only, write_audio)
        READERS[key](spec, sink)
        sink.unseen()

    def source_line(self, key: str, rec: dict) -> None:
        """One line a source reader gave: checked as a manifest line, its ``source_id`` kept."""
        sid = rec.get("source_id") if isinstance(rec, dict) else None
        sid = sid if isinstance(sid, str) and sid.strip() and "\0" not in sid else None
        path = rec.get("audio_filepath") if isinstance(rec, dict) else None
        path = path if isinstance(path, str) and "\0" not in path else None
        where = f"{key} {sid!r}"
        problem = _not_utf8(rec)
        if problem is None:
            problem = _line_problem(rec) or _source_problem(rec)
            reason = "malformed_line"
        else:
            reason = "bad_encoding"
        if problem:
            self.warn(f"{where}: {problem}, skipped")
            extra = {"source_id": sid} if sid else {}
            self.add_reject(source_id_to_id(sid) if sid else None, path, reason, f"{where}: {problem}", **extra)
            return
        entry = {
            "_source": f"{key}:{sid}",
            "_explicit": True,
            "id": source_id_to_id(sid),
            "audio_filepath": os.path.normpath(path),
            "source_id": sid,
        }
        for k in ("offset", "duration"):
            if rec.get(k) is not None:
                entry[k] = float(rec[k])
        if rec.get("channel") is not None:
            entry["channel"] = rec["channel"]
        for k in PASSTHROUGH:
            if rec.get(k) is not None:
                entry[k] = rec[k]
        if rec.get("text_filepath") is not None:
            entry["text_filepath"] = rec["text_filepath"]
        self.entries.append(entry)

    # -- exclusions ------------------------------------------------------------------
    def exclude(self, listed: set[str]) -> None:
        """Entries whose id or audio file is ``listed`` (:func:`read_exclude`) are rejected
        ``excluded``: they leave every output, and the run's ledger (removed.jsonl) says so
        for those an earlier run processed."""
        keep = []
        for e in self.entries:
            if e["id"] in listed or e["audio_filepath"] in listed or e.get("source_id") in listed:
                self.add_reject(e["id"], e["audio_filepath"], "excluded", "listed under exclude", line=e.get("_line"))
            else:
                keep.append(e)
        self.entries = keep

    # -- text ----------------------------------------------------------------------
    def read_texts(self, mode: str, threads: int) -> None:
        """Each ``text_filepath`` read into ``text``; without text, a line of a ``given`` or
        ``verify`` dataset is rejected ``no_text`` (:mod:`.texts`)."""
        ok, bad = read_texts(self.entries, threads)
        for e, reason, detail in bad:
            self.warn(f"{e['id']}: {detail}")
            self.add_reject(e["id"], e["audio_filepath"], reason, detail, line=e.get("_line"))
        self.entries, missing = without_text(ok, mode)
        for e in missing:
            detail = f"text: {mode} keeps each line's text, and this line has none (give `text` or `text_filepath`)"
            self.add_reject(e["id"], e["audio_filepath"], "no_text", detail, line=e.get("_line"))

    # -- ids ---------------------------------------------------------------------
    def resolve_ids(self) -> None:
        """Make ids unique, deterministically.

        An explicit id given twice: the first line keeps it, later ones are
        rejected ``duplicate_id``. Ids derived from paths that collide (say
        ``a/b.wav`` and ``a/b.flac``) all get a suffix from a hash of their own
        path, so the result does not depend on the order of the input.
        """
        by_id: dict[str, list[dict]] = {}
        for e in self.entries:
            by_id.setdefault(e["id"], []).append(e)
        keep = []
        for id_, group in by_id.items():
            if len(group) == 1:
                keep.append(group[0])
                continue
            explicit = [e for e in group if e["_explicit"]]
            if explicit:
                first = explicit[0]
                keep.append(first)
                for e in explicit[1:]:
                    self.warn(f"duplicate id {id_!r} ({e['_source']}), skipped")
                    self.add_reject(
                        id_,
                        e["audio_filepath"],
                        "duplicate_id",
                        f"id {id_!r} already used by {first['_source']}",
                        line=e.get("_line"),
                    )
                derived = [e for e in group if not e["_explicit"]]
            else:
                derived = group
            for e in derived:
                suffix = hashlib.sha1(e["_source"].encode("utf-8", "surrogateescape")).hexdigest()[:8]
                e["id"] = f"{id_}-{suffix}"
                keep.append(e)
        self.entries = keep

    # -- probing -----------------------------------------------------------------
    def probe(self, threads: int, only_unknown: bool = False) -> None:
        """Each file's header read once (the utterances of one recording share it): its
        duration, rate, channels; an utterance with an ``offset`` keeps its bounds and is
        rejected ``segment_out_of_range`` when they pass the file's end, ``bad_channel`` when
        its ``channel`` is not in the file. ``only_unknown``: only the entries without a
        duration are probed (a source's own durations are trusted, ``probe: false``)."""
        from ..io.audio import AudioError, probe

        todo = [e for e in self.entries if not only_unknown or e.get("duration") is None]
        if not todo:
            return

        def one(path):
            try:
                return path, probe(path), os.stat(path), None
            except AudioError as err:
                return path, None, None, err

        paths = list(dict.fromkeys(e["audio_filepath"] for e in todo))
        with ThreadPoolExecutor(max(1, threads)) as pool:
            heads = {path: rest for path, *rest in pool.map(one, paths, chunksize=64)}
        probed = {id(e) for e in todo}
        ok = []
        for e in self.entries:
            if id(e) not in probed:
                ok.append(e)
                continue
            info, st, err = heads[e["audio_filepath"]]
            if err is None:
                err = _bounds_problem(e, info)
            if err is not None:
                self.warn(f"{e['id']}: {err.reason}: {err.detail}")
                extra = {"source_id": e["source_id"]} if "source_id" in e else {}
                self.add_reject(e["id"], e["audio_filepath"], err.reason, err.detail, **extra)
                continue
            if e.get("offset") is None:
                e["duration"] = round(info.duration, 6)
            e["sample_rate"] = info.sample_rate
            e["channels"] = info.channels
            e["file_size"] = st.st_size
            e["file_mtime_ns"] = st.st_mtime_ns
            ok.append(e)
        self.entries = ok

    def drop_missing_unprobed(self) -> None:
        """Without probing, only files that vanished during the walk are known bad."""
        keep = []
        for e in self.entries:
            if e.get("_missing"):
                self.add_reject(e["id"], e["audio_filepath"], "missing", "file vanished or dangling link")
            else:
                keep.append(e)
        self.entries = keep


SEGMENT_END_SLACK = 0.01  # s a segment may pass its file's end (rounding in the source's times)


def _bounds_problem(e: dict, info):
    """An AudioError when an utterance's ``offset``/``duration`` or ``channel`` is not in its
    file (``info``: its header), else ``None``."""
    from ..io.audio import AudioError

    if e.get("offset") is not None and e["offset"] + e["duration"] > info.duration + SEGMENT_END_SLACK:
        end = e["offset"] + e["duration"]
        return AudioError("segment_out_of_range", f"ends at {end:.3f} s, past the file's end ({info.duration:.3f} s)")
    if e.get("channel") is not None and e["channel"] >= info.channels:
        return AudioError("bad_channel", f"channel {e['channel']} named, the file has {info.channels}")
    return None


def public(e: dict) -> dict:
    """A manifest line: contract fields first, private bookkeeping dropped."""
    out = {
        "id": e["id"],
        "audio_filepath": e["audio_filepath"],
        "duration": e.get("duration"),
        "sample_rate": e.get("sample_rate"),
        "channels": e.get("channels"),
    }
    for k, v in e.items():
        if not k.startswith("_") and k not in out:
            out[k] = v
    return out


def shard_plan(p: IngestParams, entries: list[dict], out_dir: Path, rejects: list[dict]) -> Planned:
    """Each entry's shard, from the plan kept in ``out_dir`` (:mod:`speechprep.ingest.plan`);
    a planned file that is gone from the corpus (``deleted``) or listed under ``exclude``
    (``excluded``) gets a line in ``removed.jsonl``; one rejected for its audio is in the
    rejects alone."""
    sizing = {"shards": p.shards, "shard_hours": None if p.shards else p.shard_hours}
    has_results = any((out_dir / d).is_dir() for d in ("vad", "asr"))
    planned = plan_shards(entries, sizing, load_plan(out_dir / PLAN_FILE), p.replan, has_results)
    (log.warning if "may run again" in planned.note else log.info)("shard plan: %s", planned.note)
    reasons = {r.get("id"): r["reason"] for r in rejects}
    gone = [(i, reasons.get(i, "deleted")) for i in planned.removed if reasons.get(i, "excluded") == "excluded"]
    record_removals(out_dir / REMOVED_FILE, gone, "ingest")
    return planned


def write_shards(shards_dir: Path, shards: dict[str, list[str]]) -> None:
    """The shard files (unchanged ones keep their bytes and mtime); a stale one is removed."""
    shards_dir.mkdir(parents=True, exist_ok=True)
    for name, b in shards.items():
        write_text_if_changed(shards_dir / f"{name}.jsonl", "".join(x + "\n" for x in b))
    for stale in shards_dir.glob("shard-*.jsonl"):
        if stale.stem not in shards:
            stale.unlink()


def read_selection(path: str) -> frozenset[str]:
    """A dataset's ``pilot_ids``: the source ids the plan's pilot drew, one a line (UTF-8)."""
    try:
        with open(path, encoding="utf-8") as f:
            return frozenset(x.rstrip("\n") for x in f if x.strip())
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"pilot_ids: cannot read {path!r}: {e}") from None


def collect(p: IngestParams, audio_dir: str, threads: int, listing: bool = False) -> tuple[Ingest, int]:
    """The dataset read and checked, its ids resolved, the excluded and textless left out and
    probed (a ``listing``: only the lines without a duration, and no audio written out); with
    the number of inputs read."""
    ing = Ingest(p.name)
    source = p.source()
    if p.pilot_ids and not source:
        raise UsageError(f"dataset {p.name!r}: pilot_ids selects a source's ids; an audio_dir or manifest has none")
    if source:
        only = read_selection(p.pilot_ids) if p.pilot_ids else None
        ing.read_source(*source, audio_dir, p.probe, only, write_audio=not listing)
    elif p.audio_dir:
        ing.scan_dir(p.audio_dir, p.extensions)
    else:
        ing.read_manifest(p.manifest)
    n_inputs = len(ing.entries) + len(ing.rejects)
    ing.resolve_ids()
    if source:
        roots = [os.getcwd()]
    elif p.audio_dir:
        roots = [os.path.abspath(p.audio_dir)]
    else:
        roots = [os.path.dirname(os.path.abspath(p.manifest))]
    ing.exclude(read_exclude(p.exclude, roots))
    ing.read_texts(p.text, threads)
    if p.probe and not listing:
        ing.probe(threads)
    elif source or listing:
        ing.probe(threads, only_unknown=True)  # the source's durations are trusted, the others read
    else:
        ing.drop_missing_unprobed()
    return ing, n_inputs


def items(p: IngestParams, out: str, threads: int = 1) -> int:
    """``ingest items``: what the plan's pilot draws from (:mod:`speechprep.workflow.pilot`),
    each item ingest would accept as one JSON line ``{"id": source id, "file": its audio file,
    "seconds": its audio}``: the source's durations, a header where it has none. Nothing is
    written but ``out``: no audio (a listing), no header read where the source gives a
    duration (with ``probe: true``, each file checked to be there). Returns the items."""
    if p.source() is None:
        raise UsageError(f"dataset {p.name!r}: ingest items lists a corpus in its own layout (kaldi, lhotse, ...)")
    ing, _ = collect(p, os.path.abspath(Path(out).parent / SOURCE_AUDIO), threads, listing=True)
    rows = [
        dumps({"id": e["source_id"], "file": e["audio_filepath"], "seconds": e.get("duration") or 0.0})
        for e in sorted(ing.entries, key=lambda e: e["id"])
    ]
    write_text_if_changed(out, "".join(x + "\n" for x in rows))
    return len(rows)


def run(p: IngestParams, manifest_out: str, rejects_out: str, shards_dir: str, threads: int = 1) -> dict:
    """Ingest dataset ``p.name``; returns a summary."""
    out_dir = Path(manifest_out).parent
    ing, n_inputs = collect(p, os.path.abspath(out_dir / SOURCE_AUDIO), threads)
    entries = sorted(ing.entries, key=lambda e: e["id"])
    planned = shard_plan(p, entries, out_dir, ing.rejects)
    n = planned.plan.count
    buckets: list[list[str]] = [[] for _ in range(n)]
    lines = []
    for e in entries:
        line = dumps(public(e))
        lines.append(line)
        buckets[planned.plan.shards[e["id"]]].append(line)
    write_shards(Path(shards_dir), {shard_name(i): b for i, b in enumerate(buckets)})
    write_text_if_changed(manifest_out, "".join(x + "\n" for x in lines))
    write_jsonl(rejects_out, ing.rejects)
    save_plan(out_dir / PLAN_FILE, planned.plan)
    hours = sum(e.get("duration") or 0.0 for e in entries) / 3600.0
    summary = {
        "dataset": p.name,
        "inputs": n_inputs,
        "accepted": len(entries),
        "rejected": len(ing.rejects),
        "shards": n,
        "hours": round(hours, 4),
    }
    log.info("%s", summary)
    return summary
