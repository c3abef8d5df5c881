"""Windowed embeddings: the batched windows are the per-window loop's vectors, on real speech."""

import numpy as np
import pytest

from speechprep.diarize.embed import WINDOW_S, window_embeddings, window_loop, window_starts
from tests.diarize.conversations import SR, real_voice


@pytest.fixture(scope="module")
def reader():
    """The LibriVox reader's sentences, one after another (real speech, 16 kHz)."""
    return np.concatenate(real_voice("librivox"))


def test_windows_cover_each_segment(model, reader):
    segs = [(0.5, 6.0), (6.4, 7.1), (8.0, 8.0 + WINDOW_S)]
    w = window_embeddings(model, reader, segs, hop=0.25)
    for k, (s, e) in enumerate(segs):
        mine = w.segment == k
        assert w.start[mine].min() == pytest.approx(s) and w.end[mine].max() == pytest.approx(e, abs=0.011)
        assert (w.start[mine] >= s - 1e-9).all() and (w.end[mine] <= e + 1e-9).all()
    assert (w.segment == 1).sum() == 1  # shorter than a window: one, zero-padded
    assert np.allclose(np.linalg.norm(w.emb, axis=1), 1, atol=1e-5)
    assert np.diff(w.start[w.segment == 0]).max() == pytest.approx(0.25)
    assert list(window_starts(SR * 3, 25)) == [0, 25, 50, 75, 100, 125, 141]  # the last flush with the end


def test_batched_equals_per_window_loop(model, reader):
    w = window_embeddings(model, reader, [(0.0, 12.0)], hop=0.4)
    loop = window_loop(model, reader, w)
    cos = np.einsum("ij,ij->i", w.emb, loop)
    # the same samples; only the mel's first and last frames differ (framed with or without the
    # audio around the window)
    assert cos.min() > 0.995, cos.min()
