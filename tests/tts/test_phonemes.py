"""Phonemes for phoneme-based recipes: espeak-ng IPA and Piper's ids, on real text.

The texts are real: an audiobook reader's LibriVox sentences (pocketsphinx-testdata) and
quotations from Debian's fortune packages in German, Spanish, Italian and Russian
(tests/real_speech.py), each in the voice of its language."""

import numpy as np
import pytest
from conftest import text_ids
from piper_phonemize import get_espeak_map

from speechprep.errors import UsageError
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.io.npyio import load_ref
from speechprep.tts import text
from speechprep.tts.captions import speaking_rate
from speechprep.tts.params import ManifestParams, TextIdsParams
from speechprep.tts.phonemes import Phonemizer
from tests.real_speech import fortunes, librivox
from tests.support import config

VOICES = config()["tts"]["phoneme_voices"]
PIPER_MAP = get_espeak_map()  # phoneme -> [id]: Piper's map
BOS, EOS, PAD = PIPER_MAP["^"][0], PIPER_MAP["$"][0], PIPER_MAP["_"][0]


def real_texts(language):
    if language == "en":
        return [u.text for u in librivox()][:20]
    return fortunes(language)[:20]


@pytest.mark.parametrize("language", ["en", "de", "es", "it", "ru"])
def test_real_text_gets_the_phonemes_of_its_language_and_pipers_ids(language):
    """Every text gets phonemes in its language's voice; their ids are Piper's (`^`, then
    each phoneme followed by a pad, `$`), and differ between two languages' voices."""
    ph = Phonemizer(VOICES)
    for t in real_texts(language):
        phonemes = ph.phonemes(t, language)
        assert "".join(phonemes).strip(), t
        ids = ph.ids(phonemes)
        assert ids.dtype == np.int32 and ids[0] == BOS and ids[-1] == EOS
        known = [p for p in phonemes if p in PIPER_MAP]
        assert len(known) >= 0.95 * len(phonemes)  # Piper's map holds espeak-ng's IPA
        assert (ids[1:-1:2] == PAD).all()  # a pad after ^ and after every phoneme
    other = "es" if language != "es" else "it"
    sample = real_texts(language)[0]
    assert ph.phonemes(sample, language) != ph.phonemes(sample, other)


def test_a_language_without_a_voice_stops_with_the_setting_to_change():
    with pytest.raises(UsageError, match=r"tts\.phoneme_voices"):
        Phonemizer({}).phonemes("hello", "xx")
    assert Phonemizer(VOICES).voice("en-GB") == "en-us" and Phonemizer(VOICES).voice("de_AT") == "de"


def test_the_text_job_writes_phonemes_and_their_ids_or_rejects_no_phonemes(tmp_path):
    """With `tts.phonemes: espeak`, each line gets `phonemes` and `phoneme_ids` (an int32
    array beside the text ids, files or packed) in the language its segment declares; a
    text espeak-ng says nothing for is rejected `no_phonemes`."""
    en, de = real_texts("en")[0], real_texts("de")[0]
    segs = [{"id": "en0", "text": en}, {"id": "de0", "text": de, "language": "de"}, {"id": "tune", "text": "♪ ♪"}]
    index = tmp_path / "features.jsonl"
    write_jsonl(index, segs)
    text.train_tokenizer([en, de, "♪ ♪"] * 5, tmp_path / "tok.model", 40)
    for layout in ("files", "packed"):
        out = tmp_path / layout / "text.jsonl"
        counts = text_ids(index, tmp_path / "tok.model", out, tmp_path / layout / "ids", (), layout, phonemes="espeak")
        lines = {x["id"]: x for x in read_jsonl(out)}
        assert sorted(lines) == ["de0", "en0"] and counts["rejected"] == 1
        reject = next(read_jsonl(out.with_suffix(".rejects.jsonl")))
        assert (reject["id"], reject["reason"]) == ("tune", "no_phonemes")
        ph = Phonemizer(VOICES)
        for seg in segs[:2]:
            line, expect = lines[seg["id"]], ph.phonemes(seg["text"], seg.get("language", "en"))
            assert line["phonemes"] == "".join(expect)
            ids = load_ref(line["phoneme_ids"], np.int32, 1)
            assert ids.tolist() == ph.ids(expect).tolist() and line["phoneme_ids_len"] == len(ids)
    # tts.no_phonemes: keep: the tune is kept, with empty phonemes and phoneme ids, unmeasured rate
    out = tmp_path / "keep" / "text.jsonl"
    keep = {"phonemes": "espeak", "no_phonemes": "keep"}
    counts = text_ids(index, tmp_path / "tok.model", out, tmp_path / "keep" / "ids", **keep)
    tune = {x["id"]: x for x in read_jsonl(out)}["tune"]
    assert counts["rejected"] == 0 and tune["phonemes"] == "" and tune["phoneme_ids_len"] == 0
    assert load_ref(tune["phoneme_ids"], np.int32, 1).size == 0 and len(load_ref(tune["text_ids"], np.int32, 1))
    assert speaking_rate({**tune, "duration": 2.0}) is None


def test_phonemes_on_by_default_and_off_for_a_dataset_that_says_so():
    cfg = config()
    assert cfg["tts"]["phonemes"] == "espeak"
    cfg["datasets"]["demo"]["phonemes"] = None  # e.g. a language espeak-ng has no voice for
    for cls in (TextIdsParams, ManifestParams):
        assert cls.from_config(cfg, "demo").phonemes is None and cls.from_config(cfg, "read").phonemes == "espeak"
