"""Separation (speechprep.music.separate): a UVR MDX-Net-shaped ONNX model and a random
HT-Demucs, built from code, load as the stage loads them and give vocals as long as the
mix. An identity model proves the MDX framing (STFT, chunks, overlap, trims) gives the mix
back; nothing here proves how well a real model separates."""

import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from speechprep.errors import ModelFileError, UsageError
from speechprep.music import separate
from speechprep.music.params import SeparateParams
from tests import real_speech as R
from tests.music.models import MDX_SMALL, htdemucs_th, mdx_onnx
from tests.support import config


def params(**changes) -> SeparateParams:
    return SeparateParams(**{**config()["separate"], **MDX_SMALL, **changes})


def real_mix(seconds: float = 4.0, rate: int = 44100) -> np.ndarray:
    """A real voice (the LibriVox reader) over real music (hyperrogue) at 10 dB, at ``rate``."""
    voice, _ = R.read(R.librivox()[0].path, rate)
    music, _ = R.read(R.music("hyperrogue")[0], rate)
    n = int(seconds * rate)
    v, m = voice[:n], music[rate * 20 : rate * 20 + n]
    m = m * np.sqrt(np.mean(v**2) / np.mean(m**2)) / 10 ** (10 / 20)
    return (v + m).astype(np.float32)


def test_the_mdx_framing_gives_the_mix_back_through_an_identity_model(tmp_path):
    model = mdx_onnx(tmp_path / "id.onnx", 512, 32, "identity")
    mix = real_mix()
    vocals = separate.load(params(model=str(model))).vocals(mix)
    assert vocals.shape == mix.shape and vocals.dtype == np.float32
    # all the framing loses: the three lowest bins (under 130 Hz at n_fft 1024) and the top one
    import soxr

    high = lambda x: x - soxr.resample(soxr.resample(x, 44100, 400), 400, 44100)[: len(x)]
    inner = slice(2000, -2000)
    assert np.corrcoef(high(mix)[inner], high(vocals)[inner])[0, 1] > 0.99
    # Instrumental as primary stem: the vocals are the mix less the stem (here the mix itself, its lowest bins aside)
    rest = separate.load(params(model=str(model), primary_stem="Instrumental", compensate=1.0)).vocals(mix)
    rms = lambda x: np.sqrt(np.mean(high(x)[inner] ** 2))
    assert rms(rest) < 0.05 * rms(mix)  # above the lowest bins nothing is left


def test_a_random_mdx_model_runs_with_and_without_denoise(tmp_path):
    model = mdx_onnx(tmp_path / "mask.onnx", 512, 32, "mask")
    mix = real_mix(2.5)
    a = separate.load(params(model=str(model))).vocals(mix)
    b = separate.load(params(model=str(model), enable_denoise=True, overlap=0.5)).vocals(mix)
    assert a.shape == b.shape == mix.shape and np.isfinite(a).all() and np.isfinite(b).all()
    assert 0 < np.sqrt(np.mean(a**2)) <= np.sqrt(np.mean(mix**2)) * 1.01  # a mask keeps at most the mix
    assert not np.allclose(a, b)


def test_mdx_settings_that_do_not_fit_the_model_are_refused_before_any_audio(tmp_path):
    model = mdx_onnx(tmp_path / "mask.onnx", 512, 32)
    with pytest.raises(UsageError, match=re.escape("segment_size 64 is not 2 ** separate.mdx_dim_t_set")):
        separate.load(params(model=str(model), segment_size=64))
    with pytest.raises(ModelFileError, match=re.escape("not (batch, 4, 256, 32)")):
        separate.load(params(model=str(model), mdx_dim_f_set=256))
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelFileError, match="not an ONNX model"):
        separate.load(params(model=str(tmp_path / "bad.onnx")))
    with pytest.raises(UsageError, match="no such file"):
        separate.load(params(model=str(tmp_path / "none.onnx")))


def test_a_random_htdemucs_saved_as_demucs_saves_it_loads_and_separates(tmp_path):
    path = htdemucs_th(tmp_path / "tiny.th")
    sep = separate.load(params(model=str(path)))
    assert isinstance(sep, separate.DemucsSeparator) and sep.rate == 16000
    mix = real_mix(3.0, 16000)
    vocals = sep.vocals(mix)
    assert vocals.shape == mix.shape and np.isfinite(vocals).all() and np.abs(vocals).max() > 0
    assert np.array_equal(vocals, sep.vocals(mix))  # no random shifts: the same vocals each time


def test_a_demucs_file_naming_anything_but_a_demucs_model_is_not_unpickled(tmp_path):
    import torch

    class Boom:  # would run on unpickling, were it allowed
        def __reduce__(self):
            return (Path.touch, (tmp_path / "ran",))

    bad = tmp_path / "evil.th"
    torch.save({"klass": Boom(), "args": (), "kwargs": {}, "state": {}}, str(bad), pickle_module=pickle)
    with pytest.raises(ModelFileError, match="refusing to load separate"):
        separate.load(params(model=str(bad)))
    assert not (tmp_path / "ran").exists()
    torch.save({"weights": torch.zeros(3)}, str(tmp_path / "plain.th"))
    with pytest.raises(ModelFileError, match="not a Demucs model file"):
        separate.load(params(model=str(tmp_path / "plain.th")))
