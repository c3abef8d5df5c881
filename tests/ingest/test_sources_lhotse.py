"""Lhotse manifests and recipes as ingest sources (speechprep.ingest.sources.lhotse, .lhotse_recipe).

Real voices with their real text (tests/ingest/source_corpora.py): manifests written by
Lhotse's own API (``Recording.from_file``, ``RecordingSet.to_file``, ``CutSet``) and by its
recipes' ``prepare_*`` on small copies of LibriSpeech, LibriTTS and VCTK."""

import gzip
import json
import os

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("lhotse")

from lhotse import CutSet, Recording, RecordingSet, SupervisionSegment, SupervisionSet
from lhotse.audio import AudioSource

from speechprep.errors import UsageError
from speechprep.ingest.sources import READERS, Collect
from speechprep.ingest.sources.lhotse_recipe import NetworkRefused, no_network
from tests import real_speech
from tests.ingest import source_corpora as corpora


def read(spec, key="lhotse"):
    out = Collect()
    READERS[key](spec, out)
    return out


def by_id(out):
    return {x["source_id"]: x for x in out.lines}


def accounted(out, ids):
    """Every source id once, in the lines or the rejects."""
    got = [x["source_id"] for x in out.lines] + [r["source_id"] for r in out.rejects]
    assert sorted(got) == sorted(ids), (sorted(got), sorted(ids))


@pytest.fixture(scope="module")
def voices():
    return corpora.voices()


@pytest.fixture()
def manifests(tmp_path, voices):
    """Lhotse's own manifests of real recordings: one supervision a file for two voices, a
    recording of two read sentences joined (two supervisions at their offsets), and the ALSA
    voice's files with no supervision (whole files, for VAD)."""
    recs, sups, truth = [], [], {}
    for v in voices[:2]:
        for k, u in enumerate(v.utterances):
            r = Recording.from_file(u.path, recording_id=f"{v.number}-{k}")
            recs.append(r)
            sid = f"{v.number}-{k}-sup"
            sups.append(SupervisionSegment(sid, r.id, 0.0, r.duration, channel=0, text=u.text, speaker=v.number,
                                           gender=v.gender, language="English"))  # fmt: skip
            truth[sid] = {"text": u.text, "speaker": v.number, "offset": 0.0, "duration": r.duration, "path": u.path}
    a, b = voices[0].utterances[:2]
    xa, sr = real_speech.read(a.path)
    xb, _ = real_speech.read(b.path)
    joined = tmp_path / "joined.flac"
    sf.write(joined, np.concatenate([xa, np.zeros(sr // 2, np.float32), xb]), sr, subtype="PCM_16")
    r = Recording.from_file(joined, recording_id="joined")
    recs.append(r)
    for sid, start, x, u in (("joined-a", 0.0, xa, a), ("joined-b", (len(xa) + sr // 2) / sr, xb, b)):
        sups.append(SupervisionSegment(sid, "joined", start, len(x) / sr, channel=0, text=u.text, speaker="1001"))
        truth[sid] = {"text": u.text, "speaker": "1001", "offset": start, "duration": len(x) / sr, "path": joined}
    whole = {}
    for u in voices[2].utterances:
        r = Recording.from_file(u.path)
        recs.append(r)
        whole[r.id] = {"duration": r.num_samples / r.sampling_rate, "path": u.path}
    RecordingSet.from_recordings(recs).to_file(tmp_path / "recordings.jsonl.gz")
    SupervisionSet.from_segments(sups).to_file(tmp_path / "supervisions.jsonl.gz")
    spec = {
        "recordings": str(tmp_path / "recordings.jsonl.gz"),
        "supervisions": str(tmp_path / "supervisions.jsonl.gz"),
    }
    return spec, truth, whole, recs, sups


def test_supervisions_are_utterances_and_bare_recordings_whole_files(manifests):
    spec, truth, whole, _, _ = manifests
    out = read(spec)
    assert not out.rejects
    got = by_id(out)
    assert set(got) == set(truth) | set(whole)
    for sid, t in truth.items():
        x = got[sid]
        assert x["audio_filepath"] == os.path.abspath(t["path"])
        assert (x["text"], x["speaker"]) == (t["text"], t["speaker"])
        assert x["offset"] == pytest.approx(t["offset"], abs=1e-6)
        assert x["duration"] == pytest.approx(t["duration"], abs=1e-3)
        assert "channel" not in x  # mono files
    assert got["1001-0-sup"]["gender"] == "F" and got["1001-0-sup"]["language"] == "en"  # Lhotse's "English"
    for rid, w in whole.items():  # no supervision: the whole file, its duration from num_samples
        x = got[rid]
        assert x["audio_filepath"] == os.path.abspath(w["path"]) and "offset" not in x and "text" not in x
        assert x["duration"] == pytest.approx(sf.info(str(w["path"])).duration, abs=1e-6)


def test_a_cutset_reads_as_its_recordings_and_supervisions(tmp_path, manifests):
    spec, truth, whole, recs, sups = manifests
    cuts = CutSet.from_manifests(
        recordings=RecordingSet.from_recordings(recs), supervisions=SupervisionSet.from_segments(sups)
    )
    path = tmp_path / "cuts.jsonl.gz"
    cuts.to_file(path)
    got, plain = by_id(read({"cuts": str(path)})), by_id(read(spec))
    assert {k: got[k] for k in truth} == {k: plain[k] for k in truth}
    # a cut without supervisions is its whole recording, under the cut's id
    bare = {c.id: c.recording_id for c in cuts if not c.supervisions}
    assert set(got) == set(truth) | set(bare)
    assert all({**got[c], "source_id": r} == plain[r] for c, r in bare.items())
    for sid, t in truth.items():
        assert got[sid]["offset"] == pytest.approx(t["offset"], abs=1e-6) and got[sid]["text"] == t["text"]
    # a cut of a stretch of a recording, and a MixedCut (two recordings mixed: not one file)
    joined = next(c for c in cuts if c.recording_id == "joined")
    part = joined.truncate(offset=1.0, duration=2.0).drop_supervisions()
    mixed = cuts[0].append(cuts[1])
    CutSet.from_cuts([part.with_id("stretch"), mixed.with_id("mixed")]).to_file(tmp_path / "odd.jsonl.gz")
    out = read({"cuts": str(tmp_path / "odd.jsonl.gz")})
    stretch = by_id(out)["stretch"]
    assert (stretch["offset"], stretch["duration"]) == (pytest.approx(1.0), pytest.approx(2.0))
    assert out.reasons() == {"mixed": "mixed_cut"}


def test_multi_channel_takes_the_channel_the_supervision_names(tmp_path, voices):
    a, b = voices[0].utterances[0], voices[1].utterances[0]
    xa, sr = real_speech.read(a.path)
    xb, _ = real_speech.read(b.path)
    n = max(len(xa), len(xb))
    stereo = np.zeros((n, 2), np.float32)
    stereo[: len(xa), 0], stereo[: len(xb), 1] = xa, xb
    sf.write(tmp_path / "stereo.wav", stereo, sr, subtype="PCM_16")
    r = Recording.from_file(tmp_path / "stereo.wav", recording_id="stereo")
    assert r.channel_ids == [0, 1]
    # the same two voices as one recording of two mono files (a source per channel)
    for name, x in (("left.wav", xa), ("right.wav", xb)):
        sf.write(tmp_path / name, np.pad(x, (0, n - len(x))), sr, subtype="PCM_16")
    two = Recording(
        "two_files",
        [AudioSource("file", [0], str(tmp_path / "left.wav")), AudioSource("file", [1], str(tmp_path / "right.wav"))],
        sr, n, n / sr,
    )  # fmt: skip
    sups = [
        SupervisionSegment("st-right", "stereo", 0.0, len(xb) / sr, channel=1, text=b.text, speaker="1002"),
        SupervisionSegment("st-both", "stereo", 0.0, len(xa) / sr, channel=[0, 1], text=a.text),
        SupervisionSegment("st-three", "stereo", 0.0, 1.0, channel=2, text="x"),
        SupervisionSegment("two-right", "two_files", 0.0, len(xb) / sr, channel=1, text=b.text, speaker="1002"),
    ]
    RecordingSet.from_recordings([r, two]).to_file(tmp_path / "r.jsonl.gz")
    SupervisionSet.from_segments(sups).to_file(tmp_path / "s.jsonl.gz")
    out = read({"recordings": str(tmp_path / "r.jsonl.gz"), "supervisions": str(tmp_path / "s.jsonl.gz")})
    got = by_id(out)
    assert got["st-right"]["channel"] == 1 and got["st-right"]["audio_filepath"] == str(tmp_path / "stereo.wav")
    assert "channel" not in got["st-both"]  # every channel of the file: the file whole
    assert got["two-right"]["audio_filepath"] == str(tmp_path / "right.wav") and "channel" not in got["two-right"]
    assert out.reasons() == {"st-three": "bad_channel"}
    # the channel a line names is the voice the supervision says: ingest's reader takes it
    from speechprep.io.audio import read_segment

    y = read_segment(got["st-right"], 16000)
    assert np.corrcoef(y[: len(xb)], xb[: len(y)])[0, 1] > 0.99


def _raw_line(path, raw: bytes):
    with gzip.open(path, "ab") as f:
        f.write(raw)


def test_bad_input_each_with_its_own_reason_nothing_run(tmp_path, voices):
    """A missing file, a supervision past its recording's end, a duplicate id, non-UTF-8 text,
    a supervision of no recording, a command and a URL source (never run: the command would
    write a file), Lhotse transforms, lines that are not JSON or not a supervision."""
    u, w = voices[0].utterances[0], voices[0].utterances[1]
    good = Recording.from_file(u.path, recording_id="good")
    gone_file = tmp_path / "gone.wav"
    sf.write(gone_file, real_speech.read(w.path)[0], 16000, subtype="PCM_16")
    gone = Recording.from_file(gone_file, recording_id="gone")
    gone_file.unlink()
    witness = tmp_path / "pwned"
    cmd = Recording("cmd", [AudioSource("command", [0], f"touch {witness}; cat {u.path}")], 16000, 16000, 1.0)
    url = Recording("url", [AudioSource("url", [0], "https://example.invalid/a.wav")], 16000, 16000, 1.0)
    fast = good.perturb_speed(1.1).with_id("fast") if hasattr(good, "with_id") else None
    recs = [good, gone, cmd, url]
    if fast is None:
        from dataclasses import replace

        fast = replace(good.perturb_speed(1.1), id="fast")
    recs.append(fast)
    rpath, spath = tmp_path / "r.jsonl.gz", tmp_path / "s.jsonl.gz"
    RecordingSet.from_recordings(recs).to_file(rpath)
    _raw_line(rpath, json.dumps({**good.to_dict(), "id": "good"}).encode() + b"\n")  # a second "good"
    _raw_line(rpath, json.dumps({**good.to_dict(), "id": "zero", "sampling_rate": 0}).encode() + b"\n")
    d = good.duration
    sups = [
        SupervisionSegment("ok", "good", 0.0, d / 2, text=u.text, speaker="1001"),
        SupervisionSegment("in-gone", "gone", 0.0, 1.0, text=w.text),
        SupervisionSegment("past-end", "good", d / 2, d, text="past"),
        SupervisionSegment("orphan", "nowhere", 0.0, 1.0, text="no recording"),
        SupervisionSegment("by-command", "cmd", 0.0, 1.0, text="a command"),
        SupervisionSegment("by-url", "url", 0.0, 1.0, text="a url"),
        SupervisionSegment("speeded", "fast", 0.0, 1.0, text="speeded"),
        SupervisionSegment("at-zero-hz", "zero", 0.0, 1.0, text="a recording of no rate"),
        SupervisionSegment("ok", "good", d / 2, d / 4, text="the same id again"),
    ]
    SupervisionSet.from_segments(sups).to_file(spath)
    bad_text = json.dumps(SupervisionSegment("latin1", "good", 0.0, 1.0, text="XX").to_dict()).encode()
    _raw_line(spath, bad_text.replace(b"XX", "café".encode("latin-1")) + b"\n")
    _raw_line(spath, b"{not json\n")
    _raw_line(spath, json.dumps({"id": "half", "recording_id": "good"}).encode() + b"\n")  # no start/duration
    out = read({"recordings": str(rpath), "supervisions": str(spath)})
    assert not witness.exists()
    assert [x["source_id"] for x in out.lines] == ["ok"]
    reasons = out.reasons()
    assert {k: v for k, v in reasons.items() if not k.startswith("s.jsonl.gz:")} == {
        "in-gone": "missing",
        "past-end": "segment_out_of_range",
        "orphan": "no_recording",
        "by-command": "command_not_allowed",
        "by-url": "source_url",
        "speeded": "lhotse_transforms",
        "at-zero-hz": "bad_line",
        "ok": "duplicate_id",
        "good": "duplicate_id",  # the recording given twice
        "half": "bad_line",
    }
    assert sorted(v for k, v in reasons.items() if k.startswith("s.jsonl.gz:")) == ["bad_encoding", "bad_line"]
    cmd_reject = next(r for r in out.rejects if r["source_id"] == "by-command")
    assert f"touch {witness}" in cmd_reject["detail"]
    assert len(out.lines) + len(out.rejects) == len(sups) + 3 + 1  # every supervision once, the second "good" too


def test_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        read({"recordings": str(tmp_path / "none.jsonl.gz")})
    with pytest.raises(UsageError, match="needs its recordings"):
        read({"supervisions": str(tmp_path / "s.jsonl.gz")})
    (tmp_path / "r.json").write_text("[]", encoding="utf-8")
    with pytest.raises(UsageError, match="jsonl"):
        read({"recordings": str(tmp_path / "r.json")})


# -- recipes ------------------------------------------------------------------------------------
RECIPES = {
    "librispeech": (corpora.librispeech, {"parts": ["dev-clean"]}),
    "libritts": (corpora.libritts, {"parts": ["dev-clean"]}),
    "vctk": (corpora.vctk, {}),
}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_a_recipe_on_a_local_copy_keeps_text_speakers_ids(tmp_path, name):
    build, extra = RECIPES[name]
    root = tmp_path / name
    truth = build(root)
    out = read({"name": name, "corpus_dir": str(root), **extra}, "lhotse_recipe")
    assert not out.rejects
    got = by_id(out)
    assert set(got) == set(truth)
    for sid, t in truth.items():
        x = got[sid]
        assert (x["text"], x["speaker"]) == (t["text"], t["speaker"])
        assert x.get("gender") == t.get("gender") and x["language"] == "en"
        assert x["duration"] == pytest.approx(t["duration"], abs=1e-3) and x["offset"] == 0.0
        assert os.path.isfile(x["audio_filepath"]) and x["audio_filepath"].startswith(str(root))
    assert not list(root.rglob("*.jsonl.gz"))  # nothing written beside the corpus


def test_the_recipes_own_manifests_read_the_same(tmp_path):
    """prepare_librispeech's output_dir manifests, read by the manifest reader, give the
    lines the recipe reader gives."""
    from lhotse.recipes import prepare_librispeech

    root = tmp_path / "LibriSpeech"
    corpora.librispeech(root)
    prepare_librispeech(root, dataset_parts=["dev-clean"], output_dir=tmp_path / "manifests")
    m = tmp_path / "manifests"
    spec = {
        "recordings": str(m / "librispeech_recordings_dev-clean.jsonl.gz"),
        "supervisions": str(m / "librispeech_supervisions_dev-clean.jsonl.gz"),
    }
    key = lambda x: x["source_id"]
    recipe = read({"name": "librispeech", "corpus_dir": str(root), "parts": "dev-clean"}, "lhotse_recipe")
    assert sorted(read(spec).lines, key=key) == sorted(recipe.lines, key=key) and len(recipe.lines) == 14


def test_a_recipe_that_would_download_says_so_and_stops(tmp_path, monkeypatch):
    """prepare_switchboard without its transcripts_dir fetches them from the web (into the
    working directory): refused, said, stopped, nothing fetched."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "swb").mkdir()
    spec = {"name": "switchboard", "corpus_dir": str(tmp_path / "swb"), "options": {"audio_dir": str(tmp_path / "swb")}}
    with pytest.raises(UsageError, match=r"tried to reach the network.*downloads nothing"):
        read(spec, "lhotse_recipe")
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size > 0]
    import urllib.request

    with pytest.raises(NetworkRefused), no_network():
        urllib.request.urlopen("http://127.0.0.1:9/")


def test_recipe_usage_errors(tmp_path):
    with pytest.raises(UsageError, match=r"no recipe 'nosuch'.*librispeech"):
        read({"name": "nosuch", "corpus_dir": str(tmp_path)}, "lhotse_recipe")
    with pytest.raises(UsageError, match="is not a directory"):
        read({"name": "librispeech", "corpus_dir": str(tmp_path / "none")}, "lhotse_recipe")
    with pytest.raises(UsageError, match="takes no 'download'"):
        read({"name": "librispeech", "corpus_dir": str(tmp_path), "options": {"download": True}}, "lhotse_recipe")
    with pytest.raises(UsageError, match="cannot read"):  # VCTK without its speaker-info.txt
        read({"name": "vctk", "corpus_dir": str(tmp_path)}, "lhotse_recipe")


def test_through_ingest_the_lines_keep_source_ids_and_rejects_their_reasons(tmp_path, manifests):
    """The ingest stage on a Lhotse dataset: every supervision and bare recording a manifest
    line with its source_id, text and bounds; a second run writes the same bytes."""
    from speechprep.ingest import stage
    from speechprep.ingest.params import IngestParams
    from speechprep.io.jsonio import read_jsonl
    from tests.support import config

    spec, truth, whole, _, _ = manifests
    out = tmp_path / "out"
    cfg = {**config(), "datasets": {"lh": {"lhotse": spec, "text": "asr", "probe": True}}}
    p = IngestParams.from_config(cfg, "lh", name="lh")

    def run():
        stage.run(p, str(out / "manifest.jsonl"), str(out / "rejects.jsonl"), str(out / "shards"), threads=2)
        return (out / "manifest.jsonl").read_bytes()

    first = run()
    lines = {x["source_id"]: x for x in read_jsonl(out / "manifest.jsonl")}
    assert set(lines) == set(truth) | set(whole) and not list(read_jsonl(out / "rejects.jsonl"))
    for sid, t in truth.items():
        assert (lines[sid]["text"], lines[sid]["speaker"]) == (t["text"], t["speaker"])
        assert lines[sid]["offset"] == pytest.approx(t["offset"], abs=1e-6)
    assert run() == first
