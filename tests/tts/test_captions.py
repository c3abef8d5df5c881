"""Captions from the annotations' bins, with the config's templates and words."""

import json

import pytest

from speechprep.errors import UsageError
from speechprep.tts import captions as C
from tests.support import config

CFG = config()["tts"]["captions"]
BINS = config()["curate"]["annotation_bins"]
EDGES = {  # 7 bins: inner edges 1..6 for every measure (as curate/summary.json writes them)
    m: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] for m in ("pitch_mean", "pitch_std", "monotony", "reverb", "snr_db")
}


def line(**kw):
    base = {"pitch_mean": 6.5, "monotony": 0.5, "reverb": 0.2, "snr_db": 9.0, "speaking_rate": 3.5}
    return {**base, **kw}


def test_words_come_from_each_measures_bin_and_who_from_the_given_gender():
    c = C.Captions(CFG, BINS, EDGES)
    c.edges["speaking_rate"] = EDGES["pitch_mean"]
    assert c(line()) == (
        "A speaker speaks at a moderate speed with a very high-pitched, very monotone voice, "
        "in a very close-sounding and very clean recording."
    )
    assert c(line(gender="female", pitch_mean=0.5, speaking_rate=6.0)).startswith(
        "A woman speaks very fast with a very low-pitched,"
    )  # an edge's value is the bin above it
    assert c(line(gender="male")).startswith("A man ") and c(line(gender="other")).startswith("A speaker ")
    assert c(line(pitch_mean=None)) is None  # no voiced frame: no caption, counted
    assert c.stats()["counts"] == {"described": 4, "no_pitch": 1}


def test_the_pitch_word_of_a_segment_with_a_gender_comes_from_that_gender_s_bins():
    """DataSpeech bins pitch per gender: a man at 130 Hz is "high-pitched" among men whose
    edges run 90-120 Hz, and "very low-pitched" among women; no gender: the dataset's."""
    hz = {**EDGES, "pitch_mean": [150.0, 160.0, 170.0, 180.0, 190.0, 200.0]}
    by_gender = {
        "male": {"pitch_mean": [95.0, 100.0, 105.0, 110.0, 115.0, 120.0], "pitch_std": None},
        "female": {"pitch_mean": [190.0, 200.0, 210.0, 220.0, 230.0, 240.0], "pitch_std": None},
        "child": {"pitch_mean": None, "pitch_std": None},  # too few segments: the dataset's edges
    }
    c = C.Captions(CFG, BINS, hz, by_gender)
    c.edges["speaking_rate"] = EDGES["pitch_mean"]
    pitch = lambda **kw: c(line(pitch_mean=130.0, **kw)).split(" with a ")[1].split(",")[0]
    assert pitch(gender="male") == "very high-pitched"
    assert pitch(gender="female") == "very low-pitched"
    assert pitch() == pitch(gender="child") == "very low-pitched"  # the dataset's: below 150
    assert set(c.stats()["pitch_by_gender"]) == {"male", "female"}


def test_speaking_rate_counts_phonemes_not_stress_or_gaps_else_characters():
    assert C.speaking_rate({"duration": 2.0, "phonemes": "hˈɛloʊ wˈɜːld"}) == 4.5  # h ɛ l o ʊ w ɜ l d
    assert C.speaking_rate({"duration": 2.0, "text": "ab cd", "text_normalized": "ab cde"}) == 2.5
    assert C.speaking_rate({"duration": 0.0, "text": "ab"}) is None


def test_fitted_rate_edges_from_the_lines_own_rates():
    c = C.Captions(CFG, BINS, EDGES)
    c.fit_rate([{"speaking_rate": r} for r in range(101)])
    assert len(c.edges["speaking_rate"]) == BINS - 1


def test_a_word_list_of_another_length_or_an_unknown_field_is_a_usage_error():
    with pytest.raises(UsageError, match=r"tts\.captions\.words\.pitch has 2 words"):
        C.Captions({**CFG, "words": {**CFG["words"], "pitch": ["low", "high"]}}, BINS, EDGES)
    with pytest.raises(UsageError, match=r"names \['mood'\]"):
        C.Captions({**CFG, "template": "{who} sounds {mood}."}, BINS, EDGES)


def test_a_grown_corpus_keeps_the_edges_its_captions_were_binned_with(tmp_path):
    """The first run records its edges; a later run over more segments (its own edges moved)
    bins with them, so an old line keeps its caption; a measure or gender without edges in
    the record takes the later run's; a record of another bin count is not read."""
    record = tmp_path / "tts" / ".caption_edges.json"
    rates = lambda n: [line(speaking_rate=float(r)) for r in range(1, n)]
    first = C.Captions(CFG, BINS, EDGES)
    first.fit_rate(rates(9))
    first.hold(record)
    before, mtime = first(line(pitch_mean=1.5)), record.stat().st_mtime_ns
    moved = {m: [e + 0.7 for e in edges] for m, edges in EDGES.items()}
    grown = C.Captions(CFG, BINS, moved, {"female": {"pitch_mean": [9.0] * 6}})
    grown.fit_rate(rates(30))
    assert before and grown(line(pitch_mean=1.5)) != before  # binned afresh, the caption moves
    grown.hold(record)
    assert grown(line(pitch_mean=1.5)) == before and grown.pitch_by_gender == {"female": [9.0] * 6}
    assert record.stat().st_mtime_ns > mtime  # the gender's edges were added to the record
    unchanged = record.stat().st_mtime_ns
    grown.hold(record)
    assert record.stat().st_mtime_ns == unchanged  # the same edges: the record is not rewritten
    kept = json.loads(record.read_text(encoding="utf-8"))
    record.write_text(json.dumps({**kept, "edges": {**kept["edges"], "reverb": None}}), encoding="utf-8")
    again = C.Captions(CFG, BINS, moved)
    again.fit_rate(rates(30))
    again.hold(record)
    assert again.edges["reverb"] == moved["reverb"] and again.edges["pitch"] == EDGES["pitch_mean"]
    other = C.Captions({**CFG, "words": {k: v[:5] for k, v in CFG["words"].items()}}, 5, moved)
    other.fit_rate(rates(30))
    other.hold(record)
    assert other.edges["pitch"] == moved["pitch_mean"]
