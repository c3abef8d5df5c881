"""The curation jobs: files in, files out (``docs/outputs.md``, "Curation").

Per shard ``<s>`` of a dataset, under ``curate/``:

* the measure job (expensive, resumable per segment: :mod:`.measure`);
* :func:`run_decide` (cheap): ``<s>.jsonl`` (kept) and ``<s>.rejects.jsonl``.

For the whole run (one speaker id space): :func:`run_speakers` (``<s>.speakers.jsonl``
for every shard of every dataset, ``speakers/<speaker>.npy`` centroids, the run's and
each dataset's ``speaker_clusters.json``). Per dataset: :func:`run_duplicates`
(``<s>.duplicates.jsonl`` for every shard) and :func:`run_summary` (``speakers.jsonl``, ``summary.json``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.bins import bin_edges
from ..core.language import declared_language
from ..core.names import file_stem
from ..core.shardjob import Accepted, Rejected, ShardJob
from ..encoders import ResemblyzerEncoder
from ..errors import NothingKept, UsageError
from ..io.exclude import read_exclude, record_removals
from ..io.jsonio import read_jsonl, write_json, write_jsonl
from ..io.npyio import save_named_rows, save_npy
from .decide import STAGE, TIERS, decide
from .params import DecideParams, DuplicateParams, SpeakerParams, SummaryParams

log = logging.getLogger("speechprep.curate")
# the run's speakers kept for the next run (speechprep.curate.speakers.Prior), beside its report:
# not an output (Snakemake deletes those before the speakers job runs again)
SPEAKER_STATE = "speaker_state.npz"
# rejects that are the models' fault, not the audio's (speechprep.core.failures)


# ----------------------------------------------------------------------------
# speakers (every dataset of the run)
# ----------------------------------------------------------------------------
class ShardRows:
    """Rows of every shard's embeddings (memory-mapped), addressed by one global index."""

    def __init__(self, paths: list[str]):
        self.arrays = [np.load(p, mmap_mode="r") for p in paths]
        for p, a in zip(paths, self.arrays, strict=True):
            if a.ndim != 2 or a.dtype != np.float32:
                raise UsageError(f"{p}: not a float32 (N, dim) embeddings array")
        self.offsets = np.cumsum([0] + [len(a) for a in self.arrays])
        widths = {a.shape[1] for a in self.arrays if len(a)}  # an empty shard's width says nothing
        if len(widths) > 1:
            raise UsageError(
                f"embeddings of {sorted(widths)} values a row: the shards were measured by different speaker models"
            )
        self.dim = widths.pop() if widths else ResemblyzerEncoder.dim

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        """Rows ``idx`` (sorted global indices) as one float32 array."""
        shard = np.searchsorted(self.offsets, idx, side="right") - 1
        parts = []
        for k in np.unique(shard):
            parts.append(np.asarray(self.arrays[k][idx[shard == k] - self.offsets[k]], dtype=np.float32))
        return np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)


def _check_rows(measures: list[str], arrays: list[np.ndarray], keys: tuple[str, ...]) -> list[list[tuple]]:
    """Per shard, the ``keys`` of each measurements line (only those: a million lines
    stay small), checked against the rows of the shard's array."""
    shards = []
    for m, a in zip(measures, arrays, strict=True):
        lines = [tuple(line.get(k) for k in keys) for line in read_jsonl(m)]
        if len(lines) != len(a):
            raise UsageError(f"{m} has {len(lines)} lines but its array has {len(a)} rows")
        shards.append(lines)
    return shards


@dataclass(frozen=True)
class SpeakerFiles:
    """The speakers job's files: ``shard_counts[k]`` consecutive ``measures``/``embeddings``/
    ``assign`` files (one each per shard) are ``datasets[k]``'s; one ``dataset_clusters``
    report per dataset."""

    datasets: list[str]
    shard_counts: list[int]
    measures: list[str]
    embeddings: list[str]
    assign: list[str]
    dataset_clusters: list[str]

    def check(self) -> None:
        if not len(self.measures) == len(self.embeddings) == len(self.assign):
            raise UsageError("curate speakers: give as many --measures, --embeddings and --assign files")
        n = len(self.datasets)
        if (
            n != len(self.shard_counts)
            or n != len(self.dataset_clusters)
            or sum(self.shard_counts) != len(self.measures)
        ):
            raise UsageError(
                "curate speakers: give one --shard-counts count and one --dataset-clusters file per --datasets name, "
                "the counts summing to the --measures files"
            )


def _cluster(
    files: SpeakerFiles, rows: ShardRows, shards: list[list[tuple]], seg_ds: np.ndarray, p: SpeakerParams, prior
):
    """Every segment's speaker (:mod:`.speakers`), by file or by segment (``speaker_unit``);
    ``prior``: an earlier run's speakers, kept (:class:`.speakers.Prior`)."""
    from .speakers import assign_speakers, assign_speakers_by_file

    given = [spk for lines in shards for _, spk, _, _ in lines]
    if p.speaker_unit == "file":
        # a file id is its dataset's: the same name in two datasets is two files (one
        # dataset: the names as they are, no copy of a million strings); a diarized file's
        # local speakers are items of their own (`<file id>#<diarize_speaker>`)
        ids = [(f if f is not None else i) + (f"#{d}" if d else "") for lines in shards for i, _, f, d in lines]
        if len(files.datasets) > 1:
            ids = [f"{k}\t{f}" for k, f in zip(seg_ds.tolist(), ids, strict=True)]
        return assign_speakers_by_file(rows, ids, rows.dim, given, p, prior), given
    keys = [i for lines in shards for i, *_ in lines]
    if len(files.datasets) > 1:
        keys = [f"{k}\t{i}" for k, i in zip(seg_ds.tolist(), keys, strict=True)]
    return assign_speakers(rows, len(given), rows.dim, given, p, keys, prior), given


def _write_assignments(spk, shards: list[list[tuple]], assign: list[str]) -> None:
    k = 0
    for lines, path in zip(shards, assign, strict=True):
        names = [spk.names[i] for i in spk.label[k : k + len(lines)]]
        dist = spk.distance[k : k + len(lines)].tolist()
        rows = zip(lines, names, dist, strict=True)
        write_jsonl(path, ({"id": i, "speaker": n, "speaker_distance": d} for (i, *_), n, d in rows))
        k += len(lines)


def _centroid_lines(spk, col, paths, named, counts=None, datasets=()) -> list[dict]:
    """One line per speaker with segments in ``col`` (its counts); with ``counts`` (datasets x
    speakers), how many of each dataset's segments each has."""
    out = []
    for j, (n, c) in enumerate(zip(spk.names, col, strict=True)):
        if c:
            line = {"speaker": n, "source": "given" if n in named else "cluster", "n_measured": int(c)}
            if counts is not None:
                line["datasets"] = {ds: int(counts[d, j]) for d, ds in enumerate(datasets) if counts[d, j]}
            out.append({**line, "centroid": paths[n]})
    return out


def run_speakers(
    files: SpeakerFiles, centroids_dir: str, clusters_out: str, p: SpeakerParams, centroids_out: str | None = None
) -> dict[str, Any]:
    """Pseudo speakers of every dataset of a run, one id space: the shards of all datasets
    are clustered together, so one voice gets one id in every dataset. Writes per-shard
    assignments, one centroid file per speaker, the run's report (``clusters_out``) and
    each dataset's (its speakers, with how many of its segments each has); ``centroids_out``:
    every speaker's name and centroid in one table, which a grown corpus rewrites with the
    same bytes unless it brought new speakers (what the RTTM jobs read)."""
    files.check()
    rows = ShardRows(files.embeddings)
    shards = _check_rows(files.measures, rows.arrays, ("id", "speaker", "file_id", "diarize_speaker"))
    shard_ds = np.repeat(np.arange(len(files.datasets)), files.shard_counts)
    seg_ds = np.repeat(shard_ds, [len(lines) for lines in shards]).astype(np.int64)
    from .speakers import load_prior, save_prior

    state = Path(clusters_out).with_name(SPEAKER_STATE)
    spk, given = _cluster(files, rows, shards, seg_ds, p, load_prior(state, p))
    cdir = Path(centroids_dir).resolve()
    paths = {name: str(cdir / f"{file_stem(name)}.npy") for name in spk.names}
    for name, c in zip(spk.names, spk.centroids, strict=True):
        save_npy(paths[name], c.astype(np.float32))
    if centroids_out:
        save_named_rows(centroids_out, list(spk.names), spk.centroids.astype(np.float32))
    _write_assignments(spk, shards, files.assign)
    counts = np.zeros((len(files.datasets), len(spk.names)), np.int64)  # segments of each speaker in each dataset
    np.add.at(counts, (seg_ds, spk.label), 1)
    named = {g for g in given if g is not None}
    common = {"sample_clusters": spk.sample_clusters, "params": asdict(p)}
    for d, (ds, path) in enumerate(zip(files.datasets, files.dataset_clusters, strict=True)):
        own = _centroid_lines(spk, counts[d], paths, named)
        write_json(
            path, {"dataset": ds, "segments": int(counts[d].sum()), "speakers": len(own), **common, "centroids": own}
        )
    report = {
        "datasets": list(files.datasets),
        "segments": len(given),
        "speakers": len(spk.names),
        "speakers_in_several_datasets": int(((counts > 0).sum(axis=0) > 1).sum()),
        **common,
        "centroids": _centroid_lines(spk, counts.sum(axis=0), paths, named, counts, files.datasets),
    }
    write_json(clusters_out, report)
    save_prior(state, spk, p)
    several = report["speakers_in_several_datasets"]
    log.info(
        "speakers: %d segments of %d datasets, %d speakers (%d named in the input, %d in several datasets)",
        *(len(given), len(files.datasets), len(spk.names), len(named), several),
    )
    keys = ("segments", "speakers", "sample_clusters", "speakers_in_several_datasets")
    return {k: report[k] for k in keys}


# ----------------------------------------------------------------------------
# duplicates (per dataset)
# ----------------------------------------------------------------------------
def run_duplicates(
    measures: list[str],
    minhash: list[str],
    out: list[str],
    p: DuplicateParams,
    fingerprint: list[str],
    seen: str | None = None,
) -> dict[str, Any]:
    """Exact, acoustic and near duplicates across every shard: per shard, one line per
    dropped segment (:func:`speechprep.curate.dupsearch.run_job`, bounded memory)."""
    from .dupsearch import match_of, run_job

    return run_job(measures, minhash, fingerprint, out, match_of(p), seen)


# ----------------------------------------------------------------------------
# decide (per shard)
# ----------------------------------------------------------------------------
# measurement-line fields that are the pipeline's, not the output's
INTERNAL = ("minhash", "minhash_file", "fingerprint")
REJECT_FIELDS = ("id", "audio_filepath", "stage", "reason", "detail")  # every rejects line's own


def run_decide(
    measures: str,
    measure_rejects: str,
    speakers: str,
    duplicates: str,
    out: str,
    rejects_out: str,
    p: DecideParams,
    exclude: str | None = None,
    annotations: str | None = None,
) -> dict[str, Any]:
    """Keep or reject each measured segment of a shard, with its ``annotations`` (the annotate
    job's lines, by id) on its line; the measure job's rejects pass through."""
    from .texts import LanguageId, audio_language_facts, text_facts

    assign = {a["id"]: a for a in read_jsonl(speakers)}
    dups = {d["id"]: d for d in read_jsonl(duplicates)}
    notes = {a.pop("id"): a for a in read_jsonl(annotations)} if annotations else {}
    lid, excluded = LanguageId(), read_exclude(exclude)
    job = ShardJob(STAGE, measures, None, {**p.identity(), "exclude": sorted(excluded)}, "3")
    with job.running(job.todo()):
        for m in job.items:
            a = assign.get(m["id"])
            if a is None:
                raise UsageError(f"{speakers} has no speaker for {m['id']}: rerun the speakers job")
            if a["speaker"] in excluded:
                job.emit(m, Rejected("excluded", f"speaker {a['speaker']} is listed under exclude"))
                continue
            seg = {**{k: v for k, v in m.items() if k not in INTERNAL}, **notes.get(m["id"], {})}
            declared = declared_language(seg, p.dataset_language)
            seg.update(text_facts(seg.get("text"), declared, lid, p.min_language_chars))
            seg.update(audio_language_facts(seg, declared))  # the audio's, where it was measured
            ok, line = decide(seg, a["speaker"], a["speaker_distance"], dups.get(m["id"]), p)
            if ok:
                job.emit(m, Accepted(line))
            else:
                extra = {k: v for k, v in line.items() if k not in REJECT_FIELDS}
                job.emit(m, Rejected(line["reason"], line["detail"], extra=extra))
    return job.commit({out: [data for _, data in job.accepted()]}, rejects_out, passed=read_jsonl(measure_rejects))


# ----------------------------------------------------------------------------
# summary (per dataset)
# ----------------------------------------------------------------------------
def _reject_counts(rejects: list[str], removed: str | None):
    """Dropped segments and hours per reason; the excluded ones recorded in the ledger ``removed``."""
    from collections import Counter

    reasons: Counter = Counter()
    reason_hours: Counter = Counter()
    gone = []
    for path in rejects:
        for r in read_jsonl(path):
            reasons[r["reason"]] += 1
            reason_hours[r["reason"]] += float(r.get("duration") or 0.0) / 3600
            if r["reason"] == "excluded":
                gone.append((r["id"], "excluded"))
    if removed:
        record_removals(removed, gone, "curate")
    return reasons, reason_hours


# the annotations binned for captions (the TTS manifests' `description`): chars_per_s stands
# for the speaking rate (the phonemes come later, in the TTS stage)
ANNOTATED = ("pitch_mean", "pitch_std", "monotony", "reverb", "snr_db", "chars_per_s")
BY_GENDER = ("pitch_mean", "pitch_std")  # binned per gender too, as DataSpeech bins pitch


class Annotations:
    """Every kept segment's annotations, by dataset, by speaker and (pitch, where the input
    manifest gives a ``gender``) by gender: ``summary()`` gives their bin edges
    (curate/summary.json ``annotations``)."""

    def __init__(self, bins: int):
        from collections import defaultdict

        self.bins = bins
        self.values: dict[str, list] = defaultdict(list)
        self.by_speaker: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        self.by_gender: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))

    def add(self, s: dict) -> None:
        for k in ANNOTATED:
            if s.get(k) is not None:
                self.values[k].append(s[k])
                self.by_speaker[s["speaker"]][k].append(s[k])
                if s.get("gender") and k in BY_GENDER:
                    self.by_gender[s["gender"]][k].append(s[k])

    def summary(self) -> dict[str, Any]:
        edges = lambda vals, keys=ANNOTATED: {k: bin_edges(vals.get(k, []), self.bins) for k in keys}
        median = lambda v: round(float(np.median(v)), 6) if v else None
        medians = {k: median(self.values.get(k)) for k in ANNOTATED}
        return {
            "bins": self.bins,
            "edges": edges(self.values),
            "medians": medians,
            "by_speaker": {spk: edges(v) for spk, v in sorted(self.by_speaker.items())},
            "by_gender": {g: edges(v, BY_GENDER) for g, v in sorted(self.by_gender.items())},
        }


def _speaker_lines(per_speaker: dict[str, list], clusters: str) -> list[dict[str, Any]]:
    """``speakers.jsonl``: each speaker's kept segments and hours (``per_speaker``) and its
    centroid's record in ``clusters``."""
    report = {c["speaker"]: c for c in json.loads(Path(clusters).read_text(encoding="utf-8"))["centroids"]}
    lines = []
    for name in sorted(per_speaker):
        n, h = per_speaker[name]
        c = report.get(name, {})
        record = {k: c.get(k) for k in ("centroid", "source", "n_measured")}
        lines.append({"speaker": name, "n_segments": n, "hours": round(h, 6), **record})
    return lines


def run_summary(
    kept: list[str],
    rejects: list[str],
    clusters: str,
    summary_out: str,
    speakers_out: str,
    p: SummaryParams,
    removed: str | None = None,
) -> dict[str, Any]:
    """``summary.json`` (kept and dropped segments and hours, per reason, per tier; the
    annotations' bins, :class:`Annotations`) and ``speakers.jsonl`` (every speaker with kept
    segments); a segment of an excluded speaker gets a line in the ledger ``removed``
    (:mod:`speechprep.io.exclude`)."""
    from collections import defaultdict

    hours = lambda s: float(s.get("duration") or 0.0) / 3600
    n_kept, h_kept = 0, 0.0
    tiers = {t: {"segments": 0, "hours": 0.0} for t in TIERS}
    per_speaker: dict[str, list] = defaultdict(lambda: [0, 0.0])
    annotations = Annotations(p.annotation_bins)
    for path in kept:
        for s in read_jsonl(path):
            annotations.add(s)
            n_kept += 1
            h_kept += hours(s)
            tiers[s["tier"]]["segments"] += 1
            tiers[s["tier"]]["hours"] += hours(s)
            per_speaker[s["speaker"]][0] += 1
            per_speaker[s["speaker"]][1] += hours(s)
    reasons, reason_hours = _reject_counts(rejects, removed)
    speaker_lines = _speaker_lines(per_speaker, clusters)
    write_jsonl(speakers_out, speaker_lines)
    summary = {
        "stage": STAGE,
        "shards": len(kept),
        "segments": n_kept + sum(reasons.values()),
        "kept": n_kept,
        "kept_hours": round(h_kept, 6),
        "rejected": sum(reasons.values()),
        "rejected_hours": round(sum(reason_hours.values()), 6),
        "rejects_by_reason": dict(sorted(reasons.items())),
        "rejected_hours_by_reason": {k: round(v, 6) for k, v in sorted(reason_hours.items())},
        "tiers": {t: {"segments": v["segments"], "hours": round(v["hours"], 6)} for t, v in tiers.items()},
        "speakers": len(speaker_lines),
        "annotations": annotations.summary(),
    }
    write_json(summary_out, summary)
    check_something_kept(summary)
    return summary


def check_something_kept(summary: dict[str, Any]) -> None:
    """A dataset whose curation keeps nothing of a non-empty input fails loudly, naming the drop
    reasons and their counts: an empty training set is never a quiet success."""
    if summary["kept"] == 0 and summary["rejected"] > 0:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(summary["rejects_by_reason"].items(), key=lambda x: -x[1]))
        raise NothingKept(
            f"curation kept none of {summary['rejected']} segments ({reasons}); check the models "
            "(a demo model on another corpus drops everything low_confidence) and the curate thresholds"
        )
