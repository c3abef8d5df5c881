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

from ..core import spectral
from ..core.spectral import bandwidth_hz as bandwidth_hz  # one measure, shared with diarization
from ..io.audio import to_int16


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


# -- SNR: speech band, noise from the file's non-speech ---------------------------
SNR_FLOOR_DB, SNR_CEIL_DB = -20.0, 100.0  # the scale's ends (noise as loud as the segment; digital silence)
_SNR_FFT, _SNR_HOP = 1024, 256  # 64 ms Blackman-Harris frames, 16 ms apart (at 16 kHz)
_SNR_MIN_NOISE_FRAMES = 4  # fewer frames of non-speech than this: estimate the noise from the segment itself
_SNR_QUIET_SHARE = 0.1  # ... from its quietest tenth of frames


def band_frame_power(x: np.ndarray, rate: int, band: tuple[float, float]) -> np.ndarray:
    """Power of each frame of ``x`` within ``band`` (Hz): Blackman-Harris frames of
    1024 samples, 256 apart, sum of ``|X(f)|^2`` over the bins in the band. The
    window's sidelobes are 92 dB down and its main lobe is +-4 bins (+-62 Hz at
    16 kHz), so content more than 62 Hz below the band (mains hum, rumble) does
    not reach it. Empty when ``x`` is shorter than one frame."""
    if len(x) < _SNR_FFT:
        return np.zeros(0)
    frames = np.lib.stride_tricks.sliding_window_view(np.asarray(x, dtype=np.float64), _SNR_FFT)[::_SNR_HOP]
    spec = np.fft.rfft(frames * _bh_window(), axis=1)
    f = np.fft.rfftfreq(_SNR_FFT, 1.0 / rate)
    sel = (f >= band[0]) & (f <= band[1])
    return np.einsum("ij,ij->i", spec.real[:, sel], spec.real[:, sel]) + np.einsum(
        "ij,ij->i", spec.imag[:, sel], spec.imag[:, sel]
    )


def _bh_window() -> np.ndarray:
    return spectral.cosine_window(_SNR_FFT, spectral.BLACKMAN_HARRIS)


def snr_db(x: np.ndarray, noise: list[np.ndarray], rate: int, band: tuple[float, float]) -> float | None:
    """Signal-to-noise ratio (dB) of a segment in the speech ``band``:
    ``10 log10((P - N) / N)``, ``P`` the segment's mean band power per frame
    (speech plus noise), ``N`` the mean band power per frame of ``noise``, pieces
    of the same file where there is no speech (what VAD left between segments),
    each framed on its own. With fewer than 4 frames of non-speech, or only
    digital silence there, ``N`` is the mean of the segment's own quietest tenth of
    frames (its pauses, when it has some). Clamped to -20..100 dB: -20 when the
    segment is no louder than its noise, 100 for noise of digital silence.
    ``None`` for a segment shorter than a frame (64 ms) or with nothing in the band."""
    p = band_frame_power(x, rate, band)
    if not len(p) or not np.any(p):
        return None
    parts = [band_frame_power(n, rate, band) for n in noise]
    n = np.concatenate(parts) if parts else np.zeros(0)
    if len(n) < _SNR_MIN_NOISE_FRAMES or not np.any(n):
        n = np.sort(p)[: max(1, int(len(p) * _SNR_QUIET_SHARE))]
    level = float(n.mean())
    speech = float(p.mean()) - level
    if level <= 0:
        return SNR_CEIL_DB
    if speech <= 0:
        return SNR_FLOOR_DB
    return float(np.clip(10.0 * math.log10(speech / level), SNR_FLOOR_DB, SNR_CEIL_DB))


# -- pitch (a voiced-frame F0 track in, numbers out) -----------------------------------
SEMITONE_REF_HZ = 55.0  # pitch_mean_st: semitones above A1
PITCH_FIELDS = ("pitch_mean", "pitch_std", "pitch_mean_st", "pitch_std_st", "monotony")
OCTAVE_JUMP_ST = 10.0  # a voiced frame this many semitones or more from the median is a tracking error


def pitch_measures(f0: np.ndarray, frame_s: float, min_voiced: int) -> dict[str, float | None]:
    """The utterance's pitch from a per-frame F0 track (Hz; 0 where unvoiced, frames
    ``frame_s`` apart): ``pitch_mean``/``pitch_std`` over its voiced frames in Hz (those
    10 semitones or more from their median left out: a tracker's octave jumps, which
    would move a mean by tens of Hz),
    ``pitch_mean_st``/``pitch_std_st`` in semitones (above 55 Hz), and ``monotony``: the
    semitone spread of the F0 about its straight-line trend over time, so a statement's
    steady fall (declination) does not count as expression (the smaller, the more
    monotone). Each ``None`` with fewer than ``min_voiced`` voiced frames."""
    f0 = np.asarray(f0, dtype=np.float64)
    voiced = np.flatnonzero(f0 > 0)
    if len(voiced):
        st = 12.0 * np.log2(f0[voiced] / SEMITONE_REF_HZ)
        voiced = voiced[np.abs(st - np.median(st)) < OCTAVE_JUMP_ST]
    if len(voiced) < max(min_voiced, 2):
        return dict.fromkeys(PITCH_FIELDS)
    hz = f0[voiced]
    st = 12.0 * np.log2(hz / SEMITONE_REF_HZ)
    t = voiced * frame_s
    slope, intercept = np.polyfit(t, st, 1)
    return {
        "pitch_mean": float(hz.mean()),
        "pitch_std": float(hz.std()),
        "pitch_mean_st": float(st.mean()),
        "pitch_std_st": float(st.std()),
        "monotony": float(np.std(st - (slope * t + intercept))),
    }


# -- reverberation: how fast the level can fall ---------------------------------------
_REVERB_FRAME, _REVERB_HOP = 0.02, 0.01  # s: level frames of 20 ms (Hann), 10 ms apart
_REVERB_BANDS = np.geomspace(200.0, 4000.0, 5)  # Hz: four octave-wide bands, the telephone band's too
_REVERB_BAND_RANGE_DB = 40.0  # a band whose loudest frame is 40 dB under the loudest band's holds no speech
_REVERB_WINDOW = 0.15  # s: the level's slope is fitted over 150 ms
_REVERB_RANGE_DB = 30.0  # only windows starting within 30 dB of their band's loudest frame (not the noise floor)
_REVERB_FASTEST = 0.05  # the 5th percentile of the slopes: the fastest falls the room allows
REVERB_MAX_S = 10.0


def reverb_s(x: np.ndarray, rate: int) -> float | None:
    """A decay time (s) estimated from the segment alone: a room's reverberation keeps the
    level from falling faster than 60 dB per RT60 after each sound stops, while dry
    speech falls as fast as the mouth closes. The level (dB) of 20 ms frames every 10 ms
    in four octave-wide bands (200-4000 Hz: each band's falls are decays of their own,
    so a short segment offers four times the falls of its broadband level); the
    least-squares slope of every 150 ms run of a band's level that starts within 30 dB
    of that band's loudest frame; ``-60 / slope`` at the 5th percentile of all those
    slopes (the steepest falls), clipped to 0..10 s. It ranks rooms rather than measuring
    RT60: dry read speech reads about 0.2 s, the same speech in rooms of RT60 0.3/0.6/1.0 s
    about 0.3/0.5/0.7 (docs/stages/curate.md, "Annotations"). ``None`` for a segment shorter
    than the window."""
    frame, hop, width = int(_REVERB_FRAME * rate), int(_REVERB_HOP * rate), round(_REVERB_WINDOW / _REVERB_HOP)
    if len(x) < frame:
        return None
    frames = np.lib.stride_tricks.sliding_window_view(np.asarray(x, dtype=np.float64), frame)[::hop]
    if len(frames) < width:
        return None
    power = np.abs(np.fft.rfft(frames * np.hanning(frame), axis=1)) ** 2
    edges = np.searchsorted(np.fft.rfftfreq(frame, 1.0 / rate), _REVERB_BANDS)  # each band's first bin, the end
    level = 10.0 * np.log10(np.add.reduceat(power[:, : edges[-1]], edges[:-1], axis=1) + 1e-12)  # frames x bands
    top = level.max(axis=0)
    t = np.arange(width) * _REVERB_HOP
    t -= t.mean()
    slopes = []
    for b in np.flatnonzero(top >= top.max() - _REVERB_BAND_RANGE_DB):
        runs = np.lib.stride_tricks.sliding_window_view(level[:, b], width)
        slopes.append(np.einsum("ij,j->i", runs, t / (t @ t))[runs[:, 0] > top[b] - _REVERB_RANGE_DB])
    slopes = np.concatenate(slopes)
    if not len(slopes):
        return None
    steepest = float(np.quantile(slopes, _REVERB_FASTEST))
    return float(min(-60.0 / steepest, REVERB_MAX_S)) if steepest < 0 else REVERB_MAX_S


# -- bandwidth --------------------------------------------------------------------
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
