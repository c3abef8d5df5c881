"""Each signal measure on synthetic signals with a known answer (tolerances stated per test)."""

import math

import numpy as np
import pytest
from conftest import asr_lines, measure_params

from speechprep.curate import measures as M
from speechprep.demo import damage
from speechprep.io.audio import read_segment

SR = 16000


def sine(freq, rms_dbfs, seconds=3.0, rate=SR):
    t = np.arange(int(seconds * rate)) / rate
    return (math.sqrt(2) * 10 ** (rms_dbfs / 20) * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.mark.parametrize("rms_dbfs", [-20.0, -30.0])
@pytest.mark.parametrize("rate", [16000, 48000])
def test_lufs_of_a_997_hz_sine(rms_dbfs, rate):
    # BS.1770-4: a 997 Hz sine at 0 dBFS peak on one channel reads -3.01 LKFS, so one at
    # R dBFS RMS (peak R + 3.01) reads R LUFS. Tolerance 0.1 LU: pyloudnorm derives the
    # K-weighting filters for the given rate from the analogue prototype.
    assert M.lufs(sine(997, rms_dbfs, rate=rate), rate) == pytest.approx(rms_dbfs, abs=0.1)


def test_lufs_none_when_undefined():
    assert M.lufs(np.zeros(SR, np.float32), SR) is None  # silence: -inf
    assert M.lufs(sine(997, -20, seconds=0.3), SR) is None  # shorter than one 400 ms block


def test_peak_and_dc():
    x = 0.5 * np.sin(2 * np.pi * 440 * np.arange(SR) / SR).astype(np.float32)  # 440 Hz: a whole number of cycles
    assert M.peak_dbfs(x) == pytest.approx(20 * math.log10(0.5), abs=1e-3)  # -6.02 dB
    assert M.peak_dbfs(np.zeros(10, np.float32)) is None
    assert M.dc_offset(x + 0.1) == pytest.approx(0.1, abs=1e-6)


def test_clipping_ratio():
    x = np.zeros(10000, np.float32)
    x[:37] = 1.0
    x[100:113] = -1.0
    x[200:300] = 0.98  # below clip_level
    assert M.clipping_ratio(x, 0.99) == 50 / 10000
    # a sine of amplitude A hard-clipped at 1 sits at full scale 1 - (2/pi) asin(1/A) of the time
    # (97.3 Hz over 10 s: sampled at phases spread evenly enough for 2e-3)
    a = 4.0
    y = np.clip(a * np.sin(2 * np.pi * 97.3 * np.arange(SR * 10) / SR), -1, 1).astype(np.float32)
    assert M.clipping_ratio(y, 0.99) == pytest.approx(1 - 2 / np.pi * np.arcsin(0.99 / a), abs=2e-3)


@pytest.mark.parametrize("cutoff", [3000.0, 4000.0, 6000.0])
def test_bandwidth_of_band_limited_noise(cutoff):
    # white noise with every FFT bin above `cutoff` zeroed: the bandwidth is `cutoff`
    # to within 150 Hz above it (Welch bins are 31.25 Hz wide; the Hann window's main
    # lobe and the 5-bin smoothing spread the edge by up to 4 bins: 125 Hz)
    rng = np.random.default_rng(0)
    spec = np.fft.rfft(rng.standard_normal(SR * 3))
    spec[np.fft.rfftfreq(SR * 3, 1 / SR) > cutoff] = 0
    x = (0.1 * np.fft.irfft(spec) / np.std(np.fft.irfft(spec))).astype(np.float32)
    assert cutoff <= M.bandwidth_hz(x, SR, 50) <= cutoff + 150
    assert M.bandwidth_hz(rng.standard_normal(SR).astype(np.float32), SR, 50) == SR / 2


def test_bandwidth_of_telephone_audio():
    # 16 kHz speech through 8 kHz and back: about 4 kHz left (the upsampler's filter ends at 3.9 kHz)
    x = read_segment(asr_lines(1)[0])
    assert M.bandwidth_hz(x, SR, 50) > 7000
    assert 3500 <= M.bandwidth_hz(damage.band_limit(x), SR, 50) <= 4000


def test_welch_in_numpy_equals_scipys():
    """The bandwidth's Welch spectrum (numpy, so that a job need not import scipy.signal)
    against scipy.signal.welch on real recordings of two sources and on noise of lengths
    around whole frames: the same frequencies, the same density to float rounding, the
    same bandwidth."""
    from scipy import signal

    from speechprep.core.spectral import welch
    from tests import real_speech as R

    rng = np.random.default_rng(0)
    utts = [u for v in list(R.TELEPHONE_VOICES)[:2] for u in R.telephone_prompts(v, 5)] + R.cards()
    clips = [R.read(u.path, SR)[0].astype(np.float64) for u in utts]
    clips += [rng.standard_normal(n) for n in (512, 513, 767, 768, 16000)]
    for x in clips:
        f, p = signal.welch(x, fs=SR, nperseg=512, noverlap=256, window="hann", detrend=False)
        g, q = welch(x, SR, 512)
        assert np.array_equal(f, g) and np.max(np.abs(p - q)) <= 1e-12 * p.max()
        p = np.convolve(p, np.ones(5) / 5, mode="same")
        assert M.bandwidth_hz(x, SR, 50) == f[np.flatnonzero(10 * np.log10(np.maximum(p, 1e-30) / p.max()) >= -50)[-1]]


@pytest.mark.parametrize("snr", [0.0, 10.0, 30.0])
def test_snr_of_a_tone_in_white_noise(snr):
    # a 1 kHz tone in white noise, the noise alone beside it: within 0.5 dB of the band SNR
    rng = np.random.default_rng(1)
    band = (200.0, 7000.0)
    noise = rng.standard_normal(SR * 4) * 0.01
    n_band = M.band_frame_power(noise, SR, band).mean()
    tone = sine(1000, 0.0)[: SR * 2].astype(np.float64)
    tone *= math.sqrt(n_band * 10 ** (snr / 10) / M.band_frame_power(tone, SR, band).mean())
    got = M.snr_db(tone + noise[: SR * 2], [noise[SR * 2 :]], SR, band)
    assert got == pytest.approx(snr, abs=0.5)


def test_snr_ends_of_the_scale_and_fallback():
    rng = np.random.default_rng(2)
    band = (200.0, 7000.0)
    x = rng.standard_normal(SR)
    assert M.snr_db(np.zeros(SR), [], SR, band) is None  # nothing in the band
    assert M.snr_db(x[:512], [], SR, band) is None  # shorter than a frame
    assert M.snr_db(x, [np.zeros(SR)], SR, band) == M.snr_db(x, [], SR, band)  # digital silence: the segment's own
    assert M.snr_db(x * 0.1, [x], SR, band) == M.SNR_FLOOR_DB  # quieter than its noise
    burst = np.concatenate([np.zeros(SR), x])  # no noise at all under its quiet tenth
    assert M.snr_db(burst, [], SR, band) == M.SNR_CEIL_DB
    # a 60 Hz hum 20 dB above the segment leaves a 200-7000 Hz band untouched
    hum = sine(60, 0.0, seconds=1.0).astype(np.float64)
    assert M.band_frame_power(hum, SR, band).max() < 1e-9 * M.band_frame_power(hum, SR, (0, 8000)).max()


def test_speaking_rate_and_unit_ratio():
    assert M.speaking_rate("the cat  sat", 2.0) == (9 / 2.0, 3 / 2.0)
    assert M.speaking_rate("", 2.0) == (0.0, 0.0) and M.speaking_rate(None, 1.0) == (0.0, 0.0)
    assert M.dedup_units([5, 5, 7, 5, 5]) == [5, 7, 5]
    assert M.text_unit_ratio("ab c", [1, 1, 2, 2, 3]) == 3 / 3
    assert M.text_unit_ratio("ab", None) is None and M.text_unit_ratio("ab", []) is None


def test_pcm_hash():
    x = read_segment(asr_lines(1)[0])
    assert M.pcm_sha256(x) == M.pcm_sha256(x.copy())
    assert M.pcm_sha256(x) != M.pcm_sha256(x * 0.5)
    assert M.pcm_sha256(x) == M.pcm_sha256(x.astype(np.float64))  # the same int16 samples


def test_speaker_encoder_beside_dnsmos_on_one_torch_thread(models):
    """The measure job's models: the speaker encoder runs in a thread of its own on one torch
    thread (the caller's count untouched), beside DNSMOS; on real telephone prompts its vectors
    and the scores equal what each model gives alone in the calling thread."""
    import torch

    from tests import real_speech as R

    clips = [R.read(u.path, 16000)[0] for s in ("allison_en", "ivr_ru") for u in R.telephone_prompts(s)[40::90][:3]]
    threads = torch.get_num_threads()
    together = models(clips)
    assert torch.get_num_threads() == threads
    assert models.side.submit(torch.get_num_threads).result() == 1
    vectors, scores_alone = models.speaker(clips), models.dnsmos(clips)
    for (scores, vector, language), alone, dnsmos in zip(together, vectors, scores_alone, strict=True):
        assert language is None  # no curate.language_model
        assert np.abs(vector - alone).max() < 1e-6
        assert scores == pytest.approx(dnsmos, abs=1e-6)


def test_one_thread_runs_the_models_one_after_the_other(models):
    from speechprep.curate import measure

    clips = [read_segment(s) for s in asr_lines(2)]
    one = measure.Models(measure_params(), "cpu", 1)
    assert one.side is None and one.dnsmos.pool is None
    for (s1, v1, _), (s2, v2, _) in zip(one(clips), models(clips), strict=True):
        assert np.abs(v1 - v2).max() < 1e-6 and s1 == pytest.approx(s2, abs=1e-6)
