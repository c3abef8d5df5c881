"""VAD of a transcribed dataset (text: given or verify) on real speech: each manifest line is one
utterance, trimmed to its speech with its own bounds kept, never cut; a line whose speech spans
more than vad.max_segment is passed whole, marked long_form, for the align job."""

import numpy as np
import soundfile as sf

from speechprep.core.shardjob import Accepted, Rejected
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.vad.stage import VadParams, analyze_file, run_shard
from tests import real_speech as rs
from tests.support import params

P = params(VadParams, text="given")


def entry(u, **extra):
    return {"id": u.path.stem, "audio_filepath": str(u.path), "text": u.text, "speaker": u.speaker, **extra}


def test_each_real_utterance_is_one_trimmed_segment_with_its_text():
    for u in rs.librivox() + rs.cards():
        o = analyze_file(entry(u, language="en", gender="male"), P)
        assert isinstance(o, Accepted), (u.path, o)
        (seg,) = o.data["segments"]
        duration = sf.info(str(u.path)).duration
        assert seg["id"] == f"{u.path.stem}_0000" and seg["file_id"] == u.path.stem
        assert (seg["vad_offset"], seg["vad_duration"]) == (0.0, round(duration, 4))  # the line's bounds
        assert seg["offset"] >= 0.0 and seg["offset"] + seg["duration"] <= duration + 1e-3
        assert seg["duration"] >= 0.6 * duration  # trimmed, not cut: the speech is all there
        assert (seg["text"], seg["speaker"], seg["language"], seg["gender"]) == (u.text, u.speaker, "en", "male")
        assert "long_form" not in seg
        # the statistics are VAD's own, as for any file
        assert o.data["stats"]["id"] == u.path.stem and o.data["stats"]["n_segments"] >= 1
    # with the same settings, text: asr cuts the 7-second sentence at its pauses
    cut = analyze_file(entry(rs.librivox()[0]), params(VadParams, text="asr", max_segment=3.0)).data["segments"]
    kept = analyze_file(entry(rs.librivox()[0]), params(VadParams, text="given", max_segment=8.0)).data["segments"]
    assert len(cut) > 1 and len(kept) == 1 and "text" not in cut[0]


def test_leading_and_trailing_silence_is_trimmed_away(tmp_path):
    u = rs.librivox()[1]
    x, sr = rs.read(u.path)
    padded = np.concatenate([np.zeros(2 * sr, np.float32), x, np.zeros(3 * sr, np.float32)])
    path = tmp_path / "padded.wav"
    sf.write(str(path), padded, sr)
    plain = analyze_file(entry(u), P).data["segments"][0]
    seg = analyze_file({**entry(u), "id": "p", "audio_filepath": str(path)}, P).data["segments"][0]
    n = len(x) / sr  # the recording's own span is [2, 2 + n] in the padded file: the 5 s of silence are gone
    assert 2.0 - P.pad - 1e-3 <= seg["offset"] <= 2.0 + plain["offset"] + 0.05
    assert 2.0 + plain["offset"] + plain["duration"] - 0.05 <= seg["offset"] + seg["duration"] <= 2.0 + n + P.pad
    assert seg["vad_duration"] == round(len(padded) / sr, 4)


def test_silence_is_no_speech_and_a_long_recording_is_passed_whole(tmp_path):
    sr = 16000
    silence = tmp_path / "silence.wav"
    sf.write(str(silence), np.zeros(2 * sr, np.float32), sr)
    o = analyze_file({"id": "s", "audio_filepath": str(silence), "text": "nothing was said"}, P)
    assert isinstance(o, Rejected) and o.reason == "no_speech"
    # the five LibriVox sentences end to end: 25 s of one reader, longer than max_segment 20
    book = tmp_path / "book.wav"
    sf.write(str(book), np.concatenate([rs.read(u.path)[0] for u in rs.librivox()]), sr)
    text = " ".join(u.text + "." for u in rs.librivox())
    (seg,) = analyze_file({"id": "b", "audio_filepath": str(book), "text": text}, params(VadParams, text="verify",
                          max_segment=20.0)).data["segments"]  # fmt: skip
    assert seg["long_form"] is True and seg["offset"] == 0.0
    assert seg["duration"] == round(sf.info(str(book)).duration, 4) and seg["text"] == text


def test_a_shard_accounts_for_every_line(tmp_path):
    lines = [entry(u) for u in rs.cards()] + [{"id": "gone", "audio_filepath": str(tmp_path / "x.wav"), "text": "a"}]
    write_jsonl(tmp_path / "shard-0000.jsonl", lines)
    out = {k: tmp_path / f"{k}.jsonl" for k in ("segments", "stats", "rejects")}
    run_shard(str(tmp_path / "shard-0000.jsonl"), *(str(out[k]) for k in ("segments", "stats", "rejects")), P, 1,
              str(tmp_path / "resume.jsonl"))  # fmt: skip
    segs, rejects = list(read_jsonl(out["segments"])), list(read_jsonl(out["rejects"]))
    assert [s["file_id"] for s in segs] == [x["id"] for x in lines[:-1]]
    assert [(r["id"], r["reason"]) for r in rejects] == [("gone", "missing")]
    assert [s["text"] for s in segs] == [u.text for u in rs.cards()]
