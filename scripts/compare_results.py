#!/usr/bin/env python3
"""Compare two workflow result trees file by file: are the outputs the same?

    python3 scripts/compare_results.py RUN_A/results RUN_B/results [--new-field NAME ...] [--added GLOB ...]

Two runs of the same config (say, before and after a refactoring, or a local and
a SLURM run) must write the same files with the same content. Compared:

* every file under both trees, by relative path (a file in one tree only is a
  difference, but for empty ones matching ``--new`` globs and any matching ``--added``
  globs: the outputs of a stage only B ran), except logs,
  Snakemake's benchmark files and state, the resume/scratch directories of jobs
  (``.partial``, ``.partial_annotate``, ...) and the report's plots of job times, which hold times;
* JSON and JSONL (``.gz`` too) as parsed values, with each run's own root
  directory replaced by ``<ROOT>`` in strings (absolute paths differ between
  working directories) and the fields that hold times, rates or the config
  digest left out (:data:`IGNORED_FIELDS`), and those ``--new-field`` names (fields
  B adds: left out of both sides, so that all else must match), and CSV files by their
  rows likewise;
* ``.npy`` as arrays (dtype, shape and values equal);
* tar archives member by member (names, then content as above), so that a
  member's mtime does not count;
* every other file byte for byte.

Exit 0 when the trees match, 1 with one line per difference otherwise.
Standard library only (numpy when ``.npy`` files are present).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import tarfile
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

# fields whose values are times, rates, host facts or the config digest, not outputs
IGNORED_FIELDS = frozenset(
    {
        "wall_seconds",
        "audio_seconds_per_second",
        "seconds",
        "elapsed",
        "config_sha256",
        "created",
        "time",
        "packages",
        "file_mtime_ns",  # an input file's time
        "job_seconds",
    }
)
# report files drawn from the jobs' times
TIMED = frozenset({"throughput.png"})
SKIPPED_DIRS = frozenset({"logs", "benchmarks", ".snakemake", ".cache"})
SKIPPED_SUFFIXES = (".log", ".snakemake_timestamp")


def files(root: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if (
            not p.is_file()
            or SKIPPED_DIRS.intersection(rel.parts)
            or any(x.startswith(".partial") for x in rel.parts)  # every job's resume and reuse stores
            or p.name.endswith(SKIPPED_SUFFIXES)
            or p.name in TIMED
        ):
            continue
        out[rel.as_posix()] = p
    return out


def _clean(v: Any, root: str, ignored: frozenset[str] = IGNORED_FIELDS) -> Any:
    if isinstance(v, dict):
        return {k: _clean(x, root, ignored) for k, x in v.items() if k not in ignored}
    if isinstance(v, list):
        return [_clean(x, root, ignored) for x in v]
    if isinstance(v, str):
        return v.replace(root, "<ROOT>")
    return v


def _text(data: bytes, name: str) -> str:
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8")


def parsed(data: bytes, name: str, root: str, ignored: frozenset[str] = IGNORED_FIELDS) -> Any | None:
    """The JSON value(s) of a JSON/JSONL file, or a CSV's rows, cleaned; None for other files."""
    base = name[:-3] if name.endswith(".gz") else name
    if base.endswith(".csv"):
        import csv

        return [_clean(row, root, ignored) for row in csv.DictReader(io.StringIO(_text(data, name)))]
    if base.endswith(".json"):
        return _clean(json.loads(_text(data, name)), root, ignored)
    if base.endswith(".jsonl"):
        return [_clean(json.loads(x), root, ignored) for x in _text(data, name).splitlines() if x.strip()]
    return None


def _npy(data: bytes):
    import numpy as np

    return np.load(io.BytesIO(data), allow_pickle=False)


def same_content(
    a: bytes, b: bytes, name: str, roots: tuple[str, str], ignored: frozenset[str] = IGNORED_FIELDS
) -> str | None:
    """None when equal, else what differs."""
    pa = parsed(a, name, roots[0], ignored)
    if pa is not None:
        pb = parsed(b, name, roots[1], ignored)
        if pa == pb:
            return None
        if isinstance(pa, list) and isinstance(pb, list):
            if len(pa) != len(pb):
                return f"{len(pa)} lines against {len(pb)}"
            k = next(i for i, (x, y) in enumerate(zip(pa, pb)) if x != y)
            keys = sorted(set(pa[k]) ^ set(pb[k])) if isinstance(pa[k], dict) and isinstance(pb[k], dict) else []
            diff = keys or [x for x in pa[k] if isinstance(pa[k], dict) and pa[k].get(x) != pb[k].get(x)]
            return f"line {k + 1} differs ({', '.join(map(str, diff[:5]))})"
        return "values differ"
    if name.endswith(".npy"):
        import numpy as np

        xa, xb = _npy(a), _npy(b)
        nan = xa.dtype.kind in "fc"  # NaN equals NaN in float arrays; structured ones compare as they are
        ok = xa.dtype == xb.dtype and xa.shape == xb.shape and np.array_equal(xa, xb, equal_nan=nan)
        return None if ok else f"arrays differ ({xa.dtype}{xa.shape} against {xb.dtype}{xb.shape})"
    if name.endswith(".tar"):
        return same_tar(a, b, roots, ignored)
    return None if a == b else f"bytes differ ({len(a)} against {len(b)})"


def same_tar(a: bytes, b: bytes, roots: tuple[str, str], ignored: frozenset[str] = IGNORED_FIELDS) -> str | None:
    with tarfile.open(fileobj=io.BytesIO(a)) as ta, tarfile.open(fileobj=io.BytesIO(b)) as tb:
        return _same_members(ta, tb, roots, ignored)


def _same_members(
    ta: tarfile.TarFile, tb: tarfile.TarFile, roots: tuple[str, str], ignored: frozenset[str]
) -> str | None:
    ma = {m.name: m for m in ta.getmembers() if m.isfile()}
    mb = {m.name: m for m in tb.getmembers() if m.isfile()}
    if list(ma) != list(mb):
        return f"members differ ({sorted(set(ma) ^ set(mb))[:5]})"
    for name in ma:
        why = same_content(ta.extractfile(ma[name]).read(), tb.extractfile(mb[name]).read(), name, roots, ignored)
        if why:
            return f"member {name}: {why}"
    return None


def compare(a: Path, b: Path, new: list[str] = (), added: list[str] = (), fields: list[str] = ()) -> list[str]:
    """The differences; a file only in ``b`` whose path matches an ``added`` glob is allowed,
    an empty one matching a ``new`` glob too; the ``fields`` are left out of both sides."""
    fa, fb = files(a), files(b)
    roots = (str(a.resolve().parent), str(b.resolve().parent))
    ignored = IGNORED_FIELDS | frozenset(fields)
    allowed = {
        n
        for n in set(fb) - set(fa)
        if any(fnmatch(n, g) for g in added) or (fb[n].stat().st_size == 0 and any(fnmatch(n, g) for g in new))
    }
    out = [f"only in {a}: {n}" for n in sorted(set(fa) - set(fb))]
    out += [f"only in {b}: {n}" for n in sorted(set(fb) - set(fa) - allowed)]
    for name in sorted(set(fa) & set(fb)):
        why = same_content(fa[name].read_bytes(), fb[name].read_bytes(), name, roots, ignored)
        if why:
            out.append(f"{name}: {why}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path, help="a results directory")
    ap.add_argument("b", type=Path, help="another results directory")
    ap.add_argument("--new", action="append", default=[], help="a glob of new (empty) files B may have")
    ap.add_argument("--added", action="append", default=[], help="a glob of files only B has (a stage only B ran)")
    ap.add_argument("--new-field", action="append", default=[], help="a field B adds: left out of both sides")
    args = ap.parse_args(argv)
    diffs = compare(args.a, args.b, args.new, args.added, args.new_field)
    for line in diffs:
        print(line)
    n = len(files(args.a))
    print(f"{n} files compared: " + ("the same" if not diffs else f"{len(diffs)} differences"))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
