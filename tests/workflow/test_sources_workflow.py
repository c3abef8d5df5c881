"""Corpora in their own layout through the workflow (``text: given``): a Kaldi data directory
(two-channel NIST SPHERE behind ``sph2pipe -c`` lines with segments, FLAC behind ``flac -d``
lines, and one bad line of each kind, a command that would write a file among them) and a Common
Voice release (MP3 clips, validated.tsv), of real speech with its human transcripts
(tests/ingest/source_layouts.py). The text and speakers the sources gave reach the TTS
manifests, each line's ``source_id`` maps back to its utterance, and no wav.scp command ran."""

import pytest
from conftest import demo_models, read_jsonl, snakemake, write_config

from tests.ingest.source_layouts import common_voice_dir, kaldi_dir

pytestmark = pytest.mark.slow  # a real snakemake run (two datasets, 21 utterances, the demo run's models)

STAGES = ["vad", "asr", "s2s", "curate", "tts"]


@pytest.fixture(scope="module")
def sources_run(tmp_path_factory, demo):
    work, _ = demo
    tmp = tmp_path_factory.mktemp("sources")
    kaldi = kaldi_dir(tmp / "corpora" / "kaldi" / "data" / "train", bad=True)
    cv = common_voice_dir(tmp / "corpora" / "cv" / "en")
    datasets = {
        "kal": {"kaldi": str(tmp / "corpora" / "kaldi" / "data" / "train"), "text": "given", "shards": 1},
        "cv": {"common_voice": str(tmp / "corpora" / "cv" / "en"), "text": "given", "shards": 1},
    }
    write_config(tmp / "run", datasets, stages=STAGES, **demo_models(work))
    _, out = snakemake(tmp / "run")
    return tmp / "run", {"kal": kaldi, "cv": cv}, out


def tts_lines(work, ds):
    res = work / "results" / ds
    return [x for k in ("train", "val") for x in read_jsonl(res / "tts" / f"{k}_manifest.jsonl")]


@pytest.mark.parametrize("ds", ["kal", "cv"])
def test_the_sources_text_and_speakers_reach_the_tts_manifests(sources_run, ds):
    work, truth, _ = sources_run
    res = work / "results" / ds
    manifest = {m["source_id"]: m for m in read_jsonl(res / "manifest.jsonl")}
    rejects = {r["source_id"]: r["reason"] for r in read_jsonl(res / "rejects" / "ingest.jsonl")}
    assert set(manifest) == set(truth[ds].utterances)
    assert {k: v for k, v in rejects.items() if k != truth[ds].duplicate} == truth[ds].rejects
    lines = tts_lines(work, ds)
    assert len(lines) >= len(truth[ds].utterances) // 2, lines  # real read speech: most utterances are kept
    for x in lines:
        src = truth[ds].utterances[x["source_id"]]
        assert x["id"].rsplit("_", 1)[0] == manifest[x["source_id"]]["id"]  # <manifest id>_0000
        assert (x["text"], x["speaker"], x["text_source"]) == (src["text"], src["speaker"], "given")
        assert x.get("channel") == src.get("channel")
        if "offset" in src:  # within the source's segment, on the file's clock
            assert (
                src["offset"] - 0.01
                <= x["offset"]
                <= x["offset"] + x["duration"]
                <= src["offset"] + src["duration"] + 0.01
            )
    speakers = {s["speaker"]: s for s in read_jsonl(res / "curate" / "speakers.jsonl")}
    assert {x["speaker"] for x in lines} <= set(speakers)
    assert all(s["source"] == "given" for s in speakers.values())


def test_no_wav_scp_command_ran(sources_run):
    work, truth, out = sources_run
    assert truth["kal"].marker is not None and not truth["kal"].marker.exists()
    lines = tts_lines(work, "kal")
    assert {x.get("channel") for x in lines if x["speaker"] == "cards_speaker"} == {1}  # sph2pipe -c 2
