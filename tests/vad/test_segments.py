"""Segmentation and statistics on frame flags (no audio, no TEN-VAD)."""

import itertools

import numpy as np
import pytest

from speechprep.vad.stage import VadParams, file_stats, make_segments, speech_runs
from tests.support import params

HOP = 256 / 16000  # 16 ms


def flags_from(intervals, duration):
    """Frame flags that are 1 inside ``intervals`` (seconds)."""
    f = np.zeros(int(np.ceil(duration / HOP)), np.uint8)
    for s, e in intervals:
        f[int(round(s / HOP)) : int(round(e / HOP))] = 1
    return f


def segs(intervals, duration, **kw):
    f = flags_from(intervals, duration)
    probs = f.astype(np.float32) * 0.9
    return make_segments(f, probs, duration, params(VadParams, **kw))


def test_speech_runs():
    assert speech_runs(np.array([0, 1, 1, 0, 0, 1, 0, 1, 1])) == [(1, 3), (5, 6), (7, 9)]
    assert speech_runs(np.array([], np.uint8)) == []
    assert speech_runs(np.array([1, 1])) == [(0, 2)]


def test_short_gaps_are_merged_long_ones_kept():
    out = segs([(1.0, 2.0), (2.1, 3.0), (4.0, 5.0)], 6.0, min_silence=0.3, pad=0.0)
    assert len(out) == 2
    assert out[0] == pytest.approx((1.0, 3.0), abs=HOP)
    assert out[1] == pytest.approx((4.0, 5.0), abs=HOP)


def test_short_speech_dropped():
    out = segs([(1.0, 1.1), (3.0, 4.0)], 5.0, min_speech=0.25, pad=0.0)
    assert len(out) == 1 and out[0] == pytest.approx((3.0, 4.0), abs=HOP)


def test_padding_clamped_to_file_and_neighbours():
    out = segs([(0.02, 1.0), (1.4, 2.0), (2.9, 2.98)], 3.0, min_silence=0.3, min_speech=0.05, pad=0.3)
    assert out[0][0] == 0.0  # clamped at the file start
    assert out[0][1] == pytest.approx(out[1][0])  # neighbours meet half way
    assert out[0][1] == pytest.approx(1.2, abs=HOP)
    assert out[-1][1] == 3.0  # clamped at the file end
    for (_, b), (c, _) in itertools.pairwise(out):
        assert b <= c


def test_bounds_are_whole_10_ms_frames_and_neighbours_still_meet():
    """Every bound on the 10 ms grid, so a segment read at 16 kHz is whole 160-sample hops
    (DNSMOS computes one period of its repeated frames); the half-way point two padded
    neighbours share is rounded once, so they still meet; a segment that reaches the
    file's end (3.007 s) ends at its last whole 10 ms (3.0, not 3.01)."""
    out = segs([(0.333, 1.017), (1.301, 2.2), (2.5, 3.007)], 3.007, min_silence=0.1, min_speech=0.05, pad=0.2)
    assert len(out) == 3
    for a, b in out:
        assert round(a * 100) == pytest.approx(a * 100, abs=1e-9) and round(b * 100) == pytest.approx(b * 100, abs=1e-9)
        assert round((b - a) * 16000) % 160 == 0
    for (_, b), (c, _) in itertools.pairwise(out):
        assert b == c
    assert out[-1][1] == 3.0


def test_long_segment_cut_at_longest_internal_silences():
    # 25 blocks of 2 s speech, short pauses (all merged by min_silence); the
    # 12th pause is the longest, the 5th and 20th the next longest
    pauses = [0.05] * 24
    pauses[11], pauses[4], pauses[19] = 0.25, 0.15, 0.1
    speech, t = [], 0.5
    for i in range(25):
        speech.append((t, t + 2.0))
        t += 2.0 + (pauses[i] if i < 24 else 0)
    cut = speech[11][1], speech[12][0]
    out = segs(speech, t + 1.0, min_silence=0.3, pad=0.0, max_segment=30.0)
    assert len(out) == 2
    assert all(e - s <= 30.0 for s, e in out)
    assert out[0][1] == pytest.approx(cut[0], abs=HOP)
    assert out[1][0] == pytest.approx(cut[1], abs=HOP)
    # a tighter limit cuts at the next longest pauses too
    out = segs(speech, t + 1.0, min_silence=0.3, pad=0.0, max_segment=20.0)
    assert len(out) == 4 and all(e - s <= 20.0 for s, e in out)
    assert out[0][1] == pytest.approx(speech[4][1], abs=HOP)
    assert out[2][1] == pytest.approx(speech[19][1], abs=HOP)


def test_max_segment_holds_with_padding_and_continuous_speech():
    # 100 s of speech without any pause: cut where probability is lowest
    out = segs([(0.5, 100.5)], 101.0, pad=0.2, max_segment=12.0)
    assert len(out) >= 9
    assert all(e - s <= 12.0 + 1e-9 for s, e in out)
    covered = sum(e - s for s, e in out)
    assert covered == pytest.approx(100.0 + 2 * 0.2, abs=0.05)


def test_stats_of_segments():
    st = file_stats("f", 10.0, [(1.0, 3.0), (5.0, 6.0)])
    assert st["n_segments"] == 2
    assert st["speech_ratio"] == pytest.approx(0.3)
    assert st["max_speech"] == 2.0 and st["min_speech"] == 1.0 and st["avg_speech"] == 1.5
    # silences: 0-1, 3-5, 6-10
    assert st["max_silence"] == 4.0 and st["min_silence"] == 1.0
    assert st["avg_silence"] == pytest.approx(7 / 3, abs=1e-4)
    st = file_stats("g", 2.0, [(0.0, 2.0)])
    assert st["speech_ratio"] == 1.0 and st["max_silence"] == 0.0


def test_forced_cut_in_continuous_speech_respects_min_speech():
    """90 s without a pause longer than a frame; the only gap is one frame right
    after the start: no piece may be shorter than min_speech."""
    duration = 92.0
    f = flags_from([(0.5, 90.5)], duration)
    f[int(0.55 / HOP)] = 0  # a 16 ms gap 50 ms after the start
    probs = f.astype(np.float32) * 0.9
    probs[int(0.55 / HOP)] = 0.0  # and the least speech-like frame of all
    p = params(VadParams, pad=0.0, min_speech=0.25, max_segment=30.0)
    notes = []
    out = make_segments(f, probs, duration, p, notes)
    assert all(e - s >= p.min_speech for s, e in out), out
    assert all(e - s <= p.max_segment + 1e-9 for s, e in out)
    assert sum(e - s for s, e in out) == pytest.approx(90.0, abs=0.05)
    assert not notes


def test_no_admissible_cut_keeps_both_parts_longest_and_says_so():
    # max_segment below twice min_speech: no cut can leave min_speech on both sides
    p = params(VadParams, pad=0.0, min_speech=1.0, max_segment=1.5)
    notes = []
    f = flags_from([(1.0, 2.8)], 4.0)
    out = make_segments(f, f.astype(np.float32), 4.0, p, notes)
    assert len(out) == 2 and out[0][1] - out[0][0] == pytest.approx(out[1][1] - out[1][0], abs=HOP)
    assert notes and "no cut point leaves min_speech" in notes[0]
