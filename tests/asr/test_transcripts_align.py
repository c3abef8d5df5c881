"""Long-form alignment (speechprep.asr.align, .ctc) with the demo ASR model.

The demo model knows only the demo phrases, so the recording is built from them
(tests/asr/longform.py: ten minutes of the 32 phrases in shuffled order, their
text as a book's with digits and commas, an unread preface and epilogue, and a
real human voice, the LibriVox reader, announcing in the middle what the text
lacks). Real speech alignment needs a model that recognises it: here real
speech is the announcement, which must end in a reject."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechprep.asr import align as al
from speechprep.asr.ctc import CtcHead, _windows
from speechprep.errors import UsageError
from speechprep.text.spoken import SpokenNormalizer
from tests import real_speech as rs

sys.path.insert(0, str(Path(__file__).parent))
import longform

# measured on this recording (docs/benchmarks/asr.md, "Long-form alignment"): the defaults proposed for phase 2
P = al.AlignParams(
    max_segment=20.0,
    min_align_score=-3.0,
    chunk_seconds=30.0,
    context_seconds=2.0,
    window_seconds=240.0,
    score_seconds=0.6,
    min_untranscribed=1.0,
    gap_logprob=-1.5,
    start_pad=0.0,
    end_pad=0.0,
)


# ---------------------------------------------------------------------------------------------
# text, scores, cuts: no model
# ---------------------------------------------------------------------------------------------
def test_sentences_and_clauses_without_grammars():
    text = "The cat sat. Did it?  Yes!\n\nA new paragraph without an end\nline two, still the same sentence"
    assert al.split_sentences(text, "xx", None) == [
        "The cat sat.",
        "Did it?",
        "Yes!",
        "A new paragraph without an end line two, still the same sentence",
    ]
    assert al.split_clauses("We like green apples, open the door please.") == [
        "We like green apples,",
        "open the door please.",
    ]
    assert al.split_clauses("Yes, he did, and then, at last, he left.") == [
        "Yes, he did,",
        "and then, at last, he left.",  # "he left." (2 words) joins the clause before it
    ]
    assert al.split_clauses("Oh, no.") == ["Oh, no."]


def test_sentences_with_the_grammars_keep_abbreviations(grammars_en):
    spoken = SpokenNormalizer({"en": str(grammars_en)})
    got = al.split_sentences("Mr. Smith came at 9 a.m. on Jan. 5. He left! Did he?", "en", spoken)
    assert got == ["Mr. Smith came at 9 a.m. on Jan. 5.", "He left!", "Did he?"]


def test_window_score_is_the_minimum_mean():
    x = np.array([0.0] * 10 + [-3.0] * 3 + [0.0] * 10)
    assert al.window_score(x, 3) == -3.0
    assert al.window_score(x, 6) == pytest.approx(-1.5)
    assert al.window_score(x[:4], 30) == pytest.approx(-0.0)
    assert al.window_score(np.zeros(0), 3) == -1e10


def test_long_sentences_are_cut_at_the_largest_pause_between_clauses():
    units = [
        al.Unit("a", 0, "a", [1], 0, 100),
        al.Unit("b", 0, "b", [1], 130, 200),
        al.Unit("c", 0, "c", [1], 205, 300),
    ]
    assert al._cut(units, 400) == [units]
    assert al._cut(units, 200) == [units[:1], units[1:]]
    assert al._cut(units, 99) is None  # one clause alone is longer


def test_chunks_cover_a_real_recording_once(tmp_path):
    """Every sample of a real recording falls in exactly one chunk's core, and each chunk carries its
    context (the LibriVox reader, 16 kHz, read as a stream)."""
    u = rs.librivox()[0]
    x, sr = rs.read(u.path)
    cores = []
    for wave, left, n_core in _windows(str(u.path), 16000, core=16000, ctx=3200):
        assert left == (0 if not cores else 3200)
        cores.append(wave[left : left + n_core])
        assert len(wave) <= n_core + 2 * 3200
    np.testing.assert_allclose(np.concatenate(cores), x, atol=1e-6)


def test_collapse():
    assert al._collapse(np.array([5, 5, 1, 5, 2, 2, 5, 3]), 5) == [1, 2, 3]


# ---------------------------------------------------------------------------------------------
# with models
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rnnt", "tdt", "canary"])
def test_a_model_without_ctc_output_is_refused_naming_its_class(nemo_model_file, kind):
    from speechprep.asr.model import load_model

    model = load_model(str(nemo_model_file(kind)), "cpu")
    with pytest.raises(UsageError, match=type(model).__name__ + " has none"):
        CtcHead(model)


def test_a_hybrid_model_gives_its_ctc_heads_log_probs(nemo_model_file, tmp_path):
    from speechprep.asr.model import load_model

    head = CtcHead(load_model(str(nemo_model_file("hybrid")), "cpu"))
    assert head.model_class == "EncDecHybridRNNTCTCBPEModel" and head.tokenizer is not None
    ids, starts = head.encode("the cat sat")
    assert len(starts) == 3 and head.decode(ids) == "the cat sat"
    u = rs.librivox()[1]
    lp = head.log_probs(str(u.path), ids, chunk_seconds=1.0, context_seconds=0.5)
    assert lp.lpz.shape == (len(lp.greedy), len(set(ids)) + 1)
    n = sf.info(str(u.path)).frames
    assert len(lp.greedy) == pytest.approx(n / head.frame_samples, abs=2)
    assert np.all(lp.lpz <= 0)


@pytest.fixture(scope="module")
def demo_head(model_path):
    from speechprep.asr.model import load_model

    return CtcHead(load_model(str(model_path), "cpu"))


@pytest.fixture(scope="module")
def ten_minutes(tmp_path_factory, demo_head, grammars_en):
    path = tmp_path_factory.mktemp("longform") / "book.wav"
    announcement = [rs.read(u.path, 16000)[0] for u in rs.librivox()[:2]]
    rec = longform.build(path, 10, announcement=announcement)
    spoken = SpokenNormalizer({"en": str(grammars_en)})
    out = al.align_recording({"id": "book", "audio_filepath": str(path)}, rec.text, demo_head, P, spoken, "en")
    return rec, out, al.split_sentences(rec.text, "en", spoken)


def test_ten_minutes_split_into_sentences_within_a_fifth_of_a_second(ten_minutes):
    rec, out, sentences = ten_minutes
    first = sentences.index(rec.sentences[0][2])
    assert first == 2  # the preface's two sentences come first
    by_id = {u["id"]: u for u in out["utterances"]}
    starts, ends = [], []
    for j, (a, b, text) in enumerate(rec.sentences):
        u = by_id[f"book_{first + j:04d}"]
        assert u["text"] == text and u["text_source"] == "given"
        starts.append(u["offset"] - a)
        ends.append(u["offset"] + u["duration"] - b)
    err = np.abs(np.concatenate([starts, ends]))
    assert np.median(err) <= 0.2
    assert len(out["utterances"]) == len(rec.sentences)  # every read sentence kept
    assert min(u["align_score"] for u in out["utterances"]) >= P.min_align_score


def test_unread_text_and_untranscribed_audio_end_in_rejects(ten_minutes):
    rec, out, sentences = ten_minutes
    by_reason = {}
    for r in out["rejects"]:
        by_reason.setdefault(r["reason"], []).append(r)
    unread = [r["text"] for r in by_reason["misaligned"] if "text" in r]
    assert unread == [sentences[0], sentences[1], sentences[-1]]  # preface and epilogue
    heard = [r for r in by_reason["misaligned"] if r["detail"].startswith("audio the text lacks")]
    a, b = rec.announcement
    assert len(heard) == 1
    assert heard[0]["offset"] >= a - 0.2 and heard[0]["offset"] + heard[0]["duration"] <= b + 0.2
    assert heard[0]["duration"] >= 0.5 * (b - a)
    assert set(by_reason) == {"misaligned"}


def test_chunked_log_probs_stitch_to_the_whole_recordings_frames(demo_head, tmp_path):
    """30 s chunks with 2 s of context either side against one pass over a minute: the same frames,
    the same greedy token on at least 95 % of them (the 400-step test model: 96.0 %; it normalises
    its features per input, so a chunk's statistics differ from the whole minute's). The context is
    what stitches: 10 s chunks agree on 94.8 % with 2 s of it and on 91.2 % without."""
    path = tmp_path / "minute.wav"
    longform.build(path, 1.0, intro=False, outro=False)
    ids = list(range(demo_head.blank_id))
    whole = demo_head.log_probs(str(path), ids, 600, 0)
    chunked = demo_head.log_probs(str(path), ids, 30, 2)
    assert chunked.lpz.shape == whole.lpz.shape
    assert (chunked.greedy == whole.greedy).mean() >= 0.95
    short = [(demo_head.log_probs(str(path), ids, 10, c).greedy == whole.greedy).mean() for c in (2, 0)]
    assert short[0] >= short[1] + 0.02
    assert chunked.duration == pytest.approx(sf.info(str(path)).duration, abs=1e-3)


def test_a_token_held_over_heard_speech_inside_a_unit_leaves_its_span():
    _held_apart = al._held_apart
    # a unit of 6 tokens (path states 1-6): the fourth entered at frame 30 and held to 130
    entry = np.array([0, 10, 15, 20, 30, 130, 133, 140])
    pause = np.zeros(200, bool)  # the model hears nothing there: a pause inside the clause, kept
    assert _held_apart(entry, pause, 1, 6, hold=50) == (1, 6)
    heard = pause.copy()
    heard[40:120] = True  # 80 frames of speech the text lacks: the span is the four tokens before it
    assert _held_apart(entry, heard, 1, 6, hold=50) == (1, 4)
    assert _held_apart(entry, heard, 1, 6, hold=100) == (1, 6)  # held no longer than allowed
    late = np.array([0, 10, 110, 113, 116, 119, 122, 140])  # the first token held: the five after it
    heard[20:100] = True
    assert _held_apart(late, heard, 1, 6, hold=50) == (2, 6)


def test_a_stretch_of_one_channel_is_aligned_alone_on_the_files_clock(demo_head, tmp_path):
    """A source's long utterance: a minute of the book 10 s into channel 1 of a real 2-channel
    file, the LibriVox reader on channel 0 all along and before it on channel 1 (speech the text
    lacks). Read alone (its offset, duration and channel), it aligns as the minute's own file
    does: the same utterances and rejects, their times 10 s later (the file's clock)."""
    mono = tmp_path / "minute.wav"
    rec = longform.build(mono, 1.0, intro=False, outro=False)
    book = sf.read(mono, dtype="float32")[0]
    reader = np.concatenate([rs.read(u.path, 16000)[0] for u in rs.librivox()])
    before = 10 * 16000
    n = before + len(book)
    other = np.resize(reader, n)  # the reader, again and again, as long as the file
    stereo = np.stack([other, np.concatenate([other[:before], book])], axis=1)
    path = tmp_path / "two.wav"
    sf.write(path, stereo, 16000, subtype="PCM_16")
    alone = al.align_recording({"id": "r", "audio_filepath": str(mono)}, rec.text, demo_head, P, None, "en")
    stretch = {"id": "r", "audio_filepath": str(path), "offset": 10.0, "duration": len(book) / 16000, "channel": 1}
    got = al.align_recording(stretch, rec.text, demo_head, P, None, "en")
    assert alone["utterances"] and len(got["utterances"]) == len(alone["utterances"])
    for kind in ("utterances", "rejects"):
        for a, b in zip(alone[kind], got[kind], strict=True):
            moved = {**a, "audio_filepath": str(path)}
            if "offset" in a:
                moved["offset"] = pytest.approx(a["offset"] + 10.0, abs=1e-4)
            assert b == moved
