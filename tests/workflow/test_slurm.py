"""`snakemake --profile profiles/slurm` on a real one-node SLURM (scripts/slurm_test_cluster.sh)."""

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf
from conftest import REPO, read_jsonl, write_config

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="the test SLURM's daemons need root")]
RULES = (
    "ingest",
    "vad",
    "vad_merge",
    "asr",
    "asr_merge",
    "s2s",
    "tts_grammars",
    "tts_normalize",
    "tts_tokenizer",
    "tts_features",
    "tts_text",
    "tts_manifest",
    "tts_combined",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("slurm")
    subprocess.run(["bash", str(REPO / "scripts" / "slurm_test_cluster.sh"), "start", str(d)], check=True, timeout=300)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(d / "slurm.conf")
    yield d
    subprocess.run(["bash", str(REPO / "scripts" / "slurm_test_cluster.sh"), "stop", str(d)], timeout=60)
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old


def slurm_snakemake(workdir, *args, check=True, popen=False):
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--slurm-init-seconds-before-status-checks",
        "5",
        *args,
    ]
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8")
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=1800)
    out = p.stdout + p.stderr
    if check and p.returncode != 0:
        raise AssertionError(f"snakemake (slurm) failed ({p.returncode}):\n{out[-6000:]}")
    return out


def submissions(output):
    """{rule: [SLURM job ids]} from snakemake's output (job blocks and submission lines)."""
    rule_of, current = {}, None
    for line in output.splitlines():
        m = re.match(r"\s*(?:local)?(?:rule|checkpoint) (\w+):$", line)
        if m:
            current = m.group(1)
        m = re.match(r"\s*jobid: (\d+)$", line)
        if m and current:
            rule_of[m.group(1)] = current
    jobs = {}
    for m in re.finditer(r"Job (\d+) has been submitted with SLURM jobid (\d+)", output):
        jobs.setdefault(rule_of[m.group(1)], []).append(m.group(2))
    for m in re.finditer(r"Submitted array job with Snakemake IDs ([\d,]+) and SLURM job ID (\d+)", output):
        for k, sid in enumerate(m.group(1).split(",")):  # array tasks get consecutive ids here
            jobs.setdefault(rule_of[sid], []).append(str(int(m.group(2)) + k))
    return jobs


def jobcomp(cluster):
    """{job id: state} from SLURM's job completion log."""
    out = {}
    for line in (cluster / "jobcomp.txt").read_text(encoding="utf-8").splitlines():
        m = re.search(r"JobId=(\d+)\S*.*JobState=(\w+)", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def same_models(demo_work):
    m = demo_work / "resources" / "models"
    return {
        "asr": {"model": str(m / "demo_asr.nemo")},
        "s2s": {
            "hubert": str(m / "demo_hubert_legacy.pt"),
            "kmeans": str(m / "demo_km.bin"),
            "vocoder": str(m / "demo_vocoder.pt"),
            "vocoder_config": str(m / "demo_vocoder.json"),
        },
    }


@pytest.fixture(scope="module")
def slurm_demo(cluster, demo, demo_copy, tmp_path_factory):
    work = tmp_path_factory.mktemp("slurm_demo")
    write_config(work, {"demo": {"audio_dir": str(demo_copy), "shards": 3}}, **same_models(demo[0]))
    return work, slurm_snakemake(work)


def test_every_stage_ran_as_slurm_jobs(cluster, slurm_demo):
    work, out = slurm_demo
    jobs, comp = submissions(out), jobcomp(cluster)
    for rule in RULES:
        assert jobs.get(rule), f"no SLURM job for rule {rule}: {jobs}"
        for jid in jobs[rule]:
            assert "COMPLETED" in comp.get(jid, []), (rule, jid, comp.get(jid))
    assert "has been submitted with SLURM jobid" in out or "Submitted array job" in out


def test_rules_ran_in_their_environments_on_the_node(slurm_demo):
    work, _ = slurm_demo
    logs = work / "results" / "demo" / "logs"
    for stage, log in (
        ("ingest", logs / "ingest.log"),
        ("vad", logs / "vad" / "shard-0001.log"),
        ("asr", logs / "asr" / "shard-0001.log"),
        ("s2s", logs / "s2s" / "shard-0001.log"),
        ("tts", logs / "tts" / "shard-0001.log"),
    ):
        assert f"stage '{stage}' env ok: prefix={REPO / '.venvs' / stage}" in log.read_text(encoding="utf-8")


def test_outputs_identical_to_the_local_run(slurm_demo, demo):
    work, _ = slurm_demo
    local, remote = demo[0] / "results" / "demo", work / "results" / "demo"
    names = ["manifest.jsonl", "rejects/ingest.jsonl", "vad/stats.csv", "asr/manifest.jsonl"]
    for s in ("shard-0000", "shard-0001", "shard-0002"):
        names += [
            f"vad/{s}.segments.jsonl",
            f"vad/{s}.stats.jsonl",
            f"vad/{s}.rejects.jsonl",
            f"asr/{s}.jsonl",
            f"asr/{s}.rejects.jsonl",
            f"s2s/{s}.rejects.jsonl",
        ]
        strip = lambda rows: [{k: v for k, v in r.items() if k != "wav"} for r in rows]
        assert strip(read_jsonl(remote / f"s2s/{s}.units.jsonl")) == strip(read_jsonl(local / f"s2s/{s}.units.jsonl"))
        for w in (local / "s2s" / s).glob("*.wav"):
            # the same units; the vocoder's float rounding may move a sample by one
            # LSB when it ran its segments in another order (a file the local run added later)
            a, b = sf.read(w, dtype="int16")[0], sf.read(remote / "s2s" / s / w.name, dtype="int16")[0]
            assert len(a) == len(b) and np.abs(a.astype(int) - b).max() <= 1, w.name
    for n in names:
        assert (remote / n).read_bytes() == (local / n).read_bytes(), n
    for split in ("train", "val"):
        here, there = (read_jsonl(r / "tts" / f"{split}_manifest.jsonl") for r in (local, remote))
        assert [x["id"] for x in there] == [x["id"] for x in here] and here
        for a, b in zip(here, there):
            assert a["text"] == b["text"] and a["duration"] == b["duration"]
            for kind in ("text_ids", "codes"):
                assert np.array_equal(np.load(a[kind]), np.load(b[kind])), (a["id"], kind)
            for kind in ("condition", "emo_vec"):
                np.testing.assert_allclose(np.load(b[kind]), np.load(a[kind]), rtol=1e-5, atol=1e-6)


def test_single_target_submits_only_its_job(slurm_demo):
    work, _ = slurm_demo
    target = work / "results" / "demo" / "vad" / "shard-0001.segments.jsonl"
    before = target.read_bytes()
    target.unlink()
    out = slurm_snakemake(work, "results/demo/vad/shard-0001.segments.jsonl")
    submitted = re.findall(r"has been submitted with SLURM jobid|Submitted array job", out)
    assert len(submitted) == 1, out[-4000:]
    assert re.search(r"rule vad:.*?wildcards: ds=demo, shard=shard-0001", out, re.S)
    assert target.read_bytes() == before


def test_cancelled_shard_job_is_resubmitted_and_the_run_completes(cluster, tmp_path):
    from test_vad_workflow import long_corpus

    long_corpus(tmp_path / "audio", n=60, seconds=20.0)
    write_config(
        tmp_path, {"big": {"audio_dir": str(tmp_path / "audio"), "shards": 1}}, vad={"threads": 1}, stages=["vad"]
    )
    proc = slurm_snakemake(tmp_path, popen=True)
    deadline, cancelled = time.monotonic() + 600, None
    scratch = tmp_path / "results" / "big" / "vad" / ".partial" / "shard-0000.jsonl"
    while time.monotonic() < deadline and proc.poll() is None and cancelled is None:
        if scratch.exists() and scratch.read_text(encoding="utf-8").count("\n") > 3:
            running = subprocess.run(
                ["squeue", "-h", "-t", "R", "-o", "%i"], capture_output=True, text=True
            ).stdout.split()
            if running:  # the VAD shard job, checkpointing files as it goes
                subprocess.run(["scancel", running[0]], check=True)
                cancelled = running[0]
        time.sleep(0.2)
    out, _ = proc.communicate(timeout=900)
    assert cancelled, "the shard job finished before it could be cancelled"
    assert proc.returncode == 0, out[-5000:]
    comp = jobcomp(cluster)
    assert "CANCELLED" in comp[cancelled]
    vad_jobs = submissions(out)["vad"]
    assert vad_jobs[0] == cancelled
    retried = vad_jobs[1:]
    assert retried and "COMPLETED" in comp[retried[-1]]
    log = (tmp_path / "results" / "big" / "logs" / "vad" / "shard-0000.log").read_text(encoding="utf-8")
    assert "already done" in log and ", 0 already done" not in log  # resumed from its checkpoint
    stats = read_jsonl(tmp_path / "results" / "big" / "vad" / "shard-0000.stats.jsonl")
    assert len(stats) == 60
    summary = json.loads((tmp_path / "results" / "big" / "vad" / "summary.json").read_text(encoding="utf-8"))
    assert summary["files"] == 60


def test_report_after_the_slurm_run(slurm_demo):
    from test_report import check_report

    check_report(slurm_demo[0])
