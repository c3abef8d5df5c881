"""Spoken-form text normalisation (tts.normalize) with the real nemo-text-processing grammars."""

import time

import numpy as np
import pytest
from conftest import demo_segments, text_ids

from speechprep.errors import UsageError
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.io.npyio import load_npy
from speechprep.text import spoken
from speechprep.text.normalize import TextNormalizer
from speechprep.tts import manifests, normalize, text
from speechprep.tts.params import TextParams
from tests.support import params

# written form -> what NeMo's English grammars (deterministic, cased) say
WRITTEN_SPOKEN = [
    ("I have 42 apples.", "I have forty two apples."),  # cardinal
    ("1,000,000 people.", "one million people."),
    ("In 1999 it rained.", "In nineteen ninety nine it rained."),  # years
    ("The year 2023.", "The year twenty twenty three."),
    ("It costs $5.", "It costs five dollars."),  # money
    ("It cost $12.50.", "It cost twelve dollars fifty cents."),
    ("We walked 3 km.", "We walked three kilometers."),  # units (American spelling)
    ("It weighs 7 kg.", "It weighs seven kilograms."),
    ("He is 100% sure.", "He is one hundred percent sure."),
    ("She came 1st.", "She came first."),  # ordinals
    ("The 21st century.", "The twenty first century."),
    ("Meet me at 10:30 am.", "Meet me at ten thirty AM."),  # times
    ("It ends at 3:30 pm.", "It ends at three thirty PM."),
    ("Born on January 5, 2020.", "Born on january fifth, twenty twenty."),  # a date
    ("Dr. Smith is here.", "doctor Smith is here."),  # abbreviations
    ("Mr. Jones is late.", "mister Jones is late."),
    ("Hello world, this is a test.", "Hello world, this is a test."),  # nothing to say differently
]


def demo_transcripts():
    return sorted({s["text"] for s in demo_segments()})


@pytest.mark.parametrize(("written", "said"), WRITTEN_SPOKEN)
def test_written_forms_become_spoken_forms(spoken_en, written, said):
    assert spoken_en(written, "en") == (said, "spoken")
    assert spoken_en(written, "en-US")[0] == said  # a regional code uses its base language's grammars


def test_normalisation_is_idempotent_and_deterministic(spoken_en):
    texts = [said for _, said in WRITTEN_SPOKEN] + [spoken_en(t, "en")[0] for t in demo_transcripts()]
    assert len(texts) > 20
    for t in texts:
        assert spoken_en(t, "en") == (t, "spoken"), t
    again = spoken.SpokenNormalizer(dict(spoken_en.grammars))
    assert [again(w, "en")[0] for w, _ in WRITTEN_SPOKEN] == [s for _, s in WRITTEN_SPOKEN]


def test_a_failing_segment_keeps_its_text_and_is_counted(spoken_en, caplog):
    before = spoken_en.summary()["failed"]
    lone_surrogate = "price \ud800 $5"  # NeMo raises (UnicodeEncodeError)
    assert spoken_en(lone_surrogate, "en", "seg-x") == (lone_surrogate, "failed")
    assert spoken_en.summary()["failed"] == before + 1
    assert "seg-x: text normalisation failed (UnicodeEncodeError" in caplog.text


def test_unsupported_language_passes_through_and_is_counted(tmp_path, grammars):
    segs = [
        {"id": "en1", "text": "We walked 3 km."},
        {"id": "fr1", "text": "Il a marché 3 km.", "language": "fr"},
        {"id": "de1", "text": "Er hat 3 km.", "language": "de-AT"},
        {"id": "fr2", "text": "Le 1er mai.", "language": "fr"},
        {"id": "empty", "text": " "},
    ]
    write_jsonl(tmp_path / "asr.jsonl", segs)
    p = params(TextParams)
    assert p.normalize and p.normalize_languages == ["en"]  # config/config.yaml
    counts = normalize.run_normalize(str(tmp_path / "asr.jsonl"), str(tmp_path / "n.jsonl"), p, [str(grammars[0])])
    lines = {x["id"]: x for x in read_jsonl(tmp_path / "n.jsonl")}
    assert set(lines) == {"en1", "fr1", "de1", "fr2"}  # no text: left to the features' no_text
    assert lines["en1"]["text_normalized"] == "We walked three kilometers."
    assert lines["en1"]["language"] == "en"  # no segment or dataset language: asr.language
    for i in ("fr1", "de1", "fr2"):
        assert lines[i]["text_normalized"] == lines[i]["text"]
        assert lines[i]["text_normalization"] == "passed_through"
    assert lines["fr1"]["text"] == "Il a marché 3 km."  # the original text stays
    assert counts == {"spoken": 1, "passed_through": 3, "failed": 0, "passed_through_by_language": {"de": 1, "fr": 2}}
    stats = manifests.normalization_counts(list(lines.values()))
    assert stats["passed_through"] == 3 and stats["spoken"] == 1
    assert stats["passed_through_by_language"] == {"de-AT": 1, "fr": 2}

    off = params(TextParams, normalize=False)
    assert normalize.run_normalize(str(tmp_path / "asr.jsonl"), str(tmp_path / "off.jsonl"), off) == {"off": 4}
    assert all(x["text_normalized"] == x["text"] for x in read_jsonl(tmp_path / "off.jsonl"))


def test_text_ids_are_the_sentencepiece_ids_of_the_normalised_text(tmp_path, grammars):
    segs = [{"id": s["id"], "text": s["text"]} for s in demo_segments()]
    segs += [{"id": f"num{i}", "text": w} for i, (w, _) in enumerate(WRITTEN_SPOKEN)]
    write_jsonl(tmp_path / "asr.jsonl", segs)
    normalized = str(tmp_path / "shard.normalized.jsonl")
    normalize.run_normalize(
        str(tmp_path / "asr.jsonl"), normalized, params(TextParams, dataset_language="en"), [str(grammars[0])]
    )
    tok = str(tmp_path / "tok.model")
    text.train_normalized_tokenizer([normalized], 96, tok)
    sp = text.load_tokenizer(tok)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    assert not any(c.isdigit() or c in "$%" for piece in pieces for c in piece)  # trained on spoken forms
    index = tmp_path / "features.jsonl"  # the features job's lines: id, (cleaned) text
    write_jsonl(index, [{"id": s["id"], "text": TextNormalizer()(s["text"])} for s in segs])
    text_ids(index, tok, tmp_path / "text.jsonl", tmp_path / "ids", [normalized])
    said = {x["id"]: x["text_normalized"] for x in read_jsonl(normalized)}
    lines = list(read_jsonl(tmp_path / "text.jsonl"))
    assert len(lines) == len(segs)
    for line in lines:
        ids = load_npy(line["text_ids"], np.int32, 1)
        assert line["text_normalized"] == said[line["id"]]
        assert ids.tolist() == sp.encode(said[line["id"]], out_type=int) and len(ids) == line["text_ids_len"]
    assert said["num6"] == "We walked three kilometers."


def test_grammar_cache_is_loaded_not_rebuilt(grammars):
    d, info = grammars
    fars = {p.name: p.stat().st_mtime_ns for p in d.glob("*.far")}
    assert set(fars) == set(info["files"]) and len(fars) >= 2
    t0 = time.perf_counter()
    n = spoken.SpokenNormalizer({"en": str(d)})
    n.normalizer("en")
    loaded = time.perf_counter() - t0
    print(f"en grammars: built in {info['build_seconds']:.1f} s, loaded from the cache in {loaded:.2f} s")
    assert loaded < info["build_seconds"] / 5
    assert {p.name: p.stat().st_mtime_ns for p in d.glob("*.far")} == fars  # not rewritten
    assert n("3 km", "en")[0] == "three kilometers"


def test_missing_grammars_are_an_error_not_a_build(tmp_path):
    n = spoken.SpokenNormalizer({"en": str(tmp_path / "none")})
    with pytest.raises(UsageError, match="rule tts_grammars builds them"):
        n("3 km", "en")
    assert not (tmp_path / "none").exists()
    with pytest.raises(UsageError, match="no text-normalisation grammars"):
        spoken.build_grammars("xx", tmp_path / "xx")


def test_the_segments_the_features_keep_all_have_normalised_text(tmp_path, grammars):
    """The features job cleans with the segment's or the dataset's language only; asr.language
    (the grammars' last resort) must not make the normalise job drop a segment they keep."""
    write_jsonl(tmp_path / "asr.jsonl", [{"id": "p", "text": "?!"}, {"id": "q", "text": "Take 2."}])
    p = params(TextParams, languages={"en": {"strip_punct": True}})
    normalize.run_normalize(str(tmp_path / "asr.jsonl"), str(tmp_path / "n.jsonl"), p, [str(grammars[0])])
    lines = {x["id"]: x for x in read_jsonl(tmp_path / "n.jsonl")}
    assert set(lines) == {"p", "q"} and lines["p"]["text"] == "?!" and lines["p"]["text_normalized"]
    assert lines["q"]["text"] == "Take 2." and lines["q"]["text_normalized"] == "Take two"  # options after NeMo
