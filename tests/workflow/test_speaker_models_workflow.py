"""`speakers.model`: a speaker model a lab brings (here a tiny random WeSpeaker-convention
ONNX model, built from code) runs every step that embeds a voice: diarization's windows,
curation's embeddings and speakers, the RTTM; with the same output files and fields as the
built-in model's run. Its thresholds are the defaults, given as chosen for it. In the same
run a second dataset (one more voice) sets its own `diarize_model`, NeMo's tiny Sortformer
built from code to hear one voice (speaker_nemo.one_voice_sortformer): turns from its
probabilities through the job, its windows linked by the ONNX model; every segment accounted
for, one speaker a file, its lines curated. (What turns and overlaps the job makes of a
Sortformer's probabilities: tests/diarize/test_sortformer.py.)"""

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, demo_models, jobs_run, read_jsonl, snakemake, write_config

pytestmark = pytest.mark.slow  # a real snakemake run
BUILD = (
    "import json, sys; from pathlib import Path; from speechprep.models import speaker_nemo, speaker_onnx; "
    "out = {k: str(v) for k, v in speaker_onnx.build_tiny(Path(sys.argv[1])).items()}; "
    "out['sortformer'] = str(speaker_nemo.one_voice_sortformer(Path(sys.argv[1]) / 'sortformer.nemo')); "
    "print(json.dumps(out))"
)
SORTFORMER_STATS = {"model_windows", "model_windows_full"}  # what a Sortformer's file stats add
VOICES = ("us_male", "scottish")
SORTFORMER_VOICE = "caribbean"
STAGES = ("vad", "diarize", "asr", "s2s", "curate")


def tiny_onnx(out) -> dict[str, str]:
    py = REPO / ".venvs" / "curate" / "bin" / "python"
    p = subprocess.run([str(py), "-c", BUILD, str(out)], capture_output=True, text=True, encoding="utf-8", cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])  # NeMo prints to stdout before it


@pytest.fixture(scope="module")
def onnx_run(tmp_path_factory, demo, demo_copy):
    """Two of the demo's voices (8 files), diarized and curated with the tiny ONNX model; the
    session's demo run (the built-in model) beside it."""
    demo_work, _ = demo
    work = tmp_path_factory.mktemp("onnx_speakers")
    models = tiny_onnx(work / "models")
    model = models["wespeaker"]
    for voice in VOICES:
        shutil.copytree(demo_copy / voice, work / "audio" / voice)
    shutil.copytree(demo_copy / SORTFORMER_VOICE, work / "sf_audio" / SORTFORMER_VOICE)
    speakers = {"model": model, "calibrated_for": hashlib.sha256(Path(model).read_bytes()).hexdigest()}
    sections = {**demo_models(demo_work), "speakers": speakers, "stages": ["vad", "asr", "s2s", "curate"]}
    datasets = {"two": {"audio_dir": str(work / "audio"), "shards": 1}}
    datasets["sf"] = {"audio_dir": str(work / "sf_audio"), "shards": 1, "diarize_model": models["sortformer"]}
    write_config(work, datasets, **sections)
    _, out = snakemake(work)
    return work / "results" / "two", out, demo_work / "results" / "demo"


def outputs(res) -> set[str]:
    """The stages' output files, shard names as one."""
    return {
        str(p.relative_to(res)).replace("shard-0001", "shard-0000")
        for stage in STAGES
        for p in (res / stage).glob("*")
        if p.is_file()
    }


def keys(lines) -> set[str]:
    return set().union(*map(set, lines))


def test_lab_models_run_diarization_and_curation(onnx_run):
    res, out, ref = onnx_run
    for rule in ("diarize", "curate_measure", "curate_speakers", "diarize_rttm"):
        assert jobs_run(out, rule), rule
    assert outputs(res) == outputs(ref)
    emb = np.load(res / "curate" / "shard-0000.embeddings.npy")
    assert emb.shape[1] == 32 and np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-5)  # the tiny model's
    for name in ("curate/shard-0000.jsonl", "curate/speakers.jsonl", "diarize/shard-0000.stats.jsonl"):
        ours, theirs = read_jsonl(res / name), read_jsonl(ref / name)
        assert ours and keys(ours) <= keys(theirs) | SORTFORMER_STATS, name
    kept = read_jsonl(res / "curate" / "shard-0000.jsonl")
    assert all(x["speaker"] for x in kept)
    centroid = np.load(read_jsonl(res / "curate" / "speakers.jsonl")[0]["centroid"])
    assert centroid.shape == (32,)
    log = "\n".join(p.read_text(encoding="utf-8") for p in (res / "logs" / "curate").glob("shard-*.log"))
    assert "wespeaker.onnx" in log
    log = "\n".join(p.read_text(encoding="utf-8") for p in (res / "logs" / "diarize").glob("shard-*.log"))
    assert "wespeaker.onnx" in log and "sortformer" not in log  # this dataset keeps the clustering


def test_a_dataset_diarized_by_its_own_sortformer_accounts_for_every_segment(onnx_run):
    res, _, ref = onnx_run
    sf = res.parent / "sf"
    assert outputs(sf) == outputs(ref)
    stats = read_jsonl(sf / "diarize" / "shard-0000.stats.jsonl")
    assert stats and all(x["status"] == "ok" and x["model_windows"] >= 1 for x in stats)
    assert keys(stats) <= keys(read_jsonl(ref / "diarize" / "shard-0000.stats.jsonl")) | SORTFORMER_STATS
    log = "\n".join(p.read_text(encoding="utf-8") for p in (sf / "logs" / "diarize").glob("shard-*.log"))
    assert "sortformer.nemo linked by" in log and "wespeaker.onnx" in log
    vad = {x["id"] for x in read_jsonl(sf / "vad" / "shard-0000.segments.jsonl")}
    lines = read_jsonl(sf / "diarize" / "shard-0000.segments.jsonl")
    rejects = read_jsonl(sf / "diarize" / "shard-0000.rejects.jsonl")
    assert {x.get("diarize_source", x["id"]) for x in lines} | {r["id"] for r in rejects} == vad
    assert all(x["speakers"] == 1 and x["overlap"] == 0 for x in stats)  # one voice heard
    assert read_jsonl(sf / "curate" / "shard-0000.jsonl")  # and its lines curated
