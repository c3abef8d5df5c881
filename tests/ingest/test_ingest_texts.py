"""Ingest of a transcribed dataset: each line's text, inline or from ``text_filepath`` (UTF-8), kept;
a text file that is missing or not UTF-8, and a line without text, end in rejects, on real
recordings (the LibriVox reader and the cards speaker, with their human transcripts)."""

import codecs
import json

import pytest
from test_ingest import run

from speechprep.core.config import ConfigError, check
from tests import real_speech as rs


def manifest_of(tmp_path, lines):
    m = tmp_path / "input" / "manifest.jsonl"
    m.parent.mkdir(parents=True, exist_ok=True)
    m.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    return m


def test_text_and_text_filepath_kept_bad_text_files_rejected(tmp_path):
    librivox, cards = rs.librivox(), rs.cards()
    texts = tmp_path / "input" / "texts"
    texts.mkdir(parents=True)
    # a LibriTTS-style text file per utterance: one with a byte-order mark, one with a paragraph break
    (texts / "0870.txt").write_bytes(codecs.BOM_UTF8 + (librivox[0].text + "\n").encode("utf-8"))
    (texts / "0880.txt").write_text(f"  {librivox[1].text}\n\nSecond paragraph é.\n", encoding="utf-8")
    (texts / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    lines = [
        {"id": "a", "audio_filepath": str(librivox[0].path), "text_filepath": "texts/0870.txt"},
        {"id": "b", "audio_filepath": str(librivox[1].path), "text_filepath": str(texts / "0880.txt")},
        {"id": "c", "audio_filepath": str(cards[0].path), "text": cards[0].text, "speaker": "cards_speaker"},
        {"id": "d", "audio_filepath": str(cards[1].path), "text_filepath": "texts/latin1.txt"},
        {"id": "e", "audio_filepath": str(cards[2].path), "text_filepath": "texts/nowhere.txt"},
        {"id": "f", "audio_filepath": str(cards[3].path), "text": "x", "text_filepath": "texts/0870.txt"},
        {"id": "g", "audio_filepath": str(cards[4].path)},
        {"id": "h", "audio_filepath": str(librivox[2].path), "text": "   "},
    ]
    m = manifest_of(tmp_path, lines)
    summary, manifest, rejects, _ = run(tmp_path, {"manifest": str(m), "text": "given", "shards": 1})
    by_id = {x["id"]: x for x in manifest}
    assert by_id["a"]["text"] == librivox[0].text  # the BOM and the final newline dropped
    assert by_id["a"]["text_filepath"] == str(texts / "0870.txt")  # relative to the manifest, absolute
    assert by_id["b"]["text"] == f"{librivox[1].text}\n\nSecond paragraph é."  # paragraphs kept
    assert by_id["c"]["text"] == cards[0].text and by_id["c"]["speaker"] == "cards_speaker"
    reasons = {r["id"]: (r["reason"], r["detail"]) for r in rejects}
    assert reasons["d"][0] == "bad_encoding" and "latin1.txt" in reasons["d"][1] and "offset 3" in reasons["d"][1]
    assert reasons["e"][0] == "missing" and "nowhere.txt" in reasons["e"][1]
    assert reasons["f"][0] == "malformed_line" and "both text and text_filepath" in reasons["f"][1]
    assert reasons["g"][0] == "no_text" and reasons["h"][0] == "no_text"
    assert sorted(by_id) + sorted(reasons) == sorted(x["id"] for x in lines)  # every line accounted for
    assert summary["inputs"] == len(lines) and summary["accepted"] == 3


def test_text_asr_keeps_lines_without_text(tmp_path):
    """With text: asr (the default) a line needs no text; a text file given is still read."""
    u = rs.librivox()[0]
    (tmp_path / "input" / "t.txt").parent.mkdir(parents=True)
    (tmp_path / "input" / "t.txt").write_text(u.text, encoding="utf-8")
    m = manifest_of(tmp_path, [
        {"id": "a", "audio_filepath": str(u.path)},
        {"id": "b", "audio_filepath": str(u.path), "text_filepath": "t.txt"},
    ])  # fmt: skip
    _, manifest, rejects, _ = run(tmp_path, {"manifest": str(m), "shards": 1})
    assert not rejects and [x.get("text") for x in manifest] == [None, u.text]


def test_an_audio_dir_cannot_have_given_text():
    with pytest.raises(ConfigError, match="an audio_dir has no text"):
        check({"datasets": {"x": {"audio_dir": "a", "text": "verify"}}})
