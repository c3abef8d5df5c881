"""The diarize job of a shard (rule ``diarize``): files of conversations built from real and
synthetic voices, written through real codecs, their VAD segments as lines. What the job
writes is what the module decides on the whole file; every VAD segment ends once; a file's
audio is read only around its speech; a file that fails passes through; a model that fails
everywhere fails the job; killed with SIGKILL, the job resumes per file."""

import json
import re
import subprocess
import sys
from dataclasses import asdict, replace

import numpy as np
import pytest
import soundfile as sf

from speechprep.core.failures import SystematicFailure
from speechprep.diarize import stage
from speechprep.diarize.audio import SpanAudio, chunks
from speechprep.diarize.core import diarize_file
from speechprep.diarize.lines import segment_lines
from speechprep.diarize.params import DiarizeJobParams
from speechprep.io.jsonio import read_jsonl, write_jsonl
from tests.diarize import conversations as C
from tests.support import REPO
from tests.support import params as config_params

SR = 16000
KINDS = ("segments", "rejects", "turns", "speakers", "stats")


def lines_of(fid, path, conv):
    return [
        {
            "id": f"{fid}_{k:04d}",
            "file_id": fid,
            "audio_filepath": str(path),
            "offset": round(s, 4),
            "duration": round(e - s, 4),
        }
        for k, (s, e) in enumerate(conv.vad_segments())
    ]


def job_files(root, resume=True):
    out = {k: str(root / "diarize" / f"shard-0000.{k}.jsonl") for k in KINDS}
    part = str(root / "diarize" / ".partial" / "shard-0000.jsonl") if resume else None
    return stage.DiarizeFiles(str(root / "vad" / "shard-0000.segments.jsonl"), *out.values(), part)


def read(files):
    return {k: list(read_jsonl(getattr(files, "out" if k == "segments" else k))) for k in KINDS}


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    """Five files: pause-free turn changes of two real voices (float WAV: the job's audio is the
    array's exactly), overlaps of a real and an espeak-ng voice (FLAC), one real voice with a
    minute of silence in its middle (FLAC, 44.1 kHz: resampled), three voices (FLAC) and a
    file deleted after VAD."""
    root = tmp_path_factory.mktemp("shard")
    (root / "audio").mkdir()
    turns = C.turn_changes("librivox", "klettres_fr", seed=41)
    over = C.overlaps("cards", "espeak_us_male", seed=42)
    one = C.one_voice("klettres_nb", seed=43, seconds=12)
    half = len(one.audio) // 2
    one.audio = np.concatenate([one.audio[:half], np.zeros(60 * SR, np.float32), one.audio[half:]])
    shift = lambda t: t if t < half / SR else t + 60
    one.turns = [(shift(s), shift(e), v) for s, e, v in one.turns]
    three = C.three_voices(("alsa", "klettres_lt", "espeak_scottish"), seed=44, seconds=40)
    convs = {
        "turns": turns,
        "overlaps": over,
        "one": one,
        "three": three,
        "gone": C.one_voice("alsa", seed=45, seconds=6),
    }
    lines = []
    for fid, conv in convs.items():
        path = root / "audio" / (f"{fid}.wav" if fid == "turns" else f"{fid}.flac")
        if fid == "one":
            import soxr

            sf.write(path, soxr.resample(conv.audio, SR, 44100), 44100, subtype="PCM_16")
        elif fid == "turns":
            sf.write(path, conv.audio, SR, subtype="FLOAT")
        else:
            sf.write(path, conv.audio, SR, subtype="PCM_16")
        lines += lines_of(fid, path, conv)
    (root / "audio" / "gone.flac").unlink()
    write_jsonl(root / "vad" / "shard-0000.segments.jsonl", lines)
    return root, convs, lines


@pytest.fixture(scope="module")
def done(shard, model, params):
    root, convs, lines = shard
    files = job_files(root)
    summary = stage.run(files, config_params(DiarizeJobParams, device="cpu"), 1, model=model)
    return files, summary, read(files)


def test_the_job_writes_what_the_module_decides(shard, done, model, params):
    _, convs, lines = shard
    _, _, out = done
    conv = convs["turns"]
    mine = [x for x in lines if x["file_id"] == "turns"]
    result = diarize_file(model, conv.audio, [(x["offset"], x["offset"] + x["duration"]) for x in mine], params)
    kept, rejected = segment_lines(mine, result, tts=False)
    assert [x for x in out["segments"] if x["file_id"] == "turns"] == kept
    assert [x for x in out["rejects"] if x.get("file_id") == "turns"] == rejected
    assert any("diarize_source" in x for x in kept)  # the changes were cut
    turns = [t for t in out["turns"] if t["file_id"] == "turns"]
    assert {t["speaker"] for t in turns} == {"spk0", "spk1"}
    assert sum(t["end"] - t["start"] for t in turns) == pytest.approx(
        sum(x["duration"] for x in kept) + sum(x["duration"] for x in kept if x.get("overlap")), abs=0.05
    )
    speakers = [s for s in out["speakers"] if s["file_id"] == "turns"]
    assert [s["diarize_speaker"] for s in speakers] == ["spk0", "spk1"]
    assert all(abs(np.linalg.norm(s["centroid"]) - 1) < 1e-4 and len(s["centroid"]) == 256 for s in speakers)


def test_every_vad_segment_ends_once(shard, done):
    _, _, lines = shard
    _, summary, out = done
    ended = [x.get("diarize_source", x["id"]) for x in out["segments"]]
    ended += [r["id"] for r in out["rejects"]]
    assert sorted(set(ended)) == sorted(x["id"] for x in lines)
    kept_whole = [x["id"] for x in out["segments"] if "diarize_source" not in x]
    assert len(kept_whole) + len({x["diarize_source"] for x in out["segments"] if "diarize_source" in x}) + len(
        out["rejects"]
    ) == len(lines)
    assert {r["reason"] for r in out["rejects"]} <= {"multi_speaker"} and all(
        r["stage"] == "diarize" for r in out["rejects"]
    )
    assert any(x.get("overlap") for x in out["segments"])  # the ASR view keeps overlaps, flagged
    stats = {s["id"]: s for s in out["stats"]}
    assert set(stats) == {"turns", "overlaps", "one", "three", "gone"}
    assert summary["files"] == 5 and summary["segments"] == len(lines)
    assert stats["three"]["speakers"] == 3 and stats["overlaps"]["overlap"] >= 2
    assert stats["one"]["speakers"] == 1 and stats["one"]["cut"] == 0 and stats["one"]["multi_speaker"] == 0
    # one speaker: the file's lines as VAD wrote them (no diarize_speaker: curation pools it by file)
    assert [x for x in out["segments"] if x["file_id"] == "one"] == [x for x in lines if x["file_id"] == "one"]
    assert all(x["diarize_speaker"].startswith("spk") for x in out["segments"] if x["file_id"] == "three")


def test_audio_is_read_only_around_the_speech(shard, done):
    _, convs, lines = shard
    stats = {s["id"]: s for s in done[2]["stats"]}["one"]
    speech = sum(x["duration"] for x in lines if x["file_id"] == "one")
    n = sum(x["file_id"] == "one" for x in lines)
    assert stats["decoded_s"] <= 2 * (speech + 2 * n * 1.0)  # each chunk decoded about twice
    assert stats["decoded_s"] < 0.75 * convs["one"].duration  # the silent minute is never decoded
    audio = SpanAudio(lines[0]["audio_filepath"], [(1.0, 2.0), (2.5, 3.0), (9.0, 9.5)], pad=0.5, max_chunk=120)
    whole = sf.read(lines[0]["audio_filepath"], dtype="float32")[0]
    assert audio.chunks == [(8000, 56000), (136000, 160000)]  # touching segments joined
    assert np.array_equal(audio[SR : 3 * SR], whole[SR : 3 * SR])
    assert np.array_equal(audio[5 * SR : 5 * SR + 10], np.zeros(10, np.float32))  # between chunks: silence
    assert np.array_equal(audio[3 * SR : 9 * SR][: SR // 2], whole[3 * SR : 3 * SR + SR // 2])  # across a gap
    assert chunks([(0, 100), (100.5, 200)], 1.0, 120) == [(0, 101 * SR), (int(99.5 * SR), 201 * SR)]


def test_a_file_that_cannot_be_read_passes_through(shard, done):
    _, _, lines = shard
    _, _, out = done
    stats = {s["id"]: s for s in out["stats"]}["gone"]
    assert stats["status"] == "failed" and re.match("(missing|unreadable): ", stats["error"]), stats
    assert [x for x in out["segments"] if x["file_id"] == "gone"] == [x for x in lines if x["file_id"] == "gone"]
    assert not [t for t in out["turns"] if t["file_id"] == "gone"]


def test_a_model_that_fails_everywhere_fails_the_job(shard, tmp_path):
    """A real torch module of the wrong shape in the encoder's place: every file raises; the
    first two failures stop the job (model_failure.first_errors), naming the error."""
    import torch

    root, _, _ = shard
    broken = torch.nn.Linear(7, 256)
    broken.device = torch.device("cpu")
    p = config_params(DiarizeJobParams, device="cpu")
    p = replace(p, model_failure={**p.model_failure, "first_errors": 2})
    files = replace(job_files(root, resume=False), out=str(tmp_path / "s.jsonl"), rejects=str(tmp_path / "r.jsonl"))
    with pytest.raises(SystematicFailure, match=r"Resemblyzer fails systematically.*the first 2"):
        stage.run(files, p, 1, model=broken)


def command(root, p):
    f = job_files(root)
    flags = ["--segments", f.segments, "--params", json.dumps(asdict(p)), "--resume", f.resume]
    flags += ["--out", f.out, "--rejects", f.rejects, "--turns", f.turns, "--speakers", f.speakers, "--stats", f.stats]
    return [sys.executable, "-m", "speechprep", "diarize", "run", *flags]


def test_the_job_logs_each_files_speech_and_cpu_for_the_plan(shard, model, tmp_path):
    """Each file's seconds of speech and the CPU seconds spent on it, logged as the plan reads
    them (its diarization cost fit by file length: speechprep.workflow.pilot)."""
    from speechprep.core import logs
    from speechprep.workflow.pilot import file_costs

    _, _, lines = shard
    mine = [x for x in lines if x["file_id"] in ("three", "gone")]
    write_jsonl(tmp_path / "vad" / "shard-0000.segments.jsonl", mine)
    log = tmp_path / "job.log"
    with open(log, "w", encoding="utf-8") as f:
        logs.setup("diarize", "shard-0000", stream=f)
        stage.run(job_files(tmp_path, resume=False), config_params(DiarizeJobParams, device="cpu"), 1, model=model)
    costs = file_costs(log)
    items = stage.file_items(mine)
    assert [x for x, _ in costs] == [round(i["duration"], 3) for i in items] and items[0]["id"] == "three"
    assert costs[0][0] > 30 and costs[0][1] > 0.2 and costs[1][1] < costs[0][1] / 10  # a file it could not read


@pytest.mark.slow
def test_sigkilled_job_resumes_per_file(shard, done, tmp_path):
    """Through the CLI: killed once two files are done, the job does only the other three again,
    and writes what an uninterrupted run wrote."""
    from tests.support import kill_when_checkpointed

    root, _, lines = shard
    write_jsonl(tmp_path / "vad" / "shard-0000.segments.jsonl", lines)
    p = config_params(DiarizeJobParams, device="cpu")
    resume = tmp_path / "diarize" / ".partial" / "shard-0000.jsonl"
    proc = subprocess.Popen(
        command(tmp_path, p), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    assert 2 <= kill_when_checkpointed(proc, resume, 2) < 5
    again = subprocess.run(command(tmp_path, p), cwd=REPO, capture_output=True, text=True, encoding="utf-8")
    assert again.returncode == 0, again.stderr[-3000:]
    m = re.search(r"(\d+) files, (\d+) already done or screened out .*, (\d+) to process", again.stderr)
    assert m and int(m.group(1)) == 5 and int(m.group(2)) >= 2 and int(m.group(3)) == 5 - int(m.group(2)), again.stderr
    assert not resume.exists()
    got = read(job_files(tmp_path))
    strip = lambda rows: [{k: v for k, v in r.items() if k != "centroid"} for r in rows]
    for k in KINDS:
        assert strip(got[k]) == strip(done[2][k]), k


def test_a_file_damaged_mid_stream_is_diarized_up_to_the_damage(tmp_path, model, params):
    """A FLAC cut short (a download that stopped): VAD keeps the audio before the damage and its
    segments end there; diarization reads the file the same way (it failed the whole file,
    "decode failed at 0.000 s", and passed its segments through undiarized)."""
    from speechprep.io.audio import stream_mono

    conv = C.turn_changes("librivox", "klettres_fr", seed=41)
    path = tmp_path / "damaged.flac"
    sf.write(path, conv.audio, SR, subtype="PCM_16")
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * 0.6)])
    at = []
    decoded = sum(len(x) for x in stream_mono(str(path), on_damage=lambda t, d: at.append(t)))
    assert at and decoded == pytest.approx(at[0] * SR, abs=1)
    lines = [x for x in lines_of("d", path, conv) if x["offset"] < at[0] - 0.3]  # what VAD keeps
    lines[-1]["duration"] = round(min(lines[-1]["duration"], at[0] - lines[-1]["offset"]), 4)
    item = stage.file_items(lines)[0]
    out = stage.diarize_item(model, item, params)
    assert out["stats"]["status"] == "ok" and out["stats"]["truncated_at"] == pytest.approx(at[0], abs=0.01)
    ended = {x.get("diarize_source", x["id"]) for x in out["lines"] + out["rejects"]}
    assert ended == {x["id"] for x in lines} and out["turns"]
    assert {t["speaker"] for t in out["turns"]} == {"spk0", "spk1"}


def test_each_channel_of_a_two_channel_file_is_diarized_alone(tmp_path, model, params):
    """A real 2-channel file (a telephone call's layout): the cards speaker alone on channel 0,
    turn changes of two other real voices on channel 1; a source names each utterance's channel
    (two ingest entries). Each is diarized from its own channel, as the file of that channel
    alone is: the same turns and speakers (one on the left, two on the right; the channels'
    mix holds three voices)."""
    left = C.one_voice("cards", seed=46, seconds=20)
    right = C.turn_changes("librivox", "klettres_fr", seed=41)
    n = max(len(left.audio), len(right.audio))
    stereo = np.stack([np.pad(c.audio, (0, n - len(c.audio))) for c in (left, right)], axis=1)
    path = tmp_path / "call.flac"
    sf.write(path, stereo, SR, subtype="PCM_16")
    lines = [
        {**x, "channel": channel}
        for fid, channel, conv in (("left", 0, left), ("right", 1, right))
        for x in lines_of(fid, path, conv)
    ]
    items = stage.file_items(lines)
    assert [(i["id"], i["channel"]) for i in items] == [("left", 0), ("right", 1)]
    out = {i["id"]: stage.diarize_item(model, i, params) for i in items}
    assert (out["left"]["stats"]["speakers"], out["right"]["stats"]["speakers"]) == (1, 2)
    for k, item in enumerate(items):
        mono = tmp_path / f"{item['id']}.flac"
        sf.write(mono, stereo[:, k], SR, subtype="PCM_16")
        alone = [
            {kk: v for kk, v in x.items() if kk != "channel"} | {"audio_filepath": str(mono)} for x in item["segments"]
        ]
        want = stage.diarize_item(model, stage.file_items(alone)[0], params)
        assert out[item["id"]]["turns"] == want["turns"] and out[item["id"]]["speakers"] == want["speakers"]
    pcm = sf.read(path, dtype="float32")[0]
    audio = SpanAudio(str(path), [(1.0, 3.0)], channel=1)
    assert np.array_equal(audio[SR : 3 * SR], pcm[SR : 3 * SR, 1])
