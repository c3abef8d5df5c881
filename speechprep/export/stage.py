"""Export stage: the final kept segments of a shard as training-ready containers.

Per dataset, :func:`run_lines` cuts the TTS manifests (``tts/train_manifest.jsonl``
and ``tts/val_manifest.jsonl``: what curation and the TTS stage kept) into each
shard's lines (``export/.lines/<shard>.jsonl``: those whose ids the shard's
``tts/<shard>.features.jsonl`` holds, in its order) and the dataset's Parquet
column types (``export/.lines/columns.json``); a grown corpus rewrites an old
shard's file with the same bytes, so its export job does not run again. Per
shard, :func:`run_shard` exports its lines. Each segment is cut from its
source (soundfile + soxr), resampled to ``export.sample_rate``, optionally
loudness-normalised to ``export.lufs`` (pyloudnorm) and encoded as 16-bit FLAC,
once, into the resume directory; the shard's containers are then written from
those bytes, one per format in ``export.formats`` (docs/outputs.md,
"Exports"):

* ``webdataset/<shard>.tar``: ``<key>.flac``, ``<key>.json`` (the manifest
  line), ``<key>.<kind>.npy`` per feature;
* ``parquet/data/train-<nnnnnn>.parquet``: one row per segment, ``audio`` (the
  ``datasets`` ``Audio`` feature), every manifest field, the features as lists
  in their own dtype;
* ``lhotse_shar/data/``: the shard's numbered Lhotse Shar files (cuts with a
  supervision, FLAC recordings, the features as custom arrays);
* ``nemo_tarred/audio_<n>.tar`` + ``nemo_tarred/manifest_<n>.json``: NeMo's
  sharded tarred audio (``audio_filepath`` is the member name, ``shard_id`` n).

(the Parquet and Lhotse layouts: :mod:`speechprep.export.layouts`). Each format
directory also gets ``<shard>.index.jsonl`` (``id``, the member or row,
``sha256`` of the audio bytes); :func:`run_summary` joins them into the
contract's ``index.jsonl`` and ``stats.json`` (segments, hours, duration-bucket
edges) and writes what the format's loader reads for the whole dataset (the
Parquet dataset card, NeMo's manifest of all shards and its config keys).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import shutil
import tarfile
import tempfile
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.names import file_stem, id_digest
from ..core.shardjob import Accepted, Rejected, ShardJob
from ..errors import UsageError, describe
from ..io.audio import AudioError, read_segment
from ..io.jsonio import atomic_open, read_jsonl, write_json, write_jsonl
from ..io.npyio import load_ref
from .layouts import column_types, outcomes, shard_number, summarize, write_lhotse_shar, write_parquet
from .params import BucketParams, ExportParams

log = logging.getLogger("speechprep.export")

VERSION = "1"
FORMATS = ("webdataset", "parquet", "lhotse_shar", "nemo_tarred")
# The per-segment arrays the TTS stage writes (manifest field -> its .npy path); phoneme_ids
# only with tts.phonemes
FEATURES = ("text_ids", "codes", "condition", "emo_vec", "phoneme_ids")


def member_key(id_: str) -> str:
    """A webdataset-safe key: webdataset splits a member name at its first dot, so
    an id with a dot (or one too long or unsafe as a file name, see
    :func:`speechprep.core.names.file_stem`) becomes a readable prefix plus a hash."""
    stem = file_stem(id_)
    if "." not in stem:
        return stem
    digest = hashlib.sha256(id_.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{stem.replace('.', '_')[:143]}-{digest}"


def cut(item: dict, sample_rate: int, lufs: float | None) -> np.ndarray:
    """The segment as float32 mono at ``sample_rate``, loudness-normalised to ``lufs``."""
    x = read_segment(item, sample_rate)
    if lufs is None:
        return x
    import pyloudnorm

    meter = pyloudnorm.Meter(sample_rate, block_size=min(0.4, len(x) / sample_rate))
    loudness = meter.integrated_loudness(x)
    if not np.isfinite(loudness):  # silence: nothing to scale
        return x
    return np.clip(pyloudnorm.normalize.loudness(x, loudness, lufs), -1.0, 1.0).astype(np.float32)


def flac_bytes(x: np.ndarray, sample_rate: int) -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, x, sample_rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def features_of(item: dict) -> dict[str, np.ndarray]:
    """The item's feature arrays (those its manifest line names: files or packed slices)."""
    out = {}
    for kind in FEATURES:
        if item.get(kind):
            a = load_ref(item[kind])
            if a is None:
                raise AudioError("missing_feature", f"{kind} file {item[kind]} is missing or unreadable")
            out[kind] = a
    return out


class _Places:
    """Where each segment of the shards' feature indexes stands: its shard and position, in
    arrays of 16 bytes an id (an 8-byte digest of the id, sorted), not a dict of the ids; a
    digest two ids share (or an id two shards share) is looked up by the id itself."""

    def __init__(self, indexes: list[str]):
        keys, shards, positions = array("Q"), array("I"), array("I")
        for k, index in enumerate(indexes):
            for p, f in enumerate(read_jsonl(index)):
                keys.append(id_digest(f["id"]))
                shards.append(k)
                positions.append(p)
        key = np.frombuffer(keys, np.uint64) if keys else np.zeros(0, np.uint64)
        order = np.argsort(key, kind="stable")
        self.keys = key[order]
        self.shards = np.frombuffer(shards, np.uint32)[order] if shards else np.zeros(0, np.uint32)
        self.positions = np.frombuffer(positions, np.uint32)[order] if positions else np.zeros(0, np.uint32)
        shared = set(self.keys[1:][self.keys[1:] == self.keys[:-1]].tolist())
        self.shared: dict[str, list[tuple[int, int]]] = {}
        if shared:
            for k, index in enumerate(indexes):
                for p, f in enumerate(read_jsonl(index)):
                    if id_digest(f["id"]) in shared:
                        self.shared.setdefault(f["id"], []).append((k, p))
        self.shared_keys = shared

    def of(self, id_: str) -> list[tuple[int, int]]:
        """The (shard, position) of every index line of ``id_``: none when no shard holds it."""
        key = id_digest(id_)
        if key in self.shared_keys:
            return self.shared.get(id_, [])
        i = int(np.searchsorted(self.keys, np.uint64(key)))
        if i < len(self.keys) and int(self.keys[i]) == key:
            return [(int(self.shards[i]), int(self.positions[i]))]
        return []


def run_lines(
    manifests: list[str], features_indexes: list[str], out: list[str], columns_out: str, buckets: int = 256
) -> dict[str, Any]:
    """Per shard (one ``out`` per ``features_indexes``), the manifest lines of its segments
    in the shard's order (a later line of an id wins); ``columns_out``: every line's Parquet
    column type (:func:`.layouts.column_types`), so that every shard has the dataset's schema.

    Bounded memory at any size: the lines go, as read, into up to ``buckets`` files of a
    temporary folder (by shard), and each bucket is then cut into its shards' files; what
    stays in memory is 16 bytes an id (:class:`_Places`) and one bucket's lines."""
    if len(out) != len(features_indexes):
        raise UsageError(f"{len(out)} shard files named for {len(features_indexes)} shards")
    places = _Places(features_indexes)
    n = max(1, min(buckets, len(out)))
    counts = {}
    Path(columns_out).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=Path(columns_out).parent, prefix=".cut-") as tmp:
        files = [open(Path(tmp) / f"{b}.tsv", "w", encoding="utf-8") for b in range(n)]  # noqa: SIM115

        def routed():  # every manifest line, filed under each place its id has
            for m in manifests:
                with open(m, encoding="utf-8") as f:
                    for text in map(str.strip, f):
                        if text:
                            line = json.loads(text)
                            for shard, pos in places.of(line["id"]):
                                files[shard % n].write(f"{shard}\t{pos}\t{text}\n")
                            yield line

        try:
            columns = column_types(routed())
        finally:
            for f in files:
                f.close()
        for b in range(n):
            held: dict[int, dict[int, str]] = {}  # shard -> position -> the line's text
            with open(Path(tmp) / f"{b}.tsv", encoding="utf-8") as f:
                for row in f:
                    shard, pos, text = row.rstrip("\n").split("\t", 2)
                    held.setdefault(int(shard), {})[int(pos)] = text
            for k in range(b, len(out), n):
                lines = held.pop(k, {})
                with atomic_open(out[k]) as f:  # the manifests' lines as the TTS stage wrote them
                    f.writelines(lines[p] + "\n" for p in sorted(lines))
                counts[Path(out[k]).stem] = len(lines)
    write_json(columns_out, columns)
    log.info("%d lines of %d shards", sum(counts.values()), len(counts))
    return counts


def _cut_one(item: dict, params: ExportParams, audio_dir: Path) -> tuple:
    """``(outcome, feature arrays, audio seconds)`` of one segment: its FLAC in ``audio_dir``."""
    try:
        arrays = features_of(item)
        x = cut(item, params.sample_rate, params.lufs)
    except AudioError as e:
        return Rejected(e.reason, str(e)), None, None
    except (OSError, ValueError) as e:
        return Rejected("unreadable_audio", describe(e)), None, None
    key = member_key(item["id"])
    data = flac_bytes(x, params.sample_rate)
    with atomic_open(audio_dir / f"{key}.flac", "wb") as f:
        f.write(data)
    done = {"key": key, "sha256": hashlib.sha256(data).hexdigest(), "samples": len(x)}
    return Accepted(done), arrays, len(x) / params.sample_rate


def run_shard(
    lines_path: str,
    columns_path: str,
    out_dir: str,
    rejects: str,
    params: ExportParams,
    resume: str,
) -> dict[str, Any]:
    """Export one shard's lines (:func:`run_lines`) in every format of ``params.formats``
    under ``out_dir/<format>/``, with the dataset's column types."""
    items = list(read_jsonl(lines_path))
    columns = json.loads(Path(columns_path).read_text(encoding="utf-8"))
    digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode("utf-8")).hexdigest()
    job = ShardJob(
        "export",
        lines_path,
        resume,
        {**params.identity(), "items": digest},
        VERSION,
        items=items,
    )
    audio_dir = Path(resume).with_suffix(".audio")
    audio_dir.mkdir(parents=True, exist_ok=True)

    def keep(item: dict, outcome) -> bool:
        return not isinstance(outcome, Accepted) or (audio_dir / f"{outcome.data['key']}.flac").exists()

    todo = job.todo(keep=keep)
    with job.running(todo):
        for item in todo:
            outcome, _arrays, seconds = _cut_one(item, params, audio_dir)  # its arrays checked here
            job.emit(item, outcome, audio_seconds=seconds)

    segments = Segments(list(job.accepted()), audio_dir)
    summary = job.commit(write_containers(segments, out_dir, job.name, params, columns), rejects)
    shutil.rmtree(audio_dir)  # with any temp file a killed run left
    return summary


class Segments(Sequence):
    """``(line, outcome, FLAC bytes, feature arrays)`` per accepted segment of a shard, each
    read from ``audio_dir`` and its feature files when it is taken: a writer holds one
    segment's audio and arrays (the Parquet writer one row group's), not the shard's, so a
    job's memory does not grow with its shard (bench/export/scale.py)."""

    def __init__(self, accepted: list[tuple[dict, dict]], audio_dir: Path):
        self.accepted, self.audio_dir = accepted, audio_dir

    def __len__(self) -> int:
        return len(self.accepted)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        item, d = self.accepted[i]
        return item, d, (self.audio_dir / f"{d['key']}.flac").read_bytes(), features_of(item)


def write_containers(
    segments: Sequence, out_dir: str, shard: str, params: ExportParams, columns: dict[str, str]
) -> dict[Path, list[dict]]:
    """The shard's files in every format; returns each format's index lines by path."""
    outputs = {}
    for fmt in params.formats:
        members = WRITERS[fmt](segments, Path(out_dir) / fmt, shard, params.sample_rate, columns)
        outputs[Path(out_dir) / fmt / f"{shard}.index.jsonl"] = [
            {"id": item["id"], "member": m, "sha256": sha, "duration": d["samples"] / params.sample_rate}
            for (item, d), (m, sha) in zip(outcomes(segments), members, strict=True)
        ]
    return outputs


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write_webdataset(segments, out: Path, shard: str, sample_rate: int, columns=None) -> list[tuple[str, str]]:
    members = []
    with (
        atomic_open(out / f"{shard}.tar", "wb") as f,
        tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for item, d, audio, arrays in segments:
            key = d["key"]
            _add(tar, f"{key}.flac", audio)
            _add(tar, f"{key}.json", json.dumps(item, ensure_ascii=False, sort_keys=True).encode("utf-8"))
            for kind, a in arrays.items():
                _add(tar, f"{key}.{kind}.npy", _npy_bytes(a))
            members.append((f"{shard}.tar:{key}.flac", d["sha256"]))
    return members


def write_nemo_tarred(segments, out: Path, shard: str, sample_rate: int, columns=None) -> list[tuple[str, str]]:
    n = shard_number(shard)
    lines, members = [], []
    with (
        atomic_open(out / f"audio_{n}.tar", "wb") as f,
        tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for item, d, audio, _arrays in segments:
            name = f"{d['key']}.flac"
            _add(tar, name, audio)
            own = {k: v for k, v in item.items() if k != "channel"}  # the member is that channel alone
            lines.append(
                {**own, "audio_filepath": name, "offset": 0.0, "shard_id": n, "duration": d["samples"] / sample_rate}
            )
            members.append((f"audio_{n}.tar:{name}", d["sha256"]))
    write_jsonl(out / f"manifest_{n}.json", lines)
    return members


# format -> writer(segments, format dir, shard, sample rate, Parquet column types):
# (member or row, sha256 of its audio) per segment
WRITERS = {
    "webdataset": write_webdataset,
    "parquet": write_parquet,
    "lhotse_shar": write_lhotse_shar,
    "nemo_tarred": write_nemo_tarred,
}


def bucket_edges(durations: list[float], edges: list[float] | None, buckets: int) -> list[float]:
    """``edges`` when given, else the ``buckets``-quantiles of the durations."""
    if edges is not None:
        return [float(e) for e in edges]
    if not durations:
        return []
    qs = np.quantile(np.asarray(durations), np.linspace(0, 1, buckets + 1)[1:-1])
    return [round(float(q), 3) for q in qs]


def run_summary(indexes: list[str], index_out: str, stats_out: str, p: BucketParams, fmt: str | None = None) -> None:
    """Join a format's per-shard indexes into ``index.jsonl`` and write ``stats.json``;
    with ``fmt``, also the files its loader reads for the whole dataset
    (:func:`speechprep.export.layouts.summarize`: the Parquet card, NeMo's
    manifest of all shards and its config keys, in ``stats.json``)."""
    lines = [line for path in indexes for line in read_jsonl(path)]
    extra = summarize(fmt, Path(index_out).parent, [Path(q).name.split(".")[0] for q in indexes], lines)
    write_jsonl(index_out, lines)
    durations = [line["duration"] for line in lines]
    write_json(
        stats_out,
        {
            "segments": len(lines),
            "hours": round(sum(durations) / 3600, 4),
            "bucket_edges": bucket_edges(durations, p.bucket_edges, p.buckets),
            **extra,
        },
    )
