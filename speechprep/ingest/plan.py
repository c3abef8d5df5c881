"""A dataset's shard plan: which shard each file is in, kept from one run to the next.

A corpus grows (a download that finishes later, a new source each month) and shrinks (a
file deleted, a licence withdrawn). Were each run to deal the files out again, adding 1%
of a corpus would change nearly every shard file, and every job of every stage would run
again. So ingest keeps its plan (``results/<ds>/shard_plan.json``, beside its outputs but
not one of them: Snakemake deletes a job's outputs before it reruns it):

* the first plan deals the files out by ``hash(id) mod n`` (n from ``shards`` or
  ``shard_hours``), as ingest always has;
* later runs keep every planned file in its shard; a file no longer there leaves its
  shard (a line of ``removed.jsonl``); new files, in id order, fill new shards of
  ``shard_hours`` each (with a fixed ``shards`` count: of the planned shards' mean size),
  numbered after the last one. Old shards whose files did not change are written with
  the same bytes, so nothing downstream of them runs again;
* the plan depends on ids and durations only, never on paths, times or the machine;
* ``replan: true`` deals everything out again on purpose, as does a change of ``shards``
  or ``shard_hours``; a plan lost while the dataset has results is said in the log.

Standard library only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..core.names import id_digest
from ..errors import UsageError
from ..io.jsonio import write_text_if_changed

PLAN_VERSION = 1


def shard_name(i: int) -> str:
    return f"shard-{i:04d}"


SHARD_PATTERN = r"shard-\d{4}\d*"  # every shard_name: four digits, more from shard-10000


def shard_index(id_: str, n: int) -> int:
    """Stable shard of ``id_`` among ``n`` (independent of every other id)."""
    return id_digest(id_) % n


def shard_count(entries: list[dict], shards: int | None, shard_hours: float | None) -> int:
    if shards:
        return int(shards)
    if not entries:
        return 1
    missing = sum(1 for e in entries if e.get("duration") is None)
    if missing:
        raise UsageError(
            f"shard_hours needs every file's duration, but {missing} entries have none; "
            "turn probing on (probe: true), give `duration` in the input manifest, or set a fixed `shards`"
        )
    hours = sum(e["duration"] for e in entries) / 3600.0
    return max(1, math.ceil(hours / float(shard_hours)))


@dataclass
class ShardPlan:
    """``sizing``: the settings the plan was made with (``shards``, ``shard_hours``);
    ``count``: its shards, ``shard-0000`` to ``count - 1`` (one may hold no file: its jobs
    write empty outputs); ``shards``: each shard's index by id."""

    sizing: dict
    count: int
    shards: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        by_shard: dict[str, list[str]] = {shard_name(i): [] for i in range(self.count)}
        for id_, i in sorted(self.shards.items()):
            by_shard.setdefault(shard_name(i), []).append(id_)
        doc = {"version": PLAN_VERSION, "sizing": self.sizing, "shards": dict(sorted(by_shard.items()))}
        return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def load(path: str | Path) -> ShardPlan | None:
    """The plan saved at ``path``, or None when there is none (or one of another version)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if doc.get("version") != PLAN_VERSION:
        return None
    shards = {id_: int(name.rsplit("-", 1)[1]) for name, ids in doc["shards"].items() for id_ in ids}
    return ShardPlan(doc["sizing"], len(doc["shards"]), shards)


def save(path: str | Path, plan: ShardPlan) -> None:
    write_text_if_changed(path, plan.to_json())


@dataclass
class Planned:
    """What :func:`plan` decided: the plan, the ids that left it, and why it was (re)made."""

    plan: ShardPlan
    removed: list[str]
    added: list[str]
    note: str


def _first(entries: list[dict], sizing: dict) -> ShardPlan:
    n = shard_count(entries, sizing["shards"], sizing["shard_hours"])
    return ShardPlan(sizing, n, {e["id"]: shard_index(e["id"], n) for e in entries})


def _target(old: ShardPlan, kept: list[dict], sizing: dict) -> tuple[float, str]:
    """How much a new shard holds: ``shard_hours`` of audio, or with a fixed count the
    planned shards' mean (hours when every file has a duration, else files)."""
    if not sizing["shards"]:
        return float(sizing["shard_hours"]) * 3600.0, "seconds"
    n = max(1, old.count)
    if all(e.get("duration") is not None for e in kept) and kept:
        return sum(e["duration"] for e in kept) / n, "seconds"
    return max(1.0, len(old.shards) / n), "files"


def _grow(old: ShardPlan, entries: list[dict], sizing: dict) -> Planned:
    present = {e["id"]: e for e in entries}
    removed = sorted(set(old.shards) - set(present))
    shards = {id_: i for id_, i in old.shards.items() if id_ in present}
    added = sorted(set(present) - set(shards))
    target, unit = _target(old, [present[i] for i in shards], sizing)
    nxt, held = old.count, 0.0
    for id_ in added:
        size = 1.0 if unit == "files" else float(present[id_].get("duration") or 0.0)
        if held and held + size > target:
            nxt, held = nxt + 1, 0.0
        shards[id_], held = nxt, held + size
    note = f"kept {len(shards) - len(added)} files in their shards, {len(added)} new, {len(removed)} gone"
    return Planned(ShardPlan(sizing, nxt + 1 if added else old.count, shards), removed, added, note)


def plan(entries: list[dict], sizing: dict, old: ShardPlan | None, replan: bool, has_results: bool) -> Planned:
    """The shard of every entry (``entries``: dicts with ``id`` and ``duration``), from the
    ``old`` plan when there is one made with the same ``sizing`` (see the module's docstring)."""
    ids = [e["id"] for e in entries]
    if old is not None and not replan and old.sizing == sizing:
        return _grow(old, entries, sizing)
    if replan:
        note = "replanned on purpose (replan: true)"
    elif old is not None:
        note = f"replanned: the sizing changed from {old.sizing} to {sizing}"
    elif has_results:
        note = "no shard plan found beside earlier results: replanned, so every shard may run again"
    else:
        note = "first plan"
    removed = sorted(set(old.shards) - set(ids)) if old is not None else []
    return Planned(_first(entries, sizing), removed, [], note)
