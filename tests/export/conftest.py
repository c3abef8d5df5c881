"""Shared by the export tests: a kept-segment shard as the TTS stage leaves it
(demo audio, manifest lines, feature .npy files), the export parameters from
config/config.yaml, and a run of the shard job."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from speechprep.export import stage as export
from speechprep.export.params import BucketParams, ExportParams
from speechprep.io.jsonio import write_jsonl
from speechprep.io.npyio import pack_npy, save_npy
from tests.support import config, demo_segments

warnings.simplefilter("ignore")

CFG = config()["export"]
# Ids a file name or a webdataset key cannot take as they are: a dot, non-ASCII, long.
ODD_IDS = {1: "spk.one/ünïcode_0001", 2: "x" * 300}


def params(**kw) -> ExportParams:
    return ExportParams.from_dict({k: v for k, v in {**CFG, **kw}.items() if k not in ("bucket_edges", "buckets")})


def make_shard(root: Path, n: int = 6, missing_audio: int | None = None, layout: str = "files") -> list[dict]:
    """``root/tts/train_manifest.jsonl`` (+ an empty val manifest) and the shard's
    features index and arrays (one file per segment, or packed per kind as
    ``tts.layout: packed`` leaves them); the manifest lines, in shard order."""
    rng = np.random.default_rng(0)
    segs = demo_segments(n, text=True)
    lines, packs = [], {}
    for k, seg in enumerate(segs):
        id_ = ODD_IDS.get(k, seg["id"])
        line = {"id": id_, "dataset": "demo", "text": seg["text"], "text_normalized": seg["text"].upper()}
        line.update(audio_filepath=seg["audio_filepath"], offset=seg["offset"], duration=seg["duration"])
        line.update(speaker=f"spk{k % 2}", language="en")
        if k == missing_audio:
            line["audio_filepath"] = str(root / "gone.wav")
        d = root / "tts" / "shard-0000"
        stem = export.member_key(id_)
        arrays = {
            "text_ids": rng.integers(0, 256, 5 + k, dtype=np.int32),
            "codes": rng.integers(0, 500, 40 + k, dtype=np.int32),
            "condition": rng.standard_normal(256).astype(np.float32),
            "emo_vec": rng.standard_normal(88).astype(np.float32),
        }
        for kind, a in arrays.items():
            packs.setdefault(kind, []).append(a)
            if layout == "files":
                save_npy(d / kind / f"{stem}.npy", a)
                line[kind] = str(d / kind / f"{stem}.npy")
        lines.append(line)
    if layout == "packed":
        for kind, arrays in packs.items():
            where = pack_npy(root / "tts" / "shard-0000" / kind / "packed.npy", arrays, arrays[0].dtype)
            for line, r in zip(lines, where):
                line[kind] = r
    write_jsonl(root / "tts" / "train_manifest.jsonl", lines[1:])
    write_jsonl(root / "tts" / "val_manifest.jsonl", lines[:1])
    # the shard also held a segment curation dropped: not in any manifest, not exported
    write_jsonl(root / "tts" / "shard-0000.features.jsonl", [{"id": "dropped_0000"}] + [{"id": x["id"]} for x in lines])
    return lines


def run(root: Path, p: ExportParams | None = None) -> dict:
    tts, lines = root / "tts", root / "export" / ".lines"
    manifests = [str(tts / "train_manifest.jsonl"), str(tts / "val_manifest.jsonl")]
    export.run_lines(
        manifests,
        [str(tts / "shard-0000.features.jsonl")],
        [str(lines / "shard-0000.jsonl")],
        str(lines / "columns.json"),
    )
    return export.run_shard(
        str(lines / "shard-0000.jsonl"),
        str(lines / "columns.json"),
        str(root / "export"),
        str(root / "export" / "shard-0000.rejects.jsonl"),
        p or params(),
        str(root / "export" / ".partial" / "shard-0000.jsonl"),
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The shard exported in every format, and summarised (segment 3's source audio is missing)."""
    root = tmp_path_factory.mktemp("export")
    lines = make_shard(root, missing_audio=3)
    summary = run(root)
    for fmt in CFG["formats"]:  # each format's summary (the Parquet card, NeMo's manifest of all shards)
        d = root / "export" / fmt
        export.run_summary(
            [str(d / "shard-0000.index.jsonl")],
            str(d / "index.jsonl"),
            str(d / "stats.json"),
            BucketParams(None, 4),
            fmt,
        )
    return root, lines, summary


def read_index(root: Path, fmt: str) -> list[dict]:
    with open(root / "export" / fmt / "shard-0000.index.jsonl", encoding="utf-8") as f:
        return [json.loads(x) for x in f]
