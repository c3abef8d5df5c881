"""TTS text: normalisation, SentencePiece; atomic .npy."""

import json

import numpy as np
import pytest

from speechprep.io.npyio import load_npy, save_npy
from speechprep.text.normalize import TextNormalizer
from speechprep.tts.text import load_tokenizer, text_ids, train_normalized_tokenizer, train_tokenizer
from tests.support import TRUTH


def test_normalisation_nfkc_punctuation_whitespace():
    norm = TextNormalizer()
    assert norm("  Hello ,\u00a0world\u2026  ") == "Hello, world..."
    assert norm("\uff21\uff22\uff23 \ufb01ne") == "ABC fine"  # NFKC: fullwidth, ligature
    assert norm("\u201cQuoted\u201d \u2014 it\u2019s fine!!!") == '"Quoted" - it\'s fine!'
    assert norm("tab\tand\nnewline\u200b") == "tab and newline"


def test_language_hooks_and_config_overrides():
    norm = TextNormalizer({"en": {"lowercase": True}, "de": {"strip_punct": True}})
    assert norm("Bonjour ! Ça va ?", "fr") == "Bonjour ! Ça va ?"  # French keeps the space
    assert norm("Hello , World !", "en-US") == "hello, world!"
    assert norm("Guten Tag, Welt! Wie geht's?", "de") == "Guten Tag Welt Wie geht's"
    assert norm("Hello , World !", None) == "Hello, World!"


def test_tokenizer_trained_on_demo_texts_round_trips(tmp_path):
    norm = TextNormalizer()
    texts = [norm(s["text"]) for info in TRUTH["files"].values() for s in info.get("speech", [])]
    model = train_tokenizer(texts, tmp_path / "tok" / "sp.model", vocab_size=64)
    assert model.exists() and model.with_suffix(".vocab").exists()
    sp = load_tokenizer(model)
    assert sp.get_piece_size() <= 64
    for t in texts:
        ids = text_ids(sp, t)
        assert ids.dtype == np.int32 and ids.ndim == 1 and len(ids) > 0
        assert sp.decode(ids.tolist()) == t
    before = model.read_bytes()
    train_tokenizer(texts, model, vocab_size=64)
    assert model.read_bytes() == before  # deterministic: the same texts give the same file
    assert not list((tmp_path / "tok").glob("*.training*"))


def test_npy_atomic_and_truncated_detected(tmp_path):
    p = tmp_path / "a" / "x.npy"
    save_npy(p, np.arange(100, dtype=np.int32))
    assert load_npy(p, np.int32, 1).tolist() == list(range(100))
    assert load_npy(p, np.float32) is None  # wrong dtype counts as absent
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])  # what a killed non-atomic write would leave
    assert load_npy(p, np.int32, 1) is None
    assert load_npy(tmp_path / "missing.npy") is None
    assert not list(p.parent.glob(".*.tmp"))


def test_no_text_to_train_on_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no text"):
        train_tokenizer(["", ""], tmp_path / "sp.model", 32)


def _shard(path, texts):
    path.write_text("".join(json.dumps({"text_normalized": t}) + "\n" for t in texts), encoding="utf-8")
    return str(path)


def test_a_trained_tokenizer_is_kept_while_what_it_was_trained_on_is_unchanged(tmp_path, caplog):
    """A grown corpus (a new shard) keeps the tokenizer byte for byte, so no old shard's text
    ids change; a shard it was trained on that has a text it was not trained on, another
    vocab_size or ``retrain`` train anew; a removed shard, or lines removed from one, change
    nothing; a tampered kept model is not trusted."""
    norm = TextNormalizer()
    texts = [norm(s["text"]) for info in TRUTH["files"].values() for s in info.get("speech", [])]
    half = len(texts) // 2
    old = [_shard(tmp_path / "a.jsonl", texts[:half]), _shard(tmp_path / "b.jsonl", texts[half:])]
    kept, model = tmp_path / "kept", tmp_path / "tok" / "tokenizer.model"
    train_normalized_tokenizer(old, 64, str(model), kept)
    first = model.read_bytes()
    grown = [*old, _shard(tmp_path / "c.jsonl", ["quite another sentence, zebra quartz"])]
    model.unlink()  # Snakemake deletes a job's outputs before it reruns it
    with caplog.at_level("INFO", logger="speechprep.tts"):
        train_normalized_tokenizer(grown, 64, str(model), kept)
    assert model.read_bytes() == first and "kept the one trained on 2 shards" in caplog.text
    assert model.with_suffix(".vocab").read_bytes() == (kept / "tokenizer.vocab").read_bytes()
    train_normalized_tokenizer(grown[1:], 64, str(model), kept)  # a shard removed
    assert model.read_bytes() == first
    _shard(tmp_path / "a.jsonl", texts[: half - 2])  # files removed from a shard: its texts a subset
    caplog.clear()
    with caplog.at_level("INFO", logger="speechprep.tts"):
        train_normalized_tokenizer(grown, 64, str(model), kept)
    assert model.read_bytes() == first and "kept the one trained on 2 shards" in caplog.text
    train_normalized_tokenizer(grown, 64, str(model), kept, retrain=True)
    assert model.read_bytes() != first  # trained on the grown corpus, and kept as such
    retrained = model.read_bytes()
    train_normalized_tokenizer(grown, 64, str(model), kept)
    assert model.read_bytes() == retrained
    _shard(tmp_path / "a.jsonl", [*texts[:half], "a changed transcript"])
    train_normalized_tokenizer(grown, 64, str(model), kept)
    changed = model.read_bytes()
    assert changed != retrained
    train_normalized_tokenizer(grown, 48, str(model), kept)
    assert load_tokenizer(model).get_piece_size() <= 48
    (kept / "tokenizer.model").write_bytes(b"not a model")
    train_normalized_tokenizer(grown, 48, str(model), kept)
    assert load_tokenizer(model).get_piece_size() <= 48 and "does not match its state" in caplog.text
