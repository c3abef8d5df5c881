"""Common Voice releases (speechprep.ingest.sources.common_voice), from real speech: the cards
speaker and French klettres letters as MP3 clips (ffmpeg), validated.tsv as Common Voice writes
it (no quoting), clip_durations.tsv, and one row of each bad kind."""

import shutil

import pytest
import soundfile as sf

from speechprep.errors import UsageError
from speechprep.ingest import stage as ingest
from speechprep.ingest.params import IngestParams
from speechprep.ingest.sources import READERS, Collect
from speechprep.io.jsonio import read_jsonl
from tests.ingest.source_layouts import common_voice_dir
from tests.support import config


def run(tmp_path, ds, name="cv"):
    out = tmp_path / "out"
    p = IngestParams.from_config({**config(), "datasets": {name: ds}}, name, name=name)
    summary = ingest.run(p, str(out / "manifest.jsonl"), str(out / "rejects.jsonl"), str(out / "shards"), threads=2)
    return summary, list(read_jsonl(out / "manifest.jsonl")), list(read_jsonl(out / "rejects.jsonl"))


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    d = tmp_path_factory.mktemp("cv") / "en"
    return d, common_voice_dir(d, bad=True)


def test_every_row_read_or_rejected_with_its_reason(release, tmp_path):
    d, truth = release
    summary, manifest, rejects = run(tmp_path, {"common_voice": str(d), "text": "given", "probe": False})
    by_sid = {m["source_id"]: m for m in manifest}
    assert set(by_sid) == set(truth.utterances)
    durations = dict(
        line.split("\t") for line in (d / "clip_durations.tsv").read_text(encoding="utf-8").split("\n")[1:-1]
    )
    for sid, want in truth.utterances.items():
        m = by_sid[sid]
        assert {k: m.get(k) for k in want} == want
        assert m["id"] == sid and m["duration"] == int(durations[sid]) / 1000  # the release's, not probed
        assert m["sample_rate"] is None
    assert sum('"' in m["text"] for m in manifest) == 1  # a quoted sentence is text, quotes and all
    reasons = {}
    for r in rejects:
        reasons.setdefault(r["source_id"], []).append(r["reason"])
    assert {k: v[0] for k, v in reasons.items() if k != truth.duplicate} == truth.rejects
    assert reasons[truth.duplicate] == ["duplicate_id"]
    rows = (d / "validated.tsv").read_bytes().count(b"\n") - 1
    assert len(manifest) + len(rejects) == rows == summary["inputs"]


def test_probe_reads_the_mp3_headers(release, tmp_path):
    d, truth = release
    _, manifest, _ = run(tmp_path, {"common_voice": str(d), "probe": True})
    for m in manifest:
        info = sf.info(m["audio_filepath"])
        assert (m["sample_rate"], m["duration"]) == (32000, pytest.approx(info.duration))


def test_another_split_and_no_clip_durations(release, tmp_path):
    d, truth = release
    other = tmp_path / "fr"
    shutil.copytree(d, other)
    (other / "clip_durations.tsv").unlink()
    lines = (other / "validated.tsv").read_bytes().split(b"\n")
    (other / "train.tsv").write_bytes(b"\n".join(lines[:3]) + b"\n")
    out = Collect()
    READERS["common_voice"]({"dir": str(other), "split": "train"}, out)
    assert [x["source_id"] for x in out.lines] == sorted(truth.utterances)[:2] and not out.rejects
    assert all("duration" not in x for x in out.lines)  # ingest probes them


def test_a_directory_without_the_split_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"no validated\.tsv"):
        READERS["common_voice"](str(tmp_path), Collect())
