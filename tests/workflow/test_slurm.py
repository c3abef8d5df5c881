"""`snakemake --profile profiles/slurm` on a real one-node SLURM (scripts/slurm_test_cluster.sh)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import yaml
from conftest import DEMO_SHARDS, REPO, demo_models, read_jsonl, snakemake, write_config

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="the test SLURM's daemons need root")]
RULES = (  # every rule of the run but `all` (the grammars come from the session's cache)
    "ingest",
    "vad",
    "vad_merge",
    "diarize",
    "diarize_rttm",
    "music",
    "asr",
    "asr_merge",
    "s2s_export",
    "s2s",
    "curate_measure",
    "curate_speakers",
    "curate_duplicates",
    "curate_decide",
    "curate_summary",
    "tts_normalize",
    "tts_tokenizer",
    "tts_features",
    "tts_text",
    "tts_manifest",
    "tts_combined",
    "report_plots",
    "report_curation",
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
    # none of its config is left in /etc/slurm: every `scontrol` (the SLURM executor plugin runs
    # one when any Snakemake starts) would wait 9 s for the controller that is gone
    ours = [p for p in Path("/etc/slurm").glob("*.conf") if "written by speechprep" in p.read_text(encoding="utf-8")]
    assert not ours, ours


def slurm_snakemake(workdir, *args, check=True, popen=False, profile=REPO / "profiles" / "slurm"):
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
        str(profile),
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
        for k, sid in enumerate(m.group(1).split(","), start=1):  # task k of the array: <array id>_<k>
            jobs.setdefault(rule_of[sid], []).append(f"{m.group(2)}_{k}")
    return jobs


def jobcomp_records(cluster):
    """(ids, state, MB allocated) per line of SLURM's job completion log; an array task's
    ids are its own job id and ``<array id>_<task>`` (what :func:`submissions` names)."""
    for line in (cluster / "jobcomp.txt").read_text(encoding="utf-8").splitlines():
        m = re.search(r"JobId=(\d+)\S*.*JobState=(\w+)", line)
        if not m:
            continue
        ids = [m.group(1)]
        task = re.search(r"ArrayJobId=(\d+) ArrayTaskId=(\d+)", line)
        if task:
            ids.append(f"{task.group(1)}_{task.group(2)}")
        mem = re.search(r"\bmem=([\d.]+)([MG])", line)  # sacct style: 769M, 2G, 2.50G
        mb = round(float(mem.group(1)) * (1024 if mem.group(2) == "G" else 1)) if mem else None
        yield ids, m.group(2), mb


def jobcomp(cluster):
    """{job id: [states]} from SLURM's job completion log."""
    out = {}
    for ids, state, _ in jobcomp_records(cluster):
        for i in ids:
            out.setdefault(i, []).append(state)
    return out


def jobcomp_memory(cluster):
    """{job id: [(state, MB allocated)]} from SLURM's job completion log (its TRES mem=)."""
    out = {}
    for ids, state, mb in jobcomp_records(cluster):
        for i in ids:
            out.setdefault(i, []).append((state, mb))
    return out


def memory_enforcement(cluster):
    """How the test SLURM kills a job over its --mem (cgroup, overmemorykill); skips if it cannot."""
    mode = (cluster / "memory_enforcement").read_text(encoding="utf-8").strip()
    if mode == "none":
        pytest.skip(
            "the test SLURM cannot enforce --mem on this machine: neither task/cgroup (ConstrainRAMSpace) "
            f"nor jobacct_gather OverMemoryKill killed its probe job (see {cluster}/memory_probe.*.log)"
        )
    return mode


def profile_copy(dest, settings=None, **set_resources):
    """profiles/slurm as it is, with ``settings`` ({key: value}) and ``set_resources``
    ({rule: {resource: value}}) over its own."""
    cfg = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text(encoding="utf-8"))
    cfg.update(settings or {})
    for rule, res in set_resources.items():
        cfg["set-resources"].setdefault(rule, {}).update(res)
    dest.mkdir(parents=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def slurm_demo(cluster, demo, demo_copy, tmp_path_factory):
    work = tmp_path_factory.mktemp("slurm_demo")
    # the session's grammar cache, which the local demo run built (rule tts_grammars is a
    # plain one-command rule in the tts env, as tts_normalize is)
    demo_ds = {"demo": {"audio_dir": str(demo_copy), "shards": DEMO_SHARDS}}
    write_config(work, demo_ds, **demo_models(demo[0]))
    return work, slurm_snakemake(work)


def test_every_stage_ran_as_slurm_jobs(cluster, slurm_demo):
    work, out = slurm_demo
    jobs, comp = submissions(out), jobcomp(cluster)
    for rule in RULES:
        assert jobs.get(rule), f"no SLURM job for rule {rule}: {jobs}"
        for jid in jobs[rule]:
            assert "COMPLETED" in comp.get(jid, []), (rule, jid, comp.get(jid))
    assert "has been submitted with SLURM jobid" in out or "Submitted array job" in out


def test_every_shard_job_fit_its_first_memory_request(cluster, slurm_demo, demo):
    """The shard rules ask for what their job will hold (speechprep.workflow.resources: the shard's
    lines and longest segment, the models, the batch): under enforced memory, every demo
    shard job ran once and COMPLETED with the request computed from its own shard."""
    from speechprep.core.config import defaults
    from speechprep.jobs import JOBS
    from speechprep.workflow.resources import memory_mb, shard_content

    memory_enforcement(cluster)
    work, out = slurm_demo
    jobs, comp = submissions(out), jobcomp_memory(cluster)
    res = work / "results" / "demo"
    for rule in ("vad", "asr", "s2s", "curate_measure", "tts_features"):
        records = [comp.get(j) for j in jobs[rule]]
        ok = [r and [s for s, _ in r] == ["COMPLETED"] for r in records]
        assert len(records) == DEMO_SHARDS and all(ok), (rule, records)
    # each task asked for its shard's request; in an array, the plugin adds a few MB for its payload
    asked = lambda rule: [comp[j][0][1] for j in jobs[rule]]
    vad = memory_mb(JOBS["vad run"].memory, shard_content(res / "manifest.jsonl"), threads=2)
    assert all(vad <= mb <= vad + 64 for mb in asked("vad")), (vad, asked("vad"))
    model = [demo_models(demo[0])["asr"]["model"]]
    shards = res.glob("vad/*.segments.jsonl")
    asr_cfg = defaults(REPO / "config" / "config.yaml")["asr"]  # device auto: the larger of CPU and GPU
    asr = {
        memory_mb(JOBS["asr run"].memory, shard_content(p), model, batch=asr_cfg["batch"], device=asr_cfg["device"])
        for p in shards
    }
    assert len(asr) == 1 and all(min(asr) <= mb <= min(asr) + 64 for mb in asked("asr")), (asr, asked("asr"))


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
    for s in (f"shard-{k:04d}" for k in range(DEMO_SHARDS)):
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


# The OOM test's shard: ordinary files, then (last by name) one 128-channel
# file whose decode blocks (vad.block_seconds = 60 s of float32 samples, and
# their finiteness mask) take ~610 MB on top of the ~250 MB that the VAD job
# holds otherwise (its own processes and the job's snakemake). Attempt 1 of
# the job gets too little memory for that block, attempt 2 enough. Two blocks
# (about two seconds over the limit): OverMemoryKill's 1 s sampling sees it too.
OOM_FILES, OOM_CHANNELS = 10, 128
ATTEMPT1_MB, ATTEMPT2_MB = 500, 2000


def heavy_multichannel_file(path, channels=OOM_CHANNELS, seconds=120.0):
    """An array recording: the same demo speech on every channel (8-bit, to keep the file small)."""
    from speechprep.demo.corpus import demo_audio

    sr = 16000
    mono = np.resize(np.concatenate(demo_audio(REPO / "resources" / "demo" / "truth.json")), int(seconds * sr))
    sf.write(path, np.repeat(np.clip(mono, -1, 1)[:, None].astype(np.float32), channels, axis=1), sr, "PCM_U8")


def test_shard_job_over_its_memory_is_killed_retried_with_more_and_resumes(cluster, tmp_path):
    from test_vad_workflow import long_corpus

    mode = memory_enforcement(cluster)
    audio = tmp_path / "audio"
    long_corpus(audio, n=OOM_FILES, seconds=10.0)
    heavy_multichannel_file(audio / "zz_array.wav")
    ds = {"big": {"audio_dir": str(audio), "shards": 1}}
    for run in ("local", "slurm"):
        write_config(tmp_path / run, ds, vad={"threads": 1}, stages=["vad"])
    snakemake(tmp_path / "local")
    # profiles/slurm with the VAD job's memory: attempt 1 too small, attempt 2 enough
    profile = profile_copy(tmp_path / "profile", vad={"mem_mb": f"{ATTEMPT1_MB} if attempt == 1 else {ATTEMPT2_MB}"})
    out = slurm_snakemake(tmp_path / "slurm", profile=profile)

    vad_jobs, comp = submissions(out)["vad"], jobcomp_memory(cluster)
    assert len(vad_jobs) == 2, out[-4000:]
    first, second = (comp.get(j) for j in vad_jobs)
    assert first and first[0][0] in ("OUT_OF_MEMORY", "FAILED") and first[0][1] == ATTEMPT1_MB, (mode, first)
    assert second == [("COMPLETED", ATTEMPT2_MB)], second
    # the attempt-1 job's SLURM log (kept: it failed) shows the kill for memory
    jid = vad_jobs[0]
    logs = [
        p
        for p in (tmp_path / "slurm" / ".snakemake" / "slurm_logs").rglob("*.log")
        if p.stem == jid or p.stem.startswith(f"{jid}_")
    ]
    assert logs, sorted((tmp_path / "slurm" / ".snakemake" / "slurm_logs").rglob("*"))
    first_log = logs[0].read_text(encoding="utf-8", errors="replace")
    killed = {"cgroup": r"Detected \d+ oom-kill event", "overmemorykill": r"exceeded .*memory limit"}[mode]
    assert re.search(killed, first_log), first_log[-3000:]
    # attempt 2 resumed: the files done before the kill were not redone
    log = (tmp_path / "slurm" / "results" / "big" / "logs" / "vad" / "shard-0000.log").read_text(encoding="utf-8")
    resumed = int(re.search(r"(\d+) already done", log).group(1))
    assert 1 <= resumed <= OOM_FILES, log
    # and the outputs are the local run's
    local, remote = (tmp_path / run / "results" / "big" / "vad" for run in ("local", "slurm"))
    for name in ("shard-0000.segments.jsonl", "shard-0000.stats.jsonl", "shard-0000.rejects.jsonl", "stats.csv"):
        assert (remote / name).read_bytes() == (local / name).read_bytes(), name
    assert len(read_jsonl(remote / "shard-0000.stats.jsonl")) == OOM_FILES + 1


@pytest.fixture(scope="module")
def vad_corpus(tmp_path_factory):
    """A one-shard VAD dataset long enough to interrupt (60 files of 20 s), and its local run."""
    from test_vad_workflow import long_corpus

    root = tmp_path_factory.mktemp("vad_corpus")
    long_corpus(root / "audio", n=60, seconds=20.0)
    ds = {"big": {"audio_dir": str(root / "audio"), "shards": 1}}
    write_config(root / "local", ds, vad={"threads": 1}, stages=["vad"])
    snakemake(root / "local")
    return ds, root / "local" / "results" / "big" / "vad"


VAD_OUTPUTS = ("shard-0000.segments.jsonl", "shard-0000.stats.jsonl", "shard-0000.rejects.jsonl", "stats.csv")


def interrupt_mid_shard(workdir, profile, interrupt):
    """Run the VAD stage on SLURM; once its shard job is running and has finished a few
    files, call ``interrupt(job id)``. Returns (snakemake's output, return code, job id,
    seconds from the interruption to the end of the run)."""
    proc = slurm_snakemake(workdir, popen=True, profile=profile)
    scratch = workdir / "results" / "big" / "vad" / ".partial" / "shard-0000.jsonl"
    deadline, job = time.monotonic() + 600, None
    try:
        while time.monotonic() < deadline and proc.poll() is None and job is None:
            if scratch.exists() and scratch.read_text(encoding="utf-8").count("\n") > 3:
                running = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i"], capture_output=True, text=True)
                if running.stdout.split():
                    job = running.stdout.split()[0]
                    interrupt(job)
                    since = time.monotonic()
            time.sleep(0.2)
        out, _ = proc.communicate(timeout=900)
    finally:
        proc.kill()
    assert job, f"the shard job finished before it could be interrupted:\n{out[-5000:]}"
    return out, proc.returncode, job, time.monotonic() - since


def preempt(_job):
    """A job of the higher tier (`cpu`) that needs every CPU of the node: it preempts the
    `preemptible` partition's job. Returns its id."""
    cpus = ["-c", str(os.cpu_count()), "--mem=100"]
    return subprocess.run(
        ["sbatch", "--parsable", "-p", "cpu", *cpus, "-J", "blocker", "-o", "/dev/null", "--wrap", "sleep 5"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def check_resumed(workdir, local):
    """The shard job's last attempt resumed (files done before are not redone), and the
    outputs are the local run's."""
    log = (workdir / "results" / "big" / "logs" / "vad" / "shard-0000.log").read_text(encoding="utf-8")
    assert "already done" in log and ", 0 already done" not in log, log
    for name in VAD_OUTPUTS:
        assert (workdir / "results" / "big" / "vad" / name).read_bytes() == (local / name).read_bytes(), name


def test_preempted_shard_job_is_requeued_and_resumes(cluster, vad_corpus, tmp_path):
    """A shard job in the `preemptible` partition, preempted (PreemptMode=REQUEUE) by a
    job of the `cpu` partition that needs the node's CPUs: SLURM reruns it under the
    same job id, it resumes from its resume file, and the outputs are the local run's."""
    ds, local = vad_corpus
    write_config(tmp_path, ds, vad={"threads": 1}, stages=["vad"])
    profile = profile_copy(tmp_path / "profile", vad={"slurm_partition": "preemptible"})
    blockers = []
    out, rc, job, _ = interrupt_mid_shard(tmp_path, profile, lambda job: blockers.append(preempt(job)))
    assert rc == 0, out[-5000:]
    comp = jobcomp(cluster)
    assert comp[blockers[0]] == ["COMPLETED"]
    assert "PREEMPTED" in comp[job] and comp[job][-1] == "COMPLETED", comp[job]
    assert submissions(out)["vad"] == [job]  # rerun by SLURM, not resubmitted by snakemake
    check_resumed(tmp_path, local)


def test_job_preempted_for_good_is_retried_not_waited_for(cluster, vad_corpus, tmp_path):
    """A shard job that SLURM cannot requeue (`--no-requeue`, as on a site with
    PreemptMode=CANCEL) ends PREEMPTED. The executor plugin alone would wait for it
    forever; scripts/slurm/squeue reports it FAILED, so snakemake resubmits it (attempt
    2), and it resumes."""
    ds, local = vad_corpus
    write_config(tmp_path, ds, vad={"threads": 1}, stages=["vad"])
    settings = {"slurm-requeue": False, "slurm-no-requeue": True}
    profile = profile_copy(tmp_path / "profile", settings, vad={"slurm_partition": "preemptible"})
    out, rc, job, waited = interrupt_mid_shard(tmp_path, profile, preempt)
    assert rc == 0, out[-5000:]
    assert jobcomp(cluster)[job] == ["PREEMPTED"]
    first, second = submissions(out)["vad"]
    assert first == job and jobcomp(cluster)[second] == ["COMPLETED"]
    assert waited < 400, waited  # one status check (at most 180 s apart) and the rerun
    check_resumed(tmp_path, local)


def kill_job_processes(workdir):
    """SIGKILL every process working in ``workdir`` (the jobs' snakemake and their
    stage processes), but the workflow's own snakemake (the one with --profile)."""
    workdir = os.path.realpath(workdir)
    for p in Path("/proc").iterdir():
        try:
            if (
                p.name.isdigit()
                and os.readlink(p / "cwd") == workdir
                and b"--profile" not in (p / "cmdline").read_bytes()
            ):
                os.kill(int(p.name), signal.SIGKILL)
        except OSError:  # gone meanwhile, or not ours to read
            pass


def test_node_lost_mid_job_is_requeued_and_resumes(cluster, vad_corpus, tmp_path):
    """The node goes down under a running shard job (`scontrol update state=down`, as
    when slurmctld loses a node): the job ends NODE_FAIL, SLURM requeues it (the
    profile's `slurm-requeue: true`), it runs once the node is back, and resumes."""
    ds, local = vad_corpus
    write_config(tmp_path, ds, vad={"threads": 1}, stages=["vad"])
    node = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True).stdout.split()[0]

    def lose_node(job):
        scontrol = ["scontrol", "update", f"nodename={node}"]
        subprocess.run([*scontrol, "state=down", "reason=speechprep-test"], check=True)
        kill_job_processes(tmp_path)  # a dead node's processes are gone; here they would run on
        for _ in range(60):  # back up once its jobs are cleaned up (resume is refused while they complete)
            time.sleep(1)
            state = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True).stdout.strip()
            if state.split() and state.split()[0] in ("idle", "mix", "alloc"):  # (a line per partition)
                return
            resumed = subprocess.run([*scontrol, "state=resume"], capture_output=True, text=True)
        raise AssertionError(f"the node did not come back: {state}, {resumed.stderr}")

    out, rc, job, _ = interrupt_mid_shard(tmp_path, REPO / "profiles" / "slurm", lose_node)
    assert rc == 0, out[-5000:]
    # requeued by SLURM (the profile's slurm-requeue) under the same id, not resubmitted
    assert jobcomp(cluster)[job] == ["NODE_FAIL", "COMPLETED"], jobcomp(cluster)[job]
    assert submissions(out)["vad"] == [job]
    check_resumed(tmp_path, local)
