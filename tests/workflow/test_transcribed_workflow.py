"""The demo's transcribed dataset through the workflow: resources/demo/read (a LibriVox reader
and the cards speaker of pocketsphinx-testdata, real speech with its human transcripts,
``text: given``) with every stage and export, on the session's demo run's models. No ASR model
is built or loaded for it; the human text and ``text_source: "given"`` reach the TTS manifests
and the exports; each real voice is one speaker."""

import json
import tarfile

import pytest
from conftest import DEMO, demo_models, jobs_run, read_jsonl, snakemake, write_config

pytestmark = pytest.mark.slow  # a real snakemake run (ten utterances, the demo run's models)

STAGES = ["vad", "asr", "s2s", "curate", "tts", "export"]
MANIFEST = DEMO / "read" / "manifest.jsonl"
DATASET = {"read": {"manifest": str(MANIFEST), "text": "given", "shards": 1}}


@pytest.fixture(scope="module")
def read_run(tmp_path_factory, demo):
    """(workdir, output) of the read dataset with every stage, on the demo run's S2S models."""
    work, _ = demo
    tmp = tmp_path_factory.mktemp("read")
    write_config(tmp, DATASET, stages=STAGES, **demo_models(work))
    _, out = snakemake(tmp)
    return tmp, out


def given():
    """The input manifest's lines by id (the id of each VAD line's file)."""
    return {x["id"]: x for x in read_jsonl(MANIFEST)}


def file_of(segment_id):
    return segment_id.rsplit("_", 1)[0]  # <file id>_0000: a given utterance is one segment


def check_asr(work, out):
    res = work / "results" / "read"
    assert not jobs_run(out, "demo_asr_model") and not jobs_run(out, "asr_align")
    assert jobs_run(out, "asr") == ["ds=read, shard=shard-0000"]
    log = (res / "logs" / "asr" / "shard-0000.log").read_text(encoding="utf-8")
    assert "utterances keep their given text (no ASR model loaded)" in log
    lines = read_jsonl(res / "asr" / "shard-0000.jsonl")
    rejects = [x for p in ("vad/shard-0000.rejects.jsonl", "asr/shard-0000.rejects.jsonl") for x in read_jsonl(res / p)]
    assert not read_jsonl(res / "rejects" / "ingest.jsonl")
    truth = given()
    assert sorted([file_of(x["id"]) for x in lines] + [file_of(x["id"]) for x in rejects]) == sorted(truth)
    for x in lines:  # the human text, VAD's trim inside the line's own bounds
        src = truth[x["file_id"]]
        assert (x["text"], x["speaker"], x["text_source"]) == (src["text"], src["speaker"], "given")
        assert x["words"] is None and "asr_model" not in x
        assert x["vad_offset"] <= x["offset"] and x["offset"] + x["duration"] <= x["vad_offset"] + x["vad_duration"]
    summary = json.loads((res / "asr" / "summary.json").read_text(encoding="utf-8"))
    assert summary["text_source"] == {"given": len(lines)} and summary["models"] == []
    return lines


def test_given_text_kept_without_an_asr_model(read_run):
    lines = check_asr(*read_run)
    assert len(lines) >= 8, lines  # real read speech: VAD finds speech in (nearly) every line


def check_tts_and_exports(work):
    res = work / "results" / "read"
    truth = given()
    tts = [x for k in ("train", "val") for x in read_jsonl(res / "tts" / f"{k}_manifest.jsonl")]
    kept = [x for p in sorted((res / "curate").glob("shard-*[0-9].jsonl")) for x in read_jsonl(p)]
    assert tts and {x["id"] for x in tts} <= {x["id"] for x in kept}
    for x in tts:
        src = truth[file_of(x["id"])]
        assert (x["text"], x["text_source"], x["speaker"]) == (src["text"], "given", src["speaker"])
    # each real voice is one speaker, its given one
    speakers = {s["speaker"]: s for s in read_jsonl(res / "curate" / "speakers.jsonl")}
    assert set(speakers) == {truth[file_of(x["id"])]["speaker"] for x in kept}
    assert all(s["source"] == "given" for s in speakers.values()), speakers
    # the exports carry the manifests' text and text_source (WebDataset: each member's json)
    by_id = {x["id"]: x for x in tts}
    seen = {}
    for tar in sorted((res / "export" / "webdataset").glob("*.tar")):
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                if m.name.endswith(".json"):
                    item = json.loads(t.extractfile(m).read().decode("utf-8"))
                    seen[item["id"]] = (item["text"], item["text_source"])
    assert seen == {i: (x["text"], x["text_source"]) for i, x in by_id.items()}
    return tts


def test_the_human_text_reaches_the_tts_manifests_and_exports(read_run):
    work, _ = read_run
    assert len(check_tts_and_exports(work)) >= 5
