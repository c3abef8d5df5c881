"""Sizing a run for a cluster (speechprep.workflow.bill.recommend, pilot.sized): the shard size
that keeps each job's fixed part under 5 % and its devices fed within the site's limits, and
Snakemake's own cost at that size."""

import math

import pytest

from speechprep.workflow import bill
from speechprep.workflow.bill import Cluster, RuleSize, recommend, snakemake_cost


def test_the_smallest_shard_whose_fixed_part_is_under_5_percent():
    # a model job: 28 s to be ready, then 1,200 s per audio hour (RTFx 3 on a CPU)
    asr = RuleSize("asr", fixed_s=28.0, per_hour_s=1200.0, at_once=8)
    assert asr.hours_for_share() == pytest.approx(28 * 19 / 1200)
    r = recommend([asr], hours=100.0, configured=1.0)
    assert r["shard_hours"] == 0.45 and r["range"][0] == pytest.approx(0.4433, abs=1e-4)
    assert r["fixed_share"]["asr"] <= 0.05 < asr.share(0.44)
    assert r["shards"] == math.ceil(100 / 0.45) and r["shards_per_job"] == {} and r["notes"] == []
    assert r["jobs"] == 8  # as many as the cluster runs of it at once


def test_the_largest_rule_decides_and_nothing_binding_keeps_the_config():
    vad = RuleSize("vad", fixed_s=2.0, per_hour_s=60.0, at_once=64)
    asr = RuleSize("asr", fixed_s=30.0, per_hour_s=300.0, at_once=4)
    r = recommend([vad, asr], hours=1000.0, configured=1.0)
    assert r["shard_hours"] == 2.0  # asr's 1.9 h, to the quarter hour; vad needs 0.63 h
    assert r["jobs"] == 64
    # no fixed part and no time measured: nothing binds, the config's size stays
    assert recommend([RuleSize("x", 0.0, 0.0, 4)], hours=10.0, configured=1.0)["shard_hours"] == 1.0


def test_a_gpu_job_that_loads_longer_than_it_computes_needs_several_shards_a_job():
    # parakeet-size ASR on a GPU: RTFx ~3,000 (1.2 s per audio hour) after a 28 s fixed part
    asr = RuleSize("asr", fixed_s=28.0, per_hour_s=1.2, at_once=100)
    r = recommend([asr], hours=1e5, configured=1.0, max_queued=1000)
    assert r["shard_hours"] == bill.MAX_SHARD_HOURS  # no shard larger than the memory was measured at
    need = 28 * 19 / 1.2
    assert r["shards_per_job"] == {"asr": math.ceil(need / 50)}
    assert "asr" in r["notes"][0] and "one shard a job" in r["notes"][0]
    assert r["fixed_share"]["asr"] > 0.05
    # memory that grows with the shard caps it lower
    held = RuleSize("asr", fixed_s=28.0, per_hour_s=1.2, at_once=100, most_hours=12.0)
    assert recommend([held], hours=1e5, configured=1.0)["shard_hours"] == 12.0


def test_the_site_limits_cap_the_jobs_and_the_submissions_must_keep_up():
    # 5,000 CPU slots, at most 1,000 queued: --jobs 1000; each VAD job must last the 1,000 s it
    # takes to submit 1,000 of them one by one (1 s each), else the slots are never all busy
    vad = RuleSize("vad", fixed_s=2.0, per_hour_s=40.0, at_once=5000)
    r = recommend([vad], hours=1e5, configured=1.0, max_queued=1000)
    assert r["jobs"] == 1000
    assert r["range"][0] == pytest.approx((1000 * bill.SUBMIT_S_PER_JOB - 2.0) / 40.0)
    assert r["shard_hours"] == 25.0
    assert recommend([vad], hours=1e5, configured=1.0, max_queued=1000, jobs=100)["jobs"] == 100
    # a corpus too small for the slots says so
    few = recommend([RuleSize("vad", 2.0, 40.0, 64)], hours=3.0, configured=1.0)
    assert any("idle" in n for n in few["notes"])


def test_snakemake_s_own_cost_scales_with_the_dag():
    # a 100,000-hour corpus at 2-h shards, about 8 jobs a shard: 4x10^5 jobs
    s = snakemake_cost(400_000)
    assert s["dag_jobs"] == 400_000
    assert s["dag_mb"] == pytest.approx(400_000 * 27 / 1000)  # about 11 GB
    assert s["dag_s"] == pytest.approx(620.0)
    # 5.1 ms a job started, and the final all job's check of each input against its producers: with
    # its inputs unknown, as many as the jobs (an upper bound): 1.27e-7 s x (4x10^5)^2 = 5.6 h
    assert s["final_job_cpu_s"] == pytest.approx(20_320.0)
    assert s["scheduler_cpu_s"] == pytest.approx(2040.0 + 20_320.0)
    # the run's all job taking one VAD segments file per shard of 50,000: 318 s, as measured
    few = snakemake_cost(400_000, final_inputs=50_000)
    assert few["final_job_cpu_s"] == pytest.approx(317.5) and few["scheduler_cpu_s"] == pytest.approx(2357.5)
    # all over a marker a part of 100 (targets_per_part): 500 markers, and 500 parts of 100 inputs each
    parts = snakemake_cost(400_000, final_inputs=50_000, per_part=100)
    assert parts["final_job_cpu_s"] == pytest.approx(1.27e-7 * (500**2 + 500 * 100**2), abs=1e-3)
    assert snakemake_cost(400_000, final_inputs=80, per_part=100)["final_job_cpu_s"] == pytest.approx(
        1.27e-7 * 6400, abs=1e-3
    )


def _plan():
    # a pilot's plan: 2 shards of 0.01 h measured, the corpus 100 h in 100 shards
    from speechprep.workflow.pilot import Measured

    rules = {
        "ingest": {"kind": "dataset", "jobs": 1.0},
        "vad": {"kind": "shard", "jobs": 100.0, "threads": 2, "rss_mb": 300.0, "mem_mb_asked": 512.0},
        "asr": {"kind": "shard", "jobs": 100.0, "threads": 2, "rss_mb": 3000.0, "mem_mb_asked": 4096.0},
        "asr_merge": {"kind": "dataset", "jobs": 1.0},
    }
    for r in rules.values():
        r.setdefault("fits", {"s": {"fixed": 0.0, "per_audio_hour": 0.0}})
    plan = {"datasets": {"a": {"hours": 100.0, "shards": 100}}, "rules": rules, "stages": {}}
    jobs = {}
    for k in range(2):
        shard = f"shard-000{k}"
        jobs[("vad", "a", shard, "")] = {"bench": {"s": 1.0 + 60 * 0.01}, "ready": {"wall_s": 1.0}}
        jobs[("asr", "a", shard, "")] = {"bench": {"s": 30.0 + 1800 * 0.01}, "ready": {"wall_s": 30.0}}
    m = Measured(hours={"a": 0.02}, segments={"a": 40}, shards={"a": 2}, jobs=jobs)
    m.shard_hours.update({("a", "shard-0000"): 0.01, ("a", "shard-0001"): 0.01})
    return plan, m


def test_the_plan_sizes_its_shard_rules_from_their_ready_lines():
    from speechprep.workflow.pilot import dag_jobs, rule_sizes, sized

    plan, m = _plan()
    cfg = {"ingest": {"shard_hours": 1.0}, "datasets": {"a": {}}, "asr": {"device": "cpu"}, "vad": {}}
    cluster = Cluster(nodes=4, cores=8, gpus=0, mem_gb=32.0)
    sizes = {r.name: r for r in rule_sizes(plan, m, cfg, cluster)}
    assert sizes["asr"].fixed_s == 30.0 and sizes["asr"].per_hour_s == pytest.approx(1800.0)
    assert sizes["vad"].fixed_s == 1.0 and sizes["vad"].per_hour_s == pytest.approx(60.0)
    assert sizes["asr"].at_once == 16 and sizes["vad"].at_once == 16  # 4 nodes x 8 cores / 2 threads
    assert sizes["asr"].jobs_per_shard == 1.0
    # ASR keeps 0.01 MB per audio second of its shard: 36 MB an hour on 32 GB less its 4 GB
    assert sizes["asr"].most_hours == pytest.approx(0.01 + (32 * 1024 - 4096) / 36.0)
    assert sizes["vad"].most_hours == math.inf
    # --rtfx: the rule's speed on the cluster's device, where the pilot ran elsewhere
    fast = {r.name: r for r in rule_sizes(plan, m, cfg, cluster, {"asr": 3000.0})}
    assert fast["asr"].per_hour_s == pytest.approx(1.2)
    # the run's jobs at a shard size: the shard rules' scale with the shards, the others stay
    assert dag_jobs(plan, cfg, 1.0) == 203 and dag_jobs(plan, cfg, 2.0) == 103
    got = sized(plan, m, cfg, cluster, max_queued=10)
    rec = got["recommended"]
    assert rec["shard_hours"] == 0.32  # asr: 30 x 19 / 1800 = 0.317 h, up to 2 digits; vad: 0.317 h
    assert rec["jobs"] == 10 and rec["limits"] == {"max_queued": 10, "jobs": None}
    assert got["snakemake"]["dag_jobs"] == dag_jobs(plan, cfg, 0.32) == 2 * math.ceil(100 / 0.32) + 3
    assert got["snakemake_configured"]["dag_jobs"] == dag_jobs(plan, cfg) == 203  # the config's 1-h shards
    assert set(got["snakemake"]) >= {"dag_jobs", "scheduler_cpu_s", "dag_mb"}


def _scheduler_bench():
    import importlib.util

    from tests.support import REPO

    spec = importlib.util.spec_from_file_location("scheduler_bench", REPO / "bench" / "workflow" / "scheduler.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_both_profiles_schedule_as_the_scheduler_bench_measures():
    # the bench reads profiles/slurm's scheduling settings; profiles/local must schedule the same way
    import yaml

    from tests.support import REPO

    cfg = {p: yaml.safe_load((REPO / "profiles" / p / "config.yaml").read_text()) for p in ("local", "slurm")}
    for key in ("scheduler", "scheduler-subsample"):
        assert cfg["local"][key] == cfg["slurm"][key], key
    assert cfg["slurm"]["scheduler"] == "greedy" and cfg["slurm"]["scheduler-subsample"] <= 1000
    flags = _scheduler_bench().profile_settings("profile", {"scheduler-subsample": "7"})
    assert flags[flags.index("--scheduler-subsample") + 1] == "7"  # --set over the profile's value
    assert "--max-jobs-per-timespan" in flags


def test_the_scheduler_bench_fails_a_profile_case_that_misses_the_targets():
    bench = _scheduler_bench()
    row = {"settings": "profile", "jobs": 50_000, "cpu_ms_per_job_after_dag": 9.5, "first_job_after_dag_s": 0.2}
    assert bench.missed(row) == []
    slow = bench.missed({**row, "cpu_ms_per_job_after_dag": 12.0, "first_job_after_dag_s": 41.0})
    assert len(slow) == 2 and "12.0 ms" in slow[0] and "41.0 s" in slow[1]
    assert len(bench.missed({**row, "first_job_after_dag_s": None})) == 1  # no job started: missed
    # the greedy baseline is what the profiles improve on, not what they run: never a miss
    assert bench.missed({**row, "settings": "default", "cpu_ms_per_job_after_dag": 99.0}) == []
