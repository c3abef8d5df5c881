"""Hugging Face datasets on disk as an ingest source (speechprep.ingest.sources.hf).

Datasets saved by ``datasets`` itself (``save_to_disk``, ``to_parquet``) with an ``Audio``
column holding real recordings' bytes (tests/ingest/source_corpora.py: the LibriVox reader,
the cards speaker, the ALSA voice, with their text) in the formats datasets on the Hub hold:
16-bit WAV, FLAC, MP3 (sox's libmp3lame), float WAV. ``datasets`` encodes Audio only through
torchcodec, so the tables are built in Arrow with the ``Audio`` feature's schema and wrapped
in a ``datasets.Dataset``, as its own readers build them."""

import io
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("datasets")

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Audio, Dataset, DatasetDict, Features, Value
from datasets.table import InMemoryTable

from speechprep.errors import UsageError
from speechprep.ingest.sources import READERS, Collect
from tests import real_speech
from tests.ingest import source_corpora as corpora


def read(spec, audio_dir):
    out = Collect(str(audio_dir))
    READERS["hf"](spec, out)
    return out


def by_id(out):
    return {x["source_id"]: x for x in out.lines}


def encoded(path, kind):
    """A real recording's bytes as a dataset would hold them: ``wav`` (16-bit), ``flac``,
    ``mp3`` (sox), ``float`` (32-bit float WAV)."""
    x, sr = real_speech.read(path)
    buf = io.BytesIO()
    if kind == "mp3":
        if shutil.which("sox") is None:
            pytest.skip("sox is not installed")
        wav = io.BytesIO()
        sf.write(wav, x, sr, format="WAV", subtype="PCM_16")
        p = subprocess.run(["sox", "-R", "-t", "wav", "-", "-t", "mp3", "-"], input=wav.getvalue(), capture_output=True)
        assert p.returncode == 0, p.stderr
        return p.stdout
    fmt, subtype = {"wav": ("WAV", "PCM_16"), "flac": ("FLAC", "PCM_16"), "float": ("WAV", "FLOAT")}[kind]
    sf.write(buf, x, sr, format=fmt, subtype=subtype)
    return buf.getvalue()


FEATURES = Features(
    {"id": Value("string"), "audio": Audio(), "sentence": Value("string"), "speaker_id": Value("int64")}
)
KINDS = ("wav", "flac", "mp3", "float")


def dataset(rows, features=FEATURES):
    """A ``datasets.Dataset`` of ``rows`` (dicts), its Arrow table in ``features``' schema."""
    cols = {k: [r.get(k) for r in rows] for k in features}
    return Dataset(InMemoryTable(pa.table(cols, schema=features.arrow_schema)))


@pytest.fixture(scope="module")
def rows():
    """Each real utterance a row: its bytes in one of KINDS in turn, its text and speaker."""
    out, k = [], 0
    for v in corpora.voices():
        for u in v.utterances:
            kind = KINDS[k % len(KINDS)]
            out.append({"id": f"utt{k:03d}", "audio": {"bytes": encoded(u.path, kind), "path": f"utt{k:03d}.{kind}"},
                        "sentence": u.text, "speaker_id": int(v.number), "_kind": kind, "_src": u.path})  # fmt: skip
            k += 1
    return out


@pytest.fixture()
def saved(tmp_path, rows):
    """A DatasetDict (train: all but two rows, test: those two) saved by ``save_to_disk``."""
    path = tmp_path / "saved"
    DatasetDict({"train": dataset(rows[:-2]), "test": dataset(rows[-2:])}).save_to_disk(str(path))
    spec = {"path": str(path), "split": "train", "audio_column": "audio", "text_column": "sentence",
            "speaker_column": "speaker_id"}  # fmt: skip
    return spec, rows[:-2]


def files(d):
    return {str(p): p.stat().st_mtime_ns for p in d.rglob("*") if p.is_file()}


def test_rows_become_files_once_losslessly_with_text_and_speakers(tmp_path, saved):
    spec, rows = saved
    audio = tmp_path / "results" / "audio"
    out = read(spec, audio)
    assert not out.rejects
    got = by_id(out)
    assert set(got) == {r["id"] for r in rows}
    for r in rows:
        x = got[r["id"]]
        assert (x["text"], x["speaker"]) == (r["sentence"], str(r["speaker_id"]))
        path = x["audio_filepath"]
        assert path.startswith(str(audio / "hf" / "shard-")) and os.path.isfile(path)
        data = r["audio"]["bytes"]
        info = sf.info(io.BytesIO(data))
        assert x["duration"] == pytest.approx(info.frames / info.samplerate, abs=1e-6)
        if r["_kind"] == "wav":  # 16-bit PCM: FLAC of the same samples, the same rate
            assert path.endswith(".flac")
            y, sr = sf.read(path, dtype="int16")
            ref, ref_sr = sf.read(io.BytesIO(data), dtype="int16")
            assert sr == ref_sr and np.array_equal(y, ref)
        else:  # FLAC as it is; MP3 and float WAV cannot become FLAC without loss: their own bytes
            assert path.endswith({"flac": ".flac", "mp3": ".mp3", "float": ".wav"}[r["_kind"]])
            assert Path(path).read_bytes() == data
    # a resumed ingest writes nothing again; a grown one only the new row's file
    before = files(audio)
    again = read(spec, audio)
    assert again.lines == out.lines and files(audio) == before
    more = tmp_path / "grown"
    extra = {**rows[0], "id": "new-row", "audio": {"bytes": encoded(rows[1]["_src"], "wav"), "path": None}}
    DatasetDict({"train": dataset([*rows, extra])}).save_to_disk(str(more))
    grown = read({**spec, "path": str(more)}, audio)
    after = files(audio)
    assert {k: v for k, v in after.items() if k in before} == before and len(after) == len(before) + 1
    assert by_id(grown)["new-row"]["audio_filepath"] in set(after) - set(before)
    assert {k: v for k, v in by_id(grown).items() if k != "new-row"} == got


def test_parquet_files_read_as_the_saved_dataset(tmp_path, saved):
    """Parquet in the Hub's layout (data/<split>-NNNNN-of-NNNNN.parquet, written by
    ``datasets``' to_parquet) gives the saved dataset's lines."""
    spec, rows = saved
    data = tmp_path / "hub" / "data"
    data.mkdir(parents=True)
    dataset(rows[:5]).to_parquet(str(data / "train-00000-of-00002.parquet"))
    dataset(rows[5:]).to_parquet(str(data / "train-00001-of-00002.parquet"))
    dataset(rows[:1]).to_parquet(str(data / "test-00000-of-00001.parquet"))
    audio = tmp_path / "audio"
    from_parquet = read({**spec, "path": str(tmp_path / "hub")}, audio)
    assert by_id(from_parquet) == by_id(read(spec, audio))


def test_a_relative_audio_dir_gives_absolute_paths(tmp_path, saved, monkeypatch):
    """Ingest's jobs name their results relative to the working directory: the lines' paths
    are absolute all the same."""
    spec, rows = saved
    monkeypatch.chdir(tmp_path)
    out = read(spec, "results/ds/audio")
    assert all(x["audio_filepath"].startswith(str(tmp_path / "results" / "ds" / "audio")) for x in out.lines)


def test_without_an_id_column_a_row_is_its_split_and_index(tmp_path, rows):
    features = Features({"audio": Audio(), "sentence": Value("string")})
    path = tmp_path / "noid"
    dataset([{"audio": r["audio"], "sentence": r["sentence"]} for r in rows[:3]], features).save_to_disk(str(path))
    out = read({"path": str(path), "split": "train", "text_column": "sentence"}, tmp_path / "audio")
    assert [x["source_id"] for x in out.lines] == ["train/0", "train/1", "train/2"]
    assert [x["text"] for x in out.lines] == [r["sentence"] for r in rows[:3]] and "speaker" not in out.lines[0]


def test_bad_rows_each_with_its_own_reason(tmp_path, rows):
    """A duplicate id, bytes no decoder reads, no audio, a path that is not there, text that
    is not UTF-8 (a binary text column): each rejected with its reason, the rest read."""
    features = Features({"id": Value("string"), "audio": Audio(), "sentence": Value("binary")})
    good = [{"id": r["id"], "audio": r["audio"], "sentence": r["sentence"].encode()} for r in rows[:2]]
    shutil.copyfile(rows[4]["_src"], tmp_path / "beside.wav")  # a row that names a file beside the data, no bytes
    good.append({"id": "beside", "audio": {"bytes": None, "path": "beside.wav"}, "sentence": b"beside"})
    bad = [
        {"id": rows[0]["id"], "audio": rows[2]["audio"], "sentence": b"the same id again"},
        {"id": "garbage", "audio": {"bytes": b"RIFF....not audio at all", "path": "x.wav"}, "sentence": b"x"},
        {"id": "silent", "audio": None, "sentence": b"no audio"},
        {"id": "gone", "audio": {"bytes": None, "path": str(tmp_path / "gone.wav")}, "sentence": b"gone"},
        {"id": "latin1", "audio": rows[3]["audio"], "sentence": "café".encode("latin-1")},
    ]
    # pyarrow writes it, as tools other than `datasets` do (save_to_disk and to_parquet would embed
    # the bytes of the file a row names, and refuse a file that is not there)
    path = tmp_path / "bad.parquet"
    pq.write_table(dataset(good + bad, features).data.table, path)
    out = read({"path": str(path), "text_column": "sentence"}, tmp_path / "audio")
    assert [x["source_id"] for x in out.lines] == [rows[0]["id"], rows[1]["id"], "beside"]
    assert out.lines[2]["audio_filepath"] == str(tmp_path / "beside.wav") and "duration" not in out.lines[2]
    assert out.reasons() == {
        rows[0]["id"]: "duplicate_id",
        "garbage": "unreadable",
        "silent": "no_audio",
        "gone": "missing",
        "latin1": "bad_encoding",
    }
    assert len(out.lines) + len(out.rejects) == len(good) + len(bad)
    assert not [p for p in (tmp_path / "audio").rglob("*") if p.is_file() and ".tmp" in p.name]


def test_usage_errors(tmp_path, saved):
    spec, _ = saved
    with pytest.raises(UsageError, match="has splits"):
        read({**spec, "split": None}, tmp_path)
    with pytest.raises(UsageError, match="no column"):
        read({**spec, "text_column": "transcript"}, tmp_path)
    with pytest.raises(UsageError, match="no such file"):
        read({"path": str(tmp_path / "none")}, tmp_path)
    with pytest.raises(UsageError, match="unknown key"):
        read({**spec, "decode": True}, tmp_path)


def test_through_ingest_a_rerun_writes_nothing_again(tmp_path, saved):
    """The ingest stage on a saved dataset: its audio under results/<ds>/audio, the lines with
    their source_id; run again, the same manifest bytes and not one audio file rewritten."""
    from speechprep.ingest import stage
    from speechprep.ingest.params import IngestParams
    from speechprep.io.jsonio import read_jsonl
    from tests.support import config

    spec, rows = saved
    out = tmp_path / "results" / "hfds"
    cfg = {**config(), "datasets": {"hfds": {"hf": spec, "text": "given"}}}
    p = IngestParams.from_config(cfg, "hfds", name="hfds")

    def run():
        stage.run(p, str(out / "manifest.jsonl"), str(out / "rejects.jsonl"), str(out / "shards"), threads=2)
        return (out / "manifest.jsonl").read_bytes(), files(out / "audio")

    first, audio = run()
    lines = {x["source_id"]: x for x in read_jsonl(out / "manifest.jsonl")}
    assert set(lines) == {r["id"] for r in rows} and len(audio) == len(rows)
    text = {r["id"]: r["sentence"] for r in rows}
    assert all(x["audio_filepath"] in audio and x["text"] == text[sid] for sid, x in lines.items())
    assert run() == (first, audio)
