"""Duplicates: an exact copy and re-encoded near copies (HuBERT units of the demo S2S
models) are found across shards; one kept per group, deterministically. The acoustic
fingerprint on real codecs: tests/curate/test_fingerprint.py; the search's arrays:
tests/curate/test_dupsearch.py."""

import random

import numpy as np
import pytest
from conftest import asr_lines, damage, params, s2s_units

from speechprep.curate.duplicates import Candidate, jaccard, minhash_signature, unit_jaccard
from speechprep.curate.dupsearch import find_duplicates
from speechprep.curate.measures import pcm_sha256
from speechprep.demo.s2s_models import COPIES
from speechprep.io.audio import read_segment

pytestmark = pytest.mark.slow  # builds the demo S2S models for the units
AT_035 = params("duplicates", near_duplicate_jaccard=0.35)


@pytest.fixture(scope="module")
def phrases(tmp_path_factory):
    """Every clean demo phrase, and re-encodes of the first: (audio, units) by id."""
    segs = asr_lines()
    audio = {s["id"]: read_segment(s) for s in segs}
    first = segs[0]["id"]
    for fmt, gain in COPIES:  # the copies the demo S2S build checks its k-means on
        audio[f"{first}@{fmt.lower()}"] = damage.reencode(audio[first], fmt=fmt, gain_db=gain)
    units = s2s_units(audio, tmp_path_factory.mktemp("units"))
    return first, audio, units


def candidates(ids, audio, units, quality):
    p = params("measure", device="cpu")
    return [
        Candidate(
            i,
            pcm_sha256(audio[i.split("#")[0]]),
            quality.get(i, 2.0),
            minhash_signature(units[i.split("#")[0]], p.minhash_ngram, p.minhash_perm),
        )
        for i in ids
    ]


def test_exact_and_near_copies_are_duplicates_of_the_best(phrases):
    first, audio, units = phrases
    thr = params("duplicates").near_duplicate_jaccard
    ids = [*sorted(i for i in audio if "@" not in i), first + "#copy", first + "@mp3", first + "@flac"]
    quality = {first: 3.0}  # the original scores best: it is the one kept
    dups = {d.id: d for d in find_duplicates(candidates(ids, audio, units, quality), params("duplicates"))}
    assert set(dups) == {first + "#copy", first + "@mp3", first + "@flac"}
    assert all(d.duplicate_of == first for d in dups.values())
    assert dups[first + "#copy"].kind == "exact" and dups[first + "#copy"].similarity == 1.0
    assert dups[first + "@mp3"].kind == dups[first + "@flac"].kind == "near"
    assert dups[first + "@mp3"].similarity >= thr


def test_keeper_is_deterministic(phrases):
    first, audio, units = phrases
    ids = [first, first + "#b", first + "#a", first + "@mp3"]
    # equal quality: the smallest id is kept, whatever the order
    for seed in range(3):
        order = ids[:]
        random.Random(seed).shuffle(order)
        dups = find_duplicates(candidates(order, audio, units, {}), AT_035)
        assert {d.duplicate_of for d in dups} == {first} and len(dups) == 3
    # a better re-encode is kept over the original
    dups = find_duplicates(candidates(ids, audio, units, {first + "@mp3": 4.0}), AT_035)
    assert {d.duplicate_of for d in dups} == {first + "@mp3"}


def test_different_phrases_are_not_near_duplicates(phrases):
    _, audio, units = phrases
    p = params("measure", device="cpu")
    sigs = [minhash_signature(units[i], p.minhash_ngram, p.minhash_perm) for i in audio if "@" not in i]
    worst = max(jaccard(a, b) for k, a in enumerate(sigs) for b in sigs[k + 1 :])
    assert worst < params("duplicates").near_duplicate_jaccard


def test_signature_needs_units():
    assert minhash_signature(None, 2, 64) is None and minhash_signature([3, 3, 3], 2, 64) is None
    a = minhash_signature([1, 2, 3, 4, 5], 2, 64)
    assert a.shape == (64,) and (a == minhash_signature([1, 1, 2, 3, 3, 4, 5], 2, 64)).all()  # runs collapsed
    # the exact Jaccard the MinHash estimates: {1 2, 2 3} of {1 2, 2 3, 3 4}
    assert unit_jaccard([1, 1, 2, 3], [1, 2, 3, 3, 4], 2) == 2 / 3 and unit_jaccard([3, 3], [1, 2, 3], 2) == 0.0


def test_a_clearly_noisier_or_narrower_copy_is_not_kept_for_its_dnsmos():
    """DNSMOS decides only between copies alike in SNR and bandwidth (tolerances: 10 dB, 250 Hz)."""
    sig = np.arange(128, dtype=np.uint64)  # one MinHash: near copies of one another

    def keeper(*copies):
        cands = [Candidate(i, f"sha-{i}", q, sig, snr, bw) for i, q, snr, bw in copies]
        dups = find_duplicates(cands, AT_035)
        assert len(dups) == len(copies) - 1 and len({d.duplicate_of for d in dups}) == 1
        return dups[0].duplicate_of

    # a copy with 30 dB of noise added scores higher DNSMOS: the source is kept
    assert keeper(("src", 2.0, 48.6, 7687.5), ("noisy", 2.13, 25.0, 8000.0)) == "src"
    # an MP3 copy: as noisy, 400 Hz less bandwidth, higher DNSMOS: the source is kept
    assert keeper(("mp3", 2.39, 39.9, 7281.25), ("src", 2.37, 37.9, 7687.5)) == "src"
    # alike in SNR and bandwidth: the better DNSMOS, then the smaller id
    assert keeper(("a", 2.0, 40.0, 7600.0), ("b", 2.5, 45.0, 7750.0)) == "b"
    assert keeper(("b", 2.0, 40.0, 7600.0), ("a", 2.0, 41.0, 7700.0)) == "a"
    # missing measures are skipped, whatever the input order
    for order in (
        (("x", 2.0, None, None), ("y", 3.0, 20.0, 7000.0)),
        (("y", 3.0, 20.0, 7000.0), ("x", 2.0, None, None)),
    ):
        assert keeper(*order) == "y"
