"""Every export format read by its library's own loader exactly as its documentation
shows it, over every shard at once: a real-speech dataset in three shards, the
middle one empty (its every segment rejected) (tests/export_data.py). Lhotse's
``CutSet.from_shar(in_dir=...)`` (audio, every custom array, a bucketing
sampler's pass), ``datasets.load_dataset(<dir>)`` (the ``Audio`` feature, the
arrays' own dtypes, the dataset card), WebDataset over the brace-expanded shard
list. A run with only some formats reads back; a shard rerun empty leaves none
of its files. (NeMo's tarred dataset over all shards: tests/asr/test_export_nemo.py.)"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import soundfile as sf
import yaml

from speechprep.export import stage as export
from speechprep.export.layouts import ARRAY_DTYPES
from speechprep.export.params import BucketParams
from speechprep.io.npyio import load_ref
from tests.export_data import SHARDS, export_dataset, kept, make_dataset, write_manifests

SR = 16000
TOL = 1.5 / 32767  # FLAC is 16-bit: within one quantisation step of the float cut


def same_audio(x: np.ndarray, line: dict) -> None:
    ref = export.cut(line, SR, None)
    assert len(x) == len(ref) and abs(len(x) - line["duration"] * SR) <= 1
    assert np.max(np.abs(x - ref)) <= TOL


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("loaders")
    by_shard = make_dataset(root)
    return export_dataset(root, export.FORMATS), kept(by_shard)


def lhotse_cuts(out):
    from lhotse import CutSet

    return CutSet.from_shar(in_dir=out / "lhotse_shar" / "data")


def hf_rows(out, cache):
    """The rows as ``load_dataset`` on the directory gives them, audio as stored
    (decoding needs torchcodec, which the CPU torch here cannot load)."""
    from datasets import Audio, load_dataset

    ds = load_dataset(str(out / "parquet"), split="train", cache_dir=str(cache))
    return ds.cast_column("audio", Audio(decode=False))


def test_lhotse_from_shar_reads_every_shard(dataset):
    out, want = dataset
    cuts = list(lhotse_cuts(out))
    assert [c.id for c in cuts] == [x["id"] for x in want]
    for c, line in zip(cuts, want, strict=True):
        (sup,) = c.supervisions
        assert (sup.text, sup.speaker, sup.language) == (line["text"], line["speaker"], line["language"])
        assert c.custom["audio_filepath"] == line["audio_filepath"] and c.sampling_rate == SR
        same_audio(c.load_audio()[0], line)
        for kind in ARRAY_DTYPES:
            a = c.load_custom(kind)
            np.testing.assert_array_equal(a, load_ref(line[kind]))
            np.testing.assert_array_equal(getattr(c, f"load_{kind}")(), a)
    names = sorted(p.name for p in (out / "lhotse_shar" / "data").iterdir())
    assert names == sorted(f"{f}.{n:06d}.{ext}" for n in (0, 2) for f, ext in FIELDS)  # shard 1 is empty


FIELDS = [("cuts", "jsonl.gz"), ("recording", "tar"), *((k, "tar") for k in ARRAY_DTYPES)]


def test_lhotse_bucketing_sampler_pass(dataset):
    from lhotse import CutSet
    from lhotse.dataset import DynamicBucketingSampler

    out, want = dataset
    cuts = CutSet.from_shar(in_dir=out / "lhotse_shar" / "data", shuffle_shards=True, seed=3)
    sampler = DynamicBucketingSampler(cuts, max_duration=6.0, num_buckets=2, shuffle=True, seed=0)
    batches = [list(b) for b in sampler]
    ids = [c.id for b in batches for c in b]
    assert sorted(ids) == sorted(x["id"] for x in want) and len(batches) > 1
    for b in batches:  # each batch within max_duration, or a single longer cut
        assert len(b) == 1 or sum(c.duration for c in b) <= 6.0
        for c in b:  # the sampler's cuts still load their data
            assert c.load_audio().shape[-1] == round(c.duration * SR) and c.load_codes().dtype == np.int32


def test_datasets_load_dataset_on_the_directory(dataset, tmp_path):
    from datasets import Audio, List, Value, load_dataset

    out, want = dataset
    ds = load_dataset(str(out / "parquet"), split="train", cache_dir=str(tmp_path))
    assert ds.features["audio"] == Audio(sampling_rate=SR)
    for kind, dtype in ARRAY_DTYPES.items():
        assert ds.features[kind] == List(Value(dtype)), kind
    assert ds.features["duration"] == Value("float64") and ds.features["speaker"] == Value("string")
    rows = ds.cast_column("audio", Audio(decode=False))
    assert [r["id"] for r in rows] == [x["id"] for x in want]
    for row, line in zip(rows, want, strict=True):
        for k, v in line.items():
            assert row[f"{k}_path" if k in ARRAY_DTYPES else k] == v, k
        x, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32")
        assert sr == SR == row["sample_rate"] and row["audio"]["path"].endswith(".flac")
        same_audio(x, line)
    table = rows.with_format("arrow", columns=list(ARRAY_DTYPES))[:]  # the arrays as stored
    for kind, dtype in ARRAY_DTYPES.items():
        for i, line in enumerate(want):
            a = table[kind][i].values.to_numpy()
            assert a.dtype == np.dtype(dtype), kind
            np.testing.assert_array_equal(a, load_ref(line[kind]))


def torchcodec_loads() -> bool:
    try:
        import torchcodec.decoders  # noqa: F401
    except (ImportError, OSError, RuntimeError):
        return False
    return True


@pytest.mark.skipif(
    not torchcodec_loads(),
    reason="datasets decodes Audio through torchcodec; PyPI's torchcodec needs CUDA torch (libtorch_cuda), "
    "the export env has the CPU build",
)
def test_datasets_decodes_the_audio_feature(dataset, tmp_path):
    from datasets import load_dataset

    out, want = dataset
    ds = load_dataset(str(out / "parquet"), split="train", cache_dir=str(tmp_path))
    for row, line in zip(ds, want, strict=True):
        assert row["audio"]["sampling_rate"] == SR
        same_audio(np.asarray(row["audio"]["array"], dtype=np.float32), line)


def test_the_dataset_card(dataset):
    out, want = dataset
    text = (out / "parquet" / "README.md").read_text(encoding="utf-8")
    _, header, body = text.split("---\n", 2)
    meta = yaml.safe_load(header)
    assert meta["configs"] == [{"config_name": "default", "data_files": [{"split": "train", "path": "data/*.parquet"}]}]
    info = meta["dataset_info"]
    assert info["splits"][0]["num_examples"] == len(want)
    columns = [f["name"] for f in info["features"]]
    assert {"id", "audio", "text", *ARRAY_DTYPES} <= set(columns)
    for name in columns:  # every field described in the body
        assert f"| `{name}` |" in body, name


def test_webdataset_reads_every_shard(dataset):
    import webdataset as wds

    out, want = dataset
    samples = list(wds.WebDataset(str(out / "webdataset" / "shard-{0000..0002}.tar"), shardshuffle=False))
    assert [json.loads(s["json"])["id"] for s in samples] == [x["id"] for x in want]
    for s, line in zip(samples, want, strict=True):
        x, sr = sf.read(io.BytesIO(s["flac"]), dtype="float32")
        assert sr == SR
        same_audio(x, line)
        for kind in ARRAY_DTYPES:
            np.testing.assert_array_equal(np.load(io.BytesIO(s[f"{kind}.npy"])), load_ref(line[kind]))


def test_nemo_config_names_every_shard(dataset):
    out, want = dataset
    stats = json.loads((out / "nemo_tarred" / "stats.json").read_text(encoding="utf-8"))
    cfg = stats["nemo_config"]
    nemo = out.resolve() / "nemo_tarred"
    assert cfg == {
        "manifest_filepath": str(nemo / "tarred_audio_manifest.json"),
        "tarred_audio_filepaths": str(nemo / "audio__OP_0..2_CL_.tar"),
        "is_tarred": True,
        "sample_rate": SR,
    }
    lines = [json.loads(x) for x in (nemo / "tarred_audio_manifest.json").read_text(encoding="utf-8").splitlines()]
    assert [x["id"] for x in lines] == [x["id"] for x in want]
    assert [x["shard_id"] for x in lines] == [0, 0, 0, 2, 2, 2]


def wds_ids(out, _tmp):
    import webdataset as wds

    return [
        json.loads(s["json"])["id"]
        for s in wds.WebDataset(str(out / "webdataset" / "shard-{0000..0002}.tar"), shardshuffle=False)
    ]


def nemo_ids(out, _tmp):
    text = (out / "nemo_tarred" / "tarred_audio_manifest.json").read_text(encoding="utf-8")
    return [json.loads(x)["id"] for x in text.splitlines()]


# what a trainer of each format reads: the segment ids
READERS = {
    "lhotse_shar": lambda out, _tmp: [c.id for c in lhotse_cuts(out)],
    "parquet": lambda out, tmp: [r["id"] for r in hf_rows(out, tmp)],
    "webdataset": wds_ids,
    "nemo_tarred": nemo_ids,
}


@pytest.mark.parametrize("formats", [("lhotse_shar",), ("parquet", "nemo_tarred")])
def test_a_run_with_some_formats_reads_back(tmp_path, formats):
    want = kept(make_dataset(tmp_path))
    out = export_dataset(tmp_path, formats)
    assert sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")) == sorted(formats)
    for fmt in formats:
        assert sorted(READERS[fmt](out, tmp_path / "cache")) == sorted(x["id"] for x in want), fmt


def test_a_shard_rerun_empty_leaves_none_of_its_files(tmp_path):
    by_shard = make_dataset(tmp_path)
    formats = ("lhotse_shar", "parquet", "webdataset")
    out = export_dataset(tmp_path, formats)
    assert list((out / "lhotse_shar" / "data").glob("*.000000.*"))
    for line in by_shard["shard-0000"]:  # its sources vanish: the rerun rejects its every segment
        line["audio_filepath"] = str(tmp_path / "gone.wav")
    write_manifests(tmp_path, by_shard)
    export_dataset(tmp_path, formats)
    assert not list((out / "lhotse_shar" / "data").glob("*.000000.*"))
    want = sorted(x["id"] for x in by_shard[SHARDS[2]])
    for fmt in formats:
        assert sorted(READERS[fmt](out, tmp_path / "cache")) == want, fmt


def test_files_of_a_shard_the_dataset_no_longer_has_go(tmp_path):
    """Sharded anew into fewer shards: the summary removes the numbered files of the
    shards that are gone, so the loaders read what index.jsonl lists."""
    by_shard = make_dataset(tmp_path)
    formats = ("lhotse_shar", "parquet")
    out = export_dataset(tmp_path, formats)
    for fmt in formats:
        d = out / fmt
        indexes = [str(d / f"{s}.index.jsonl") for s in SHARDS[:2]]
        export.run_summary(indexes, str(d / "index.jsonl"), str(d / "stats.json"), BucketParams(None, 4), fmt)
    assert not list(out.glob("*/data/*000002*"))
    want = sorted(x["id"] for x in by_shard[SHARDS[0]])
    for fmt in formats:
        assert sorted(READERS[fmt](out, tmp_path / "cache")) == want, fmt


def test_column_types_are_the_whole_datasets():
    """One Parquet type per manifest field from every line (so every shard, an empty
    one too, has the same schema), in the order the lines first name the fields."""
    from speechprep.export.layouts import column_types

    lines = [
        {"id": "a", "n": 1, "x": 1, "ok": True, "words": [{"w": "hi"}], "codes": "/c.npy"},
        {"id": "b", "n": 2, "x": 2.5, "ok": None, "words": None, "late": None},
        {"id": "c", "n": None, "x": None, "ok": False, "words": "?", "late": None},
    ]
    assert column_types(lines) == {
        "id": "string",
        "n": "int64",
        "x": "float64",
        "ok": "bool",
        "words": "json",
        "late": "string",
        "codes": "array",  # an array some line names: the exports carry it
    }
    assert list(column_types(lines)) == ["id", "n", "x", "ok", "words", "codes", "late"]
    with pytest.raises(Exception, match="sample_rate"):
        column_types([{"id": "a", "sample_rate": 16000}])
