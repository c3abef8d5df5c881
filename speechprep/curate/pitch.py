"""The F0 track of a segment, for the pitch annotations (:func:`.measures.pitch_measures`).

SwiftF0 (MIT; its 135 KB ONNX model ships inside the wheel and runs on onnxruntime,
which DNSMOS already uses): a pitch and a voicing confidence for every 16 ms frame of
16 kHz audio. One detector per process, one onnxruntime thread (the annotate job
decodes segments in a pool of threads; ``detect`` may be called from several at
once). On real voices its per-speaker median F0 is within 5% of Praat's
autocorrelation pitch (tests/curate/test_annotations.py; docs/stages/curate.md, "Annotations").
"""

from __future__ import annotations

import functools
import os

import numpy as np

FRAME_S = 256 / 16000  # SwiftF0's hop at 16 kHz


@functools.lru_cache(maxsize=1)
def detector():
    """The process's SwiftF0 detector, built on first use."""
    from swift_f0 import SwiftF0

    return SwiftF0(threads=1, spin=False)


def f0_track(x: np.ndarray, rate: int, range_hz: tuple[float, float], voicing: float) -> np.ndarray:
    """F0 (Hz) of every frame of ``x``, 0 where the confidence is below ``voicing``."""
    if len(x) < 256:
        return np.zeros(0)
    r = detector().detect(x, rate, fmin=range_hz[0], fmax=range_hz[1])
    return np.where(r.confidence >= voicing, r.pitch_hz, 0.0)


def model_file() -> str:
    import swift_f0

    return os.path.join(os.path.dirname(swift_f0.__file__), "model.onnx")
