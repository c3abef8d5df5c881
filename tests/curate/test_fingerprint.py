"""The acoustic fingerprint on real speech through real codecs (tests/real_speech.py: Debian's
recordings; sox GSM 06.10 and MP3, ffmpeg G.722 and Opus, a resample to 8 kHz; +-3/6 dB,
0.1-0.5 s offsets): copies are found by the duplicates job's search, different utterances of
one speaker never are. Calibration: bench/curate/duplicates_calibration.py (docs/stages/README.md)."""

import itertools
from collections import defaultdict

import numpy as np
import pytest
from conftest import params

from speechprep.curate import fingerprint as FP
from speechprep.curate.duplicates import Candidate
from speechprep.curate.dupsearch import find_duplicates
from speechprep.curate.measures import pcm_sha256
from tests import real_speech as R


def sources() -> list[R.Utterance]:
    """Recordings of every kind: sentences, card names, loudspeaker names, AN4, letters/syllables."""
    out = R.librivox() + R.cards() + R.alsa_voice()[:4]
    out += [R.Utterance(p, f"an4_{p.stem}") for p in R.raw_utterances()]
    for lang in R.KLETTRES_DISTINCT:
        out += R.klettres_voices(lang)[:2]
    return out


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    return R.codec_copies(sources(), tmp_path_factory.mktemp("codec_copies"))


@pytest.fixture(scope="module")
def prints():
    cache: dict[str, np.ndarray] = {}

    def get(path) -> tuple[np.ndarray, np.ndarray | None]:
        key = str(path)
        if key not in cache:
            x = R.read(path, 16000)[0]
            cache[key] = (x, FP.fingerprint(x))
        return cache[key]

    return get


def candidates(paths, prints) -> list[Candidate]:
    out = []
    for k, path in enumerate(paths):
        x, fp = prints(path)
        out.append(Candidate(f"{k:05d}", pcm_sha256(x), 3.0, None, fingerprint=fp))
    return out


def test_real_codec_copies_are_found(copies, prints):
    """Recall >= 0.95 over every copy (>= 0.9 per codec), each copy tied to its own source."""
    srcs = sources()
    paths = [u.path for u in srcs] + [c.path for c in copies]
    source_of = {len(srcs) + k: srcs.index(c.source) for k, c in enumerate(copies)}
    dups = {int(d.id): int(d.duplicate_of) for d in find_duplicates(candidates(paths, prints), params("duplicates"))}
    group = lambda i: dups.get(i, i)
    found = defaultdict(list)
    for k, c in enumerate(copies):
        i = len(srcs) + k
        found[c.codec].append(group(i) == group(source_of[i]))
        if i in dups:  # found or not, a copy is never tied to another recording
            assert source_of.get(group(i), group(i)) == source_of[i], (c, dups[i])
    recall = {codec: float(np.mean(v)) for codec, v in found.items()}
    assert np.mean([x for v in found.values() for x in v]) >= 0.95, recall
    assert min(recall.values()) >= 0.9, recall
    assert len({group(i) for i in range(len(srcs))}) == len(srcs)  # no two sources in one group


def voices() -> dict[str, list[R.Utterance]]:
    out = defaultdict(list)
    for u in R.librivox() + R.cards() + R.alsa_voice():
        out[u.speaker].append(u)
    for lang in ("lt", "he", "da", "en", "fr"):  # lt: the closest pairs of bench/curate/duplicates_calibration.py
        for u in R.klettres_voices(lang):
            out[u.speaker].append(u)
    return out


def test_different_utterances_of_one_speaker_are_never_duplicates(prints):
    """Every pair of one speaker's recordings scores under the threshold; the search over all of
    them finds only the exact copies klettres ships (two Hebrew syllable files, one PCM each)."""
    thr = params("duplicates").acoustic_duplicate_score
    paths, worst = [], (0.0, ("", ""))
    for utts in voices().values():
        for u, w in itertools.combinations(utts, 2):
            (xa, fa), (xb, fb) = prints(u.path), prints(w.path)
            if len(xa) == len(xb) and np.array_equal(xa, xb):
                continue  # one recording in two files: an exact duplicate, below
            s = FP.compare(fa, fb) if fa is not None and fb is not None else 0.0
            worst = max(worst, (s, (u.path.name, w.path.name)))
        paths += [u.path for u in utts]
    assert worst[0] < thr, worst
    cands = candidates(paths, prints)
    dups = find_duplicates(cands, params("duplicates"))
    twins = {(paths[int(d.id)].name, paths[int(d.duplicate_of)].name) for d in dups}
    assert all(d.kind == "exact" for d in dups), dups
    assert twins == {("ad-22.ogg", "ad-19.ogg"), ("ad-11.ogg", "ad-10.ogg")}, twins


def test_a_copy_has_the_same_anchors_shifted(prints):
    """Offset, gain and a different start do not change the anchors, only their times."""
    x, fp = prints(R.librivox()[1].path)
    shifted = np.concatenate([np.zeros(3200, np.float32), 0.5 * x])  # 0.2 s later, -6 dB
    fs = FP.fingerprint(shifted)
    n = int(fp["n_anchors"])
    assert n >= 4 and int(fs["n_anchors"]) == n
    assert (fs["anchor_t"][:n].astype(int) - fp["anchor_t"][:n].astype(int) == 20).all()
    same = np.bitwise_count(fs["anchor_bits"][:n] ^ fp["anchor_bits"][:n]).sum(axis=1) / FP.ANCHOR_BITS
    assert same.max() < 0.05
    whole = 1 + FP.PITCH_WEIGHT - FP.EVIDENCE_WEIGHT / np.sqrt(np.unpackbits(fp["active"]).sum())
    assert FP.compare(fp, fp) == pytest.approx(whole) and FP.compare(fp, fs) == pytest.approx(whole, abs=0.02)


def test_rows_are_fixed_and_round_trip(prints):
    x, fp = prints(R.cards()[0].path)
    assert fp.dtype == FP.DTYPE and fp.shape == ()
    assert FP.fingerprint(x).tobytes() == fp.tobytes()
    ok, back = FP.unpack(np.frombuffer(fp.tobytes(), np.uint8))
    assert ok and back.tobytes() == fp.tobytes()
    assert FP.unpack(None)[0] is False
    with pytest.raises(ValueError, match="bytes"):
        FP.unpack(np.zeros(10, np.uint8))


def test_no_fingerprint_without_an_onset():
    t = np.arange(16000, dtype=np.float32) / 16000
    assert FP.fingerprint(np.zeros(16000, np.float32)) is None
    assert FP.fingerprint(0.3 * np.sin(2 * np.pi * 440 * t)) is None  # a steady tone
    assert FP.fingerprint(np.zeros(0, np.float32)) is None
