"""Pure signal and text measures of one segment (16 kHz float32 mono in, numbers out).

No file I/O, no models: every function here is a deterministic function of its
arguments, so the tests check each on synthetic signals with a known answer.
A measure that does not exist for a signal (the loudness of digital silence,
the peak of an empty array) is ``None``, never ``-inf``/``NaN``: the
measurements are JSON.
"""

from __future__ import annotations

import functools
import hashlib
import math

import numpy as np

from ..audio import to_int16


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


# -- level --------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _meter(rate: int):
    import pyloudnorm

    return pyloudnorm.Meter(rate)  # ITU-R BS.1770-4: K-weighting, 400 ms blocks, 75 % overlap, gating


def lufs(x: np.ndarray, rate: int) -> float | None:
    """Integrated loudness (LUFS, ITU-R BS.1770-4, mono) by pyloudnorm's meter.
    ``None`` when the segment is shorter than one 400 ms gating block or silent."""
    meter = _meter(rate)
    if len(x) < meter.block_size * rate:
        return None
    return _finite(meter.integrated_loudness(np.asarray(x, dtype=np.float64)))


def peak_dbfs(x: np.ndarray) -> float | None:
    """Sample peak in dB relative to full scale (1.0); ``None`` for silence."""
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    return 20.0 * math.log10(peak) if peak > 0 else None


def clipping_ratio(x: np.ndarray, level: float) -> float:
    """Share of samples at full scale: ``|x| >= level`` (``level`` just below 1.0,
    so int16 sources clipped at +32767 count too)."""
    return float(np.count_nonzero(np.abs(x) >= level)) / len(x) if len(x) else 0.0


def dc_offset(x: np.ndarray) -> float:
    """Mean sample value (full scale 1.0)."""
    return float(np.mean(x, dtype=np.float64)) if len(x) else 0.0


# -- SNR: WADA -------------------------------------------------------------------
_WADA_ALPHA = 0.4  # shape of the Gamma distribution of clean speech amplitudes (Kim & Stern 2008)
_WADA_EPS = 1e-10


def _wada_statistic(x: np.ndarray) -> float:
    """G = log E|x| - E log|x| of a peak-normalised signal (the WADA statistic)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    a /= max(a.max(), _WADA_EPS)
    np.maximum(a, _WADA_EPS, out=a)
    return float(math.log(max(a.mean(), _WADA_EPS)) - np.log(a).mean())


@functools.lru_cache(maxsize=1)
def _wada_table() -> tuple[np.ndarray, np.ndarray]:
    """G for SNRs of -20..100 dB under WADA's model: clean speech with Gamma(0.4)
    amplitudes and a random sign, plus white Gaussian noise at that SNR.
    Computed once (2^20 draws with a fixed seed; the same draws for every SNR,
    so the curve is smooth; made non-decreasing against what sampling noise is
    left near -20 dB, where G flattens to the Gaussian's 0.41)."""
    rng = np.random.default_rng(20080922)
    n = 1 << 19
    speech = rng.gamma(_WADA_ALPHA, 1.0, n) * rng.choice((-1.0, 1.0), n)
    speech /= np.sqrt(np.mean(speech**2))
    noise = rng.standard_normal(n)
    snrs = np.arange(-20.0, 101.0)
    g = np.array([_wada_statistic(speech + noise * 10.0 ** (-s / 20.0)) for s in snrs])
    return np.maximum.accumulate(g), snrs


def wada_snr(x: np.ndarray) -> float | None:
    """Signal-to-noise ratio (dB) by WADA (waveform amplitude distribution analysis,
    Kim & Stern, Interspeech 2008): the segment's G statistic looked up in the
    table of G against SNR for Gamma(0.4)-distributed speech in Gaussian noise,
    interpolated linearly, clamped to -20..100 dB. Blind: needs no noise-only
    part. ``None`` for digital silence."""
    if not len(x) or not np.any(x):
        return None
    g, snrs = _wada_table()
    return float(np.interp(_wada_statistic(x), g, snrs))  # G rises with the SNR


# -- bandwidth --------------------------------------------------------------------
def bandwidth_hz(x: np.ndarray, rate: int, floor_db: float, n_fft: int = 512) -> float | None:
    """Effective bandwidth: the highest frequency whose long-term level (Welch
    power spectrum, ``n_fft`` Hann frames, smoothed over 5 bins) is within
    ``floor_db`` of the spectrum's peak. Audio band-limited at 4 kHz and
    upsampled to 16 kHz (8 kHz telephone audio) reads about 4000 whatever its
    sample rate. ``None`` for silence or less than one frame."""
    from scipy.signal import welch

    if len(x) < n_fft or not np.any(x):
        return None
    f, p = welch(
        np.asarray(x, dtype=np.float64), fs=rate, nperseg=n_fft, noverlap=n_fft // 2, window="hann", detrend=False
    )
    p = np.convolve(p, np.ones(5) / 5, mode="same")
    level = 10.0 * np.log10(np.maximum(p, 1e-30) / p.max())
    above = np.flatnonzero(level >= -floor_db)
    return float(f[above[-1]])


# -- text -----------------------------------------------------------------------------
def speaking_rate(text: str | None, duration: float) -> tuple[float, float]:
    """(characters per second, words per second) of the transcript; characters
    exclude whitespace. 0 for an empty transcript."""
    text = text or ""
    if duration <= 0:
        return 0.0, 0.0
    chars = sum(1 for c in text if not c.isspace())
    return chars / duration, len(text.split()) / duration


def dedup_units(units: list[int]) -> list[int]:
    """Units with runs collapsed (``[5, 5, 7, 5] -> [5, 7, 5]``)."""
    return [u for i, u in enumerate(units) if i == 0 or units[i - 1] != u]


def text_unit_ratio(text: str | None, units: list[int] | None) -> float | None:
    """Transcript characters (no whitespace) per deduplicated S2S unit: how much text
    the audio's phonetic content carries. ``None`` without units."""
    if not units:
        return None
    chars = sum(1 for c in (text or "") if not c.isspace())
    return chars / len(dedup_units(units))


# -- identity ---------------------------------------------------------------------------
def pcm_sha256(x: np.ndarray) -> str:
    """sha256 of the segment as 16 kHz int16 PCM (what an exact duplicate shares)."""
    return hashlib.sha256(to_int16(x).tobytes()).hexdigest()
