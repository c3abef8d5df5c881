"""librosa's spectral pieces in numpy: the same numbers, without importing librosa.

What the measures and speaker encoders read from librosa: the periodic Hann window,
Slaney mel filters, the centred mel power spectrogram, ``power_to_db`` and YIN. Calling
librosa for them imports numba, its compiled kernels and ``scipy.signal``: 1.4-2.1
CPU-seconds in every measure, diarization and TTS features job, before its first segment
(docs/benchmarks/scale.md, "Corpus growth"). These functions follow librosa 0.11's own steps
with the same numpy and ``scipy.fft`` calls (librosa's FFT library), in the same order
(tests/curate/test_spectral.py holds them to librosa's results on real speech).
"""

from __future__ import annotations

import functools

import numpy as np

HANN = (0.5, 0.5)
BLACKMAN_HARRIS = (0.35875, 0.48829, 0.14128, 0.01168)


@functools.cache
def cosine_window(n: int, coeffs: tuple[float, ...]) -> np.ndarray:
    """A periodic generalised cosine window of ``n`` samples (float64), as
    ``scipy.signal.get_window(name, n, fftbins=True)`` computes it (a symmetric window of
    ``n + 1``, its last sample dropped): :data:`HANN`, :data:`BLACKMAN_HARRIS`."""
    fac = np.linspace(-np.pi, np.pi, n + 1, dtype=np.float64)
    w = np.zeros(n + 1, dtype=np.float64)
    for k, a in enumerate(coeffs):
        w += np.float64(a) * np.cos(k * fac)
    w = w[:n]
    w.flags.writeable = False
    return w


def hann(n: int) -> np.ndarray:
    """The periodic Hann window: ``scipy.signal.get_window("hann", n, fftbins=True)``."""
    return cosine_window(n, HANN)


# Slaney's mel scale: linear below 1 kHz (200/3 Hz a mel), logarithmic above
_F_SP, _MIN_LOG_HZ = 200.0 / 3, 1000.0
_MIN_LOG_MEL, _LOGSTEP = _MIN_LOG_HZ / _F_SP, np.log(6.4) / 27.0


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    f = np.asanyarray(f, dtype=np.float64)
    mels = (f - 0.0) / _F_SP
    log_t = f >= _MIN_LOG_HZ
    mels[log_t] = _MIN_LOG_MEL + np.log(f[log_t] / _MIN_LOG_HZ) / _LOGSTEP
    return mels


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    freqs = 0.0 + _F_SP * mels
    log_t = mels >= _MIN_LOG_MEL
    freqs[log_t] = _MIN_LOG_HZ * np.exp(_LOGSTEP * (mels[log_t] - _MIN_LOG_MEL))
    return freqs


@functools.cache
def mel_filters(sr: int, n_fft: int, n_mels: int, fmin: float = 0.0, fmax: float | None = None) -> np.ndarray:
    """Slaney-normalised triangular mel filters (n_mels x (1 + n_fft // 2), float32):
    ``librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax)``."""
    fmax = float(sr) / 2 if fmax is None else fmax
    weights = np.zeros((n_mels, int(1 + n_fft // 2)), dtype=np.float32)
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    lo, hi = _hz_to_mel(np.array([fmin])), _hz_to_mel(np.array([fmax]))
    mel_f = _mel_to_hz(np.linspace(lo[0], hi[0], n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels]))[:, np.newaxis]
    weights.flags.writeable = False
    return weights


def melspectrogram(y: np.ndarray, sr: int, n_fft: int, hop: int, n_mels: int) -> np.ndarray:
    """The mel power spectrogram (n_mels x frames) of ``y``:
    ``librosa.feature.melspectrogram(y=y, sr=sr, n_fft=n_fft, hop_length=hop, n_mels=n_mels)``
    (centred frames, zero padding, the window in float64, the STFT kept in complex64 for
    float32 audio, complex128 for float64; float32 out for float32 audio)."""
    import scipy.fft  # here: the workflow's driver env reads a bandwidth without scipy

    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"a mel spectrogram of mono audio, not of shape {y.shape}")
    y = y if y.dtype in (np.float32, np.float64) else y.astype(np.float32)
    padded = np.pad(y, n_fft // 2)
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop]
    stft = scipy.fft.rfft(frames * hann(n_fft), axis=1).astype(np.complex64 if y.dtype == np.float32 else np.complex128)
    power = np.abs(stft) ** 2
    return mel_filters(sr, n_fft, n_mels) @ power.T


def power_to_db(s: np.ndarray, amin: float = 1e-10, top_db: float = 80.0) -> np.ndarray:
    """``librosa.power_to_db(s, ref=np.max, amin=amin, top_db=top_db)``."""
    s = np.asarray(s)
    log_spec = 10.0 * np.log10(np.maximum(amin, s))
    log_spec -= 10.0 * np.log10(np.maximum(amin, np.max(s)))
    return np.maximum(log_spec, log_spec.max() - top_db)


def yin(y: np.ndarray, fmin: float, fmax: float, sr: int, frame_length: int, hop: int) -> np.ndarray:
    """F0 per frame (Hz): ``librosa.yin(y, fmin=fmin, fmax=fmax, sr=sr,
    frame_length=frame_length, hop_length=hop, center=False)`` (trough threshold 0.1)."""
    import scipy.fft  # here: the workflow's driver env reads a bandwidth without scipy

    y = np.asarray(y)
    frames = np.lib.stride_tricks.sliding_window_view(y, frame_length)[::hop].T  # (frame_length, n)
    min_period = int(np.floor(sr / fmax))
    max_period = min(int(np.ceil(sr / fmin)), frame_length - 1)
    # the cumulative mean normalised difference (librosa's autocorrelate: an FFT of 2 n - 1)
    n_pad = scipy.fft.next_fast_len(2 * frame_length - 1, real=True)
    spec = scipy.fft.rfft(frames, n=n_pad, axis=0)
    acf = scipy.fft.irfft(spec.real**2 + spec.imag**2, n=n_pad, axis=0)[: max_period + 1]
    d = np.square(frames)
    np.cumsum(d, out=d, axis=0)
    d[0, :] = 0
    d[1 : max_period + 1, :] = 2 * (acf[0:1, :] - acf[1 : max_period + 1, :]) - d[:max_period, :]
    numerator = d[min_period : max_period + 1, :]
    cumulative_mean = np.cumsum(d[1 : max_period + 1, :], axis=0) / np.arange(1, max_period + 1)[:, None]
    denominator = cumulative_mean[min_period - 1 : max_period, :]
    cmnd = numerator / (denominator + np.finfo(denominator.dtype).tiny)
    # parabolic interpolation: 0 at the ends and where the optimum lies beyond a neighbour
    shifts = np.zeros_like(cmnd)
    left, mid, right = cmnd[:-2], cmnd[1:-1], cmnd[2:]
    a = right + left - 2 * mid
    b = (right - left) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        shifts[1:-1] = np.where(np.abs(b) >= np.abs(a), 0, -b / a)
    # the first trough under the threshold, else the global minimum
    trough = np.zeros(cmnd.shape, dtype=bool)
    trough[1:-1] = (mid < left) & (mid <= right)
    trough[0] = cmnd[0] < cmnd[1]
    trough[-1] = cmnd[-1] < cmnd[-2]
    under = trough & (cmnd < 0.1)
    period = np.where(under.any(axis=0), np.argmax(under, axis=0), np.argmin(cmnd, axis=0))
    period = min_period + period + np.take_along_axis(shifts, period[None, :], axis=0)[0]
    return sr / period


def welch(x: np.ndarray, rate: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``scipy.signal.welch(x, rate, nperseg=n, noverlap=n // 2, window="hann", detrend=False)``
    (one-sided density, the mean of the periodograms of the whole Hann frames, ``n`` even)
    in numpy: importing ``scipy.signal`` takes about a second of each job that reads a
    bandwidth (tests/curate/test_measures.py compares the two)."""
    w = hann(n)
    frames = np.lib.stride_tricks.sliding_window_view(x, n)[:: n // 2]
    p = np.mean(np.abs(np.fft.rfft(frames * w, axis=1)) ** 2, axis=0) / (rate * (w * w).sum())
    p[1:-1] *= 2.0
    return np.fft.rfftfreq(n, 1.0 / rate), p


def bandwidth_hz(x: np.ndarray, rate: int, floor_db: float, n_fft: int = 512) -> float | None:
    """Effective bandwidth: the highest frequency whose long-term level (Welch
    power spectrum, ``n_fft`` Hann frames, smoothed over 5 bins) is within
    ``floor_db`` of the spectrum's peak. Audio band-limited at 4 kHz and
    upsampled to 16 kHz (8 kHz telephone audio) reads about 4000 whatever its
    sample rate. ``None`` for silence or less than one frame."""
    if len(x) < n_fft or not np.any(x):
        return None
    f, p = welch(np.asarray(x, dtype=np.float64), rate, n_fft)
    p = np.convolve(p, np.ones(5) / 5, mode="same")
    level = 10.0 * np.log10(np.maximum(p, 1e-30) / p.max())
    above = np.flatnonzero(level >= -floor_db)
    return float(f[above[-1]])
