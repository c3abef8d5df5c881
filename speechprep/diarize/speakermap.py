"""A file's local speakers named by the run's speaker ids, and the shard's turns as RTTM.

The run-wide ``curate speakers`` job pools each file's segments by local speaker
(``<file id>#<diarize_speaker>``; a file of one speaker by its id, as any file):
every local speaker of every file is one item
of the cross-file clustering, so its measured segments share one run speaker id.
:func:`speaker_names` reads that back from curation's files (the measurements'
``file_id`` and ``diarize_speaker``, the assignments' ``speaker``): a local speaker
takes the run id most of its measured segments got. One with no measured segment
(everything it said rejected before curation measured it) takes the run speaker
whose centroid (the speakers job's ``speaker_centroids.npy``) is nearest its own
(:mod:`.lines`' ``speakers`` lines), within
``max_speaker_distance``; else, and in a run without curation, it is named
``<file id>#<local speaker>``: a speaker of that file alone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from ..io.jsonio import read_jsonl
from ..io.npyio import load_named_rows
from .lines import local_name
from .params import RttmParams
from .rttm import RttmTurn, write_rttm

Key = tuple[str, str]  # (file id, local speaker)


def own_name(key: Key) -> str:
    """The name of a local speaker the run has no id for: ``<file id>#<local speaker>``."""
    return f"{key[0]}#{key[1]}"


def measured_names(measures: str, assign: str) -> dict[Key, str]:
    """The run speaker most measured segments of each local speaker got (a line without
    ``diarize_speaker`` is of a file with one speaker: ``spk0``)."""
    speaker = {a["id"]: a["speaker"] for a in read_jsonl(assign)}
    votes: dict[Key, Counter] = defaultdict(Counter)
    for m in read_jsonl(measures):
        if m["id"] in speaker:
            votes[(str(m["file_id"]), m.get("diarize_speaker") or local_name(0))][speaker[m["id"]]] += 1
    return {k: sorted(c.items(), key=lambda x: (-x[1], x[0]))[0][0] for k, c in votes.items()}


def nearest_names(local: list[dict[str, Any]], names: list[str], centroids: np.ndarray, limit: float) -> dict[Key, str]:
    """Each local speaker (``speakers`` lines) whose nearest run centroid is within ``limit``."""
    if not local or not names:
        return {}
    c = np.asarray([s["centroid"] for s in local], np.float32)
    c /= np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
    dist = 1.0 - c @ centroids.T
    best = np.argmin(dist, axis=1)
    return {
        (str(s["file_id"]), s["diarize_speaker"]): names[j]
        for s, j, d in zip(local, best, dist[np.arange(len(local)), best], strict=True)
        if d <= limit
    }


def speaker_names(
    speakers: str, p: RttmParams, measures: str | None = None, assign: str | None = None, centroids: str | None = None
) -> dict[Key, str]:
    """The run's name of every local speaker of the shard (``speakers``: its speakers lines)."""
    local = list(read_jsonl(speakers))
    names: dict[Key, str] = {}
    if measures and assign:
        names = measured_names(measures, assign)
    if centroids and p.max_speaker_distance is not None:
        missing = [s for s in local if (str(s["file_id"]), s["diarize_speaker"]) not in names]
        names |= nearest_names(missing, *load_named_rows(centroids), p.max_speaker_distance)
    out = {}
    for s in local:
        key = (str(s["file_id"]), s["diarize_speaker"])
        out[key] = names.get(key, own_name(key))
    return out


def write_rttm_shard(
    turns: str,
    speakers: str,
    out: str,
    p: RttmParams,
    measures: str | None = None,
    assign: str | None = None,
    centroids: str | None = None,
) -> dict[str, Any]:
    """``diarize/<shard>.rttm``: every turn of the shard, its speaker named by the run."""
    names = speaker_names(speakers, p, measures, assign, centroids)
    rows = []
    for t in read_jsonl(turns):
        key = (str(t["file_id"]), t["speaker"])
        rows.append(RttmTurn(key[0], t["start"], round(t["end"] - t["start"], 3), names.get(key, own_name(key))))
    n = write_rttm(out, rows)
    own = sum(v == own_name(k) for k, v in names.items())
    return {"turns": n, "local_speakers": len(names), "named_by_the_file_alone": own}
