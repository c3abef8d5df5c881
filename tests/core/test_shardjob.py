"""The shard-job runner: resume, screening, saved outcomes that no longer hold,
input order, the failure rule, atomic outputs (no stage, no model)."""

import pytest

from speechprep.core.failures import FailureRule, SystematicFailure
from speechprep.core.shardjob import Accepted, Rejected, ShardJob
from speechprep.io.jsonio import read_jsonl, write_jsonl

RULE = FailureRule(first_errors=3, max_error_share=0.5)


def items(tmp_path, n=6):
    path = tmp_path / "shard-0007.jsonl"
    write_jsonl(path, [{"id": f"i{k}", "audio_filepath": f"/a/{k}.wav", "duration": 1.0 + k} for k in range(n)])
    return path


def job(tmp_path, params=None, **kw):
    return ShardJob("test", items(tmp_path), tmp_path / "resume.jsonl", params or {"x": 1}, "1", **kw)


def outputs(tmp_path, j):
    lines = [{"id": it["id"], **data} for it, data in j.accepted()]
    return j.commit({tmp_path / "out.jsonl": lines}, tmp_path / "rejects.jsonl")


def test_every_item_accepted_or_rejected_in_input_order(tmp_path):
    j = job(tmp_path)
    assert j.name == "shard-0007"
    todo = j.todo(screen=lambda it: Rejected("too_long", "screened") if it["id"] == "i5" else None)
    assert [t["id"] for t in todo] == ["i0", "i1", "i2", "i3", "i4"]
    with j.running(todo):
        for it in reversed(todo):  # outcomes arrive in any order
            j.emit(it, Rejected("bad", "odd one") if it["id"] == "i2" else Accepted({"v": it["id"]}))
    counts = outputs(tmp_path, j)
    assert counts == {"segments": 6, "ok": 4, "rejected": 2}
    assert [x["id"] for x in read_jsonl(tmp_path / "out.jsonl")] == ["i0", "i1", "i3", "i4"]
    rejects = list(read_jsonl(tmp_path / "rejects.jsonl"))
    assert [(r["id"], r["reason"], r["stage"], r["audio_filepath"]) for r in rejects] == [
        ("i2", "bad", "test", "/a/2.wav"),
        ("i5", "too_long", "test", "/a/5.wav"),
    ]
    assert not (tmp_path / "resume.jsonl").exists()


def test_an_interrupted_job_resumes_with_only_the_unfinished_items(tmp_path):
    j = job(tmp_path)
    todo = j.todo()
    with pytest.raises(KeyboardInterrupt), j.running(todo):
        for it in todo[:3]:
            j.emit(it, Accepted({"v": it["id"]}))
        raise KeyboardInterrupt
    resume = tmp_path / "resume.jsonl"
    assert resume.exists()
    with open(resume, "a", encoding="utf-8") as f:
        f.write('{"id": "i3", "v"')  # the line a kill cut short
    again = job(tmp_path)
    todo = again.todo()
    assert [t["id"] for t in todo] == ["i3", "i4", "i5"]
    with again.running(todo):
        for it in todo:
            again.emit(it, Accepted({"v": it["id"]}))
    outputs(tmp_path, again)
    assert [x["v"] for x in read_jsonl(tmp_path / "out.jsonl")] == [f"i{k}" for k in range(6)]


def test_a_saved_outcome_that_no_longer_holds_is_redone(tmp_path):
    j = job(tmp_path)
    todo = j.todo()
    with pytest.raises(KeyboardInterrupt), j.running(todo):
        for it in todo:
            j.emit(it, Accepted({"v": 1}))
        raise KeyboardInterrupt
    again = job(tmp_path)
    assert [t["id"] for t in again.todo(keep=lambda it, o: it["id"] != "i1")] == ["i1"]


def test_other_parameters_do_not_reuse_the_resume_file(tmp_path):
    j = job(tmp_path)
    todo = j.todo()
    with pytest.raises(KeyboardInterrupt), j.running(todo):
        j.emit(todo[0], Accepted())
        raise KeyboardInterrupt
    assert len(job(tmp_path, params={"x": 2}).todo()) == 6
    assert len(job(tmp_path).todo()) == 5


def test_systematic_failure_fails_at_once_and_keeps_the_resume_file(tmp_path):
    j = job(tmp_path, failure_rule=RULE, model="m.nemo")
    todo = j.todo()
    with (
        pytest.raises(
            SystematicFailure,
            match=r"the model m.nemo fails systematically: the first 3 segments "
            r"all failed\. First error: i0: boom 0",
        ) as e,
        j.running(todo),
    ):
        for k, it in enumerate(todo):
            j.emit(it, Rejected("model_error", f"boom {k}", model_error=True))
    assert e.value.exit_code == 4
    # kept, but without the model errors: a resumed job retries them
    assert len((tmp_path / "resume.jsonl").read_text(encoding="utf-8").splitlines()) == 1
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("model_errors,fails", [(2, True), (1, False)])
def test_failure_by_share_at_the_end_and_input_rejects_do_not_count(tmp_path, model_errors, fails):
    j = job(tmp_path, failure_rule=RULE, model="m")
    todo = j.todo()
    outcomes = [Accepted()] + [Rejected("model_error", f"e{k}", model_error=True) for k in range(model_errors)]
    outcomes += [Rejected("unreadable", "the input's fault")] * (len(todo) - len(outcomes))

    def run():
        with j.running(todo):
            for it, o in zip(todo, outcomes):
                j.emit(it, o)

    if fails:  # 2 model errors of 3 model outcomes: more than half
        with pytest.raises(SystematicFailure, match=r"2 of 3 segments failed \(67%, more than "):
            run()
    else:  # 1 of 2 is not more than half; the unreadable inputs do not count
        run()
        assert outputs(tmp_path, j)["rejected"] == 5
