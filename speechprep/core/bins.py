"""Bins of a measure over a dataset, for captions (DataSpeech-style binning).

:func:`bin_edges` is computed once per dataset (curation's summary, the TTS manifest
job) and :func:`bin_of` reads a value's bin from the edges: one definition for both.
Standard library and numpy only.
"""

from __future__ import annotations

import bisect
import math

import numpy as np


def bin_edges(values, bins: int) -> list[float] | None:
    """The ``bins - 1`` inner edges of ``bins`` equal-width bins between the 1st and 99th
    percentiles of ``values`` (DataSpeech's equal-width bins, its outliers left out);
    ``None`` with fewer than two finite values or no spread."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    if len(v) < 2:
        return None
    lo, hi = np.quantile(v, [0.01, 0.99])
    if not hi > lo:
        return None
    return [round(float(e), 6) for e in np.linspace(lo, hi, bins + 1)[1:-1]]


def bin_of(value: float | None, edges: list[float] | None) -> int | None:
    """The bin (0 .. len(edges)) ``value`` falls in; ``None`` without a value or edges.
    A value on an edge belongs to the bin above it."""
    if value is None or edges is None or not math.isfinite(value):
        return None
    return bisect.bisect_right(edges, value)
