"""The plan's arithmetic (speechprep.workflow.bill) on a hand-made rule graph."""

import pytest

from speechprep.errors import UsageError
from speechprep.workflow.bill import (
    Cluster,
    RuleLoad,
    capacity_bound,
    critical_path,
    fit,
    fit_files,
    fit_jobs,
    interval,
    makespan,
    slots,
)

# two nodes of 8 cores, 2 GPUs and 32 GB
CLUSTER = Cluster(nodes=2, cores=8, gpus=2, mem_gb=32)


def test_slots_take_the_scarcest_of_cores_memory_and_gpus():
    assert slots(RuleLoad(10, 60.0, threads=2, mem_mb=1000), CLUSTER) == 4  # cores: 8 // 2
    assert slots(RuleLoad(10, 60.0, threads=1, mem_mb=10_000), CLUSTER) == 3  # memory: 32768 // 10000
    assert slots(RuleLoad(10, 60.0, threads=1, mem_mb=1000, gpus=1), CLUSTER) == 2  # GPUs
    assert slots(RuleLoad(1, 1.0, threads=16, mem_mb=1000), CLUSTER) == 0  # more cores than a node has


def test_makespan_is_waves_of_jobs_over_every_nodes_slots():
    # 4 slots a node x 2 nodes = 8 at once: 20 jobs are 3 waves of 60 s
    assert makespan("vad", RuleLoad(20, 60.0, threads=2, mem_mb=1000), CLUSTER) == 180.0
    assert makespan("vad", RuleLoad(8, 60.0, threads=2, mem_mb=1000), CLUSTER) == 60.0
    assert makespan("vad", RuleLoad(0, 60.0, threads=2, mem_mb=1000), CLUSTER) == 0.0
    # GPU jobs: 2 a node, 4 at once: 9 jobs are 3 waves
    assert makespan("asr", RuleLoad(9, 100.0, threads=1, mem_mb=1000, gpus=1), CLUSTER) == 300.0
    with pytest.raises(UsageError, match="fits no node"):
        makespan("big", RuleLoad(1, 1.0, threads=1, mem_mb=40_000), CLUSTER)
    with pytest.raises(UsageError, match="fits no node"):
        makespan("asr", RuleLoad(1, 1.0, threads=1, mem_mb=1000, gpus=1), Cluster(1, 8, 0, 32))


def test_critical_path_is_the_longest_chain_of_makespans():
    #   ingest -> vad -> asr -> curate -> speakers -> decide
    #                \-> diarize ------/
    loads = {
        "ingest": RuleLoad(1, 30.0, threads=2, mem_mb=1000),  # 30 s
        "vad": RuleLoad(16, 100.0, threads=2, mem_mb=1000),  # 8 at once: 200 s
        "asr": RuleLoad(16, 50.0, threads=1, mem_mb=1000, gpus=1),  # 4 at once: 200 s
        "diarize": RuleLoad(16, 400.0, threads=8, mem_mb=1000),  # 2 at once: 3200 s
        "curate": RuleLoad(16, 10.0, threads=2, mem_mb=1000),  # 20 s
        "speakers": RuleLoad(1, 500.0, threads=1, mem_mb=20_000),  # 500 s
        "decide": RuleLoad(16, 1.0, threads=1, mem_mb=1000),  # 16 at once: 1 s
    }
    edges = [
        ("ingest", "vad"),
        ("vad", "asr"),
        ("vad", "diarize"),
        ("diarize", "curate"),
        ("asr", "curate"),
        ("curate", "speakers"),
        ("speakers", "decide"),
        ("decide", "all"),  # a rule without a load weighs nothing
    ]
    seconds, path = critical_path(loads, edges, CLUSTER)
    assert seconds == 30 + 200 + 3200 + 20 + 500 + 1
    assert path == ["ingest", "vad", "diarize", "curate", "speakers", "decide", "all"]
    # fewer diarization threads: 8 at once, 800 s; the ASR branch is still shorter
    loads["diarize"] = RuleLoad(16, 400.0, threads=2, mem_mb=1000)
    assert critical_path(loads, edges, CLUSTER)[0] == 30 + 200 + 800 + 20 + 500 + 1
    # the work itself: 63,532 core-s on 16 cores; 800 GPU-s on 4 GPUs
    assert capacity_bound(loads, CLUSTER) == pytest.approx((60 + 3200 + 800 + 12_800 + 320 + 500 + 16) / 16)
    one = Cluster(nodes=1, cores=2, gpus=1, mem_gb=32)  # a laptop: the work, not the path, decides
    assert capacity_bound(loads, one) == pytest.approx((60 + 3200 + 800 + 12_800 + 320 + 500 + 16) / 2)
    assert capacity_bound(loads, one) > critical_path(loads, edges, one)[0]
    with pytest.raises(UsageError, match="cycle"):
        critical_path(loads, [*edges, ("decide", "vad")], CLUSTER)


def test_run_wide_costs_are_fitted_on_two_sizes_not_assumed_proportional():
    line = fit([(1000, 12.0), (2000, 20.0)])  # 4 s fixed + 8 ms a segment
    assert line.fixed == pytest.approx(4.0) and line.per_item == pytest.approx(0.008)
    assert line(10**6) == pytest.approx(8004.0)
    assert fit([(1000, 12.0)])(2000) == pytest.approx(24.0)  # one size: proportional
    assert fit([(1000, 20.0), (2000, 12.0)])(10**6) == pytest.approx(20.0)  # never less with more
    # a streaming job's memory: 0.4 MB more at twice the size is noise, not 4,000 MB at 10^7
    assert fit([(1000, 75.1), (2000, 75.5)], noise=16.0)(10**7) == pytest.approx(75.5)
    assert fit([(1000, 100.0), (2000, 150.0)], noise=16.0)(10**4) == pytest.approx(550.0)  # grows
    assert fit([(1000, 75.1)], proportional=False)(10**7) == pytest.approx(75.1)


def test_interval_of_per_shard_rates():
    assert interval([10.0], [1.0]) is None
    lo, hi = interval([10.0, 12.0, 14.0], [1.0, 1.0, 1.0])
    assert lo < 12.0 < hi and hi - 12.0 == pytest.approx(12.0 - lo)
    assert interval([5.0, 5.0], [1.0, 3.0]) == (5.0, 5.0)


def test_a_shard_jobs_fixed_part_is_told_from_its_part_per_hour():
    # 5 s to start (imports, the model's load) and 400 CPU-s per audio hour
    jobs = [(h, 5.0 + 400.0 * h) for h in (0.01, 0.02, 0.05, 0.1)]
    line = fit_jobs(jobs)
    assert line.fixed == pytest.approx(5.0) and line.per_item == pytest.approx(400.0)
    # 100 shards of an hour: 100 x 5 + 400 x 100, where hours alone would say 100 x 472
    assert 100 * line.fixed + line.per_item * 100 == pytest.approx(40_500.0)
    assert fit_jobs(jobs[:2]).fixed == 0.0  # two jobs: proportional
    alike = [(0.1, 45.0), (0.11, 49.0), (0.1, 45.0)]  # sizes too alike to tell the parts apart
    assert fit_jobs(alike).fixed == 0.0 and fit_jobs(alike).per_item == pytest.approx(139 / 0.31)
    assert fit_jobs([(0.1, 10.0), (0.2, 9.0), (0.4, 8.0)]).per_item == 0.0  # no growth: the mean
    assert fit_jobs([(0.1, 1.0), (0.2, 4.0), (0.4, 10.0)]).fixed == 0.0  # no negative fixed part


def test_a_files_cost_by_its_length_is_fitted_with_no_part_negative():
    # 0.05 s a file, 0.03 s per second of speech, 2e-5 per second squared (a quadratic step)
    truth = lambda x: 0.05 + 0.03 * x + 2e-5 * x * x
    pts = [(x, truth(x)) for x in (1.0, 2.0, 3.0, 4.0, 30.0, 120.0, 600.0)]
    f = fit_files(pts)
    assert (f.per_file, f.per_second, f.per_second2) == pytest.approx((0.05, 0.03, 2e-5), rel=1e-6)
    assert f(3600.0) == pytest.approx(truth(3600.0))
    # linear in the length and a little noise: the square's part is not made negative
    lin = fit_files([(x, 0.1 + 0.02 * x + (0.001 if k % 2 else -0.001)) for k, x in enumerate((1, 2, 5, 9, 20))])
    assert lin.per_second2 >= 0 and lin.per_file >= 0 and lin.per_second == pytest.approx(0.02, rel=0.02)
    # cost falling with length (noise on a few files): no negative slope, the mean's constant or less
    down = fit_files([(1.0, 1.0), (2.0, 0.8), (3.0, 0.6)])
    assert min(down.per_file, down.per_second, down.per_second2) >= 0 and down(3.0) <= 1.0
    assert fit_files([]) == fit_files([(-1.0, 5.0)]) and fit_files([])(10.0) == 0.0
    one = fit_files([(5.0, 2.0), (5.0, 4.0)])  # one length: its mean, whichever terms carry it
    assert one(5.0) == pytest.approx(3.0)
