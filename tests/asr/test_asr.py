"""The ASR stage with a real NeMo model: batching, OOM, bad audio, watchdog, resume."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from shards import DEMO, REPO, clean_segments, params, run, shard

from speechprep.asr import stage as asr
from speechprep.asr.words import NemoTranscriber
from speechprep.core.failures import SystematicFailure
from speechprep.errors import UsageError
from speechprep.io.jsonio import read_jsonl


@pytest.fixture(scope="session")
def loaded(model_path):
    model = asr.load_model(str(model_path), "cpu")
    return NemoTranscriber(model), asr.model_sample_rate(model), model_path


def test_transcripts_carry_text_and_model_identity(tmp_path, loaded, model_path):
    counts, lines, rejects = run(tmp_path, clean_segments(8), loaded)
    assert counts["ok"] == 8 and not rejects
    for line in lines:
        assert isinstance(line["text"], str)
        assert line["asr_model"] == str(model_path)
        assert len(line["asr_model_sha256"]) == 64
        assert {"id", "file_id", "audio_filepath", "offset", "duration"} <= set(line)


def test_oom_injection_halves_and_still_transcribes_everything(tmp_path, loaded, caplog):
    caplog.set_level("INFO")
    tx = loaded[0]
    segs = clean_segments()
    _, reference, _ = run(tmp_path, segs, loaded, tag="ref")
    sizes = []

    def oom_above_3(audios, language):
        sizes.append(len(audios))
        if len(audios) > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB (injected)")
        return tx(audios, language)

    counts, lines, rejects = run(tmp_path, segs, loaded, transcribe=oom_above_3, tag="oom")
    assert not rejects and counts["ok"] == len(segs) and counts["ooms"] > 0
    assert [(x["id"], x["text"]) for x in lines] == [(x["id"], x["text"]) for x in reference]
    assert "OOM on a batch of" in caplog.text and "halving to" in caplog.text and "budget lowered" in caplog.text
    # (under a memory limit, e.g. a cgroup's, the two shortest segments go first, alone: modelstage.WARMUP)
    assert max(sizes[:2]) > 3 and all(s <= 3 for s in sizes[sizes.index(max(s for s in sizes if s <= 3)) :])


def test_the_first_batch_is_a_probe_whose_measure_is_in_the_jobs_stats(tmp_path, loaded):
    """The demo model's first batch (~120 padded s) is measured: MB per padded second in the
    stats' ``batch_probe``, and the budget it chose, within the block's 120 s ceiling."""
    segs = [dict(s, id=f"{s['id']}_{k}") for k in range(4) for s in clean_segments()]
    counts, lines, rejects = run(tmp_path, segs, loaded, budget=120.0, tag="probe")
    assert counts["ok"] == len(segs) and not rejects
    got = counts["batch_probe"]
    assert got["device"] == "cpu" and got["measured"], got
    assert 100 <= got["probe_seconds"] <= 120 and got["mb_per_second"] > 0
    assert got["mb_per_second"] == pytest.approx(got["probe_mb"] / got["probe_seconds"], abs=0.01)
    assert 0 < got["seconds_chosen"] <= 120 and got["limit_mb"] > 0


LIMITED_SCRIPT = """
import json, os, sys
sys.path.insert(0, {repo!r})
from speechprep.asr import stage as asr
from speechprep.asr.words import NemoTranscriber
from speechprep.core import logs, memprobe, modelstage
from tests.asr.shards import params
from tests.support import cpu_batch
logs.setup("asr")
model = asr.load_model({model!r}, "cpu")
os.environ[memprobe.MEM_ENV] = str(round(memprobe.rss_mb() + {over}))  # the rule's mem_mb,
os.environ[memprobe.GUARD_ENV] = "1"  # enforced, as a cgroup's would be
files = modelstage.ShardFiles({segs!r}, {out!r}, {rej!r}, {scratch!r})
p = params(model={model!r}, batch=cpu_batch(320.0))
stage = asr.AsrStage(p, NemoTranscriber(model), asr.model_sample_rate(model))
print(json.dumps(modelstage.run(stage, files)))
"""


def test_a_job_under_a_memory_limit_below_its_first_batch_halves_and_finishes(tmp_path, model_path):
    """The job is told 150 MB over what it holds once the model is loaded; its first batch
    (320 padded s of the demo model) takes ~250 MB: the allocation past the limit is refused
    (memprobe.guard), the batch halves, the probe measures the half that fits, and every
    segment is transcribed, as without the limit."""
    segs = [dict(s, id=f"{s['id']}_{k}") for k in range(8) for s in clean_segments()]
    p = shard(tmp_path, segs)
    code = LIMITED_SCRIPT.format(
        repo=str(REPO), model=str(model_path), segs=str(p), over=150, out=str(tmp_path / "o.jsonl"),
        rej=str(tmp_path / "r.jsonl"), scratch=str(tmp_path / "s.jsonl"),
    )  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "halving to" in proc.stderr and counts["ooms"] >= 1
    assert counts["ok"] == len(segs) and counts["rejected"] == 0
    assert sorted(x["id"] for x in read_jsonl(tmp_path / "o.jsonl")) == sorted(s["id"] for s in segs)
    got = counts["batch_probe"]
    assert got["limit_from"] == "mem_mb" and got["measured"] and got["probe_seconds"] < 320
    assert got["seconds_chosen"] <= got["probe_seconds"]  # no more than what fitted


def test_bad_segments_in_a_batch_are_rejected_good_ones_transcribed(tmp_path, loaded):
    good = clean_segments(4)
    edge = DEMO / "audio" / "edge_cases"
    bad = [
        {"id": "corrupt_0000", "audio_filepath": str(edge / "corrupt.wav"), "offset": 0.0, "duration": 1.0},
        {"id": "zero_0000", "audio_filepath": str(edge / "zero_length.wav"), "offset": 0.0, "duration": 1.0},
        {"id": "nan_0000", "audio_filepath": str(edge / "nan_float.wav"), "offset": 0.2, "duration": 1.5},
        {"id": "past_end_0000", "audio_filepath": good[0]["audio_filepath"], "offset": 60.0, "duration": 1.0},
        {"id": "long_0000", "audio_filepath": good[0]["audio_filepath"], "offset": 0.0, "duration": 45.0},
        {"id": "short_0000", "audio_filepath": good[0]["audio_filepath"], "offset": 0.0, "duration": 0.05},
    ]
    segs = good[:2] + bad + good[2:]
    _, alone, _ = run(tmp_path, good, loaded, tag="alone")
    counts, lines, rejects = run(tmp_path, segs, loaded, budget=1000.0, tag="mixed")
    assert {r["id"]: r["reason"] for r in rejects} == {
        "corrupt_0000": "unreadable",
        "zero_0000": "empty",
        "nan_0000": "non_finite",
        "past_end_0000": "empty",
        "long_0000": "too_long",
        "short_0000": "too_short",
    }
    assert all(r["stage"] == "asr" and r["detail"] for r in rejects)
    assert [(x["id"], x["text"]) for x in lines] == [(x["id"], x["text"]) for x in alone]
    # accounting: every input id in exactly one of outputs and rejects
    assert sorted([x["id"] for x in lines] + [r["id"] for r in rejects]) == sorted(s["id"] for s in segs)
    assert counts["ok"] + counts["rejected"] == len(segs)


def test_model_exception_on_a_batch_rejects_only_the_guilty_segment(tmp_path, loaded, caplog):
    tx, sr, _ = loaded
    segs = clean_segments(6)
    guilty = segs[3]
    guilty_len = round(guilty["duration"] * sr)

    def picky(audios, language):
        if any(abs(len(a) - guilty_len) <= 1 for a in audios):
            raise ValueError("cannot decode this one (injected)")
        return tx(audios, language)

    counts, lines, rejects = run(tmp_path, segs, loaded, transcribe=picky)
    assert [(r["id"], r["reason"]) for r in rejects] == [(guilty["id"], "model_error")]
    assert "ValueError: cannot decode this one (injected)" in rejects[0]["detail"]
    assert len(lines) == 5 and "retrying one at a time" in caplog.text


def no_model(tmp_path):
    """``loaded`` for a transcriber the test gives: sample rate and a model file never loaded."""
    (tmp_path / "broken.nemo").write_bytes(b"not a model")
    return None, 16000, tmp_path / "broken.nemo"


def test_a_model_that_always_raises_fails_the_job_after_first_errors(tmp_path):
    calls = []

    def always(audios, language):
        calls.append(len(audios))
        raise RuntimeError("weights are NaN\n(injected)")

    loaded = no_model(tmp_path)
    p = params(model=str(loaded[2]), model_failure={"first_errors": 3, "max_error_share": 0.5})
    with pytest.raises(SystematicFailure) as e:
        run(tmp_path, clean_segments(12), loaded, transcribe=always, p=p)
    msg = str(e.value)
    assert "broken.nemo" in msg and "the first 3 segments all failed" in msg
    assert "RuntimeError: weights are NaN (injected)" in msg and "\n" not in msg
    assert calls == [12, 1, 1, 1]  # the batch, then one at a time until the rule fired (not all 12)
    assert not (tmp_path / "out.jsonl").exists() and (tmp_path / "scratch" / "out.jsonl").exists()


def test_a_mostly_failing_shard_fails_at_the_end_by_share_and_again_when_rerun(tmp_path):
    segs = clean_segments(8)
    failing = {round(s["duration"] * 16000) for s in segs[2:]}
    sizes = []

    def mostly(audios, language):
        sizes.append(len(audios))
        if any(abs(len(a) - n) <= 1 for a in audios for n in failing):
            raise ValueError("unsupported input (injected)")
        return ["ok"] * len(audios)

    for attempt in (1, 2):  # a retried job must fail the same way, not exit 0 with the rejects it kept
        sizes.clear()
        with pytest.raises(
            SystematicFailure,
            match=r"6 of 8 segments failed \(75%, more than "
            r"model_failure.max_error_share = 50%\)",
        ):
            run(tmp_path, segs, no_model(tmp_path), transcribe=mostly)
        assert not (tmp_path / "out.jsonl").exists()
        assert sizes[0] == (8 if attempt == 1 else 6)  # the rerun kept the successes, retried the errors


def test_empty_transcripts_are_kept_and_counted(tmp_path, loaded):
    counts, lines, rejects = run(tmp_path, clean_segments(3), loaded, transcribe=lambda a, lang: [""] * len(a))
    assert [x["text"] for x in lines] == ["", "", ""] and counts["empty_text"] == 3 and not rejects


WATCHDOG_SCRIPT = """
import sys, time, io
sys.path.insert(0, {repo!r})
from speechprep.core import logs, modelstage
from speechprep.asr.stage import AsrStage
from tests.asr.shards import params
from tests.support import cpu_batch
logs.setup("asr")
def hang(audios, language):
    time.sleep(3600)
files = modelstage.ShardFiles({segs!r}, {out!r}, {rej!r}, {scratch!r})
modelstage.run(AsrStage(params(model="x", batch_timeout=2), hang, 16000), files)
"""


def test_watchdog_fails_the_job_with_a_stack_dump(tmp_path):
    segs = clean_segments(3)
    p = shard(tmp_path, segs)
    code = WATCHDOG_SCRIPT.format(
        repo=str(REPO),
        segs=str(p),
        out=str(tmp_path / "o.jsonl"),
        rej=str(tmp_path / "r.jsonl"),
        scratch=str(tmp_path / "s.jsonl"),
    )
    # (the timeouts here and below only stop a hung test: `make test` runs these suites at a
    # lower CPU priority beside the workflow tests, so their start-up can take minutes)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 124
    log = proc.stderr
    stalled = re.search(r"WATCHDOG: no progress for (\d+) s \(limit 2 s\)", log)
    assert stalled and int(stalled.group(1)) < 30, log[-3000:]  # fired soon after the limit, not at the hang's end
    assert segs[0]["id"] in log and "of 3 segments" in log
    assert "most recent call first" in log and "in hang" in log  # every thread's stack
    assert "job failed" in log
    assert not (tmp_path / "o.jsonl").exists()


RESUMABLE_SCRIPT = """
import sys, time, json
sys.path.insert(0, {repo!r})
from speechprep.asr import stage as asr
from speechprep.asr.words import NemoTranscriber
from speechprep.core import logs, modelstage
from tests.asr.shards import params
from tests.support import cpu_batch
logs.setup("asr")
model = asr.load_model({model!r}, "cpu")
tx = NemoTranscriber(model)
def slow(audios, language):
    with open({calls!r}, "a", encoding="utf-8") as f:
        f.write(json.dumps(len(audios)) + "\\n")
    time.sleep({delay})
    return tx(audios, language)
files = modelstage.ShardFiles({segs!r}, {out!r}, {rej!r}, {scratch!r})
stage = asr.AsrStage(params(model={model!r}, batch=cpu_batch(3.0)), slow, asr.model_sample_rate(model))
modelstage.run(stage, files)
"""


def test_killed_mid_shard_resumes_after_last_finished_batch(tmp_path, model_path):
    segs = clean_segments()
    p = shard(tmp_path, segs)
    scratch = tmp_path / "scratch.jsonl"

    def script(tag, delay, calls):
        return RESUMABLE_SCRIPT.format(
            repo=str(REPO),
            model=str(model_path),
            segs=str(p),
            delay=delay,
            out=str(tmp_path / f"{tag}.jsonl"),
            rej=str(tmp_path / f"{tag}.rej.jsonl"),
            scratch=str(scratch if tag != "ref" else tmp_path / "ref-scratch.jsonl"),
            calls=str(tmp_path / calls),
        )

    subprocess.run([sys.executable, "-c", script("ref", 0, "ref.calls")], check=True, capture_output=True, timeout=900)
    proc = subprocess.Popen(
        [sys.executable, "-c", script("run", 0.5, "killed.calls")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 900
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if scratch.exists():
            done = scratch.read_text(encoding="utf-8").count("\n") - 1
            if done >= 4:
                break
        time.sleep(0.05)
    assert proc.poll() is None, "finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = scratch.read_text(encoding="utf-8").count("\n") - 1
    assert 4 <= done < len(segs) and not (tmp_path / "run.jsonl").exists()

    rerun = subprocess.run(
        [sys.executable, "-c", script("run", 0, "rerun.calls")], capture_output=True, text=True, timeout=900
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{done} already done or screened out" in rerun.stderr and f"{len(segs) - done} to process" in rerun.stderr
    assert (tmp_path / "run.jsonl").read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
    # finished batches were not recomputed: the rerun sent the model exactly the rest
    rerun_calls = [int(x) for x in (tmp_path / "rerun.calls").read_text(encoding="utf-8").split()]
    assert sum(rerun_calls) == len(segs) - done
    assert not scratch.exists()


def test_pretrained_name_offline_says_so():
    with pytest.raises(UsageError, match=r"needs? network access"):
        asr.load_model("nvidia/stt_en_fastconformer_ctc_large", "cpu")
