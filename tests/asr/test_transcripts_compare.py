"""``text: verify``'s comparison (speechprep.asr.compare) on real transcripts.

The texts are real: the LibriVox reader's five Sense and Sensibility sentences
(pocketsphinx-testdata ``librivox/transcription``) with the hypotheses a real
recogniser (pocketsphinx, ``librivox/test-lm.match``) made of those very
recordings, the cards speaker's and an AN4 utterance's transcripts. Swapped,
truncated, edge-padded and number-bearing versions of them are compared with
the figures asserted."""

import json
import random
import re

import editdistance
import pytest

from speechprep.asr.compare import (
    CompareNormalizer,
    compare,
    levenshtein_table,
    needs_grammars,
    plain,
    trailing_edits,
    verify_fields,
)
from speechprep.text.spoken import SpokenNormalizer
from tests import real_speech as rs
from tests.support import TRUTH

AN4_GOFORWARD = "go forward ten meters"  # goforward.raw, as pocketsphinx's own tests assert it


def librivox_hypotheses() -> dict[str, str]:
    """What pocketsphinx recognised in each LibriVox recording (its regression-test output)."""
    d = rs.fetch("pocketsphinx-testdata") / rs.PSPHINX / "librivox"
    out = {}
    for line in (d / "test-lm.match").read_text(encoding="utf-8").splitlines():
        m = re.match(r"(.*)\((\S+) -?\d+\)\s*$", line)
        out[m.group(2)] = m.group(1).strip()
    return out


@pytest.fixture(scope="module")
def librivox():
    return rs.librivox()


@pytest.fixture(scope="module")
def normalize(grammars_en):
    return CompareNormalizer(SpokenNormalizer({"en": str(grammars_en)}))


def fields(normalize, given, asr):
    return verify_fields(normalize, given, asr, "en")


def test_a_real_recogniser_on_the_librivox_reader(librivox, normalize):
    """Per sentence (word errors / words, char errors / chars, edge deletions at the end)."""
    hyps = librivox_hypotheses()
    got = {u.path.stem[-4:]: fields(normalize, u.text, hyps[u.path.stem]) for u in librivox}
    figures = {k: (v["word_errors"], v["ref_words"], v["char_errors"], v["edge_end_deleted"]) for k, v in got.items()}
    assert figures == {
        # "and mister john dashwood ... to do for them" heard as "but mr john guess would ... to do for":
        # 9 of 22 words; the final " them" (5 characters) missing at the end
        "0870": (9, 22, 31, 5),
        "0880": (2, 8, 7, 0),  # "ill disposed" -> "illness those"
        "0890": (3, 14, 13, 1),  # "unless" -> "homeless", "ill disposed" -> "oldest those"
        "0920": (4, 19, 9, 0),  # "a amiable" -> "amiable", "than he was" -> "many watts"
        "0930": (2, 8, 6, 0),  # "amiable himself" -> "the amiable itself"
    }
    assert got["0870"]["wer"] == pytest.approx(9 / 22, abs=1e-4)
    assert got["0870"]["cer"] == pytest.approx(31 / 115, abs=1e-4)
    assert all(v["text_compare"] == "plain" for v in got.values())  # nothing in them for the grammars


def test_correct_swapped_truncated_and_padded_transcripts(librivox, normalize):
    long, short = librivox[0].text, librivox[1].text  # 22 and 8 words
    same = fields(normalize, short, short)
    assert (same["wer"], same["cer"], same["word_errors"]) == (0.0, 0.0, 0)
    assert [same[k] for k in same if k.startswith("edge_")] == [0, 0, 0, 0]

    swapped = fields(normalize, long, short)  # another utterance's text
    assert (swapped["wer"], swapped["cer"]) == (1.0, 0.8174)

    truncated = fields(normalize, "he was not an ill disposed", short)  # the audio goes on: " young man"
    assert (truncated["wer"], truncated["edge_end_inserted"], truncated["edge_end_deleted"]) == (0.3333, 10, 0)
    assert truncated["edge_start_inserted"] == truncated["edge_start_deleted"] == 0

    padded = fields(normalize, "Chapter one. " + short, short)  # text nobody read, before
    assert (padded["wer"], padded["edge_start_deleted"], padded["edge_start_inserted"]) == (0.2, 12, 0)
    assert padded["edge_end_deleted"] == 0
    padded_end = fields(normalize, short + " The end.", short)  # and after
    assert (padded_end["wer"], padded_end["edge_end_deleted"], padded_end["edge_start_deleted"]) == (0.2, 8, 0)

    # a reading that overruns its transcript by a whole sentence: many words inserted at the end
    over = fields(normalize, short, short + " " + librivox[4].text)
    assert over["wer"] == 1.0 and over["edge_end_inserted"] == len(" " + librivox[4].text)


def test_numbers_and_abbreviations_compare_in_spoken_form(normalize):
    # AN4's "go forward ten meters", written with digits on either side
    for given, asr in (("Go forward 10 meters.", AN4_GOFORWARD), (AN4_GOFORWARD, "Go forward 10 meters")):
        got = fields(normalize, given, asr)
        assert (got["wer"], got["cer"]) == (0.0, 0.0), (given, asr)
    got = fields(normalize, "Mr. Dashwood had £3,000.", "mister dashwood had three thousand pounds")
    assert (got["wer"], got["text_compare"]) == (0.0, "spoken")
    # without grammars (a language that has none) the written forms differ: one word of four
    assert verify_fields(CompareNormalizer(None), "Go forward 10 meters.", AN4_GOFORWARD, "en")["wer"] == 0.25
    passed = CompareNormalizer(normalize.spoken)("Er kam um 10 Uhr.", "de")
    assert passed == ("er kam um 10 uhr", "passed_through")


def test_texts_without_grammar_work_skip_the_grammars_unchanged(librivox, normalize):
    """The fast path (no grammars for a text with nothing they rewrite) gives what the grammars give,
    on every real and demo transcript."""
    texts = [u.text for u in librivox + rs.cards()] + [AN4_GOFORWARD]
    texts += [s["text"] for f in TRUTH["files"].values() for s in f.get("speech", []) if s.get("text")]
    texts += [t.capitalize() + "." for t in texts] + ["He was cold-hearted, wasn't he?"]
    skipped = [t for t in texts if not needs_grammars(t)]
    assert len(skipped) == len(texts)
    for t in skipped:
        assert plain(normalize.spoken(t, "en")[0]) == plain(t), t
    for t in ("Mr. Smith", "at 9", "BBC news", "50%", "a.m. today", "he left. she came"):
        assert needs_grammars(t), t


def test_plain_normalisation():
    assert plain("\u201cDon\u2019t\u201d \u2013 she said, COLD-hearted!  ") == "don't she said cold hearted"
    assert plain("'quoted' words_here") == "quoted words here"


def test_edit_distances_agree_with_editdistance():
    rng = random.Random(0)
    for _ in range(200):
        a = "".join(rng.choice("ab c") for _ in range(rng.randint(0, 30)))
        b = "".join(rng.choice("ab c") for _ in range(rng.randint(0, 30)))
        assert levenshtein_table(a, b)[-1, -1] == editdistance.eval(a, b)
    assert trailing_edits("the cat", "the cat sat") == (4, 0)  # not "at s" inside
    assert trailing_edits("the cat sat", "the cat") == (0, 4)
    assert trailing_edits("ab", "b") == (0, 0)
    assert trailing_edits("them", "then") == (0, 0)  # a substitution is no missing text


def test_empty_texts():
    assert compare("", "").wer == 0.0
    c = compare("", "two words")
    assert (c.wer, c.cer, c.edge_end_inserted) == (2.0, 9.0, 9)
    c = compare("two words", "")
    assert (c.wer, c.cer, c.edge_end_deleted) == (1.0, 1.0, 9)


def test_fields_are_json():
    c = compare("a b", "a c")
    json.dumps(c.fields())
    assert set(c.fields()) == {
        "wer",
        "cer",
        "word_errors",
        "ref_words",
        "char_errors",
        "edge_start_inserted",
        "edge_start_deleted",
        "edge_end_inserted",
        "edge_end_deleted",
    }
