"""The curation jobs: files in, files out (``docs/outputs.md``, "Curation").

Per shard ``<s>`` of a dataset, under ``curate/``:

* :func:`run_measure` (expensive, resumable per segment on a
  :class:`~speechprep.shardjob.ShardJob`): ``<s>.measures.jsonl`` (one line
  per measured segment: its fields + every measure), ``<s>.embeddings.npy``
  (float32 (N, 256) Resemblyzer vectors, row i = line i), ``<s>.minhash.npy``
  (uint64 (N, minhash_perm), row i = line i, zeros where ``minhash`` is false)
  and ``<s>.measure_rejects.jsonl`` (segments whose audio could not be measured);
* :func:`run_decide` (cheap): ``<s>.jsonl`` (kept) and ``<s>.rejects.jsonl``.

For the whole run (one speaker id space): :func:`run_speakers` (``<s>.speakers.jsonl``
for every shard of every dataset, ``speakers/<speaker>.npy`` centroids, the run's and
each dataset's ``speaker_clusters.json``). Per dataset: :func:`run_duplicates`
(``<s>.duplicates.jsonl`` for every shard) and :func:`run_summary` (``speakers.jsonl``, ``summary.json``).
"""

from __future__ import annotations

import base64
import importlib.metadata
import json
import logging
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..audio import SAMPLE_RATE, AudioError, read_segment
from ..batching import BatchRunner, isolate, resolve_device
from ..errors import NothingKept, UsageError
from ..failures import FailureRule
from ..jsonio import read_jsonl, write_json, write_jsonl
from ..modelfiles import sha256_cached, sha256_file
from ..names import file_stem
from ..npyio import save_npy
from ..shardjob import Accepted, Outcome, Rejected, ShardJob, model_rejected
from . import measures as M
from .decide import STAGE, TIERS, decide
from .duplicates import Candidate, find_duplicates, minhash_signature
from .nonspeech import NonSpeech
from .params import DecideParams, DuplicateParams, MeasureParams, SpeakerParams

log = logging.getLogger("speechprep.curate")
# Bump when a change to this package changes measurements, so stale resume files are not reused.
ALGORITHM_VERSION = "2"
EMBEDDING_DIM = 256
# rejects that are the models' fault, not the audio's (speechprep.failures)


# ----------------------------------------------------------------------------
# measure (per shard)
# ----------------------------------------------------------------------------
def signal_measures(
    x: np.ndarray, seg: dict, units: list[int] | None, p: MeasureParams, noise: list[np.ndarray]
) -> dict[str, Any]:
    """Every model-free measure of one decoded segment (16 kHz float32); ``noise``:
    pieces of its file's non-speech (:class:`~speechprep.curate.nonspeech.NonSpeech`), for the SNR."""
    duration = len(x) / SAMPLE_RATE
    cps, wps = M.speaking_rate(seg.get("text"), duration)
    return {
        "lufs": M.lufs(x, SAMPLE_RATE),
        "peak_dbfs": M.peak_dbfs(x),
        "clipping_ratio": M.clipping_ratio(x, p.clip_level),
        "dc_offset": M.dc_offset(x),
        "snr_db": M.snr_db(x, noise, SAMPLE_RATE, tuple(p.snr_band_hz)),
        "bandwidth_hz": M.bandwidth_hz(x, SAMPLE_RATE, p.bandwidth_floor_db),
        "chars_per_s": cps,
        "words_per_s": wps,
        "text_unit_ratio": M.text_unit_ratio(seg.get("text"), units),
        "n_units": len(units) if units is not None else None,
        "pcm_sha256": M.pcm_sha256(x),
    }


class Models:
    """DNSMOS and the Resemblyzer speaker encoder over a batch of clips:
    ``models(clips) -> [(dnsmos scores, embedding or AudioError)]``."""

    def __init__(self, p: MeasureParams, device: str, threads: int):
        from ..tts.encoders import ResemblyzerEncoder
        from .dnsmos import Dnsmos

        self.dnsmos = Dnsmos(p.dnsmos_personalized, threads)
        self.speaker = ResemblyzerEncoder(device, threads)

    def __call__(self, clips: list[np.ndarray]) -> list[tuple[dict, np.ndarray | AudioError]]:
        return list(zip(self.dnsmos(clips), self.speaker(clips), strict=True))


def model_identity(p: MeasureParams) -> dict[str, Any]:
    """What the measurements depend on beyond the parameters: model files and packages."""
    from ..tts.encoders import ResemblyzerEncoder
    from .dnsmos import model_files

    files = {
        **{f"dnsmos_{k}": v for k, v in model_files(p.dnsmos_personalized).items()},
        "resemblyzer": ResemblyzerEncoder.model_file(),
    }
    ident = {k: {"path": str(v), "sha256": sha256_cached(v, p.hash_cache)} for k, v in files.items()}
    ident["packages"] = {
        n: importlib.metadata.version(n)
        for n in ("speechmos", "onnxruntime", "resemblyzer", "pyloudnorm", "datasketch", "librosa")
    }
    return ident


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def _unb64(s: str, dtype) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), dtype=dtype)


def _with_bounds(seg: dict, o: Outcome) -> Outcome:
    """A reject carries the segment's ``offset`` and ``duration`` (the summary counts hours)."""
    if isinstance(o, Rejected):
        return Rejected(
            o.reason, o.detail, o.model_error, {**o.extra, **{k: seg[k] for k in ("offset", "duration") if k in seg}}
        )
    return o


def _finish(seg: dict, loaded: Any, result: Any, oom: bool) -> Outcome:
    if oom:
        return Rejected("oom", "out of memory even as a single segment")
    if isinstance(loaded, AudioError):
        return Rejected(loaded.reason, loaded.detail)
    if isinstance(result, Exception):  # the models raised on this segment alone
        return model_rejected(result, "encoder_error")
    scores, emb = result
    if isinstance(emb, AudioError):  # Resemblyzer finds no voice in it
        return Rejected(emb.reason, f"speaker encoder: {emb.detail}")
    dnsmos = [scores["sig"], scores["bak"], scores["ovrl"], scores["p808"]]
    if emb.size != EMBEDDING_DIM or not np.isfinite(emb).all() or not np.isfinite(dnsmos).all():
        return Rejected("non_finite", "a model returned NaN/Inf or a vector of another size", model_error=True)
    measured, sig = loaded[1], loaded[2]
    return Accepted(
        {
            "dnsmos_sig": dnsmos[0],
            "dnsmos_bak": dnsmos[1],
            "dnsmos_ovrl": dnsmos[2],
            "dnsmos_p808": dnsmos[3],
            **measured,
            "embedding": _b64(emb.astype(np.float32)),
            "minhash": _b64(sig) if sig is not None else None,
        }
    )


def run_measure(
    segments_path: str,
    units_path: str,
    out: str,
    embeddings_out: str,
    minhash_out: str,
    rejects_out: str,
    p: MeasureParams,
    resume: str,
    threads: int = 1,
    models: Callable | None = None,
) -> dict[str, Any]:
    """Measure every segment of a shard (resumable per segment; ``models`` for tests)."""
    units = {u["id"]: u["units"] for u in read_jsonl(units_path)}
    non_speech = NonSpeech(read_jsonl(segments_path), p.snr_noise_seconds)
    fp = {k: v for k, v in asdict(p).items() if k not in ("model_failure", "hash_cache")}
    job = ShardJob(
        STAGE,
        segments_path,
        resume,
        {**fp, "models": model_identity(p), "units": sha256_file(units_path)},
        ALGORITHM_VERSION,
        failure_rule=FailureRule.from_dict(p.model_failure),
        model="DNSMOS + Resemblyzer",
    )

    def screen(s: dict) -> Rejected | None:
        d = s.get("duration")
        if d is not None and float(d) < p.min_duration:
            return _with_bounds(
                s, Rejected("too_short", f"{float(d):.3f} s is below curate.min_duration ({p.min_duration} s)")
            )
        return None

    def load(s: dict) -> tuple | AudioError:
        try:
            x = read_segment(s, SAMPLE_RATE, p.min_duration, "curate.min_duration")
        except AudioError as e:
            return e
        u = units.get(s["id"])
        return x, signal_measures(x, s, u, p, non_speech.read(s)), minhash_signature(u, p.minhash_ngram, p.minhash_perm)

    todo = job.todo(screen)
    with job.running(todo):
        if todo:
            device = resolve_device(p.device)
            models = models or Models(p, device, threads)

            def infer(batch: list[tuple[dict, Any]]) -> list:
                ok = [i for i, (_, a) in enumerate(batch) if not isinstance(a, AudioError)]
                failed = lambda k, e: job.model_error(batch[ok[k]][0], e)
                res = isolate(models, [batch[i][1][0] for i in ok], "curate models", failed) if ok else []
                out: list[Any] = [None] * len(batch)
                for i, r in zip(ok, res, strict=True):
                    out[i] = r
                return out

            runner = BatchRunner(budget=p.batch_seconds, duration=lambda it: float(it[0]["duration"]), infer=infer)
            for plan in runner.plan([(s, None) for s in todo]):
                for o in runner.run([(s, load(s)) for s, _ in plan]):
                    s, loaded = o.item
                    job.emit(s, _with_bounds(s, _finish(s, loaded, o.result, o.oom)))

    emb_path, mh_path = str(Path(embeddings_out).resolve()), str(Path(minhash_out).resolve())
    lines, embs, sigs = [], [], []
    for row, (s, data) in enumerate(job.accepted()):
        embs.append(_unb64(data["embedding"], np.float32))
        sig = _unb64(data["minhash"], np.uint64) if data["minhash"] else None
        sigs.append(sig if sig is not None else np.zeros(p.minhash_perm, np.uint64))
        m = {k: v for k, v in data.items() if k not in ("embedding", "minhash")}
        lines.append(
            {
                **s,
                **m,
                "minhash": sig is not None,
                "embedding_file": emb_path,
                "embedding_row": row,
                "minhash_file": mh_path,
            }
        )
    save_npy(embeddings_out, np.stack(embs) if embs else np.zeros((0, EMBEDDING_DIM), np.float32))
    save_npy(minhash_out, np.stack(sigs) if sigs else np.zeros((0, p.minhash_perm), np.uint64))
    return job.commit({out: lines}, rejects_out)


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
        self.dim = self.arrays[0].shape[1] if self.arrays else EMBEDDING_DIM

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


def run_speakers(
    datasets: list[str],
    shard_counts: list[int],
    measures: list[str],
    embeddings: list[str],
    assign_out: list[str],
    dataset_clusters: list[str],
    centroids_dir: str,
    clusters_out: str,
    p: SpeakerParams,
) -> dict[str, Any]:
    """Pseudo speakers of every dataset of a run, one id space: the shards of all
    datasets (``shard_counts[k]`` consecutive ``measures``/``embeddings`` files are
    ``datasets[k]``'s) are clustered together, so one voice gets one id in every
    dataset. Writes per-shard assignments, one centroid file per speaker, the run's
    report (``clusters_out``) and each dataset's (``dataset_clusters``: its speakers,
    with how many of its segments each has)."""
    from .speakers import assign_speakers, assign_speakers_by_file

    if not len(measures) == len(embeddings) == len(assign_out):
        raise UsageError("curate speakers: give as many --measures, --embeddings and --assign files")
    if (
        len(datasets) != len(shard_counts)
        or len(datasets) != len(dataset_clusters)
        or sum(shard_counts) != len(measures)
    ):
        raise UsageError(
            "curate speakers: give one --shard-counts count and one --dataset-clusters file per --datasets name, "
            "the counts summing to the --measures files"
        )
    rows = ShardRows(embeddings)
    shards = _check_rows(measures, rows.arrays, ("id", "speaker", "file_id"))
    shard_ds = np.repeat(np.arange(len(datasets)), shard_counts)
    given = [spk for lines in shards for _, spk, _ in lines]
    seg_ds = np.repeat(shard_ds, [len(lines) for lines in shards]).astype(np.int64)
    if p.speaker_unit == "file":
        # a file id is its dataset's: the same name in two datasets is two files (one
        # dataset: the names as they are, no copy of a million strings)
        files = [f if f is not None else i for lines in shards for i, _, f in lines]
        if len(datasets) > 1:
            files = [f"{k}\t{f}" for k, f in zip(seg_ds.tolist(), files, strict=True)]
        how = lambda *a: assign_speakers_by_file(rows, files, *a)
    else:
        how = lambda *a: assign_speakers(rows, len(given), *a)
    spk = how(
        rows.dim,
        given,
        p.speaker_sample,
        p.speaker_threshold,
        p.speaker_linkage,
        p.speaker_min_size,
        p.speaker_seed,
        p.speaker_chunk,
    )
    cdir = Path(centroids_dir).resolve()
    paths = {}
    for name, c in zip(spk.names, spk.centroids, strict=True):
        paths[name] = str(cdir / f"{file_stem(name)}.npy")
        save_npy(paths[name], c.astype(np.float32))
    k = 0
    for lines, path in zip(shards, assign_out, strict=True):
        names = [spk.names[i] for i in spk.label[k : k + len(lines)]]
        dist = spk.distance[k : k + len(lines)].tolist()
        write_jsonl(
            path,
            (
                {"id": i, "speaker": n, "speaker_distance": d}
                for (i, _, _), n, d in zip(lines, names, dist, strict=True)
            ),
        )
        k += len(lines)
    # segments of each speaker in each dataset
    counts = np.zeros((len(datasets), len(spk.names)), np.int64)
    np.add.at(counts, (seg_ds, spk.label), 1)
    named = {g for g in given if g is not None}

    def centroids(col: np.ndarray, per_dataset: bool = False) -> list[dict]:
        out = []
        for j, (n, c) in enumerate(zip(spk.names, col, strict=True)):
            if c:
                line = {"speaker": n, "source": "given" if n in named else "cluster", "n_measured": int(c)}
                if per_dataset:
                    line["datasets"] = {ds: int(counts[d, j]) for d, ds in enumerate(datasets) if counts[d, j]}
                out.append({**line, "centroid": paths[n]})
        return out

    common = {"sample_clusters": spk.sample_clusters, "params": asdict(p)}
    for d, (ds, path) in enumerate(zip(datasets, dataset_clusters, strict=True)):
        own = centroids(counts[d])
        report = {"dataset": ds, "segments": int(counts[d].sum()), "speakers": len(own), **common, "centroids": own}
        write_json(path, report)
    in_several = int(((counts > 0).sum(axis=0) > 1).sum())
    report = {
        "datasets": list(datasets),
        "segments": len(given),
        "speakers": len(spk.names),
        "speakers_in_several_datasets": in_several,
        **common,
        "centroids": centroids(counts.sum(axis=0), per_dataset=True),
    }
    write_json(clusters_out, report)
    log.info(
        "speakers: %d segments of %d datasets, %d speakers (%d named in the input, %d in several datasets)",
        len(given),
        len(datasets),
        len(spk.names),
        len(named),
        in_several,
    )
    return {
        k: v
        for k, v in report.items()
        if k in ("segments", "speakers", "sample_clusters", "speakers_in_several_datasets")
    }


# ----------------------------------------------------------------------------
# duplicates (per dataset)
# ----------------------------------------------------------------------------
def run_duplicates(measures: list[str], minhash: list[str], out: list[str], p: DuplicateParams) -> dict[str, Any]:
    """Exact and near duplicates across every shard: per shard, one line per dropped segment."""
    if not len(measures) == len(minhash) == len(out):
        raise UsageError("curate duplicates: give as many --measures, --minhash and --out files")
    arrays = [np.load(m, mmap_mode="r") for m in minhash]
    shards = _check_rows(measures, arrays, ("id", "pcm_sha256", "dnsmos_ovrl", "minhash", "snr_db", "bandwidth_hz"))
    cands, shard_of = [], {}
    num_perm = None
    for k, (lines, sigs) in enumerate(zip(shards, arrays, strict=True)):
        if len(lines):
            num_perm = sigs.shape[1]
        for row, (id_, sha, ovrl, has_sig, snr, bandwidth) in enumerate(lines):
            cands.append(Candidate(id_, sha, ovrl, np.array(sigs[row]) if has_sig else None, snr, bandwidth))
            shard_of[id_] = k
    dups = find_duplicates(cands, p.near_duplicate_jaccard, num_perm or 128) if cands else []
    per_shard: list[list[dict]] = [[] for _ in out]
    for d in dups:
        per_shard[shard_of[d.id]].append(
            {"id": d.id, "duplicate_of": d.duplicate_of, "kind": d.kind, "similarity": d.similarity}
        )
    for lines, path in zip(per_shard, out, strict=True):
        write_jsonl(path, lines)
    return {
        "segments": len(cands),
        "exact": sum(d.kind == "exact" for d in dups),
        "near": sum(d.kind == "near" for d in dups),
    }


# ----------------------------------------------------------------------------
# decide (per shard)
# ----------------------------------------------------------------------------
INTERNAL = ("minhash", "minhash_file")  # measurement-line fields that are the pipeline's, not the output's


def run_decide(
    measures: str, measure_rejects: str, speakers: str, duplicates: str, out: str, rejects_out: str, p: DecideParams
) -> dict[str, Any]:
    """Keep or reject each measured segment of a shard; the measure job's rejects pass through."""
    assign = {a["id"]: a for a in read_jsonl(speakers)}
    dups = {d["id"]: d for d in read_jsonl(duplicates)}
    kept, rejected = [], []
    for m in read_jsonl(measures):
        a = assign.get(m["id"])
        if a is None:
            raise UsageError(f"{speakers} has no speaker for {m['id']}: rerun the speakers job")
        ok, line = decide(
            {k: v for k, v in m.items() if k not in INTERNAL}, a["speaker"], a["speaker_distance"], dups.get(m["id"]), p
        )
        (kept if ok else rejected).append(line)
    measured = [r for r in read_jsonl(measure_rejects)]
    n = write_jsonl(out, kept)
    write_jsonl(rejects_out, measured + rejected)
    counts = {"kept": n, "rejected": len(measured) + len(rejected)}
    log.info("decide: %s", counts)
    return counts


# ----------------------------------------------------------------------------
# summary (per dataset)
# ----------------------------------------------------------------------------
def run_summary(
    kept: list[str], rejects: list[str], clusters: str, summary_out: str, speakers_out: str
) -> dict[str, Any]:
    """``summary.json`` (kept and dropped segments and hours, per reason, per tier) and
    ``speakers.jsonl`` (every speaker with kept segments)."""
    from collections import Counter, defaultdict

    hours = lambda s: float(s.get("duration") or 0.0) / 3600
    n_kept, h_kept = 0, 0.0
    tiers = {t: {"segments": 0, "hours": 0.0} for t in TIERS}
    per_speaker: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for path in kept:
        for s in read_jsonl(path):
            n_kept += 1
            h_kept += hours(s)
            tiers[s["tier"]]["segments"] += 1
            tiers[s["tier"]]["hours"] += hours(s)
            per_speaker[s["speaker"]][0] += 1
            per_speaker[s["speaker"]][1] += hours(s)
    reasons: Counter = Counter()
    reason_hours: Counter = Counter()
    for path in rejects:
        for r in read_jsonl(path):
            reasons[r["reason"]] += 1
            reason_hours[r["reason"]] += hours(r)
    report = {c["speaker"]: c for c in json.loads(Path(clusters).read_text(encoding="utf-8"))["centroids"]}
    speaker_lines = []
    for name in sorted(per_speaker):
        n, h = per_speaker[name]
        c = report.get(name, {})
        speaker_lines.append(
            {
                "speaker": name,
                "n_segments": n,
                "hours": round(h, 6),
                "centroid": c.get("centroid"),
                "source": c.get("source"),
                "n_measured": c.get("n_measured"),
            }
        )
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
