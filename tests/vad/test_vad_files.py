"""TEN-VAD on real audio: the demo corpus, a 3-minute file, resume, crashes."""

import itertools
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechprep.core.resume import ResumeFile, fingerprint
from speechprep.core.reuse import item_key
from speechprep.core.shardjob import KEY, Accepted, Rejected, outcome_line
from speechprep.errors import WorkerKilled
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.vad import stage as vad
from speechprep.vad.stage import VadParams, analyze_file, run_shard
from tests.support import DEMO, TRUTH, demo_file, params

P = params(VadParams)


@pytest.mark.parametrize("rel,info", [(k, v) for k, v in TRUTH["files"].items() if v["expect"] != "ok"])
def test_bad_files_rejected_with_reason(rel, info):
    r = analyze_file(demo_file(rel), P)
    assert isinstance(r, Rejected) and r.detail, r
    # files ingest rejects are also caught by VAD alone (ingest with probing off)
    assert r.reason == info["reason"]


@pytest.mark.parametrize("rel", ["edge_cases/stereo_8k.wav", "edge_cases/rate_44k.wav"])
def test_multichannel_and_other_rates_are_handled(rel):
    r = analyze_file(demo_file(rel), P).data
    truth = TRUTH["files"][rel]
    assert "segments" in r and len(r["segments"]) == len(truth["speech"])
    assert r["stats"]["duration"] == pytest.approx(truth["duration"], abs=0.02)
    for seg, t in zip(r["segments"], truth["speech"]):
        assert abs(seg["offset"] - t["start"]) < 0.1
        assert abs(seg["offset"] + seg["duration"] - t["end"]) < 0.15


def three_minute_file(path):
    """~3 min of demo phrases separated by pauses all shorter than min_silence."""
    sr = 16000
    phrases = []
    for rel, info in TRUTH["files"].items():
        if info.get("clean"):
            x, _ = sf.read(DEMO / "audio" / rel, dtype="float32")
            phrases += [x[int(s["start"] * sr) : int(s["end"] * sr)] for s in info["speech"]]
    rng = np.random.default_rng(0)
    out, spans, pauses, t = [np.zeros(sr // 2, np.float32)], [], [], 0.5
    i = 0
    while t < 180:
        x = phrases[i % len(phrases)]
        spans.append((t, t + len(x) / sr))
        out.append(x)
        t += len(x) / sr
        p = 0.25 if i % 7 == 6 else rng.uniform(0.12, 0.2)
        pauses.append((t, t + p))
        out.append(np.zeros(int(p * sr), np.float32))
        t += p
        i += 1
    y = np.concatenate(out) + rng.normal(0, 3e-4, sum(map(len, out))).astype(np.float32)
    sf.write(path, y, sr, subtype="PCM_16")
    return spans, pauses


def test_max_segment_honoured_on_three_minute_file(tmp_path):
    path = tmp_path / "long.flac"
    spans, pauses = three_minute_file(path)
    p = params(VadParams, max_segment=30.0, pad=0.03)
    r = analyze_file({"id": "long", "audio_filepath": str(path)}, p).data
    segs = [(s["offset"], s["offset"] + s["duration"]) for s in r["segments"]]
    assert r["stats"]["duration"] > 180
    assert all(e - s <= 30.0 + 1e-6 for s, e in segs)
    assert len(segs) >= 7  # 3 minutes in pieces of at most 30 s
    # every cut lies in one of the pauses (give or take a frame and the padding)
    for (_, e), (s, _) in itertools.pairwise(segs):
        mid = (e + s) / 2
        assert any(a - 0.05 <= mid <= b + 0.05 for a, b in pauses), (e, s)
    # and nothing was lost: speech is covered
    speech = sum(b - a for a, b in spans)
    covered = sum(max(0.0, min(b, e) - max(a, s)) for a, b in spans for s, e in segs)
    assert covered / speech > 0.97


def make_shard(tmp_path, rels):
    shard = tmp_path / "shard-0000.jsonl"
    write_jsonl(shard, [demo_file(r) for r in rels])
    return shard


def run(workdir, shard, workers=1):
    """run_shard into ``workdir``; returns its counts and its three outputs' text."""
    workdir.mkdir(exist_ok=True)
    o = {k: str(workdir / f"out.{k}.jsonl") for k in ("segments", "stats", "rejects")}
    counts = run_shard(
        str(shard), o["segments"], o["stats"], o["rejects"], P, workers, str(workdir / "resume" / "shard-0000.jsonl")
    )
    return counts, {k: Path(v).read_text(encoding="utf-8") for k, v in o.items()}


CLIPS = [
    "us_male/clip01.wav",
    "us_female/clip03.flac",
    "scottish/clip02.wav",
    "edge_cases/nan_float.wav",
    "caribbean/clip04.flac",
    "edge_cases/silence.wav",
]


def test_shard_accounts_for_every_file(tmp_path):
    shard = make_shard(tmp_path, CLIPS)
    counts, out = run(tmp_path / "a", shard, workers=2)
    assert counts == {"files": 6, "ok": 4, "rejected": 2, "segments": 8}
    ids = {e["id"] for e in read_jsonl(shard)}
    stats_ids = {json.loads(x)["id"] for x in out["stats"].splitlines()}
    reject_ids = {json.loads(x)["id"] for x in out["rejects"].splitlines()}
    assert stats_ids | reject_ids == ids and not stats_ids & reject_ids
    seg_files = {json.loads(x)["file_id"] for x in out["segments"].splitlines()}
    assert seg_files == stats_ids


def test_shard_resumes_from_its_resume_file_with_identical_outputs(tmp_path, caplog):
    shard = make_shard(tmp_path, CLIPS)
    counts, full = run(tmp_path / "uninterrupted", shard)
    # a resume file as a killed job leaves it: three files done, a line cut short
    resumed_dir = tmp_path / "resumed"
    ck = resumed_dir / "resume" / "shard-0000.jsonl"
    ck.parent.mkdir(parents=True)
    done = [  # each line with its item's key, as a job with a reuse store writes it
        {**outcome_line(e["id"], analyze_file(e, P)), KEY: item_key(e, e["audio_filepath"])}
        for e in list(read_jsonl(shard))[:3]
    ]
    ck.write_text(
        json.dumps({"fingerprint": fingerprint(str(shard), vad.job_identity(P), vad.ALGORITHM_VERSION)})
        + "\n"
        + "".join(json.dumps(d) + "\n" for d in done)
        + '{"id": "caribbean__clip04", "stats": {"dur',
        encoding="utf-8",
    )
    caplog.set_level("INFO")
    counts2, resumed = run(resumed_dir, shard)
    assert "6 files, 3 already done or screened out" in caplog.text and "3 files to analyse" in caplog.text
    assert counts2 == counts
    assert resumed == full
    assert not ck.exists()  # removed once the outputs are written


def test_resume_file_for_other_input_is_not_reused(tmp_path):
    ck = ResumeFile(tmp_path / "c.jsonl", "abc")
    ck.start([outcome_line("x", Rejected("empty", "d"))])
    ck.close(remove=False)
    assert set(ResumeFile(tmp_path / "c.jsonl", "abc").load()) == {"x"}
    assert ResumeFile(tmp_path / "c.jsonl", "other").load() == {}


def _crash_on_silence(e, p, _real=vad.analyze_file):
    if e["id"].endswith("silence"):
        os._exit(9)  # what a segfault in native code looks like to the pool
    return _real(e, p)


def test_worker_crash_rejects_only_the_guilty_file(tmp_path, monkeypatch):
    monkeypatch.setattr(vad, "analyze_file", _crash_on_silence)  # inherited by forked workers
    shard = make_shard(tmp_path, CLIPS)
    counts, out = run(tmp_path / "w", shard, workers=2)
    assert counts["files"] == 6 and counts["ok"] == 4 and counts["rejected"] == 2
    rejects = {json.loads(x)["id"]: json.loads(x)["reason"] for x in out["rejects"].splitlines()}
    assert rejects == {"edge_cases__silence": "worker_crash", "edge_cases__nan_float": "non_finite"}


def _sigkill_on_silence(e, p, _real=vad.analyze_file):
    if e["id"].endswith("silence"):
        os.kill(os.getpid(), signal.SIGKILL)  # what the out-of-memory killer does
    return _real(e, p)


def test_worker_killed_for_memory_fails_the_job_and_the_rerun_resumes(tmp_path, monkeypatch):
    shard = make_shard(tmp_path, CLIPS)
    _, clean = run(tmp_path / "clean", shard)
    monkeypatch.setattr(vad, "analyze_file", _sigkill_on_silence)
    with pytest.raises(WorkerKilled, match=r"edge_cases__silence.*SIGKILL"):
        run(tmp_path / "w", shard)
    saved = (tmp_path / "w" / "resume" / "shard-0000.jsonl").read_text(encoding="utf-8")
    assert "edge_cases__silence" not in saved and "us_male__clip01" in saved  # not rejected; the others kept
    monkeypatch.undo()  # the retry, with enough memory
    counts, out = run(tmp_path / "w", shard)
    assert out == clean and counts["files"] == 6


def _clips(seconds):
    """Demo speech, clip after clip, for about ``seconds``."""
    clips = [
        sf.read(DEMO / "audio" / rel, dtype="float32")[0]
        for rel, info in sorted(TRUTH["files"].items())
        if info.get("clean")
    ]
    out, total, i = [], 0, 0
    while total < seconds * 16000:
        out.append(clips[i % len(clips)])
        total += len(clips[i % len(clips)])
        i += 1
    return np.concatenate(out)


def _damage(path, at, how):
    """Damage a file the way archives do: cut short (a download that stopped) or
    ``n`` bytes overwritten with noise (a bad sector, a broken copy)."""
    data = bytearray(path.read_bytes())
    cut = int(len(data) * at)
    if how == "truncated":
        data = data[:cut]
    else:
        data[cut : cut + 4000] = np.random.default_rng(1).integers(0, 256, 4000, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("fmt", ["FLAC", "MP3"])
@pytest.mark.parametrize("how", ["overwritten", "truncated"])
def test_file_damaged_mid_stream_keeps_the_audio_before_the_damage(tmp_path, fmt, how):
    """libFLAC's and LAME's own output (through libsndfile), then damaged: the part
    before the damage is used and the file is marked truncated, not rejected whole."""
    x = _clips(30)
    path = tmp_path / f"long.{fmt.lower()}"
    sf.write(path, x, 16000, format=fmt)
    intact = analyze_file({"id": "f", "audio_filepath": str(path)}, P).data
    _damage(path, 0.6, how)
    r = analyze_file({"id": "f", "audio_filepath": str(path)}, P)
    assert isinstance(r, Accepted), r
    r = r.data
    t = r["stats"]["truncated_at"]
    assert 0.4 * len(x) / 16000 < t < 0.7 * len(x) / 16000
    assert r["stats"]["duration"] == pytest.approx(t, abs=0.05)
    assert any("damaged" in n for n in r["notes"])
    # the segments before the damage are those of the intact file
    before = [s for s in intact["segments"] if s["offset"] + s["duration"] < t - 1.0]
    assert len(before) >= 5
    assert [(s["offset"], s["duration"]) for s in r["segments"][: len(before)]] == [
        (s["offset"], s["duration"]) for s in before
    ]
    assert "truncated_at" not in intact["stats"]


def test_file_damaged_at_its_start_is_rejected_unreadable(tmp_path):
    path = tmp_path / "early.flac"
    sf.write(path, _clips(10), 16000, format="FLAC")
    data = bytearray(path.read_bytes())
    data[200:20000] = bytes(19800)  # the first frames after the header are gone
    path.write_bytes(bytes(data))
    r = analyze_file({"id": "e", "audio_filepath": str(path)}, P)
    assert r.reason == "unreadable" and "decode failed at 0.000 s" in r.detail


def test_real_speech_recorded_at_8_khz_is_found(tmp_path):
    """TEN-VAD gives narrowband speech lower probabilities: a real speaker's "ten of clubs"
    through 8 kHz peaks at 0.48 and was no_speech at 0.5. A file at vad.narrowband_rate or
    less starts speech at narrowband_threshold, keeps it while narrowband_release holds."""
    from tests import real_speech as R

    found = {"wide": 0.0, "8k": 0.0}
    for u in R.cards() + R.librivox():
        copy = R.through_codec(u.path, "resample8k", tmp_path / f"{u.path.stem}.wav")
        wide = analyze_file({"id": u.path.stem, "audio_filepath": str(u.path), "sample_rate": 16000}, P)
        narrow = analyze_file({"id": u.path.stem, "audio_filepath": str(copy), "sample_rate": 8000}, P)
        assert isinstance(narrow, Accepted), (u.path.name, narrow)
        found["wide"] += wide.data["stats"]["speech_ratio"] * wide.data["stats"]["duration"]
        found["8k"] += narrow.data["stats"]["speech_ratio"] * narrow.data["stats"]["duration"]
    assert found["8k"] >= 0.9 * found["wide"], found
    silent = analyze_file({"id": "c1", "audio_filepath": str(tmp_path / "001.wav"), "sample_rate": 8000}, P)
    assert isinstance(silent, Accepted)
    # the same file taken as wideband: the 0.5 threshold finds nothing in it
    first = analyze_file({"id": "c1", "audio_filepath": str(tmp_path / "001.wav"), "sample_rate": 16000}, P)
    assert isinstance(first, Rejected) and first.reason == "no_speech"


@pytest.mark.parametrize("kind", ["white", "pink"])
def test_noise_at_8_khz_is_no_speech(tmp_path, kind):
    rng = np.random.default_rng(1)
    x = rng.normal(0, 0.05, 80000) if kind == "white" else np.cumsum(rng.normal(0, 0.01, 80000)) * 0.02
    sf.write(tmp_path / "n.wav", x.astype(np.float32), 8000, subtype="PCM_16")
    r = analyze_file({"id": "n", "audio_filepath": str(tmp_path / "n.wav"), "sample_rate": 8000}, P)
    assert isinstance(r, Rejected) and r.reason == "no_speech", r


def test_the_demo_8_khz_file_keeps_its_phrases_as_narrowband():
    rel = "edge_cases/stereo_8k.wav"
    r = analyze_file({**demo_file(rel), "sample_rate": 8000}, P).data
    truth = TRUTH["files"][rel]
    assert len(r["segments"]) == len(truth["speech"])
    for seg, t in zip(r["segments"], truth["speech"]):
        assert abs(seg["offset"] - t["start"]) < 0.1 and abs(seg["offset"] + seg["duration"] - t["end"]) < 0.2
