"""The export job on a small kept-segment shard, each format read back with its own
library and compared field by field with the manifest lines; the index's sha256;
a segment whose source audio is missing goes to the rejects; resume."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import soundfile as sf
from conftest import make_shard, params, read_index, run

from speechprep.export import stage as export
from speechprep.export.params import BucketParams
from speechprep.io.jsonio import read_jsonl
from speechprep.io.npyio import load_ref
from tests.support import REPO, kill_when_checkpointed

SR = params().sample_rate
# make_shard's lines, as tts.phonemes off writes them: no phoneme_ids, so the exports carry none
KINDS = [k for k in export.FEATURES if k != "phoneme_ids"]
# FLAC is 16-bit: a sample within one quantisation step of the float cut
TOL = 1.5 / 32767


def fresh_cut(line):
    return export.cut(line, SR, None)


def kept(lines):
    return [x for k, x in enumerate(lines) if k != 3]


def check_features(line, arrays):
    for kind in KINDS:
        np.testing.assert_array_equal(np.asarray(arrays[kind]).reshape(-1), load_ref(line[kind]).reshape(-1))


def test_rejects_and_summary(exported):
    root, lines, summary = exported
    assert summary["ok"] == len(lines) - 1 and summary["rejected"] == 1
    rej = list(read_jsonl(root / "export" / "shard-0000.rejects.jsonl"))
    assert [r["id"] for r in rej] == [lines[3]["id"]]
    assert rej[0]["stage"] == "export" and rej[0]["reason"] and rej[0]["detail"]
    assert not (root / "export" / ".partial" / "shard-0000.jsonl").exists()


def test_webdataset(exported):
    import webdataset as wds

    root, lines, _ = exported
    samples = list(wds.WebDataset(str(root / "export" / "webdataset" / "shard-0000.tar"), shardshuffle=False))
    want = kept(lines)
    assert len(samples) == len(want)
    for s, line in zip(samples, want, strict=True):
        assert s["__key__"] == export.member_key(line["id"]) and "." not in s["__key__"]
        assert json.loads(s["json"]) == line
        x, sr = sf.read(io.BytesIO(s["flac"]), dtype="float32")
        assert sr == SR
        ref = fresh_cut(line)
        assert abs(len(x) - line["duration"] * SR) <= 1 and len(x) == len(ref)
        assert np.max(np.abs(x - ref)) <= TOL
        check_features(line, {k: np.load(io.BytesIO(s[f"{k}.npy"])) for k in KINDS})


def test_index_sha256_matches_members(exported):
    root, lines, _ = exported
    index = read_index(root, "webdataset")
    assert [x["id"] for x in index] == [x["id"] for x in kept(lines)]
    with tarfile.open(root / "export" / "webdataset" / "shard-0000.tar") as tar:
        for x in index:
            member = x["member"].split(":", 1)[1]
            assert hashlib.sha256(tar.extractfile(member).read()).hexdigest() == x["sha256"]
    for fmt, tar_path in (("nemo_tarred", "audio_0.tar"), ("lhotse_shar", "data/recording.000000.tar")):
        with tarfile.open(root / "export" / fmt / tar_path) as tar:
            for x in read_index(root, fmt):
                member = x["member"].split(":", 1)[1]
                assert hashlib.sha256(tar.extractfile(member).read()).hexdigest() == x["sha256"]


def test_parquet(exported, tmp_path):
    from datasets import Audio, load_dataset

    root, lines, _ = exported
    ds = load_dataset(str(root / "export" / "parquet"), split="train", cache_dir=str(tmp_path))
    assert ds.features["audio"] == Audio(sampling_rate=SR)
    ds = ds.cast_column("audio", Audio(decode=False))  # decoding needs torchcodec (tests/export/test_loaders.py)
    want = kept(lines)
    assert len(ds) == len(want) and not {"phoneme_ids", "phoneme_ids_path"} & set(ds.features)  # phonemes off
    index = read_index(root, "parquet")
    for row, line, ix in zip(ds, want, index, strict=True):
        for k, v in line.items():
            if k in KINDS:
                assert row[f"{k}_path"] == v
            else:
                assert row[k] == v, k
        assert hashlib.sha256(row["audio"]["bytes"]).hexdigest() == ix["sha256"]
        x, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32")
        assert sr == SR == row["sample_rate"]
        assert np.max(np.abs(x - fresh_cut(line))) <= TOL
        check_features(line, {k: row[k] for k in KINDS})


def test_lhotse_shar(exported):
    from lhotse import CutSet

    root, lines, _ = exported
    cuts = list(CutSet.from_shar(in_dir=str(root / "export" / "lhotse_shar" / "data")))
    want = kept(lines)
    assert [c.id for c in cuts] == [x["id"] for x in want]
    for c, line in zip(cuts, want, strict=True):
        (sup,) = c.supervisions
        assert (sup.text, sup.speaker, sup.language) == (line["text"], line["speaker"], line["language"])
        assert sup.custom["text_normalized"] == line["text_normalized"]
        assert c.custom["audio_filepath"] == line["audio_filepath"]
        assert abs(c.duration - line["duration"]) <= 1 / SR
        x = c.load_audio()[0]
        assert c.sampling_rate == SR
        assert np.max(np.abs(x - fresh_cut(line))) <= TOL
        check_features(line, {k: c.load_custom(k) for k in KINDS})


def test_nemo_manifest(exported):
    root, lines, _ = exported
    got = list(read_jsonl(root / "export" / "nemo_tarred" / "manifest_0.json"))
    want = kept(lines)
    with tarfile.open(root / "export" / "nemo_tarred" / "audio_0.tar") as tar:
        names = tar.getnames()
    assert [x["audio_filepath"] for x in got] == names
    for m, line in zip(got, want, strict=True):
        assert (m["id"], m["text"], m["shard_id"]) == (line["id"], line["text"], 0)
        assert abs(m["duration"] - line["duration"]) <= 1 / SR


def test_stats_bucket_edges(exported, tmp_path):
    root, _, _ = exported
    idx = str(root / "export" / "parquet" / "shard-0000.index.jsonl")
    export.run_summary([idx], str(tmp_path / "index.jsonl"), str(tmp_path / "stats.json"), BucketParams(None, 4))
    stats = json.loads((tmp_path / "stats.json").read_text(encoding="utf-8"))
    assert stats["segments"] == 5 and len(stats["bucket_edges"]) == 3
    assert stats["bucket_edges"] == sorted(stats["bucket_edges"])
    export.run_summary([idx], str(tmp_path / "index.jsonl"), str(tmp_path / "stats.json"), BucketParams([1.0, 2.0], 4))
    assert json.loads((tmp_path / "stats.json").read_text(encoding="utf-8"))["bucket_edges"] == [1.0, 2.0]


def test_lufs(tmp_path):
    import pyloudnorm

    lines = make_shard(tmp_path, n=2)
    run(tmp_path, params(formats=["parquet"], lufs=-20.0))
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "export" / "parquet" / "data" / "train-000000.parquet").to_pylist()
    assert len(rows) == len(lines)
    for row in rows:
        x, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32")
        meter = pyloudnorm.Meter(sr, block_size=min(0.4, len(x) / sr))
        assert abs(meter.integrated_loudness(x) - (-20.0)) < 0.5


def command(root, formats):
    """The export shard job's command line, once the export lines job (run here, as the
    workflow runs it) has cut the manifests."""
    tts, lines = root / "tts", root / "export" / ".lines"
    speechprep = [sys.executable, "-m", "speechprep", "export"]
    cut = ["lines", "--manifests", str(tts / "train_manifest.jsonl"), str(tts / "val_manifest.jsonl")]
    cut += ["--features", str(tts / "shard-0000.features.jsonl"), "--out", str(lines / "shard-0000.jsonl")]
    r = subprocess.run(
        [*speechprep, *cut, "--columns", str(lines / "columns.json")], cwd=REPO, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    return [
        *speechprep,
        "shard",
        "--lines",
        str(lines / "shard-0000.jsonl"),
        "--columns",
        str(lines / "columns.json"),
        "--features",
        str(tts / "shard-0000.features.jsonl"),
        "--params",
        json.dumps(dict(params(formats=formats).__dict__, formats=formats)),
        "--resume",
        str(root / "export" / ".partial" / "shard-0000.jsonl"),
        "--out-dir",
        str(root / "export"),
        "--rejects",
        str(root / "export" / "shard-0000.rejects.jsonl"),
    ]


@pytest.mark.slow
def test_resume_after_sigkill(tmp_path):
    """Killed with SIGKILL mid-shard, the rerun exports only the unfinished segments."""
    lines = make_shard(tmp_path, n=0)  # every clean demo phrase
    many = [dict(x, id=f"{x['id']}_{r}") for r in range(12) for x in lines]
    from speechprep.io.jsonio import write_jsonl

    write_jsonl(tmp_path / "tts" / "train_manifest.jsonl", many)
    write_jsonl(tmp_path / "tts" / "shard-0000.features.jsonl", [{"id": x["id"]} for x in many])
    cmd = command(tmp_path, ["webdataset"])
    checkpoint = tmp_path / "export" / ".partial" / "shard-0000.jsonl"
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stderr=subprocess.PIPE)
    done = kill_when_checkpointed(proc, checkpoint, 10)
    assert 10 <= done < len(many)
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = [line for line in r.stderr.splitlines() if "to process" in line]
    assert m, r.stderr
    todo = int(m[0].rsplit(",", 1)[1].split()[0])
    assert todo == len(many) - done
    import webdataset as wds

    keys = [
        s["__key__"]
        for s in wds.WebDataset(str(tmp_path / "export" / "webdataset" / "shard-0000.tar"), shardshuffle=False)
    ]
    assert keys == [export.member_key(x["id"]) for x in many]


def test_a_packed_layout_shard_exports_the_same_members(tmp_path):
    """Arrays packed per kind (tts.layout: packed) give the same containers as one file each."""
    a, b = tmp_path / "files", tmp_path / "packed"
    make_shard(a, n=4)
    lines = make_shard(b, n=4, layout="packed")
    assert all("#" in x["codes"] for x in lines)
    formats = ["webdataset", "nemo_tarred", "lhotse_shar"]
    run(a, params(formats=formats))
    run(b, params(formats=formats))
    shar = [f"lhotse_shar/data/{k}.000000.tar" for k in ("recording", *KINDS)]
    for name in ("nemo_tarred/audio_0.tar", *shar):
        assert (a / "export" / name).read_bytes() == (b / "export" / name).read_bytes(), name

    def members(root):  # the webdataset tar's members; the json lines without the array locations
        with tarfile.open(root / "export" / "webdataset" / "shard-0000.tar") as tar:
            out = {m.name: tar.extractfile(m).read() for m in tar}
        for name in [n for n in out if n.endswith(".json")]:
            out[name] = {k: v for k, v in json.loads(out[name]).items() if k not in export.FEATURES}
        return out

    assert members(a) == members(b)
    from lhotse import CutSet

    cuts = list(CutSet.from_shar(in_dir=str(b / "export" / "lhotse_shar" / "data")))
    for line, cut in zip(lines, cuts, strict=True):
        check_features(line, {kind: cut.load_custom(kind) for kind in KINDS})


def test_a_shard_with_every_segment_rejected_still_completes(tmp_path):
    lines = make_shard(tmp_path, n=2)
    for line in lines:
        line["audio_filepath"] = str(tmp_path / "gone.wav")
    from speechprep.io.jsonio import write_jsonl

    write_jsonl(tmp_path / "tts" / "train_manifest.jsonl", lines)
    write_jsonl(tmp_path / "tts" / "val_manifest.jsonl", [])
    summary = run(tmp_path)
    assert summary["ok"] == 0 and summary["rejected"] == len(lines)
    for fmt in params().formats:
        assert read_index(tmp_path, fmt) == []
    assert [r["id"] for r in read_jsonl(tmp_path / "export" / "shard-0000.rejects.jsonl")] == [x["id"] for x in lines]


def test_a_grown_or_shrunk_dataset_rewrites_only_the_lines_of_its_changed_shards(tmp_path):
    """The export's cut of the manifests (what each shard job reads): a new shard's lines
    leave the old shards' files byte-identical, and so does a segment removed from another
    shard; each file holds its shard's lines in the shard's order."""
    from tests import export_data

    by_shard = export_data.make_dataset(tmp_path)
    tts, out = tmp_path / "tts", tmp_path / "export" / ".lines"
    manifests = [str(tts / "train_manifest.jsonl"), str(tts / "val_manifest.jsonl")]
    features = {s: str(tts / f"{s}.features.jsonl") for s in export_data.SHARDS}
    files = {s: out / f"{s}.jsonl" for s in export_data.SHARDS}

    def cut(shards, lines):
        export_data.write_manifests(tmp_path, lines)
        export.run_lines(
            manifests, [features[s] for s in shards], [str(files[s]) for s in shards], str(out / "columns.json")
        )
        return {s: files[s].read_bytes() for s in shards} | {"columns": (out / "columns.json").read_bytes()}

    first = cut(export_data.SHARDS[:2], {**by_shard, "shard-0002": []})
    grown = cut(export_data.SHARDS, by_shard)
    assert {k: grown[k] for k in first} == first  # the column types too: no new field
    assert list(read_jsonl(files["shard-0002"])) == by_shard["shard-0002"]
    assert list(read_jsonl(files["shard-0000"])) == by_shard["shard-0000"]
    shrunk = cut(export_data.SHARDS, {**by_shard, "shard-0002": by_shard["shard-0002"][1:]})
    assert [k for k in grown if shrunk[k] != grown[k]] == ["shard-0002"]
    with pytest.raises(export.UsageError, match="2 shard files named for 3 shards"):
        export.run_lines(manifests, list(features.values()), [str(files[s]) for s in export_data.SHARDS[:2]], "c.json")


def test_lines_are_cut_the_same_with_any_number_of_buckets(tmp_path):
    """The lines go through temporary bucket files (bounded memory): one bucket for every
    shard or several shards to a bucket give the same bytes; a later manifest line of an id
    wins, a line no shard holds is left out, and an id two shards hold goes to both."""
    from tests import export_data

    by_shard = export_data.make_dataset(tmp_path)
    tts = tmp_path / "tts"
    manifests = [str(tts / "train_manifest.jsonl"), str(tts / "val_manifest.jsonl")]
    later = {**by_shard["shard-0000"][1], "text": "said again"}
    with open(manifests[1], "a", encoding="utf-8") as f:  # the id again, and an id of no shard
        f.write(json.dumps(later) + "\n" + json.dumps({**later, "id": "nowhere"}) + "\n")
    index = tts / "shard-0001.features.jsonl"
    index.write_text(json.dumps({"id": later["id"]}) + "\n", encoding="utf-8")  # also in shard-0000
    features = [str(tts / f"{s}.features.jsonl") for s in export_data.SHARDS]

    def cut(buckets):
        out = tmp_path / f"lines-{buckets}"
        out.mkdir()
        files = [str(out / f"{s}.jsonl") for s in export_data.SHARDS]
        counts = export.run_lines(manifests, features, files, str(out / "columns.json"), buckets=buckets)
        assert not [p for p in out.iterdir() if p.name.startswith(".cut-")]  # the buckets' folder is gone
        return counts, {p.name: p.read_bytes() for p in sorted(out.iterdir())}

    counts, one_each = cut(256)
    assert cut(1) == cut(2) == (counts, one_each)
    lines = {s: list(read_jsonl(tmp_path / "lines-256" / f"{s}.jsonl")) for s in export_data.SHARDS}
    assert lines["shard-0000"] == [by_shard["shard-0000"][0], later, *by_shard["shard-0000"][2:]]
    assert lines["shard-0001"] == [later] and lines["shard-0002"] == by_shard["shard-0002"]
    assert counts == {s: len(x) for s, x in lines.items()}
