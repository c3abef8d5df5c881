"""The demo pipeline's diarization (an audio_dir dataset: on by default): between VAD and ASR,
it leaves the demo's one-voice files alone, accounts for every VAD segment, ASR reads its
segments, and the RTTM names the speakers curation gave the segments."""

import csv

import pytest
from conftest import jobs_run, read_jsonl

pytestmark = pytest.mark.slow  # the session's demo run

KINDS = ("segments", "rejects", "turns", "speakers", "stats")


def shards(res):
    return sorted(p.stem for p in (res / "shards").glob("shard-*.jsonl"))


def test_diarize_runs_per_shard_and_touches_no_one_voice_file(demo):
    work, out = demo
    res = work / "results" / "demo"
    assert len(jobs_run(out, "diarize")) == 3 and len(jobs_run(out, "diarize_rttm")) == 3
    vad = segments = touched = 0
    for s in shards(res):
        given = list(read_jsonl(res / "vad" / f"{s}.segments.jsonl"))
        got = {k: list(read_jsonl(res / "diarize" / f"{s}.{k}.jsonl")) for k in KINDS}
        ended = [x.get("diarize_source", x["id"]) for x in got["segments"]] + [r["id"] for r in got["rejects"]]
        assert sorted(set(ended)) == sorted(x["id"] for x in given)  # every VAD segment ends once
        touched += len(got["rejects"]) + len({x["diarize_source"] for x in got["segments"] if "diarize_source" in x})
        vad, segments = vad + len(given), segments + len(got["segments"])
        assert all(st["status"] == "ok" and st["speakers"] == 1 for st in got["stats"]), got["stats"]
        assert {st["id"] for st in got["stats"]} == {x["file_id"] for x in given}
        for x in got["segments"]:
            assert x["diarize_speaker"] == "spk0" and not x.get("overlap")
        log = (res / "logs" / "diarize" / f"{s}.log").read_text(encoding="utf-8")
        assert "stage 'curate' env ok" in log
    assert vad == 47 and touched / vad <= 0.02  # issue #25: one voice alone, <= 2% cut or dropped


def test_asr_reads_the_diarized_segments(demo):
    work, _ = demo
    res = work / "results" / "demo"
    for s in shards(res):
        diarized = {x["id"] for x in read_jsonl(res / "diarize" / f"{s}.segments.jsonl")}
        asr = [x for x in read_jsonl(res / "asr" / f"{s}.jsonl")] + list(read_jsonl(res / "asr" / f"{s}.rejects.jsonl"))
        assert {x["id"] for x in asr} == diarized
        assert all(x["diarize_speaker"] == "spk0" for x in read_jsonl(res / "asr" / f"{s}.jsonl"))


def test_rttm_names_the_speakers_curation_gave(demo):
    """Each demo file is one voice: its turns in the RTTM carry the run speaker id curation gave
    its kept segments; the four voices are four ids."""
    work, _ = demo
    res = work / "results" / "demo"
    kept = [x for p in sorted((res / "curate").glob("shard-*[0-9].jsonl")) for x in read_jsonl(p)]
    speaker_of = {x["file_id"]: x["speaker"] for x in kept}
    names = set()
    for s in shards(res):
        lines = (res / "diarize" / f"{s}.rttm").read_text(encoding="utf-8").splitlines()
        turns = list(read_jsonl(res / "diarize" / f"{s}.turns.jsonl"))
        assert len(lines) == len(turns) > 0
        for line in lines:
            f = line.split(" ")
            assert (
                len(f) == 10
                and f[0] == "SPEAKER"
                and f[2] == "1"
                and f[5:7] == ["<NA>", "<NA>"]
                and f[8:] == ["<NA>", "<NA>"]
            )
            if f[1] in speaker_of:
                assert f[7] == speaker_of[f[1]], line
            names.add(f[7])
    assert set(speaker_of.values()) <= names and len(set(speaker_of.values())) == 4


def test_report_counts_what_diarization_did(demo):
    work, _ = demo
    rep = work / "results" / "demo" / "report"
    with open(rep / "curation.csv", encoding="utf-8") as f:
        rows = {(r["kind"], r["name"]): r for r in csv.DictReader(f)}
    for name in ("cut", "multi_speaker", "overlap", "trimmed"):
        assert float(rows["diarize", name]["hours"]) == 0.0
    assert (rep / "diarization_turns.png").read_bytes()[:4] == b"\x89PNG"
    assert "Speaker turns (diarization)" in (rep / "curation.html").read_text(encoding="utf-8")
