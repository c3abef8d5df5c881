"""Batched DNSMOS equals speechmos.dnsmos.run, and ranks clean speech above noisy speech."""

import numpy as np
import pytest
from conftest import asr_lines, whole_clips
from speechmos import dnsmos as reference

from speechprep.core.audio import read_segment
from speechprep.curate.dnsmos import Dnsmos, windows
from speechprep.demo import damage

KEYS = (("sig", "sig_mos"), ("bak", "bak_mos"), ("ovrl", "ovrl_mos"), ("p808", "p808_mos"))


@pytest.fixture(scope="module")
def scorer():
    return Dnsmos(threads=2)


@pytest.fixture(scope="module")
def clips():
    """Demo phrases (1-2 s: repeated to 9.01 s, 1-4 windows), a whole clip (4 s) and
    12 phrases end to end (16 s: windows of real audio, one second apart)."""
    phrases = [read_segment(s) for s in asr_lines()[::5]]
    whole = read_segment(whole_clips()[0])
    return [*phrases, whole, np.concatenate([read_segment(s) for s in asr_lines(12)])]


def test_equals_speechmos(scorer, clips):
    ours = scorer(clips)
    for x, o in zip(clips, ours, strict=False):
        ref = reference.run(x, 16000)
        for k, r in KEYS:
            assert o[k] == pytest.approx(float(ref[r]), abs=1e-3), (len(x), k)


def test_windows_as_speechmos_cuts_them():
    n = int(9.01 * 16000)
    for length in (1, 16000, n - 1, n, n + 1, 16000 * 10 + 7, 16000 * 23):
        audio, starts = windows(np.ones(length, np.float32))
        # speechmos: repeat to at least 9.01 s, then one window a second while a whole one fits
        want = np.ones(length)
        while len(want) < n:
            want = np.append(want, want)
        hops = int(np.floor(len(want) / 16000) - 9.01) + 1
        assert len(audio) == len(want)
        assert starts == [i for i in range(hops) if len(want[i * 16000 : int((i + 9.01) * 16000)]) >= n]


def test_batch_composition_does_not_change_scores(scorer, clips):
    alone = [scorer([x])[0] for x in clips[:3]]
    together = scorer(clips[:3])
    for a, b in zip(alone, together, strict=False):
        for k, _ in KEYS:
            assert a[k] == pytest.approx(b[k], abs=1e-5)


def test_clean_speech_ranks_above_its_0_db_noisy_variant(scorer):
    clean = [read_segment(s) for s in asr_lines()[::4]]
    noisy = [damage.add_noise(x, 0.0, seed=k) for k, x in enumerate(clean)]
    for c, n in zip(scorer(clean), scorer(noisy), strict=False):
        assert c["ovrl"] > n["ovrl"] and c["bak"] > n["bak"]


@pytest.fixture(scope="module")
def real_clips():
    """Real speech (tests/real_speech.py) cut to 0.5, 1, 2 and 12 s (a repeated
    clip of whole seconds has identical windows: 1 s -> 9 windows, 1 distinct; 2 s -> 7, 2)."""
    from tests import real_speech as R

    book = np.concatenate([R.read(u.path, 16000)[0] for u in R.librivox()])
    cards = np.concatenate([R.read(u.path, 16000)[0] for u in R.cards()])
    return [cards[: int(s * 16000)] for s in (0.5, 1.0, 2.0)] + [book[: 12 * 16000]]


def test_distinct_windows_once_equals_every_window(scorer, real_clips, monkeypatch):
    from speechprep.curate import dnsmos as D

    assert D.distinct_windows(32000, windows(np.ones(32000, np.float32))[1]) == ([0, 1], [4, 3])
    once = scorer(real_clips)
    monkeypatch.setattr(D, "distinct_windows", lambda length, starts: (starts, [1] * len(starts)))
    every = scorer(real_clips)
    for x, a, b in zip(real_clips, once, every, strict=True):
        for k, _ in KEYS:
            assert a[k] == pytest.approx(b[k], abs=1e-4), (len(x), k)
    for j in (1, 2):  # and speechmos itself, on a 1 s and a 2 s clip
        x, o = real_clips[j], once[j]
        ref = reference.run(x, 16000)
        for k, r in KEYS:
            assert o[k] == pytest.approx(float(ref[r]), abs=1e-3), (len(x), k)
