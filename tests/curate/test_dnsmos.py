"""Batched DNSMOS equals speechmos.dnsmos.run, and ranks clean speech above noisy speech."""

import numpy as np
import pytest
from conftest import asr_lines, whole_clips
from speechmos import dnsmos as reference

from speechprep.core import kernels
from speechprep.curate.dnsmos import Dnsmos, windows
from speechprep.demo import damage
from speechprep.io.audio import read_segment

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


@pytest.fixture(scope="module")
def telephone_clips():
    """Real 8 kHz telephone prompts of five voices read at 16 kHz as the measure job reads them,
    cut to 1-4 s: lengths of whole milliseconds (what ASR's trimming writes: 16 samples a
    millisecond, so the repeated clip's frames repeat after a few hundred frames) and of
    arbitrary samples (they never repeat within its windows), and one of 20 s (three groups of
    windows)."""
    from tests import real_speech as R

    prompts = [R.read(u.path, 16000)[0] for s in R.TELEPHONE_VOICES for u in R.telephone_prompts(s)[5::60][:3]]
    speech = np.concatenate(prompts)
    cuts = [(0, 16000 + 1280), (20000, 22000 + 37), (60000, 16 * 1234), (90000, 16 * 3901), (130000, 49999)]
    return [speech[a : a + n] for a, n in cuts] + [speech[: 20 * 16000]]


def test_short_real_clips_equal_speechmos(telephone_clips):
    """Every shortcut at once (the shared convolutions and spectrogram, the windows' own edges,
    frames that repeat computed once, one clip per thread): within 1e-4 of speechmos, which
    runs the shipped models on every 9.01 s window."""
    from speechprep.curate.dnsmos import period_frames

    assert [period_frames(len(x)) for x in telephone_clips[:4]] == [108, 22037, 617, 3901]
    ours = Dnsmos(threads=2)(telephone_clips)
    for x, o in zip(telephone_clips, ours, strict=True):
        ref = reference.run(x, 16000)
        for k, r in KEYS:
            assert o[k] == pytest.approx(float(ref[r]), abs=1e-4), (len(x), k)


def test_threads_do_not_change_scores(scorer, telephone_clips):
    one = Dnsmos(threads=1)(telephone_clips[:4])
    for a, b in zip(one, scorer(telephone_clips[:4]), strict=True):
        for k, _ in KEYS:
            assert a[k] == pytest.approx(b[k], abs=1e-6)


def test_repeated_frames_and_spectrogram():
    """Frames ``period_frames`` apart of a repeated clip hold the same samples; the P.808
    spectrogram is librosa's, to the bit, at any length."""
    librosa = kernels.librosa()

    from speechprep.curate import dnsmos as D

    rng = np.random.default_rng(0)
    for length in (16000 + 1280, 16 * 1234, 16000 + 7):
        audio, starts = windows(rng.standard_normal(length).astype(np.float32))
        p = D.period_frames(length)
        f = D._frames(audio, 0, (len(audio) - D.FRAME) // D.HOP + 1)
        if p < len(f):
            assert np.array_equal(f[p:], f[: len(f) - p])
        block = np.arange(5 * 7).reshape(5, 7)
        assert np.array_equal(D._periodic(block, 20, 2, 4, axis=1)[:, 6:14], block[:, [2, 3, 4, 5, 2, 3, 4, 5]])
    x = rng.standard_normal(16000 * 3).astype(np.float32) * 0.1
    for n in (1, 320, 480, 16000 * 3):
        want = librosa.feature.melspectrogram(y=x[:n], sr=16000, n_fft=321, hop_length=160, n_mels=120)
        assert np.array_equal(D._mel(x[:n]), want)
