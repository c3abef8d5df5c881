"""The captions' measures on real voices (tests/real_speech.py): pitch against Praat, a
male and a female voice apart, monotony without declination, reverberation ranking
rooms, and the summary's bins.

Pitch: each voice's median over its recordings of ``pitch_mean`` (SwiftF0, as the
annotate job computes it) against the same median of Praat's autocorrelation pitch
(praat-parselmouth, ``to_pitch_ac`` over the same 60-500 Hz) on the same audio: per
recording the median of Praat's voiced frames (their mean carries Praat's octave jumps:
one of the cards speaker's recordings has a 90th percentile of 433 Hz, a median of 111).
Reverberation: each real recording dry and convolved with synthetic room impulses
(exponentially decaying noise after a direct path, RT60 0.3, 0.6 and 1.0 s, cut to the
recording's length as a segment would be).
"""

import itertools

import numpy as np
import pytest
from conftest import params
from scipy.signal import fftconvolve

from speechprep.core.bins import bin_edges, bin_of
from speechprep.curate import measures as M
from speechprep.curate.annotate import annotations
from speechprep.curate.stage import Annotations
from tests import real_speech as R

SR = 16000
P = params("annotate", device="cpu")


def clips(utterances, limit=None):
    return [R.read(u.path, SR)[0] for u in utterances[:limit]]


def praat_median(x):
    import parselmouth

    pitch = parselmouth.Sound(x.astype(np.float64), SR).to_pitch_ac(
        pitch_floor=P.pitch_range_hz[0], pitch_ceiling=P.pitch_range_hz[1]
    )
    f = pitch.selected_array["frequency"]
    return float(np.median(f[f > 0])) if np.count_nonzero(f) >= 8 else None


def voice_medians(xs):
    ours = [annotations(x, P)["pitch_mean"] for x in xs]
    praat = [praat_median(x) for x in xs]
    pairs = [(a, b) for a, b in zip(ours, praat, strict=True) if a is not None and b is not None]
    assert len(pairs) >= 0.8 * len(xs)
    return float(np.median([a for a, _ in pairs])), float(np.median([b for _, b in pairs]))


# (female, male): German's letters and syllables are two people (about 220 and 110 Hz);
# the held-apart telephone voice Allison Smith (8 kHz) and the LibriVox reader (16 kHz)
PAIRS = {
    "klettres_de": (lambda: R.klettres("de", "alpha"), lambda: R.klettres("de", "syllab")),
    "allison_librivox": (lambda: R.telephone_prompts("allison_en", 40), R.librivox),
}


@pytest.mark.parametrize("pair", PAIRS)
def test_pitch_of_a_woman_and_a_man_apart_and_within_5_percent_of_praat(pair):
    female, male = (voice_medians(clips(get())) for get in PAIRS[pair])
    for ours, praat in (female, male):
        assert abs(ours / praat - 1) <= 0.05, (pair, ours, praat)
    assert female[0] - male[0] > 60, (pair, female, male)


def test_monotony_leaves_out_the_declination():
    """A steady fall of 4 semitones is monotone (its spread about the trend is 0) though
    its pitch_std is not; the same fall with a 2-semitone swing is not monotone."""
    t = np.arange(200) * 0.016
    fall = 200.0 * 2 ** (-4 * t / t[-1] / 12)
    swing = fall * 2 ** (2 * np.sin(2 * np.pi * 3 * t) / 12)
    steady, lively = M.pitch_measures(fall, 0.016, 8), M.pitch_measures(swing, 0.016, 8)
    assert steady["monotony"] < 1e-6 < 1.0 < steady["pitch_std_st"]
    assert lively["monotony"] == pytest.approx(2 / np.sqrt(2), rel=0.05)
    assert abs(steady["pitch_mean"] - fall.mean()) < 1e-9
    unvoiced = np.zeros(100)
    unvoiced[:7] = 150.0  # 7 voiced frames: too few
    assert M.pitch_measures(unvoiced, 0.016, 8) == dict.fromkeys(M.PITCH_FIELDS)
    jumps = np.full(100, 120.0)
    jumps[::10] = 240.0  # a tracker's octave jumps are left out
    assert M.pitch_measures(jumps, 0.016, 8)["pitch_mean"] == 120.0


def room(rt60, rng):
    n = int(SR * rt60 * 1.2)
    tail = rng.standard_normal(n) * np.exp(-6.9 * np.arange(n) / SR / rt60)
    tail[: int(0.002 * SR)] = 0.0  # the reflections start 2 ms after the direct sound
    h = tail / np.sqrt(np.sum(tail**2))  # as much energy in the tail as in the direct sound (0 dB)
    h[0] = 1.0
    return h


@pytest.mark.parametrize("voices", ["calibration", "telephone"])
def test_reverb_ranks_a_dry_recording_below_rooms_of_rt60_03_06_10(voices):
    """Real recordings dry and in three rooms: the estimate rises with RT60 on >= 90% of
    them, on the voices that chose the estimator's settings and on the telephone prompts
    held apart from that choice (5 voices, 40 prompts each, 8 kHz, many under 1.5 s:
    87% with the broadband level alone)."""
    rng = np.random.default_rng(0)
    rooms = [room(t, rng) for t in (0.3, 0.6, 1.0)]
    if voices == "calibration":
        utts = R.librivox() + R.cards() + R.alsa_voice()
        utts += [u for lang in ("en", "fr", "de") for u in R.klettres(lang, "syllab" if lang != "fr" else "alpha")[:10]]
    else:
        utts = [u for v in R.TELEPHONE_VOICES for u in R.telephone_prompts(v, 40)]
    ranked = 0
    for x in clips(utts):
        est = [M.reverb_s(y, SR) for y in [x, *(fftconvolve(x, h)[: len(x)] for h in rooms)]]
        ranked += all(a < b for a, b in itertools.pairwise(est))
    assert ranked >= 0.9 * len(utts), (ranked, len(utts))
    assert M.reverb_s(np.zeros(100, np.float32), SR) is None  # shorter than a window


def test_bins_and_the_summary_edges():
    assert bin_edges([1.0, 2.0], 4) is not None and bin_edges([3.0], 4) is None and bin_edges([2.0, 2.0], 4) is None
    edges = bin_edges(np.linspace(0, 100, 1001), 4)  # 1st..99th percentile: 1..99
    assert edges == pytest.approx([25.5, 50.0, 74.5])
    assert [bin_of(v, edges) for v in (-5, 25.5, 50.1, 1e9)] == [0, 1, 2, 3]
    assert bin_of(None, edges) is None and bin_of(1.0, None) is None
    a = Annotations(3)
    for i in range(30):
        a.add({"speaker": f"s{i % 2}", "pitch_mean": 100.0 + i, "snr_db": None, "reverb": 0.3})
    s = a.summary()
    assert s["bins"] == 3 and len(s["edges"]["pitch_mean"]) == 2 and s["edges"]["snr_db"] is None
    assert s["edges"]["reverb"] is None and s["medians"]["pitch_mean"] == 114.5
    assert set(s["by_speaker"]) == {"s0", "s1"} and len(s["by_speaker"]["s1"]["pitch_mean"]) == 2
    assert s["by_gender"] == {}  # no gender given
    for i in range(20):
        a.add({"speaker": "s2", "gender": "male", "pitch_mean": 90.0 + i, "pitch_std": 5.0 + i})
    men, everyone = a.summary()["by_gender"]["male"], a.summary()["edges"]
    assert set(men) == {"pitch_mean", "pitch_std"} and men["pitch_mean"][0] < 100 < everyone["pitch_mean"][0]
