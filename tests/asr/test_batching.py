"""The seconds-budget batcher with OOM back-off (shared by ASR and TTS), on CPU."""

import resource
import time

import pytest
import torch

from speechprep.core import memprobe
from speechprep.core.batching import BatchRunner, is_oom, seconds_budget
from speechprep.core.config import BatchBudget


def items(durations):
    return [{"id": f"s{i}", "duration": d} for i, d in enumerate(durations)]


def runner(budget, infer, messages=None):
    return BatchRunner(
        budget=budget,
        duration=lambda x: x["duration"],
        infer=infer,
        free_cache=lambda: None,
        logger=(messages.append if messages is not None else print),
    )


def test_plan_fills_batches_up_to_the_padded_budget_longest_first():
    r = runner(10.0, infer=lambda b: b)
    batches = r.plan(items([1, 4, 2, 2, 3, 1, 1, 9, 12]))
    assert sorted(x["id"] for b in batches for x in b) == sorted(f"s{i}" for i in range(9))
    for b in batches:
        durs = [x["duration"] for x in b]
        assert durs == sorted(durs, reverse=True)
        assert len(b) == 1 or len(b) * durs[0] <= 10.0
    assert [x["duration"] for x in batches[0]] == [12]  # too long for any budget: alone
    assert [len(b) for b in batches] == [1, 1, 2, 5]  # 12 | 9 | 4,3 | 2,2,1,1,1 (5 x 2 s = 10)


def test_oom_above_k_halves_until_it_fits_and_everything_is_produced():
    k = 3
    calls = []

    def infer(batch):
        calls.append(len(batch))
        if len(batch) > k:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return [x["id"].upper() for x in batch]

    messages = []
    r = runner(100.0, infer, messages)
    out = list(r.run(items([1.0] * 20)))
    assert sorted(o.item["id"] for o in out) == sorted(f"s{i}" for i in range(20))
    assert all(o.result == o.item["id"].upper() and not o.oom for o in out)
    assert calls[0] == 20 and max(c for c in calls[1:]) <= 10
    assert any("halving to 10 + 10" in m for m in messages)
    assert any("budget lowered" in m for m in messages)
    assert r.ooms >= 3
    # once lowered, no later batch exceeds what worked
    after = calls[calls.index(next(c for c in calls if c <= k)) :]
    assert all(c <= k for c in after)


def test_item_that_never_fits_is_reported_oom_and_the_rest_goes_on():
    def infer(batch):
        if any(x["duration"] > 5 for x in batch):
            raise RuntimeError("CUDA error: out of memory")
        return [1] * len(batch)

    out = list(runner(100.0, infer).run(items([1, 2, 8, 3])))
    assert len(out) == 4
    assert [o.item["duration"] for o in out if o.oom] == [8]
    assert all(o.result == 1 for o in out if not o.oom)


def test_other_errors_are_not_swallowed():
    def infer(batch):
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        list(runner(10.0, infer).run(items([1, 2])))


def test_oom_detection_and_cpu_budget():
    assert is_oom(torch.cuda.OutOfMemoryError("x"))
    assert is_oom(RuntimeError("CUDA out of memory. Tried to allocate"))
    assert not is_oom(RuntimeError("shape mismatch"))
    assert seconds_budget("cpu", BatchBudget(42.0, 60.0, 1.0, 3600.0)) == 42.0
    assert seconds_budget("cpu", BatchBudget(420.0, 60.0, 1.0, 100.0)) == 100.0


def test_groups_are_batched_apart_within_the_budget_also_after_an_oom():
    langs = ["en", "de", "en", "de", "en", "de", "en", "fr"]
    its = [{**x, "lang": lang} for x, lang in zip(items([1, 4, 2, 2, 3, 1, 1, 2]), langs)]
    calls = []

    def infer(batch):
        calls.append(batch)
        if len(batch) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return [x["lang"] for x in batch]

    r = BatchRunner(
        budget=12.0,
        duration=lambda x: x["duration"],
        infer=infer,
        free_cache=lambda: None,
        logger=lambda m: None,
        group=lambda x: x["lang"],
    )
    for b in r.plan(its):
        assert len({x["lang"] for x in b}) == 1
        assert len(b) == 1 or len(b) * max(x["duration"] for x in b) <= 12.0
    assert sorted(len(b) for b in r.plan(its)) == [1, 3, 4]  # de 4,2,1 | en 3,2,1,1 | fr 2
    out = list(r.run(its))
    assert sorted(o.item["id"] for o in out) == sorted(x["id"] for x in its)
    assert all(o.result == o.item["lang"] for o in out) and r.ooms > 0
    assert all(len({x["lang"] for x in b}) == 1 for b in calls)


def test_a_refused_allocation_in_the_jobs_memory_is_an_oom():
    assert is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"))
    assert is_oom(MemoryError("Unable to allocate 954. MiB"))
    # oneDNN's generic failure counts only where the job runs under its memory guard
    assert not is_oom(RuntimeError("could not create a primitive"))
    with memprobe.guard(memprobe.rss_mb() + 4096):
        assert is_oom(RuntimeError("could not create a primitive"))


def test_under_the_guard_an_allocation_past_the_limit_raises_an_oom_and_the_limit_is_restored():
    before = resource.getrlimit(resource.RLIMIT_DATA)
    with memprobe.guard(memprobe.rss_mb() + 200) as g:
        assert g.data_mb is not None
        with pytest.raises(RuntimeError) as refused:
            torch.ones(2**30 // 4)  # 1 GiB
        assert is_oom(refused.value)
        assert torch.ones(2**20).sum() == 2**20  # 4 MB still fits
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


def allocating(mb_per_s, calls):
    """A model whose batch holds ``mb_per_s`` MB (float32, touched) per padded second."""

    def infer(batch):
        padded = len(batch) * max(x["duration"] for x in batch)
        calls.append(padded)
        held = torch.ones(int(mb_per_s * padded * 2**20 / 4))
        return [float(held[0])] * len(batch)

    return infer


def test_the_probe_measures_mb_per_padded_second_and_sizes_the_rest_to_the_jobs_memory():
    """The first batch (120 padded s of 4 MB/s: 480 MB, no limit enforced) is measured; the
    rest fills 70% of what the job had left under its 300 MB over what it held: ~52-62 s."""
    calls = []
    probe = memprobe.Probe("cpu", memprobe.rss_mb() + 300, ceiling=1000.0, source="mem_mb")
    r = runner(120.0, allocating(4.0, calls))
    r.probe = probe
    out = list(r.run(items([1.0] * 400)))
    assert len(out) == 400 and not any(o.oom for o in out)
    got = probe.result
    assert got["measured"] and got["probe_seconds"] == 120.0 and calls[0] == 120.0
    assert 3.6 <= got["mb_per_second"] <= 4.6
    expect = memprobe.HEADROOM * (got["limit_mb"] - probe.before_mb) / got["mb_per_second"]
    assert got["seconds_chosen"] == pytest.approx(min(expect, 1000.0), rel=0.02)
    # lowered from the probe's 120 s (~52 s: what trimming before the probe frees moves it a little)
    assert got["seconds_chosen"] < 100 and max(calls[1:]) == int(got["seconds_chosen"])


def test_on_the_cpu_the_probe_never_raises_the_budget():
    """Room for ~52 s a batch, a block of 20 s: the CPU keeps 20 s (a bigger batch is no
    faster there); measured all the same."""
    calls = []
    probe = memprobe.Probe("cpu", memprobe.rss_mb() + 300, ceiling=1000.0, source="mem_mb")
    r = runner(20.0, allocating(4.0, calls))
    r.probe = probe
    assert len(list(r.run(items([1.0] * 100)))) == 100
    assert probe.result["measured"] and probe.result["seconds_chosen"] == 20.0 and max(calls) == 20.0


def test_a_probe_that_measures_nothing_keeps_the_budget_and_says_so():
    probe = memprobe.Probe("cpu", memprobe.rss_mb() + 300, ceiling=1000.0, source="mem_mb")
    r = runner(10.0, lambda b: [0] * len(b))
    r.probe = probe
    assert len(list(r.run(items([1.0] * 30)))) == 30
    assert r.budget == 10.0 and not probe.result["measured"] and "configured budget stays" in probe.result["note"]


def test_the_probe_keeps_a_batch_under_half_the_watchdogs_timeout():
    def slow(batch):
        time.sleep(0.01 * len(batch))
        return [0] * len(batch)

    probe = memprobe.Probe("cpu", memprobe.rss_mb() + 300, ceiling=1000.0, timeout=0.1, source="mem_mb")
    r = runner(10.0, slow)
    r.probe = probe
    assert len(list(r.run(items([1.0] * 30)))) == 30
    # 0.1 s per 10 s: 0.05 s is ~5 s at most (fewer on a busy machine, where the probe ran slower)
    assert 0 < probe.result["seconds_chosen"] <= 5.0


def test_a_batch_past_the_guarded_limit_halves_and_the_probe_sizes_the_rest():
    """The first batch (120 padded s of 4 MB/s: 480 MB) does not fit under 250 MB: refused,
    it halves until a batch fits; that batch is the probe, and every item is produced."""
    calls = []
    limit = memprobe.rss_mb() + 250
    probe = memprobe.Probe("cpu", limit, ceiling=1000.0, source="mem_mb")
    messages = []
    r = runner(120.0, allocating(4.0, calls), messages)
    r.probe = probe
    with memprobe.guard(limit) as g:
        r.on_batch_start = lambda b: g.rearm()
        out = list(r.run(items([1.0] * 300)))
    assert sorted(o.item["id"] for o in out) == sorted(f"s{i}" for i in range(300))
    assert not any(o.oom for o in out) and r.ooms >= 1 and calls[0] == 120.0
    assert any("halving to 60 + 60" in m for m in messages)
    got = probe.result
    assert got["measured"] and got["probe_seconds"] < 120 and got["seconds_chosen"] < 120
    assert 3.6 <= got["mb_per_second"] <= 4.6


def test_an_item_that_does_not_fit_alone_under_the_guard_is_retried_without_it():
    """Under the guard, a single item's OOM lifts it (relief) and the item is tried again;
    the budget stays (the guard, not the batch's size, was the cause)."""
    lifted, messages = [], []

    def infer(batch):
        if not lifted:  # a library's state that the guard broke: nothing fits under it
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 5373952 bytes")
        return [x["id"] for x in batch]

    r = runner(4.0, infer, messages)
    r.relief = lambda: not lifted and not lifted.append(True)
    out = list(r.run(items([1.0] * 4)))
    assert [o.result for o in out] == [o.item["id"] for o in out] and len(out) == 4 and lifted
    assert any("retried once without it" in m for m in messages) and not any(o.oom for o in out)
    assert r.budget == 4.0


def test_the_guard_is_lifted_for_the_one_item_refused_alone_and_holds_the_next_batch_again():
    """Each item (one a batch) takes 150 MB, the guard leaves 100: each is refused, retried
    once unguarded and produced; the batch after it runs under the guard again (it was lifted
    for good before: every item after the first ran unguarded)."""
    guarded_at_call = []

    def infer(batch):
        guarded_at_call.append(memprobe.guarded())
        held = torch.ones(150 * 2**20 // 4)
        return [float(held[0])] * len(batch)

    before = resource.getrlimit(resource.RLIMIT_DATA)
    messages = []
    r = runner(1.0, infer, messages)
    with memprobe.guard(memprobe.rss_mb() + 100) as g:
        r.on_batch_start, r.relief = lambda b: g.rearm(), g.lift
        out = list(r.run(items([1.0] * 4)))
    assert [o.result for o in out] == [1.0] * 4 and not any(o.oom for o in out)
    assert guarded_at_call == [True, False] * 4 and g.lifted == 4 and r.ooms == 4
    assert sum("retried once without it" in m for m in messages) == 4
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


def test_an_allocation_refused_under_the_guard_turns_onednn_off_for_the_rest_of_the_job():
    """A refusal inside oneDNN can leave it failing every later call ("could not create a
    primitive", guarded or not) or end the process: after the first refusal the job runs
    without it; leaving the guard turns it on again. Unguarded, an OOM changes nothing."""
    calls = []

    def infer(batch):
        calls.append((len(batch), torch.backends.mkldnn.enabled))
        if len(batch) > 2:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 5373952 bytes")
        x = torch.nn.functional.conv1d(torch.ones(1, 1, 16000), torch.ones(8, 1, 5))  # native, not oneDNN
        return [float(x[0, 0, 0])] * len(batch)

    assert torch.backends.mkldnn.enabled
    r = runner(8.0, infer)
    with memprobe.guard(memprobe.rss_mb() + 500) as g:
        r.on_oom = g.refused
        out = list(r.run(items([1.0] * 8)))
        assert g.onednn_off and not torch.backends.mkldnn.enabled and memprobe.guarded()
    assert [o.result for o in out] == [5.0] * 8 and calls[0] == (8, True)
    assert all(not on for _, on in calls[1:]) and torch.backends.mkldnn.enabled
    r = runner(8.0, infer)
    r.on_oom = memprobe.guard(1e9).refused  # not entered: not guarded
    assert len(list(r.run(items([1.0] * 4)))) == 4 and torch.backends.mkldnn.enabled


def test_batches_after_the_probe_fit_the_memory_left_when_the_job_creeps():
    """A model that keeps 100 MB from each of its batches (a cache that grows): the probe
    sized 40 s batches from the memory left before it; once the job holds more, the batches
    are lowered to what is left over its resident memory now, and every item is produced."""
    kept, calls, messages = [], [], []

    def infer(batch):
        padded = len(batch) * max(x["duration"] for x in batch)
        calls.append(padded)
        held = torch.ones(int(4.0 * padded * 2**20 / 4))
        kept.append(torch.ones(100 * 2**20 // 4))
        return [float(held[0])] * len(batch)

    probe = memprobe.Probe("cpu", memprobe.rss_mb() + 700, ceiling=1000.0, source="mem_mb")
    r = runner(40.0, infer, messages)
    r.probe = probe
    out = list(r.run(items([1.0] * 200)))
    assert len(out) == 200 and not any(o.oom for o in out)
    assert probe.result["seconds_chosen"] == 40.0 and calls[0] == 40.0
    assert any("lowered to the memory left" in m for m in messages) and min(calls) < 30
    assert r.budget < 40.0
