"""Kaldi data directories (speechprep.ingest.sources.kaldi), from real speech: SPHERE files behind
sph2pipe lines, FLAC behind flac lines, segments, and one line of each bad kind; nothing in
wav.scp is ever run."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechprep.errors import UsageError
from speechprep.ingest import stage as ingest
from speechprep.ingest.params import IngestParams
from speechprep.ingest.sources import READERS, Collect
from speechprep.ingest.sources.kaldi import Audio, decoded_name, parse_command, sphere_seconds
from speechprep.io.audio import read_segment
from speechprep.io.jsonio import read_jsonl
from tests import real_speech as rs
from tests.ingest import shorten as shn
from tests.ingest.source_layouts import kaldi_dir
from tests.support import config


def run(tmp_path, ds, name="k", exclude=None):
    out = tmp_path / "out"
    cfg = {**config(), "datasets": {name: ds}, "exclude": exclude}
    p = IngestParams.from_config(cfg, name, name=name)
    summary = ingest.run(p, str(out / "manifest.jsonl"), str(out / "rejects.jsonl"), str(out / "shards"), threads=2)
    return summary, list(read_jsonl(out / "manifest.jsonl")), list(read_jsonl(out / "rejects.jsonl"))


def keys(d):
    """Every key of every Kaldi table in ``d`` (spk2utt: its utterances; spk2gender: none)."""
    found = set()
    for name in ("wav.scp", "segments", "text", "utt2spk", "utt2lang", "spk2utt"):
        for raw in (d / name).read_bytes().splitlines():
            parts = raw.decode("utf-8", "backslashreplace").split()
            found.update(parts[1:] if name == "spk2utt" else parts[:1])
    return found


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("kaldi") / "data" / "train"
    return d, kaldi_dir(d, bad=True)


def test_every_utterance_read_or_rejected_with_its_reason(bad_dir, tmp_path):
    d, truth = bad_dir
    summary, manifest, rejects = run(tmp_path, {"kaldi": str(d), "text": "given", "probe": True})
    assert not truth.marker.exists()  # `evil touch PWNED |` was never run
    by_sid = {m["source_id"]: m for m in manifest}
    assert set(by_sid) == set(truth.utterances)
    for sid, want in truth.utterances.items():
        m = by_sid[sid]
        assert m["id"] == sid and m["text"] == want["text"] and m["speaker"] == want["speaker"]
        assert m["audio_filepath"] == want["audio_filepath"] and m["language"] == "en"
        assert m["offset"] == pytest.approx(want["offset"]) and m["duration"] == pytest.approx(want["duration"])
        assert m.get("channel") == want.get("channel")
    assert {by_sid["librivox_reader-0870"]["channels"], by_sid["cards_speaker-001"]["sample_rate"]} == {2, 16000}
    reasons = {}
    for r in rejects:
        assert r["stage"] == "ingest" and r["detail"] and r["id"] == r["source_id"]
        reasons.setdefault(r["source_id"], []).append(r["reason"])
    assert {k: v[0] for k, v in reasons.items() if k != truth.duplicate} == truth.rejects
    assert reasons[truth.duplicate] == ["duplicate_id"]  # its first line is read, the later one rejected
    evil = next(r for r in rejects if r["source_id"] == "evil-1")
    assert f"touch {truth.marker} |" in evil["detail"]  # the line's text
    # every key of every file: in the manifest or the rejects (the recordings by their segments)
    recordings = {line.split()[0] for line in (d / "wav.scp").read_text(encoding="utf-8").splitlines()}
    assert keys(d) - recordings <= set(by_sid) | set(reasons)
    assert summary["accepted"] == len(manifest) and summary["rejected"] == len(rejects)


def test_the_channel_a_sph2pipe_line_names_is_the_audio_read(bad_dir):
    d, truth = bad_dir
    out = Collect()
    READERS["kaldi"](str(d), out)
    line = next(x for x in out.lines if x["source_id"] == "cards_speaker-001")
    x = read_segment(line)  # channel 1 of the SPHERE file, from the segment's offset
    want, _ = rs.read(rs.cards()[0].path, 16000)
    assert len(x) == pytest.approx(len(want), abs=2)
    n = min(len(x), len(want))
    assert np.abs(x[:n] - want[:n]).max() < 1e-3  # 16-bit PCM of the same samples
    other = read_segment({**line, "channel": 0})  # the LibriVox channel at that time is not the cards
    assert np.abs(other[:n] - want[:n]).max() > 0.05


@pytest.mark.parametrize(
    ("command", "audio"),
    [
        ("sph2pipe -f wav -p -c 2 /c/x.sph", Audio("/c/x.sph", 1)),
        ("/opt/kaldi/tools/sph2pipe_v2.5/sph2pipe -f wav x.sph", Audio("x.sph")),
        ("sph2pipe -p x.sph", Audio("x.sph")),
        ("flac -c -d -s 'a b.flac'", Audio("a b.flac")),
        ("sox x.wav -t wav -", Audio("x.wav")),
        ("ffmpeg -hide_banner -i x.m4a -f wav -", Audio("x.m4a")),
    ],
)
def test_decoder_commands_give_their_file(command, audio):
    assert parse_command(command) == audio


@pytest.mark.parametrize(
    "command",
    [
        "sph2pipe -f wav -t 1:2 x.sph",  # a time range: not the file as it is
        "sox x.wav -t wav - remix 1",
        "sox x.wav -r 8000 -t wav -",
        "ffmpeg -i x.wav -af volume=2 -f wav -",
        "flac -d x.flac",  # to a file, not stdout
        "cat x.wav",
        "sph2pipe x.sph | sox -t wav - -t wav -",
        'python3 -c \'open("/tmp/x", "w", encoding="utf-8")\'',
    ],
)
def test_other_commands_are_not_read(command):
    with pytest.raises(ValueError):
        parse_command(command)


def whole_files(d, seconds_said):
    """A Kaldi directory without segments: two real recordings whole, utt2dur saying ``seconds_said``."""
    d.mkdir(parents=True)
    utts = rs.librivox()[:2]
    (d / "wav.scp").write_text("".join(f"r{k} {u.path}\n" for k, u in enumerate(utts)), encoding="utf-8")
    (d / "text").write_text("".join(f"r{k} {u.text}\n" for k, u in enumerate(utts)), encoding="utf-8")
    (d / "utt2spk").write_text("r0 reader\nr1 reader\n", encoding="utf-8")
    (d / "spk2gender").write_text("reader m\n", encoding="utf-8")
    (d / "utt2dur").write_text("".join(f"r{k} {seconds_said}\n" for k in range(2)), encoding="utf-8")
    return utts


def test_durations_from_utt2dur_unless_probe_is_asked(tmp_path):
    utts = whole_files(tmp_path / "d", 9.25)
    _, trusted, rejects = run(tmp_path / "a", {"kaldi": str(tmp_path / "d"), "probe": False})
    assert not rejects and [m["duration"] for m in trusted] == [9.25, 9.25]  # no header was read
    assert all(m["sample_rate"] is None and "offset" not in m and m["gender"] == "male" for m in trusted)
    _, probed, _ = run(tmp_path / "b", {"kaldi": str(tmp_path / "d"), "probe": True})
    assert [m["duration"] for m in probed] == [pytest.approx(sf.info(u.path).duration) for u in utts]


def test_probe_false_touches_no_file_and_leaves_a_missing_one_to_vad(tmp_path):
    """With ``probe: false`` and utt2dur no file is checked (10^6 ``stat`` calls are ~15 s): a
    missing file passes ingest, as a manifest line's does, and VAD rejects it ``missing``;
    ``probe: true`` rejects it at ingest, naming its wav.scp line."""
    whole_files(tmp_path / "d", 9.25)
    scp = tmp_path / "d" / "wav.scp"
    scp.write_text(
        scp.read_text(encoding="utf-8").splitlines()[0] + f"\nr1 {tmp_path / 'gone.wav'}\n", encoding="utf-8"
    )
    _, trusted, rejects = run(tmp_path / "a", {"kaldi": str(tmp_path / "d"), "probe": False})
    assert not rejects and [m["id"] for m in trusted] == ["r0", "r1"]
    _, probed, rejects = run(tmp_path / "b", {"kaldi": str(tmp_path / "d"), "probe": True})
    assert [m["id"] for m in probed] == ["r0"]
    assert [(r["id"], r["reason"]) for r in rejects] == [("r1", "missing")] and "wav.scp line 2" in rejects[0]["detail"]


def test_without_utt2dur_the_headers_are_read(tmp_path):
    utts = whole_files(tmp_path / "d", 1.0)
    (tmp_path / "d" / "utt2dur").unlink()
    _, manifest, _ = run(tmp_path, {"kaldi": str(tmp_path / "d"), "probe": False})
    assert [m["duration"] for m in manifest] == [pytest.approx(sf.info(u.path).duration) for u in utts]


def test_a_grown_directory_keeps_old_ids_shards_and_lines(tmp_path):
    d = tmp_path / "d"
    kaldi_dir(d, alsa=1)
    full = (d / "segments").read_text(encoding="utf-8").splitlines()
    (d / "segments").write_text("".join(x + "\n" for x in full[:6]), encoding="utf-8")
    ds = {"kaldi": str(d), "text": "given", "probe": False, "shard_hours": 0.002}
    _, before, _ = run(tmp_path, ds)
    shards_before = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "out" / "shards").iterdir()}
    (d / "segments").write_text("".join(x + "\n" for x in full), encoding="utf-8")
    _, after, rejects = run(tmp_path, ds)
    assert len(after) == len(full) == len(before) + 5 and not [r for r in rejects if r["reason"] != "no_segments"]
    old = {m["id"]: m for m in after}
    assert all(old[m["id"]] == m for m in before)  # old lines unchanged
    shards_after = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "out" / "shards").iterdir()}
    assert all(shards_after[k] == v for k, v in shards_before.items())  # old shards unchanged


def test_text_given_rejects_an_utterance_without_text_and_exclude_takes_source_ids(tmp_path):
    whole_files(tmp_path / "d", 3.0)
    (tmp_path / "d" / "text").write_text("r0 he was not an ill disposed young man\n", encoding="utf-8")
    (tmp_path / "x.txt").write_text("r0\n", encoding="utf-8")
    _, manifest, rejects = run(
        tmp_path, {"kaldi": str(tmp_path / "d"), "text": "given"}, exclude=str(tmp_path / "x.txt")
    )
    assert not manifest
    assert sorted((r["id"], r["reason"]) for r in rejects) == [("r0", "excluded"), ("r1", "no_text")]


# -- shorten-compressed SPHERE (LDC's corpora), decoded by ffmpeg here -----------------------

FFMPEG_PCM = ["ffmpeg", "-hide_banner", "-nostdin", "-v", "error", "-f", "shn", "-i", "pipe:0", "-f", "s16le", "-"]


@pytest.fixture(scope="module")
def shorten_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("kaldi") / "data" / "train"
    return d, kaldi_dir(d, bad=True, shorten=True)


def test_the_test_shorten_encoder_is_what_ffmpeg_decodes(shorten_dir):
    _, truth = shorten_dir
    for x in truth.samples.values():  # the AN4 utterance (mono) and read2ch (two channels)
        for order in ("01", "10"):
            stream = shn.encode(x, order, verbatim=shn.wav_header(16000, x.shape[1], len(x)))
            p = subprocess.run(FFMPEG_PCM, input=stream, capture_output=True, check=True)
            assert np.array_equal(np.frombuffer(p.stdout, "<i2").reshape(-1, x.shape[1]), x)
    # NIST's embedded stream carries no RIFF header, which ffmpeg's decoder needs: hence the splice
    p = subprocess.run(FFMPEG_PCM, input=shn.encode(x), capture_output=True)
    assert not p.stdout and b"missing verbatim section" in p.stderr


def test_shorten_sphere_files_ingest_to_flac_sample_for_sample(shorten_dir, tmp_path):
    d, truth = shorten_dir
    assert shutil.which("sph2pipe") is None  # so ffmpeg decodes them (shutil.which: the reader's choice)
    summary, manifest, rejects = run(tmp_path, {"kaldi": str(d), "text": "given", "probe": True})
    by_sid = {m["source_id"]: m for m in manifest}
    assert set(by_sid) == set(truth.utterances)  # the cut file costs only its own utterance
    audio = tmp_path / "out" / "audio"
    flacs = {}
    for sid, want in truth.utterances.items():
        m = by_sid[sid]
        assert m["text"] == want["text"] and m.get("channel") == want.get("channel")
        assert m["offset"] == pytest.approx(want["offset"]) and m["duration"] == pytest.approx(want["duration"])
        if want["audio_filepath"].endswith(".sph"):  # decoded once per file, every channel
            name = decoded_name(want["audio_filepath"])
            assert m["audio_filepath"] == str(audio / f"{name}.flac") and m["sample_rate"] == 16000
            flacs[m["audio_filepath"]] = want["audio_filepath"]
            x = read_segment(m)  # the channel the line names, from its offset
            orig = truth.samples[want["audio_filepath"]][:, want.get("channel", 0)]
            at = round(want["offset"] * 16000)
            assert np.array_equal(np.round(x * 32768).astype(np.int16), orig[at : at + len(x)])
            assert len(x) == pytest.approx(want["duration"] * 16000, abs=2)
    assert sorted(Path(f).name.split("-")[0] for f in flacs) == ["an4", "read2ch"]  # one FLAC a file
    assert sorted(p.name for p in audio.iterdir()) == sorted(Path(f).name for f in flacs)
    for flac, sph in flacs.items():
        y, sr = sf.read(flac, dtype="int16", always_2d=True)
        assert sr == 16000 and sf.info(flac).subtype == "PCM_16" and np.array_equal(y, truth.samples[sph])
    cut = [r for r in rejects if r["source_id"] == "cut-1"]
    assert [r["reason"] for r in cut] == ["bad_shorten"] and "the header says sample_count 44580" in cut[0]["detail"]
    assert {r["source_id"]: r["reason"] for r in rejects if r["source_id"] != truth.duplicate} == truth.rejects
    # a second run writes nothing again: each FLAC is left as it is
    stamps = {f: os.stat(f).st_mtime_ns for f in flacs}
    _, again, _ = run(tmp_path, {"kaldi": str(d), "text": "given", "probe": True})
    assert again == manifest and stamps == {f: os.stat(f).st_mtime_ns for f in flacs}


def test_a_listing_names_the_shorten_files_their_seconds_from_the_header(shorten_dir, tmp_path):
    d, truth = shorten_dir
    p = IngestParams.from_config({**config(), "datasets": {"k": {"kaldi": str(d), "text": "given"}}}, "k", name="k")
    n = ingest.items(p, str(tmp_path / "items.jsonl"), threads=2)
    items = {r["id"]: r for r in read_jsonl(tmp_path / "items.jsonl")}
    assert n == len(items) and not (tmp_path / "audio").exists()  # nothing decoded
    mono = truth.utterances["an4-goforward"]["audio_filepath"]
    assert items["an4-goforward"] == {"id": "an4-goforward", "file": mono, "seconds": 44580 / 16000}
    assert sphere_seconds(mono) == len(truth.samples[mono]) / 16000
    for sid, want in truth.utterances.items():
        assert items[sid]["file"] == want["audio_filepath"]
        assert items[sid]["seconds"] == pytest.approx(want["duration"], abs=1e-4)
    assert items["cut-1"]["seconds"] == 44580 / 16000  # listed by its header: only decoding finds it cut


def test_a_shorten_file_that_fails_to_decode_or_has_no_decoder_is_rejected(tmp_path, monkeypatch):
    d = tmp_path / "d"
    d.mkdir()
    x = np.fromfile(next(p for p in rs.raw_utterances() if p.stem == "goforward"), dtype="<i2")
    good = shn.sphere(x, 16000)
    files = {
        "good": good,
        "junk": good[:1024] + b"ajkg\x02" + bytes(64),  # the magic, then no parameters
        "corrupt": good[:6024] + bytes(3000) + good[9024:],  # 3000 bytes of the blocks zeroed
        "ulaw": good[:1024].replace(b"-s26 pcm,embedded-shorten-v2.00", b"-s27 ulaw,embedded-shorten-v2.00"),
    }
    for name, data in files.items():
        (d / f"{name}.sph").write_bytes(data)
    (d / "wav.scp").write_text("".join(f"{k} sph2pipe -f wav -p {d / k}.sph |\n" for k in files), encoding="utf-8")
    out = Collect(str(tmp_path / "audio"))
    READERS["kaldi"](str(d), out)
    assert [x["source_id"] for x in out.lines] == ["good"]
    assert out.reasons() == {"junk": "bad_shorten", "corrupt": "bad_shorten", "ulaw": "no_decoder"}
    detail = {r["source_id"]: r["detail"] for r in out.rejects}
    assert "the stream ends inside its parameters" in detail["junk"] and "ffmpeg" in detail["corrupt"]
    assert "needs sph2pipe" in detail["ulaw"]  # ffmpeg's shorten decoder reads PCM alone
    monkeypatch.setenv("PATH", str(tmp_path))  # neither sph2pipe nor ffmpeg
    out = Collect(str(tmp_path / "audio2"))
    READERS["kaldi"](str(d), out)
    assert not out.lines and set(out.reasons().values()) == {"no_decoder"}


def test_a_directory_without_wav_scp_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"no wav\.scp"):
        READERS["kaldi"](str(tmp_path), Collect())
