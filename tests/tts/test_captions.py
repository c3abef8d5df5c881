"""Captions from the annotations' bins, with the config's templates and words."""

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
