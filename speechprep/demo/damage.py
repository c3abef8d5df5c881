"""Damaged variants of a clean clip, as curation must catch them (tests, benchmarks,
and the demo corpus builder). Each takes and returns float32 mono audio.

* :func:`add_noise`: white Gaussian noise at a given SNR (over the whole clip);
* :func:`hard_clip`: amplified, then clipped at full scale;
* :func:`band_limit`: resampled down to a lower rate and back (8 kHz: telephone
  bandwidth, about 4 kHz, in a 16 kHz file);
* :func:`reencode`: through a lossy or lossless codec at another gain (a near
  duplicate: the same speech, other samples).
"""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf


def add_noise(x: np.ndarray, snr_db: float, seed: int = 0) -> np.ndarray:
    """``x`` plus white Gaussian noise ``snr_db`` below its mean power, clipped to [-1, 1]."""
    noise = np.random.default_rng(seed).standard_normal(len(x))
    power = float(np.mean(np.asarray(x, np.float64) ** 2))
    y = x + noise * np.sqrt(power / 10.0 ** (snr_db / 10.0))
    return np.clip(y, -1.0, 1.0).astype(np.float32)


def hard_clip(x: np.ndarray, gain_db: float = 20.0) -> np.ndarray:
    """``x`` amplified by ``gain_db`` and clipped at full scale (±1)."""
    return np.clip(x * 10.0 ** (gain_db / 20.0), -1.0, 1.0).astype(np.float32)


def band_limit(x: np.ndarray, rate: int = 16000, low_rate: int = 8000) -> np.ndarray:
    """``x`` resampled to ``low_rate`` and back to ``rate`` (soxr, high quality)."""
    import soxr

    return soxr.resample(soxr.resample(x, rate, low_rate), low_rate, rate).astype(np.float32)


def reencode(x: np.ndarray, rate: int = 16000, fmt: str = "MP3", gain_db: float = -3.0) -> np.ndarray:
    """``x`` at ``gain_db`` through ``fmt`` (a libsndfile format: MP3, FLAC, OGG) and back."""
    buf = io.BytesIO()
    y = np.clip(x * 10.0 ** (gain_db / 20.0), -1.0, 1.0)
    sf.write(buf, y, rate, format=fmt)
    buf.seek(0)
    z, _ = sf.read(buf, dtype="float32")
    return z[: len(x)] if len(z) >= len(x) else np.pad(z, (0, len(x) - len(z)))
