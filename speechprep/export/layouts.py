"""The export formats in the layouts their own loaders read (docs/outputs.md, "Exports").

Per shard (``shard-0003`` is shard number 3, ``000003`` where a loader wants
six digits), each writer writes only that shard's numbered files:

* Parquet: ``parquet/data/train-000003.parquet``, built with the ``datasets``
  features (``audio`` is the ``Audio`` feature, the arrays their own dtype)
  in the schema metadata ``datasets`` reads; the summary writes the dataset
  card ``parquet/README.md`` (``configs``/``data_files`` -> ``data/*.parquet``,
  the features, the row count), so ``datasets.load_dataset("<export>/parquet")``
  reads only the data files, not ``index.jsonl`` or ``stats.json`` beside them.
* Lhotse Shar: ``lhotse_shar/data/cuts.000003.jsonl.gz``,
  ``recording.000003.tar`` and one ``<kind>.000003.tar`` per array, the
  layout ``CutSet.from_shar(in_dir="<export>/lhotse_shar/data")`` reads (it
  takes every file of ``in_dir`` as a field: the indexes stay outside). A shard
  with no segment writes none (every field's list skips it alike).
* NeMo tarred audio (``audio_<n>.tar``, ``manifest_<n>.json``, written in
  :mod:`speechprep.export`): the summary writes ``tarred_audio_manifest.json``
  (every shard's lines, as NeMo's own tarring script does) and puts the
  config keys for all shards (``tarred_audio_filepaths`` brace-expanded as
  ``audio__OP_0..N_CL_.tar``) in ``stats.json``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..io.jsonio import atomic_open, read_jsonl, write_jsonl

log = logging.getLogger("speechprep.export")

DATA = "data"  # the directory a loader is pointed at, inside parquet/ and lhotse_shar/
SPLIT = "train"
# The TTS arrays and the dtype they are written in (speechprep.tts); phoneme_ids only with
# tts.phonemes: a dataset's exports carry the arrays its manifest lines name (array_kinds)
ARRAY_DTYPES = {
    "text_ids": "int32",
    "codes": "int32",
    "condition": "float32",
    "emo_vec": "float32",
    "phoneme_ids": "int32",
}
# Parquet columns the export adds to the manifest fields.
ADDED = ("audio", "sample_rate", *ARRAY_DTYPES, *(f"{k}_path" for k in ARRAY_DTYPES))
PARQUET_ROWS_PER_GROUP = 100  # what `datasets` streams at a time
NEMO_MANIFEST = "tarred_audio_manifest.json"


def shard_number(shard: str) -> int:
    """``3`` from ``shard-0003``: the number of the shard's files in every format."""
    return int(shard.rsplit("-", 1)[-1])


# -- Parquet --------------------------------------------------------------------


def _kind(t: type) -> str | None:
    if t is type(None):
        return None
    if issubclass(t, bool):
        return "bool"
    if issubclass(t, int):
        return "int"
    if issubclass(t, float):
        return "float"
    return "str" if issubclass(t, str) else "json"


def column_types(lines: Iterable[dict]) -> dict[str, str]:
    """Each manifest field's Parquet column type, from every line of the dataset's
    manifests, so that every shard (an empty one too) has the same schema:
    ``bool``, ``int64``, ``float64`` (ints and floats), ``string``, or ``json``
    (any other value, or a mix: a string column of JSON text). A field that is
    null throughout is a string. A TTS array some line names is ``array``
    (:func:`array_kinds`)."""
    signatures = {}  # (fields, their value types) of each line, first seen first: a handful in a dataset
    for line in lines:
        signatures[tuple(line), tuple(map(type, line.values()))] = None
    kinds: dict[str, set[str | None]] = {}  # the columns in the order the lines first name them
    for fields, types in signatures:
        for k, t in zip(fields, types):
            kinds.setdefault(k, set()).add(_kind(t))
    for s in kinds.values():
        s.discard(None)
    out = {}
    for k, s in kinds.items():
        if k in ARRAY_DTYPES:
            if s:
                out[k] = "array"
            continue
        if k in ADDED:
            raise UsageError(f"the manifest field {k!r} is a column the Parquet export adds; rename it")
        if not s or s == {"str"}:
            out[k] = "string"
        elif s == {"bool"}:
            out[k] = "bool"
        elif s == {"int"}:
            out[k] = "int64"
        elif s <= {"int", "float"}:
            out[k] = "float64"
        else:
            out[k] = "json"
    return out


def array_kinds(columns: dict[str, str] | None) -> dict[str, str]:
    """The TTS arrays the dataset's lines name (:func:`column_types`), with their dtype."""
    return {k: v for k, v in ARRAY_DTYPES.items() if (columns or {}).get(k) == "array"}


def parquet_features(columns: dict[str, str], sample_rate: int):
    """The ``datasets`` features of the export's Parquet rows."""
    from datasets import Audio, Features, List, Value

    f = {k: Value("string" if t == "json" else t) for k, t in columns.items() if t != "array"}
    f["audio"] = Audio(sampling_rate=sample_rate)
    f["sample_rate"] = Value("int32")
    for kind, dtype in array_kinds(columns).items():
        f[kind] = List(Value(dtype))
        f[f"{kind}_path"] = Value("string")
    return Features(f)


def _column(values: list, kind: str) -> list:
    if kind == "json":
        return [None if v is None else json.dumps(v, ensure_ascii=False, sort_keys=True) for v in values]
    return values


def parquet_path(out: Path, shard: str) -> Path:
    return out / DATA / f"{SPLIT}-{shard_number(shard):06d}.parquet"


def outcomes(segments) -> list[tuple[dict, dict]]:
    """``(line, outcome)`` per segment of a writer's ``segments``, without reading its audio
    (:class:`speechprep.export.stage.Segments` reads a segment's audio when it is taken)."""
    accepted = getattr(segments, "accepted", None)
    return accepted if accepted is not None else [(s[0], s[1]) for s in segments]


def _parquet_rows(rows: list, sample_rate: int, columns: dict[str, str], schema):
    """One row group's table: ``rows`` of (line, outcome, FLAC bytes, arrays)."""
    import pyarrow as pa

    data = {k: _column([item.get(k) for item, *_ in rows], t) for k, t in columns.items() if t != "array"}
    data["audio"] = [{"bytes": audio, "path": f"{d['key']}.flac"} for _item, d, audio, _a in rows]
    data["sample_rate"] = [sample_rate] * len(rows)
    for kind, dtype in array_kinds(columns).items():
        data[kind] = [
            None if kind not in arrays else np.asarray(arrays[kind], dtype=dtype).reshape(-1) for *_, arrays in rows
        ]
        data[f"{kind}_path"] = [item.get(kind) for item, *_ in rows]
    return pa.table(data, schema=schema)


def write_parquet(segments, out: Path, shard: str, sample_rate: int, columns: dict[str, str]) -> list[tuple[str, str]]:
    """One row per segment: the manifest fields, ``audio`` (FLAC bytes and the
    member name, the ``Audio`` feature), ``sample_rate``, each array as a list in
    its own dtype and its ``.npy`` location as ``<kind>_path``; built and written one row
    group at a time (a group's audio in memory, not the shard's)."""
    import pyarrow.parquet as pq

    schema = parquet_features(columns, sample_rate).arrow_schema
    path = parquet_path(out, shard)
    with atomic_open(path, "wb") as f, pq.ParquetWriter(f, schema) as w:
        # none: no row group at all (`datasets` fails on an empty one)
        for start in range(0, len(segments), PARQUET_ROWS_PER_GROUP):
            rows = segments[start : start + PARQUET_ROWS_PER_GROUP]
            w.write_table(_parquet_rows(rows, sample_rate, columns, schema), row_group_size=PARQUET_ROWS_PER_GROUP)
    member = path.relative_to(out).as_posix()
    return [(f"{member}:{i}", d["sha256"]) for i, (_item, d) in enumerate(outcomes(segments))]


def write_card(out: Path, shards: list[str], rows: int) -> None:
    """``README.md``: the dataset card ``datasets.load_dataset(out)`` and a hub read
    (its ``configs`` name the data files; the features are the data files' own,
    which every shard must share)."""
    import pyarrow.parquet as pq
    from datasets import DatasetInfo, Features, SplitDict, SplitInfo
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    schemas = {s: pq.read_schema(parquet_path(out, s)) for s in shards}
    features = None
    for s, schema in schemas.items():
        f = Features.from_arrow_schema(schema)
        if features is not None and f != features:
            raise UsageError(f"{parquet_path(out, s)} has other columns than the first shard's: rerun its export job")
        features = f
    card = DatasetCardData()
    if features is not None:
        info = DatasetInfo(features=features)
        info.splits = SplitDict({SPLIT: SplitInfo(name=SPLIT, num_examples=rows)})
        DatasetInfosDict({"default": info}).to_dataset_card_data(card)
    configs = {"default": {"data_files": [{"split": SPLIT, "path": f"{DATA}/*.parquet"}]}}
    MetadataConfigs(configs).to_dataset_card_data(card)
    dataset = out.parent.parent.name
    with atomic_open(out / "README.md") as f:
        f.write(f"---\n{card.to_yaml()}\n---\n\n{card_body(dataset, features, rows)}")


FIELD_DOCS = {
    "id": "segment id (unique in the dataset)",
    "audio": "the segment, 16-bit FLAC (`Audio` feature: decodes to an array at `sample_rate`)",
    "sample_rate": "Hz of `audio`",
    "text": "transcript",
    "text_normalized": "spoken form of `text` (what `text_ids` encode)",
    "text_ids": "SentencePiece ids of `text_normalized`",
    "phoneme_ids": "Piper's phoneme ids of `phonemes` (with `tts.phonemes`; stats.json has the map)",
    "codes": "semantic codes: the segment's HuBERT k-means units, one per frame",
    "condition": "speaker conditioning vector (Resemblyzer, L2-normalised)",
    "emo_vec": "emotion/prosody vector (eGeMAPSv02 functionals)",
    "dataset": "the dataset the segment is from",
    "text_normalization": "how `text_normalized` was made: `spoken`, `passed_through`, `failed`, `off`",
    "speaker": "speaker id (one id space across the run's datasets)",
    "language": "language code",
    "tier": "curation quality tier (DNSMOS)",
    "text_ids_len": "length of `text_ids`",
    "codes_len": "length of `codes`",
    "condition_dim": "length of `condition`",
    "emo_vec_dim": "length of `emo_vec`",
    "audio_filepath": "the source recording the segment was cut from",
    "offset": "start of the segment in the source (s)",
    "duration": "length of the segment (s)",
    "source_id": "the corpus's own id of the utterance the segment is from (Kaldi utterance, Common Voice path, ...)",
    "channel": "the channel of the source recording the segment was read from (0-based)",
    "gender": "the speaker's gender, as the input manifest gave it",
    "phonemes": "espeak-ng IPA phonemes of `text_normalized` (with `tts.phonemes`)",
    "pitch_mean": "mean F0 of the voiced frames (Hz; SwiftF0, octave jumps left out)",
    "pitch_std": "standard deviation of that F0 (Hz)",
    "pitch_mean_st": "mean F0 in semitones above 55 Hz",
    "pitch_std_st": "standard deviation of F0 in semitones",
    "monotony": "F0 spread about its straight-line trend (semitones): the smaller, the more monotone",
    "reverb": "decay time estimated from the fastest level falls (s): ranks rooms, not an RT60",
    "snr_db": "signal-to-noise ratio in the speech band against the file's own non-speech (dB)",
    "speaking_rate": "phonemes per second (with `tts.phonemes`), else characters without spaces per second",
    "description": "caption from the binned annotations (`tts.captions`)",
}


def card_body(dataset: str, features, rows: int) -> str:
    lines = [
        f"# {dataset}",
        "",
        f"{rows} speech segments exported by speechprep: audio, transcript and the TTS",
        "training arrays, one row per segment.",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        'ds = load_dataset("path/to/this/directory", split="train")',
        'ds[0]["audio"]  # decoded by datasets (torchcodec); Audio(decode=False) gives the FLAC bytes',
        "```",
        "",
        "| field | type | what |",
        "|-------|------|------|",
    ]
    for name, feature in (features or {}).items():
        what = FIELD_DOCS.get(name, "where the array's `.npy` was" if name.endswith("_path") else "manifest field")
        lines.append(f"| `{name}` | {_type_name(feature)} | {what} |")
    return "\n".join(lines) + "\n"


def _type_name(feature) -> str:
    if feature._type == "List":
        return f"list of {feature.feature.dtype}"
    return feature.dtype if feature._type == "Value" else feature._type


# -- Lhotse Shar ----------------------------------------------------------------


def _lhotse_cut(item: dict, d: dict, audio: bytes, arrays: dict):
    from lhotse import MonoCut, Recording, SupervisionSegment

    rec = Recording.from_bytes(audio, recording_id=d["key"])
    top = ("id", "text", "speaker", "language")
    custom = {k: v for k, v in item.items() if k not in ARRAY_DTYPES and k not in top}
    sup = SupervisionSegment(
        id=item["id"],
        recording_id=rec.id,
        start=0.0,
        duration=rec.duration,
        text=item.get("text"),
        speaker=item.get("speaker"),
        language=item.get("language"),
        custom={"text_normalized": item.get("text_normalized")},
    )
    cut = MonoCut(
        id=item["id"], start=0.0, duration=rec.duration, channel=0, recording=rec, supervisions=[sup], custom=custom
    )
    for kind, a in arrays.items():
        cut = cut.attach_tensor(kind, a)
    return cut


def write_lhotse_shar(segments, out: Path, shard: str, sample_rate: int, columns=None) -> list[tuple[str, str]]:
    """The shard's numbered Shar files in ``out/data/``: written by Lhotse's
    ``SharWriter`` into a directory beside it, then each renamed into place (a
    file of this shard that the new set lacks goes first). Lhotse encodes the
    recordings' FLAC itself (from the same samples): the index gets its members'
    own sha256."""
    from lhotse.shar import SharWriter

    suffix = f".{shard_number(shard):06d}"
    data, tmp = out / DATA, out / f".{shard}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    fields = {"recording": "flac", **{kind: "numpy" for kind in array_kinds(columns)}}
    with SharWriter(str(tmp), fields=fields, shard_size=None, shard_suffix=suffix) as w:
        for item, d, audio, arrays in segments:
            w.write(_lhotse_cut(item, d, audio, arrays))
    recordings = f"recording{suffix}.tar"
    sha = {}
    if segments:  # a shard whose every segment was rejected writes no file
        with tarfile.open(tmp / recordings) as tar:
            sha = {
                m.name: hashlib.sha256(tar.extractfile(m).read()).hexdigest() for m in tar if m.name.endswith(".flac")
            }
    data.mkdir(parents=True, exist_ok=True)
    new = {p.name for p in tmp.iterdir()}
    for old in data.glob(f"*{suffix}.*"):
        if old.name not in new:
            old.unlink()
    for name in sorted(new):
        os.replace(tmp / name, data / name)
    tmp.rmdir()
    return [(f"{DATA}/{recordings}:{item['id']}.flac", sha[f"{item['id']}.flac"]) for item, _d in outcomes(segments)]


# -- NeMo tarred audio ----------------------------------------------------------


def brace_range(numbers: list[int]) -> str:
    """NeMo's brace expansion of ``numbers`` (``_OP_0..3_CL_``, or ``_OP_0,2,5_CL_``)."""
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"_OP_{numbers[0]}..{numbers[-1]}_CL_"
    return "_OP_" + ",".join(map(str, numbers)) + "_CL_"


def _tar_sample_rate(paths: Iterable[Path]) -> int | None:
    """The sample rate of the first audio member of the first non-empty tar."""
    import soundfile as sf

    for path in paths:
        with tarfile.open(path) as tar:
            for m in tar:
                if m.isfile():
                    return sf.info(tar.extractfile(m)).samplerate
    return None


def nemo_summary(out: Path, shards: list[str]) -> dict[str, Any]:
    """``tarred_audio_manifest.json`` (every shard's manifest lines, in shard order)
    and the config keys that read all shards at once, for ``stats.json``."""
    numbers = sorted(shard_number(s) for s in shards)
    write_jsonl(out / NEMO_MANIFEST, (line for n in numbers for line in read_jsonl(out / f"manifest_{n}.json")))
    if not numbers:
        return {}
    where = out.resolve()
    config = {
        "manifest_filepath": str(where / NEMO_MANIFEST),
        "tarred_audio_filepaths": str(where / f"audio_{brace_range(numbers)}.tar"),
        "is_tarred": True,
        "sample_rate": _tar_sample_rate(out / f"audio_{n}.tar" for n in numbers),
    }
    return {"nemo_config": config, "nemo_sharded_manifests": str(where / f"manifest_{brace_range(numbers)}.json")}


def prune(data: Path, shards: list[str]) -> None:
    """Remove the numbered files in ``data`` of shards the dataset no longer has (it
    was sharded anew), so that the loader reads what ``index.jsonl`` lists."""
    numbers = {f"{shard_number(s):06d}" for s in shards}
    for p in sorted(data.glob("*")) if data.is_dir() else []:
        m = re.search(r"[-.](\d{6})\.", p.name)
        if m and m.group(1) not in numbers and not p.name.startswith("."):
            log.warning("removing %s: of a shard this dataset no longer has", p)
            p.unlink()


def summarize(fmt: str | None, out: Path, shards: list[str], lines: list[dict]) -> dict[str, Any]:
    """The files a format's loader reads for the whole dataset (after every shard's
    job); returns what goes into ``stats.json`` besides the counts."""
    if fmt in ("parquet", "lhotse_shar"):
        prune(out / DATA, shards)
    if fmt == "parquet":
        write_card(out, shards, len(lines))
    elif fmt == "nemo_tarred":
        return nemo_summary(out, shards)
    return {}
