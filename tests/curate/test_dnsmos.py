"""Batched DNSMOS equals speechmos.dnsmos.run, and ranks clean speech above noisy speech."""

import numpy as np
import pytest
from conftest import asr_lines, whole_clips
from speechmos import dnsmos as reference

from speechprep.audio import read_segment
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
