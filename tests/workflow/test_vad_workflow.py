"""The workflow through VAD, as a user runs it: snakemake with env-modules."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import (
    DEMO,
    DEMO_SHARDS,
    REPO,
    TRUTH,
    jobs_run,
    kill_when_checkpointed,
    read_jsonl,
    snakemake,
    start_snakemake,
    write_config,
)

from speechprep.demo.corpus import demo_audio, frame_counts

pytestmark = pytest.mark.slow  # real snakemake runs

STATS_FIELDS = [
    "id",
    "duration",
    "speech_ratio",
    "n_segments",
    "max_speech",
    "min_speech",
    "avg_speech",
    "max_silence",
    "min_silence",
    "avg_silence",
]


def derive_id(rel):
    return rel.rsplit(".", 1)[0].replace("/", "__")


def test_demo_run_writes_contract_outputs(demo):
    work, out = demo
    res = work / "results" / "demo"
    for p in ["manifest.jsonl", "rejects/ingest.jsonl", "vad/stats.csv", "vad/summary.json"]:
        assert (res / p).is_file(), p
    shards = sorted(p.stem for p in (res / "shards").glob("*.jsonl"))
    assert shards == [f"shard-{k:04d}" for k in range(DEMO_SHARDS)]
    for s in shards:
        for kind in ("segments", "stats", "rejects"):
            assert (res / "vad" / f"{s}.{kind}.jsonl").is_file()
        for st in read_jsonl(res / "vad" / f"{s}.stats.jsonl"):
            assert list(st) == STATS_FIELDS
        for seg in read_jsonl(res / "vad" / f"{s}.segments.jsonl"):
            assert set(seg) >= {"id", "file_id", "audio_filepath", "offset", "duration"}
            assert seg["id"].startswith(seg["file_id"] + "_") and len(seg["id"]) == len(seg["file_id"]) + 5
            assert Path(seg["audio_filepath"]).is_absolute()
    header = (res / "vad" / "stats.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.split(",") == STATS_FIELDS
    assert len(jobs_run(out, "vad")) == DEMO_SHARDS


def test_rules_ran_in_their_own_environments(demo):
    work, out = demo
    logs = work / "results" / "demo" / "logs"
    assert "Activating environment modules: speechprep/vad" in out
    ingest_log = (logs / "ingest.log").read_text(encoding="utf-8")
    assert f"stage 'ingest' env ok: prefix={REPO / '.venvs' / 'ingest'}" in ingest_log
    for log in (logs / "vad").glob("*.log"):
        assert f"stage 'vad' env ok: prefix={REPO / '.venvs' / 'vad'}" in log.read_text(encoding="utf-8")


def test_wrong_environment_fails_loudly(tmp_path):
    """What a job does when `module load` silently failed: exit 3, say why."""
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "speechprep",
            "--env-file",
            str(REPO / "envs" / "vad.yaml"),
            "vad",
            "run",
            "--shard",
            "x",
            "--params",
            "{}",
            "--resume",
            "x",
            "--segments",
            "x",
            "--stats",
            "x",
            "--rejects",
            "x",
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    assert p.returncode == 3
    assert "'vad' stage is running outside its environment" in p.stderr
    assert "ten-vad==1.0.6.9 is not installed" in p.stderr


def test_vad_frame_f1_on_clean_files(demo):
    work, _ = demo
    segs = {}
    for p in (work / "results" / "demo" / "vad").glob("*.segments.jsonl"):
        for s in read_jsonl(p):
            segs.setdefault(s["file_id"], []).append((s["offset"], s["offset"] + s["duration"]))
    tp = fp = fn = 0
    clean = [(rel, info) for rel, info in TRUTH["files"].items() if info.get("clean")]
    assert len(clean) >= 12 and len({i["voice"] for _, i in clean}) >= 3
    for rel, info in clean:
        t = frame_counts(segs[derive_id(rel)], [(x["start"], x["end"]) for x in info["speech"]], info["duration"])
        tp, fp, fn = tp + t[0], fp + t[1], fn + t[2]
    f1 = 2 * tp / (2 * tp + fp + fn)
    print(f"frame-level F1 on {len(clean)} clean files: {f1:.4f}")
    assert f1 >= 0.95


def test_every_demo_file_in_stats_or_rejects_with_the_right_reason(demo):
    work, _ = demo
    res = work / "results" / "demo"
    stats = {s["id"] for p in (res / "vad").glob("*.stats.jsonl") for s in read_jsonl(p)}
    rejects = read_jsonl(res / "rejects" / "ingest.jsonl")
    rejects += [r for p in (res / "vad").glob("*.rejects.jsonl") for r in read_jsonl(p)]
    by_id = {r["id"]: r for r in rejects}
    assert len(by_id) == len(rejects) and not (stats & set(by_id))
    assert stats | set(by_id) == {derive_id(rel) for rel in TRUTH["files"]}
    for rel, info in TRUTH["files"].items():
        fid = derive_id(rel)
        if info["expect"] == "ok":
            assert fid in stats, rel
        else:
            r = by_id[fid]
            assert (r["stage"], r["reason"]) == (info["stage"], info["reason"]), rel
            assert r["audio_filepath"].endswith(rel) and r["detail"]
    summary = json.loads((res / "vad" / "summary.json").read_text(encoding="utf-8"))
    assert summary["files"] == len(stats)
    assert summary["rejects_by_reason"] == {"no_speech": 1, "non_finite": 2, "too_short": 1}


def test_rerun_with_nothing_changed_runs_zero_jobs(demo):
    work, _ = demo
    _, out = snakemake(work, "--dry-run")
    assert "Nothing to be done" in out, out[-3000:]


def test_new_files_fill_a_new_shard_and_a_deleted_one_reruns_only_its_own(tmp_path, demo_copy):
    """Files added to a finished run's corpus: ingest reruns, the old shards keep their files
    (their shard files are written with the same bytes), and only the VAD job of the new
    shard runs. A file deleted: only its shard's job runs, and removed.jsonl says so (the VAD
    stage alone: the session's demo run stays as it is)."""
    audio = tmp_path / "audio"
    shutil.copytree(demo_copy, audio)
    write_config(tmp_path, {"demo": {"audio_dir": str(audio), "shards": 3}}, stages=["vad"])
    snakemake(tmp_path)
    res = tmp_path / "results" / "demo"
    before = {p.name: p.read_bytes() for p in (res / "vad").glob("shard-*.jsonl")}
    for k in (98, 99):
        shutil.copy(audio / "us_male" / "clip01.wav", audio / "us_male" / f"clip{k}.wav")
    pending = status(tmp_path)
    assert pending["datasets"]["demo"]["new_files"] == 2 and "ingest" in pending["next_run"], pending
    _, out = snakemake(tmp_path)
    assert len(jobs_run(out, "ingest")) == 1
    assert jobs_run(out, "vad") == ["ds=demo, shard=shard-0003"], out[-4000:]
    assert {k: (res / "vad" / k).read_bytes() for k in before} == before
    ids = {s["id"] for s in read_jsonl(res / "vad" / "shard-0003.stats.jsonl")}
    assert ids == {"us_male__clip98", "us_male__clip99"}
    # a file deleted from the corpus: its own shard alone runs again, without it
    held = next(s.stem for s in (res / "shards").glob("*.jsonl") if "us_male__clip02" in s.read_text(encoding="utf-8"))
    (audio / "us_male" / "clip02.wav").unlink()
    _, out = snakemake(tmp_path)
    assert jobs_run(out, "vad") == [f"ds=demo, shard={held}"], out[-4000:]
    assert "us_male__clip02" not in {s["id"] for s in read_jsonl(res / "vad" / f"{held}.stats.jsonl")}
    removed = list(read_jsonl(res / "removed.jsonl"))
    assert [(r["id"], r["reason"]) for r in removed] == [("us_male__clip02", "deleted")]
    done = status(tmp_path)
    assert done["next_run"] == {} and done["datasets"]["demo"]["removed"] == {"deleted": 1}
    assert (done["datasets"]["demo"]["new_files"], done["datasets"]["demo"]["gone_files"]) == (0, 0)
    assert done["datasets"]["demo"]["files"] == pending["datasets"]["demo"]["files"] + 1  # 2 in, 1 out


def status(workdir):
    """``python -m speechprep.workflow.status --json`` in a run's directory, with its options."""
    cmd = [sys.executable, "-m", "speechprep.workflow.status", "--json", "--configfile", "config.yaml", "--"]
    cmd += ["--profile", str(REPO / "profiles" / "local"), "--cores", "2"]
    p = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, encoding="utf-8", check=True)
    return json.loads(p.stdout)


def test_single_target_builds_only_what_it_needs(tmp_path, demo_copy):
    write_config(tmp_path, {"demo": {"audio_dir": str(demo_copy), "shards": 3}})
    _, out = snakemake(tmp_path, "results/demo/vad/shard-0001.segments.jsonl")
    assert not jobs_run(out, "demo_asr_model") and not jobs_run(out, "asr")
    assert jobs_run(out, "vad") == ["ds=demo, shard=shard-0001"]
    assert not jobs_run(out, "vad_merge")
    vad_dir = tmp_path / "results" / "demo" / "vad"
    assert sorted(p.name for p in vad_dir.glob("*.jsonl")) == [
        "shard-0001.rejects.jsonl",
        "shard-0001.segments.jsonl",
        "shard-0001.stats.jsonl",
    ]


def test_the_ten_thousandth_shard_has_its_jobs(tmp_path, demo_copy):
    """Shard names grow a fifth digit from shard-10000 (a 10^4-hour corpus at shard_hours: 1);
    the rules still match them."""
    write_config(tmp_path, {"demo": {"audio_dir": str(demo_copy), "shards": 10001}}, stages=["vad"])
    _, out = snakemake(tmp_path, "results/demo/vad/shard-10000.segments.jsonl")
    assert jobs_run(out, "vad") == ["ds=demo, shard=shard-10000"]
    assert (tmp_path / "results" / "demo" / "vad" / "shard-10000.stats.jsonl").exists()


def test_other_corpus_from_configfile_manifest_and_plain_cores(tmp_path, demo):
    """`--configfile` with a manifest dataset runs that dataset alone, also
    without a profile (`--cores N`: each rule uses its stage's venv); VAD and ASR."""
    audio = DEMO / "audio"
    lines = [
        json.dumps(
            {"audio_filepath": str(audio / "scottish" / "clip01.wav"), "id": "a", "text": "x", "speaker": "scot"}
        ),
        "{broken",
        json.dumps({"audio_filepath": str(audio / "edge_cases" / "nan_float.wav"), "id": "b"}),
        json.dumps({"audio_filepath": "does/not/exist.wav", "id": "c"}),
    ]
    (tmp_path / "in.jsonl").write_bytes(("\n".join(lines) + "\n").encode() + b'{"id": "\xff"}\n')
    write_config(
        tmp_path,
        {"mine": {"manifest": str(tmp_path / "in.jsonl"), "shards": 2}},
        asr={"model": str(demo[0] / "resources" / "models" / "demo_asr.nemo")},
        stages=["vad", "asr"],
    )
    _, out = snakemake(tmp_path, "--cores", "2", profile=False)
    assert not jobs_run(out, "demo_asr_model")  # the given model is used, not rebuilt
    res = tmp_path / "results"
    assert sorted(p.name for p in res.iterdir() if not p.name.startswith(".")) == ["mine"]  # (.cache: model digests)
    assert len(jobs_run(out, "asr")) == 2 and not jobs_run(out, "s2s")
    ing = {r["reason"] for r in read_jsonl(res / "mine" / "rejects" / "ingest.jsonl")}
    assert ing == {"malformed_line", "bad_encoding", "missing"}
    vad_rejects = [r for p in (res / "mine" / "vad").glob("*.rejects.jsonl") for r in read_jsonl(p)]
    assert [(r["id"], r["reason"]) for r in vad_rejects] == [("b", "non_finite")]
    segs = [s for p in (res / "mine" / "vad").glob("*.segments.jsonl") for s in read_jsonl(p)]
    assert {s["id"] for s in segs} == {"a_0000", "a_0001"}
    assert all(s["speaker"] == "scot" for s in segs)


def long_corpus(root, n=48, seconds=15.0):
    """``n`` files of demo speech, ``seconds`` long each."""
    sr = 16000
    pool = np.concatenate(demo_audio(DEMO / "truth.json"))
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        start = (i * 7919 * sr // 10) % (len(pool) - int(seconds * sr))
        sf.write(root / f"utt{i:03d}.flac", pool[start : start + int(seconds * sr)], sr)


def test_sigkill_mid_shard_then_rerun_resumes(tmp_path):
    long_corpus(tmp_path / "audio")
    ds = {"big": {"audio_dir": str(tmp_path / "audio"), "shards": 1}}
    write_config(tmp_path / "clean", ds, vad={"threads": 1}, stages=["vad"])
    snakemake(tmp_path / "clean")
    write_config(tmp_path / "killed", ds, vad={"threads": 1}, stages=["vad"])
    proc = start_snakemake(tmp_path / "killed")
    scratch = tmp_path / "killed" / "results" / "big" / "vad" / ".partial" / "shard-0000.jsonl"
    kill_when_checkpointed(proc, scratch, 8)
    out_dir = tmp_path / "killed" / "results" / "big" / "vad"
    assert not (out_dir / "shard-0000.segments.jsonl").exists()
    snakemake(tmp_path / "killed", "--unlock")
    _, out = snakemake(tmp_path / "killed")
    log = (tmp_path / "killed" / "results" / "big" / "logs" / "vad" / "shard-0000.log").read_text(encoding="utf-8")
    resumed = int(log.split("already done")[0].split(",")[-1].split()[0])
    assert 8 <= resumed < 48, log
    assert f"{48 - resumed} files to analyse" in log
    clean_dir = tmp_path / "clean" / "results" / "big" / "vad"
    for kind in ("segments", "stats", "rejects"):
        name = f"shard-0000.{kind}.jsonl"
        assert (out_dir / name).read_bytes() == (clean_dir / name).read_bytes(), name
    assert not scratch.exists()
