"""profiles/slurm with more ready shards of a rule than `jobs:`, on the real test SLURM
(scripts/slurm_test_cluster.sh): every shard job is submitted and the run finishes.

With job arrays (the plugin's slurm-array-jobs) the pinned plugin held the rule's selected
jobs back while more of its jobs were ready than selected, and nothing was submitted again."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="the test SLURM's daemons need root")]
SHARDS, JOBS = 24, 8  # three times as many ready shards as jobs queued at once
# one cheap job per shard; named as a per-shard rule of the project's Snakefile, so that the
# profile's settings for that rule apply as they would to the real one
SNAKEFILE = """N = int(config["shards"])

rule all:
    input: expand("out/{i}.txt", i=range(N))
    localrule: True

rule vad:
    output: "out/{i}.txt"
    shell: "echo {wildcards.i} > {output}"
"""


def wait_for_other_cluster(limit_s=1500):
    """One test cluster per machine: wait while another (tests/workflow/test_slurm.py on the
    other xdist worker) runs."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True).returncode != 0:
            return
        time.sleep(5)
    pytest.skip("another test SLURM kept running")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    wait_for_other_cluster()
    d = tmp_path_factory.mktemp("slurm_scale")
    subprocess.run(["bash", str(REPO / "scripts" / "slurm_test_cluster.sh"), "start", str(d)], check=True, timeout=300)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(d / "slurm.conf")
    yield d
    subprocess.run(["bash", str(REPO / "scripts" / "slurm_test_cluster.sh"), "stop", str(d)], timeout=60)
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old


def test_more_ready_shards_than_jobs_all_run(cluster, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "Snakefile").write_text(SNAKEFILE, encoding="utf-8")
    cfg = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text(encoding="utf-8"))
    cfg["set-resources"]["vad"]["cpus_per_task"] = 1  # two at a time on the 2-CPU test node
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        "Snakefile",
        "--profile",
        str(profile),
        "--jobs",
        str(JOBS),
        "--slurm-init-seconds-before-status-checks",
        "5",
        "--config",
        f"shards={SHARDS}",
    ]
    p = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8")
    try:
        out, _ = p.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        p.kill()  # SIGKILL: on SIGTERM Snakemake waits for the jobs it holds, which never run
        out, _ = p.communicate()
        done = len(list((work / "out").glob("*.txt"))) if (work / "out").is_dir() else 0
        pytest.fail(f"hung: {done}/{SHARDS} shards after 400 s\n{out[-4000:]}")
    assert p.returncode == 0, out[-4000:]
    assert "Array job collection incomplete" not in out
    assert out.count("has been submitted with SLURM jobid") == SHARDS, out[-4000:]
    for i in range(SHARDS):
        assert Path(work / "out" / f"{i}.txt").read_text(encoding="utf-8").strip() == str(i)
