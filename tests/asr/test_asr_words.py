"""Word timestamps and confidences (``asr.timestamps``) from every NeMo model class, and
trimming to the words (``asr.trim``).

The models are tiny random-weight ones (``nemo_models``): what they say is
meaningless, so only the form of the words is checked, and which classes give them.
"""

import logging

import pytest
from nemo_models import KINDS
from shards import DEMO, TRUTH, clean_segments, params, run

from speechprep.asr import stage as asr
from speechprep.asr.words import NemoTranscriber
from tests.support import file_id

# the classes NeMo gives word timestamps and confidences for; AED (Canary) models need a
# separate timestamp model, so they get null
GIVES_WORDS = {"ctc", "rnnt", "tdt", "tdt_char", "hybrid"}


def loaded(model, path, timestamps):
    return NemoTranscriber(model, timestamps), asr.model_sample_rate(model), path


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_class_gives_well_formed_words_or_null_saying_so(tmp_path, nemo_model_file, kind, caplog):
    path = nemo_model_file(kind)
    model = asr.load_model(str(path), "cpu")
    segs = clean_segments(4)
    with caplog.at_level(logging.INFO, logger="speechprep.asr"):
        counts, lines, rejects = run(tmp_path, segs, loaded(model, path, True), p=params(model=str(path)))
    assert not rejects and counts["ok"] == 4
    by_id = {s["id"]: s for s in segs}
    if kind not in GIVES_WORDS:
        assert all(x["words"] is None and x["confidence"] is None for x in lines)
        assert "no word timestamps" in caplog.text and "words: null" in caplog.text
        return
    assert any(x["words"] for x in lines), lines  # not null everywhere
    for line in lines:
        seg, words = by_id[line["id"]], line["words"]
        assert isinstance(words, list)
        assert [w["start"] for w in words] == sorted(w["start"] for w in words)
        for w in words:
            assert set(w) == {"word", "start", "end", "confidence"}
            assert isinstance(w["word"], str) and w["word"]
            assert seg["offset"] <= w["start"] <= w["end"] <= round(seg["offset"] + seg["duration"], 3) + 1e-9
            assert 0.0 <= w["confidence"] <= 1.0
        if words:
            assert line["confidence"] == pytest.approx(sum(w["confidence"] for w in words) / len(words))
        else:
            assert line["confidence"] is None


TAIL = "vwxyz'"  # the last characters of the character vocabulary (nemo_models.CHARS)


@pytest.mark.parametrize("timestamps", [False, True])
def test_a_char_tdt_model_keeps_its_whole_vocabulary(tmp_path, nemo_model_file, timestamps):
    """NeMo's character TDT decoding drops the vocabulary's last characters from the text and
    fails computing their timestamps; the stage's repair keeps them, words and all."""
    path = nemo_model_file("tdt_char")
    model = asr.load_model(str(path), "cpu")
    counts, lines, rejects = run(
        tmp_path, clean_segments(6), loaded(model, path, timestamps), p=params(model=str(path), timestamps=timestamps)
    )
    assert not rejects and counts["ok"] == 6
    text = "".join(x["text"] for x in lines)
    assert any(c in text for c in TAIL), text  # the model emits them (nemo_models leans towards "y" and "'")
    if timestamps:
        assert all([w["word"] for w in x["words"]] == x["text"].split() for x in lines), lines


def test_words_are_null_from_the_first_batch_nemo_cannot_time(tmp_path, nemo_model_file, caplog):
    path = nemo_model_file("tdt_char")
    model = asr.load_model(str(path), "cpu")
    tx = loaded(model, path, True)
    # the decoding as NeMo 3.0 ships it: its timestamps fail on the vocabulary's last characters
    model.decoding.num_extra_outputs = model.joint.num_extra_outputs
    with caplog.at_level(logging.INFO, logger="speechprep.asr"):
        counts, lines, rejects = run(tmp_path, clean_segments(6), tx, p=params(model=str(path)))
    assert not rejects and counts["ok"] == 6
    assert all(x["words"] is None and x["confidence"] is None for x in lines)
    assert any(c in "".join(x["text"] for x in lines) for c in TAIL)
    said = [r.getMessage() for r in caplog.records if "cannot compute word timestamps" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("EncDecRNNTModel") and "IndexError" in said[0], said


def test_timestamps_off_lines_are_as_before(tmp_path, nemo_model_file):
    path = nemo_model_file("ctc")
    model = asr.load_model(str(path), "cpu")
    _, lines, _ = run(
        tmp_path, clean_segments(2), loaded(model, path, False), p=params(model=str(path), timestamps=False)
    )
    assert lines and all("words" not in x and "confidence" not in x and "vad_offset" not in x for x in lines)


def test_word_times_move_onto_the_source_clock_clipped_and_monotonic():
    seg = {"offset": 10.0, "duration": 2.0}
    words = [
        {"word": "a", "start": -0.05, "end": 0.4, "confidence": 0.9},
        {"word": "b", "start": 0.3, "end": 0.8, "confidence": 0.5},
        {"word": "c", "start": 0.2, "end": 2.5, "confidence": 0.7},  # out of order, past the end
    ]
    out = asr.on_source_clock({"text": "a b c", "words": words, "confidence": 0.7}, seg)["words"]
    assert [(w["start"], w["end"]) for w in out] == [(10.0, 10.4), (10.3, 10.8), (10.3, 12.0)]
    assert asr.on_source_clock({"text": "", "words": None}, seg)["words"] is None


def test_trim_cuts_to_the_words_with_the_pad_within_the_vad_bounds():
    line = {
        "offset": 10.0,
        "duration": 3.0,
        "words": [{"word": "a", "start": 10.05, "end": 10.5}, {"word": "b", "start": 11.0, "end": 11.6}],
    }
    out = asr.trimmed(line, 0.1)
    assert (out["offset"], out["duration"]) == (10.0, 1.7)  # 10.05 - 0.1 clipped to 10.0; 11.6 + 0.1
    assert (out["vad_offset"], out["vad_duration"]) == (10.0, 3.0)
    assert line["offset"] == 10.0 and "vad_offset" not in line  # the input is left alone
    out = asr.trimmed({**line, "words": line["words"][1:]}, 0.2)
    assert (out["offset"], out["duration"]) == (10.8, 1.0)
    # bounds on the 10 ms grid: 10.334 - 0.1 and 11.517 + 0.1 to the nearest 10 ms
    out = asr.trimmed({**line, "words": [{"word": "c", "start": 10.334, "end": 11.517}]}, 0.1)
    assert (out["offset"], out["duration"]) == (10.23, 1.39)
    # no words (null or none said): the VAD bounds stay
    for words in (None, []):
        out = asr.trimmed({"offset": 1.0, "duration": 2.0, "words": words}, 0.1)
        assert (out["offset"], out["duration"], out["vad_offset"], out["vad_duration"]) == (1.0, 2.0, 1.0, 2.0)


def test_trim_applies_to_the_shard_lines(tmp_path, nemo_model_file):
    path = nemo_model_file("ctc")
    model = asr.load_model(str(path), "cpu")
    segs = clean_segments(4)
    _, lines, _ = run(tmp_path, segs, loaded(model, path, True), p=params(model=str(path), trim=True, trim_pad=0.1))
    by_id = {s["id"]: s for s in segs}
    for line in lines:
        seg = by_id[line["id"]]
        assert (line["vad_offset"], line["vad_duration"]) == (seg["offset"], seg["duration"])
        assert (
            seg["offset"] <= line["offset"]
            and line["offset"] + line["duration"] <= seg["offset"] + seg["duration"] + 1e-6
        )
        if line["words"]:
            assert (
                line["offset"] <= line["words"][0]["start"]
                and line["words"][-1]["end"] <= line["offset"] + line["duration"] + 1e-6
            )


# Measured with the workflow's demo model on the demo's clean phrases cut with
# 0.03 s of padding: first-word starts within 0.13 s of the true phrase start
# (mean -0.01), last-word ends within 0.21 s of its end (mean -0.08: a CTC
# model's last character spike comes before the sound fades). The tolerances
# leave room for this suite's shorter-trained model.
START_TOLERANCE, END_TOLERANCE = 0.25, 0.35


def phrases(rels, pad=0.03):
    """The demo files' phrases as segments, with their true bounds."""
    segs = []
    for rel in rels:
        for k, sp in enumerate(TRUTH["files"][rel]["speech"]):
            segs.append(
                {
                    "id": f"{file_id(rel)}_{k:04d}",
                    "file_id": file_id(rel),
                    "audio_filepath": str(DEMO / "audio" / rel),
                    "offset": round(sp["start"] - pad, 3),
                    "duration": round(sp["end"] - sp["start"] + 2 * pad, 3),
                    "_truth": (sp["start"], sp["end"]),
                }
            )
    return segs


def test_demo_words_match_the_true_phrases_and_noise_lowers_confidence(tmp_path, model_path):
    """The demo model (trained on the clean clips): word times against truth.json's phrase
    intervals; the noisy, clipped and band-limited variants of clean clips get a lower
    confidence than the clips they were made from."""
    model = asr.load_model(str(model_path), "cpu")
    damaged = {"low_snr", "clipped", "narrowband"}
    noisy = {rel: info.get("variant_of") for rel, info in TRUTH["files"].items() if info.get("reason") in damaged}
    noisy = {rel: clean for rel, clean in noisy.items() if clean and TRUTH["files"][clean].get("clean")}
    assert {"variants/noise_0db.wav", "variants/clipped.wav", "variants/narrowband.wav"} <= set(noisy)
    clean = sorted(rel for rel, info in TRUTH["files"].items() if info.get("clean"))
    segs = phrases(clean + sorted(noisy))
    truth = {s["id"]: s.pop("_truth") for s in segs}
    counts, lines, rejects = run(tmp_path, segs, loaded(model, model_path, True), p=params(model=str(model_path)))
    assert not rejects
    by_id = {x["id"]: x for x in lines}
    errors = []
    for x in lines:
        if x["file_id"] in {file_id(rel) for rel in clean}:
            assert x["words"], x
            errors.append((x["words"][0]["start"] - truth[x["id"]][0], x["words"][-1]["end"] - truth[x["id"]][1]))
    assert len(errors) == 32
    worst = (max(abs(a) for a, _ in errors), max(abs(b) for _, b in errors))
    assert worst[0] <= START_TOLERANCE and worst[1] <= END_TOLERANCE, worst
    for rel, source in noisy.items():
        for k in range(len(TRUTH["files"][rel]["speech"])):
            bad, good = by_id[f"{file_id(rel)}_{k:04d}"], by_id[f"{file_id(source)}_{k:04d}"]
            assert bad["confidence"] < good["confidence"], (rel, bad["confidence"], good["confidence"])
