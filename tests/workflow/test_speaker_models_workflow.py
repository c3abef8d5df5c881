"""`speakers.model`: a speaker model a lab brings runs every step that embeds a voice:
diarization's windows, curation's embeddings and speakers, the RTTM; and the whole workflow
runs on to the TTS features and manifests and the export, with the same output files and
fields as the built-in model's run (the session's demo run; the export, which that run
leaves out, as docs/outputs.md lists it). Each kind of model a lab brings, built from code
with random weights, in a run of its own (the setting is global): a WeSpeaker-convention
ONNX model, and NeMo's TitaNet (an EncDecSpeakerLabelModel `.nemo`,
speaker_nemo.build_one, restored by NeMo itself). Their thresholds are the defaults, given
as chosen for them. In the ONNX model's run a second dataset (one more voice) sets its own
`diarize_model`, NeMo's tiny Sortformer built from code to hear one voice
(speaker_nemo.one_voice_sortformer): turns from its probabilities through the job, its
windows linked by the ONNX model; every segment accounted for, one speaker a file, its
lines curated. (What turns and overlaps the job makes of a Sortformer's probabilities:
tests/diarize/test_sortformer.py.)"""

import hashlib
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, demo_models, jobs_run, read_jsonl, snakemake, write_config

from speechprep.models.speaker_nemo import TITANET_EMB

pytestmark = pytest.mark.slow  # real snakemake runs
BUILD = (
    "import json, sys; from pathlib import Path; from speechprep.models import speaker_nemo, speaker_onnx; "
    "out = {k: str(v) for k, v in speaker_onnx.build_tiny(Path(sys.argv[1])).items()}; "
    "out['sortformer'] = str(speaker_nemo.one_voice_sortformer(Path(sys.argv[1]) / 'sortformer.nemo')); "
    "out['titanet'] = str(speaker_nemo.build_one('titanet', Path(sys.argv[1]) / 'titanet.nemo')); "
    "print(json.dumps(out))"
)
SORTFORMER_STATS = {"model_windows", "model_windows_full"}  # what a Sortformer's file stats add
VOICES = ("us_male", "scottish")
SORTFORMER_VOICE = "caribbean"
NEMO_VOICE = "us_female"
# the whole workflow: every stage the config can name
RUN_STAGES = ["vad", "asr", "s2s", "curate", "tts", "export"]
STAGES = ("vad", "diarize", "asr", "s2s", "curate", "tts")  # what the demo run (no export) also writes
FORMATS = ("webdataset", "parquet", "lhotse_shar", "nemo_tarred")  # export.formats, the default
ARRAYS = ("text_ids", "codes", "condition", "emo_vec", "phoneme_ids")  # tts.phonemes: espeak, the default
SHARD = re.compile(r"shard-\d{4}")
SEGMENTS = re.compile(r"shard-\d{4}(\.reuse)?")  # a shard's folder of per-segment files, or its reuse store


@pytest.fixture(scope="module")
def lab_models(tmp_path_factory):
    """The tiny models, built from code in one process (NeMo imported once)."""
    out = tmp_path_factory.mktemp("lab_models")
    py = REPO / ".venvs" / "curate" / "bin" / "python"
    p = subprocess.run([str(py), "-c", BUILD, str(out)], capture_output=True, text=True, encoding="utf-8", cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])  # NeMo prints to stdout before it


def lab_run(work, demo_work, model, datasets):
    """The whole workflow in ``work`` with ``model`` as speakers.model, its thresholds the defaults."""
    speakers = {"model": model, "calibrated_for": hashlib.sha256(Path(model).read_bytes()).hexdigest()}
    write_config(work, datasets, **demo_models(demo_work), speakers=speakers, stages=RUN_STAGES)
    _, out = snakemake(work)
    return out


@pytest.fixture(scope="module")
def onnx_run(tmp_path_factory, demo, demo_copy, lab_models):
    """Two of the demo's voices (8 files), diarized and curated with the tiny ONNX model, and a
    third diarized by the Sortformer; the session's demo run (the built-in model) beside it."""
    demo_work, _ = demo
    work = tmp_path_factory.mktemp("onnx_speakers")
    for voice in VOICES:
        shutil.copytree(demo_copy / voice, work / "audio" / voice)
    shutil.copytree(demo_copy / SORTFORMER_VOICE, work / "sf_audio" / SORTFORMER_VOICE)
    datasets = {"two": {"audio_dir": str(work / "audio"), "shards": 1}}
    sortformer = lab_models["sortformer"]
    datasets["sf"] = {"audio_dir": str(work / "sf_audio"), "shards": 1, "diarize_model": sortformer}
    out = lab_run(work, demo_work, lab_models["wespeaker"], datasets)
    return work / "results" / "two", out, demo_work / "results" / "demo"


@pytest.fixture(scope="module")
def nemo_run(tmp_path_factory, demo, demo_copy, lab_models):
    """One voice of the demo (4 files, one shard), the whole workflow with the tiny TitaNet."""
    demo_work, _ = demo
    work = tmp_path_factory.mktemp("nemo_speakers")
    shutil.copytree(demo_copy / NEMO_VOICE, work / "audio" / NEMO_VOICE)
    datasets = {"one": {"audio_dir": str(work / "audio"), "shards": 1}}
    out = lab_run(work, demo_work, lab_models["titanet"], datasets)
    return work / "results" / "one", out, demo_work / "results" / "demo"


def outputs(res, stages=STAGES) -> set[str]:
    """The stages' output files, shard names as one, a segment's own files (in its shard's
    folder: the unit WAVs, the TTS arrays) as one ``*`` per folder and suffix."""
    found = set()
    for stage in stages:
        for p in (res / stage).rglob("*"):
            if not p.is_file():
                continue
            parts = list(p.relative_to(res).parts)
            if any(SEGMENTS.fullmatch(x) for x in parts[:-1]) and not p.name.startswith("."):
                parts[-1] = "*" + p.suffix
            found.add(SHARD.sub("shard-0000", "/".join(parts)))
    return found


def export_files(shards: int) -> set[str]:
    """What export writes for a dataset of ``shards`` shards (docs/outputs.md, "Exports"),
    Snakemake's and the job's working files aside."""
    out = {f"export/shard-{i:04d}.rejects.jsonl" for i in range(shards)}
    out |= {f"export/.lines/shard-{i:04d}.jsonl" for i in range(shards)} | {"export/.lines/columns.json"}
    for fmt in FORMATS:
        out |= {f"export/{fmt}/index.jsonl", f"export/{fmt}/stats.json"}
        out |= {f"export/{fmt}/shard-{i:04d}.index.jsonl" for i in range(shards)}
    for i in range(shards):
        out |= {f"export/webdataset/shard-{i:04d}.tar", f"export/parquet/data/train-{i:06d}.parquet"}
        out |= {f"export/nemo_tarred/audio_{i}.tar", f"export/nemo_tarred/manifest_{i}.json"}
        shar = (f"cuts.{i:06d}.jsonl.gz", f"recording.{i:06d}.tar", *(f"{k}.{i:06d}.tar" for k in ARRAYS))
        out |= {f"export/lhotse_shar/data/{n}" for n in shar}
    return out | {"export/parquet/README.md", "export/nemo_tarred/tarred_audio_manifest.json"}


def keys(lines) -> set[str]:
    return set().union(*map(set, lines))


# the lines whose fields a lab model's run writes as the built-in model's (the demo run's, its
# shards together); with a Sortformer, its file stats add SORTFORMER_STATS
LINES = (
    "diarize/shard-*.stats.jsonl",
    "curate/shard-*[0-9].jsonl",
    "curate/speakers.jsonl",
    "tts/shard-*.normalized.jsonl",
    "tts/shard-*.features.jsonl",
    "tts/shard-*.text.jsonl",
)


def fields(res, pattern) -> set[str]:
    return keys(x for p in sorted(res.glob(pattern)) for x in read_jsonl(p))


def same_outputs_and_fields(res, ref, sortformer=False):
    """``res`` (a lab model's run) writes the demo run's output files with its fields, and the
    export (which the demo run leaves out) as documented, its lines the TTS manifests'."""
    assert outputs(res) == outputs(ref)
    for pattern in LINES:
        ours = fields(res, pattern)
        assert ours and ours <= fields(ref, pattern) | (SORTFORMER_STATS if sortformer else set()), pattern
    assert fields(res, "tts/*_manifest.jsonl") == fields(ref, "tts/*_manifest.jsonl")
    ours, theirs = (json.loads((r / "tts" / "stats.json").read_text(encoding="utf-8")) for r in (res, ref))
    assert set(ours) == set(theirs)
    manifest = [x for m in ("train", "val") for x in read_jsonl(res / "tts" / f"{m}_manifest.jsonl")]
    for x in manifest:  # the condition vector is the TTS stage's own encoder's (Resemblyzer), whatever speaks
        assert np.load(x["condition"]).shape == (256,) and x["condition_dim"] == 256

    mark = ".snakemake_timestamp"  # Snakemake's own, in the directory output export/.lines
    assert {f for f in outputs(res, ("export",)) if not f.endswith(mark)} == export_files(1)
    ids = sorted(x["id"] for x in manifest)
    for fmt in FORMATS:
        index = read_jsonl(res / "export" / fmt / "index.jsonl")
        assert sorted(x["id"] for x in index) == ids and keys(index) == {"id", "member", "sha256", "duration"}, fmt
        stats = json.loads((res / "export" / fmt / "stats.json").read_text(encoding="utf-8"))
        nemo = {"nemo_config", "nemo_sharded_manifests"} if fmt == "nemo_tarred" else set()
        assert set(stats) == {"segments", "hours", "bucket_edges"} | nemo and stats["segments"] == len(ids), fmt
    with tarfile.open(res / "export" / "webdataset" / "shard-0000.tar") as tar:
        lines = [json.load(tar.extractfile(m)) for m in tar.getmembers() if m.name.endswith(".json")]
    assert sorted(lines, key=lambda x: x["id"]) == sorted(manifest, key=lambda x: x["id"])
    tarred = read_jsonl(res / "export" / "nemo_tarred" / "tarred_audio_manifest.json")
    assert sorted(x["id"] for x in tarred) == ids and keys(tarred) == keys(manifest) | {"shard_id"}


def test_lab_models_run_diarization_and_curation(onnx_run):
    res, out, ref = onnx_run
    for rule in ("diarize", "curate_measure", "curate_speakers", "diarize_rttm", "tts_features", "export_shard"):
        assert jobs_run(out, rule), rule
    same_outputs_and_fields(res, ref)
    emb = np.load(res / "curate" / "shard-0000.embeddings.npy")
    assert emb.shape[1] == 32 and np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-5)  # the tiny model's
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
    same_outputs_and_fields(sf, ref, sortformer=True)
    stats = read_jsonl(sf / "diarize" / "shard-0000.stats.jsonl")
    assert stats and all(x["status"] == "ok" and x["model_windows"] >= 1 for x in stats)
    log = "\n".join(p.read_text(encoding="utf-8") for p in (sf / "logs" / "diarize").glob("shard-*.log"))
    assert "sortformer.nemo linked by" in log and "wespeaker.onnx" in log
    vad = {x["id"] for x in read_jsonl(sf / "vad" / "shard-0000.segments.jsonl")}
    lines = read_jsonl(sf / "diarize" / "shard-0000.segments.jsonl")
    rejects = read_jsonl(sf / "diarize" / "shard-0000.rejects.jsonl")
    assert {x.get("diarize_source", x["id"]) for x in lines} | {r["id"] for r in rejects} == vad
    assert all(x["speakers"] == 1 and x["overlap"] == 0 for x in stats)  # one voice heard
    assert read_jsonl(sf / "curate" / "shard-0000.jsonl")  # and its lines curated


def test_a_nemo_speaker_model_runs_the_whole_workflow(nemo_run):
    """TitaNet (a `.nemo` NeMo restores) embeds diarization's windows and curation's segments."""
    res, out, ref = nemo_run
    for rule in ("diarize", "curate_measure", "curate_speakers", "diarize_rttm", "tts_features", "export_shard"):
        assert jobs_run(out, rule), rule
    same_outputs_and_fields(res, ref)
    emb = np.load(res / "curate" / "shard-0000.embeddings.npy")
    assert emb.shape[1] == TITANET_EMB and np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-5)
    speakers = read_jsonl(res / "curate" / "speakers.jsonl")
    assert speakers and np.load(speakers[0]["centroid"]).shape == (TITANET_EMB,)
    assert all(x["speaker"] for x in read_jsonl(res / "curate" / "shard-0000.jsonl"))
    for step in ("curate", "diarize"):
        log = "\n".join(p.read_text(encoding="utf-8") for p in (res / "logs" / step).glob("shard-*.log"))
        assert "titanet.nemo" in log, step
