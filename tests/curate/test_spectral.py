"""speechprep.core.spectral: librosa's window, mel filters, mel spectrogram, dB and YIN in
numpy give librosa's numbers, on real voices (an audiobook reader, a telephone prompt, a
child's letters), real music and noise; and the jobs that use them no longer import librosa."""

import subprocess
import sys

import numpy as np
import pytest

from speechprep.core import kernels, spectral
from tests import real_speech as R

SR = 16000


@pytest.fixture(scope="module")
def clips():
    """Real recordings of other makers and kinds, 16 kHz float32 (2-4 s of each), and noise."""
    paths = [
        R.librivox()[0].path,
        R.telephone_prompts("carlo_it", 3)[2].path,
        R.klettres("fr")[0].path,
        R.music("hyperrogue")[0],
    ]
    out = []
    for p in paths:
        x = R.read(p, SR)[0].astype(np.float32)
        out.append(x[SR // 2 : SR // 2 + 4 * SR] if len(x) > 5 * SR else x)
    out.append((np.random.default_rng(0).standard_normal(SR * 2) * 0.05).astype(np.float32))
    return out


def test_window_and_filters_are_librosas_to_the_bit():
    librosa = kernels.librosa()

    for n in (320, 321, 400, 1024):
        assert np.array_equal(spectral.hann(n), librosa.filters.get_window("hann", n, fftbins=True))
    for args in ((SR, 321, 120, 0.0, None), (SR, 400, 40, 0.0, None), (SR, 512, 32, 150.0, 3700.0)):
        sr, n_fft, n_mels, fmin, fmax = args
        ours = spectral.mel_filters(sr, n_fft, n_mels, fmin, fmax)
        theirs = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


def test_mel_spectrogram_and_db_are_librosas(clips):
    librosa = kernels.librosa()

    for x in [*clips, clips[0].astype(np.float64)]:
        for n_fft, n_mels in ((400, 40), (321, 120)):
            ours = spectral.melspectrogram(x, SR, n_fft, 160, n_mels)
            theirs = librosa.feature.melspectrogram(y=x, sr=SR, n_fft=n_fft, hop_length=160, n_mels=n_mels)
            assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
            assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-7 * float(theirs.max()))
            db = librosa.power_to_db(theirs, ref=np.max)
            assert np.array_equal(spectral.power_to_db(theirs), db)


def test_yin_is_librosas(clips):
    librosa = kernels.librosa()

    for x in clips:
        x = np.pad(x, (0, 1024))
        ours = spectral.yin(x, 50.0, 600.0, SR, 1024, 160)
        theirs = librosa.yin(x, fmin=50.0, fmax=600.0, sr=SR, frame_length=1024, hop_length=160, center=False)
        assert ours.shape == theirs.shape
        assert np.array_equal(ours, theirs), float(np.max(np.abs(ours - theirs)))


def test_the_measures_and_encoders_load_no_librosa(clips):
    """A fingerprint, DNSMOS and a Resemblyzer embedding in a fresh process: none of librosa's
    modules (but its lazy top level, which Resemblyzer imports), scipy.signal or numba is
    loaded (each costs a job seconds before its first segment)."""
    code = """
import sys
import numpy as np
from speechprep.curate import dnsmos, fingerprint
from speechprep.encoders import ResemblyzerEncoder
x = (np.random.default_rng(0).standard_normal(32000) * 0.1).astype(np.float32)
fingerprint.fingerprint(x)
dnsmos.Dnsmos()([x])
ResemblyzerEncoder("cpu", 1)([x])
heavy = ("librosa.core", "librosa.feature", "librosa.filters", "librosa.util", "numba", "scipy.signal")
print(sorted(m for m in sys.modules if m.startswith(heavy)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8", check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
