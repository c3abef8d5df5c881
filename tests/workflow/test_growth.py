"""A corpus grows: the growth run runs the shard jobs of the new shards alone (the export's
too), and the old segments keep their text ids (the tokenizer trained on the first run is
kept); a growth run killed with SIGKILL once the run-wide speakers job has updated its state
resumes, after ``--unlock``, to the outputs of the same growth run left alone (every stage
and export, three demo voices, two new files; both growth runs start from a copy of one
first run, in the same folder)."""

import json
import shutil
import time

import pytest
from conftest import NOT_DIARIZED, demo_models, jobs_run, kill_group, snakemake, start_snakemake, write_config

from speechprep.io.npyio import load_ref

pytestmark = pytest.mark.slow  # a real run of every stage, then two growth runs

VOICES = ("us_male", "us_female", "scottish")
STAGES = ["vad", "asr", "s2s", "curate", "tts", "export"]


def lines(work, pattern):
    """Every line of the files matching ``pattern`` under results/, the run's folder written
    as ``WORK`` (the two runs differ only there)."""
    out = {}
    for path in sorted((work / "results").glob(pattern)):
        text = path.read_text(encoding="utf-8").replace(str(work), "WORK")
        out[str(path.relative_to(work))] = [json.loads(x) for x in text.splitlines() if x.strip()]
    return out


def same(a, b, path=""):
    """``a`` and ``b`` equal, floats to 1e-6 (two processes' float sums)."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-6), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{k}]")
    else:
        assert a == b, path


def text_ids(work):
    """Each TTS manifest line's text ids, by segment id."""
    paths = sorted((work / "results" / "d" / "tts").glob("*_manifest.jsonl"))
    rows = [json.loads(x) for p in paths for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
    return {x["id"]: load_ref(x["text_ids"]).tolist() for x in rows}


def kill_once_speakers_updated(proc, state, since, timeout=600):
    """SIGKILL the run as soon as the speakers job has rewritten its state file."""
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        if state.exists() and state.stat().st_mtime > since:
            kill_group(proc)
            return
        time.sleep(0.2)
    raise AssertionError(f"the speakers job did not update {state} (run ended: {proc.poll()})")


def test_a_growth_run_killed_mid_way_resumes_to_the_same_outputs(tmp_path, demo, demo_copy):
    models, _ = demo
    audio = tmp_path / "audio"
    for v in VOICES:
        shutil.copytree(demo_copy / v, audio / v)
    new = [audio / "us_female" / "clip01.wav", audio / "scottish" / "clip02.wav"]
    aside = tmp_path / "aside"
    aside.mkdir()
    for k, p in enumerate(new):  # kept out of the first run
        shutil.move(p, aside / f"{k}.wav")
    sections = {"stages": STAGES, **demo_models(models), **NOT_DIARIZED}
    work = tmp_path / "work"  # both growth runs run here (the outputs name their folder)
    write_config(work, {"d": {"audio_dir": str(audio), "shard_hours": 0.004}}, **sections)
    snakemake(work)
    first = tmp_path / "first"
    shutil.copytree(work, first, symlinks=True)  # the first run's outputs and records, mtimes kept
    for k, p in enumerate(new):  # the corpus grows
        shutil.move(aside / f"{k}.wav", p)

    shards = lambda: {p.stem for p in (work / "results" / "d" / "shards").glob("shard-*.jsonl")}
    old, ids_before = shards(), text_ids(work)
    _, out = snakemake(work)
    new_shards = shards() - old
    assert new_shards, out[-3000:]
    # the run-wide steps ran again, and wrote the old shards' files of theirs with the same
    # bytes: the old shards' decisions and text ids are not made again
    rules = ("vad", "asr", "s2s", "curate_measure", "curate_annotate", "tts_features", "curate_decide", "tts_text")
    for rule in (*rules, "export_shard"):
        ran = set(jobs_run(out, rule))
        assert ran == {f"ds=d, shard={s}" for s in new_shards}, (rule, out[-3000:])
    ids_after = text_ids(work)
    assert ids_before and {i: ids_after.get(i) for i in ids_before} == ids_before
    patterns = ("d/curate/shard-*[0-9].jsonl", "d/curate/*.rejects.jsonl", "d/tts/*_manifest.jsonl")
    patterns += ("d/export/*/index.jsonl",)
    alone = {pattern: lines(work, pattern) for pattern in patterns}
    new_ids = {x["id"].split("_0")[0] for f in alone["d/tts/*_manifest.jsonl"].values() for x in f}
    assert {"us_female__clip01", "scottish__clip02"} <= new_ids  # the new files reached the manifests

    work.rename(tmp_path / "alone")
    first.rename(work)  # the same growth again from the first run, killed this time
    started = time.time()
    proc = start_snakemake(work)
    state = work / "results" / "_all" / "curate" / "speaker_state.npz"
    kill_once_speakers_updated(proc, state, started)
    snakemake(work, "--unlock")
    snakemake(work)
    for pattern in patterns:
        killed = lines(work, pattern)
        assert alone[pattern].keys() == killed.keys() and killed, pattern
        same(alone[pattern], killed, pattern)
