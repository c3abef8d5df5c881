"""The seconds-budget batcher with OOM back-off (shared by ASR and TTS), on CPU."""

import pytest
import torch

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
