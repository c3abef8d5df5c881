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


def audio_items(tmp_path, names):
    """Items whose audio files exist (their size and mtime are part of the reuse key)."""
    lines = []
    for n in names:
        wav = tmp_path / "audio" / f"{n}.wav"
        wav.parent.mkdir(exist_ok=True)
        if not wav.exists():
            wav.write_bytes(n.encode("utf-8"))
        lines.append({"id": n, "audio_filepath": str(wav), "duration": 1.0})
    write_jsonl(tmp_path / "shard-0003.jsonl", lines)
    return tmp_path / "shard-0003.jsonl"


def run_all(tmp_path, names, params=None, context=True, error=()):
    """A reusing job over ``names``: returns the ids it processed and its store's ids."""
    resume = tmp_path / ".partial" / "shard-0003.jsonl"
    reuse = (lambda it: [it, context]) if context else True
    j = ShardJob("test", audio_items(tmp_path, names), resume, params or {"x": 1}, "1", failure_rule=RULE, reuse=reuse)
    todo = j.todo()
    with j.running(todo):
        for it in todo:
            failed = Rejected("model_error", "x", model_error=True)
            j.emit(it, failed if it["id"] in error else Accepted({"v": it["id"]}))
    outputs(tmp_path, j)
    stored = list(read_jsonl(tmp_path / ".partial" / "shard-0003.reuse" / "outcomes.jsonl"))[1:]
    return [t["id"] for t in todo], [x["line"]["id"] for x in stored]


def test_a_shard_run_again_reuses_each_unchanged_item_and_keeps_only_its_items(tmp_path, caplog):
    caplog.set_level("INFO")
    first = [f"f{k}" for k in range(6)]
    assert run_all(tmp_path, first, error={"f5"}) == (first, first[:5])  # a model error is retried
    # the shard lost f1 and gained f9: only f9 and the retried f5 run
    grown = [n for n in first if n != "f1"] + ["f9"]
    todo, stored = run_all(tmp_path, grown)
    assert todo == ["f5", "f9"] and stored == grown
    assert "4 of 6 segments reused from the store" in caplog.text
    assert [x["v"] for x in read_jsonl(tmp_path / "out.jsonl")] == grown
    assert not (tmp_path / ".partial" / "shard-0003.jsonl").exists()


def test_what_decides_an_item_changed_so_it_runs_again(tmp_path):
    names = ["a", "b", "c"]
    run_all(tmp_path, names)
    assert run_all(tmp_path, names)[0] == []  # nothing changed: nothing runs
    wav = tmp_path / "audio" / "b.wav"
    wav.write_bytes(b"another recording")  # the file was replaced under the same path
    assert run_all(tmp_path, names)[0] == ["b"]
    assert run_all(tmp_path, names, context="other units")[0] == names  # what else the stage reads
    assert run_all(tmp_path, names, params={"x": 2})[0] == names  # other parameters


def test_a_store_cut_short_or_without_its_items_reuses_nothing_it_cannot_trust(tmp_path):
    names = ["a", "b"]
    run_all(tmp_path, names)
    store = tmp_path / ".partial" / "shard-0003.reuse" / "outcomes.jsonl"
    text = store.read_text(encoding="utf-8")
    store.write_text(text[: len(text) - 10], encoding="utf-8")  # a torn store: not read at all
    assert run_all(tmp_path, names)[0] == names
    (tmp_path / ".partial" / "shard-0003.reuse.new" / "junk").mkdir(parents=True)  # a save killed mid-way
    assert run_all(tmp_path, names)[0] == []
    assert not (tmp_path / ".partial" / "shard-0003.reuse.new").exists()


def test_a_resumed_item_whose_key_changed_is_redone_and_a_transient_reject_is_not_kept(tmp_path):
    """A job killed part-way keeps its resume lines with each item's key: resumed after what
    decides an item changed (not its line: say, its units), that item runs again. An ``oom``
    reject is resumed within the run but never kept in the store."""
    names = ["a", "b", "c"]
    resume = tmp_path / ".partial" / "shard-0003.jsonl"
    j = ShardJob("test", audio_items(tmp_path, names), resume, {"x": 1}, "1", reuse=lambda it: [it, "units 1"])
    todo = j.todo()
    with pytest.raises(KeyboardInterrupt), j.running(todo):
        j.emit(todo[0], Accepted({"v": "a"}))
        j.emit(todo[1], Rejected("oom", "too long for the device"))
        raise KeyboardInterrupt
    again = ShardJob("test", audio_items(tmp_path, names), resume, {"x": 1}, "1", reuse=lambda it: [it, "units 1"])
    assert [t["id"] for t in again.todo()] == ["c"]  # a and b resumed
    other = ShardJob("test", audio_items(tmp_path, names), resume, {"x": 1}, "1", reuse=lambda it: [it, "units 2"])
    todo = other.todo()
    assert [t["id"] for t in todo] == names  # every key changed: nothing resumed
    with other.running(todo):
        for it in todo:
            other.emit(it, Rejected("oom", "x") if it["id"] == "b" else Accepted({"v": it["id"]}))
    outputs(tmp_path, other)
    stored = list(read_jsonl(tmp_path / ".partial" / "shard-0003.reuse" / "outcomes.jsonl"))[1:]
    assert [x["line"]["id"] for x in stored] == ["a", "c"]


def test_two_jobs_of_one_shard_keep_two_stores(tmp_path):
    """The ASR job and the alignment job of a shard (``shard-0003.jsonl``, ``shard-0003.align.jsonl``)."""
    from speechprep.core.reuse import store_dir

    part = tmp_path / ".partial"
    assert store_dir(part / "shard-0003.jsonl") != store_dir(part / "shard-0003.align.jsonl")


def test_an_accepted_items_data_is_read_back_from_the_resume_file_not_held(tmp_path):
    """What a job holds per item is an offset in its resume file: the outputs, a resumed job's
    saved outcomes and the reuse store still get every item's data, unicode included."""
    j = job(tmp_path, reuse=True)
    todo = j.todo()
    with pytest.raises(KeyboardInterrupt), j.running(todo):
        for it in todo[:3]:
            j.emit(it, Accepted({"v": it["id"], "words": [{"word": "café", "start": 0.25}]}))
        raise KeyboardInterrupt
    again = job(tmp_path, reuse=True)
    todo = again.todo()
    assert again.outcomes["i0"].data["v"] == "i0"  # a saved outcome, before the job runs
    with again.running(todo):
        for it in todo:
            again.emit(it, Rejected("bad", "odd") if it["id"] == "i4" else Accepted({"v": it["id"], "n": 1.5}))
        assert all(again.outcomes[k].data == {} for k in ("i0", "i3", "i5")), "data held in memory"
        assert again.outcome("i1").data == {"v": "i1", "words": [{"word": "café", "start": 0.25}]}
        assert again.outcome("i4") == Rejected("bad", "odd")
    assert outputs(tmp_path, again) == {"segments": 6, "ok": 5, "rejected": 1}
    out = list(read_jsonl(tmp_path / "out.jsonl"))
    assert out[0] == {"id": "i0", "v": "i0", "words": [{"word": "café", "start": 0.25}]}
    assert [x["id"] for x in out] == ["i0", "i1", "i2", "i3", "i5"] and out[-1] == {"id": "i5", "v": "i5", "n": 1.5}
    stored = list(read_jsonl(tmp_path / "resume.reuse" / "outcomes.jsonl"))[1:]
    assert {x["line"]["id"]: x["line"].get("v") for x in stored} == {**{k: k for k in todo_ids(6)}, "i4": None}


def todo_ids(n):
    return [f"i{k}" for k in range(n)]


def test_a_job_without_a_resume_file_keeps_its_outcomes(tmp_path):
    j = ShardJob("test", items(tmp_path), None, {"x": 1}, "1")
    todo = j.todo()
    with j.running(todo):
        for it in todo:
            j.emit(it, Accepted({"v": it["id"]}))
    assert [d for _, d in j.accepted()] == [{"v": f"i{k}"} for k in range(6)]
