"""ONNX speaker encoders (speechprep.encoders.onnx_speaker) on real recordings: the Kaldi fbank
front end against an independent NumPy implementation of Kaldi's algorithm, the
encoder against the tiny torch models' own forward, batching, refusals, bad clips."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from speechprep.encoders.onnx_speaker import CONVENTIONS, OnnxSpeakerEncoder, kaldi_fbank
from speechprep.errors import UsageError
from speechprep.io.audio import AudioError
from speechprep.models.speaker_onnx import build_tiny, export_onnx, tiny_model
from tests import real_speech
from tests.support import REPO

# Max |kaldi-native-fbank - float64 reference| on the mean-normalised log mel energies.
# kaldi-native-fbank computes in float32, and its FFT's rounding is relative to the
# frame's whole power: a band holding a small share of it loses more in its log. Measured
# on these recordings: median 5e-6, 99th percentile 3.5e-5, max 4.6e-4 (bands 6-9, near
# 200-300 Hz, which after pre-emphasis hold as little as 1e-9 of a frame's power). A wrong
# setting (window, waveform scale, band edges, no pre-emphasis) moves them by 0.1 to 10.
# 1e-3 on a natural log is 0.1 % of the band's power.
FBANK_TOL = 1e-3
VECTOR_TOL = 1e-5


@pytest.fixture(scope="module")
def clips():
    """Five LibriVox sentences read by one real reader (16 kHz, 3.0-7.1 s)."""
    return [real_speech.read(u.path, 16000)[0] for u in real_speech.librivox()]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp("speaker_onnx"))


# --- an independent Kaldi fbank (compute-fbank-feats' algorithm, float64) -----------------
def _mel(f):
    return 1127.0 * np.log(1.0 + np.asarray(f) / 700.0)


def _kaldi_mel_banks(num_bins=80, padded=512, rate=16000, low=20.0, high=8000.0):
    """Kaldi's MelBanks: triangles equally spaced on the mel scale from ``low`` to ``high``,
    over the FFT bins 0 .. padded/2 - 1 (the Nyquist bin gets no weight)."""
    mel = _mel(np.arange(padded // 2) * rate / padded)
    lo, hi = _mel(low), _mel(high)
    delta = (hi - lo) / (num_bins + 1)
    banks = np.zeros((num_bins, padded // 2 + 1))
    for b in range(num_bins):
        left, center, right = lo + b * delta, lo + (b + 1) * delta, lo + (b + 2) * delta
        up = (mel - left) / (center - left)
        down = (right - mel) / (right - center)
        inside = (mel > left) & (mel < right)
        banks[b, : padded // 2] = np.where(inside, np.where(mel <= center, up, down), 0.0)
    return banks


def reference_fbank(wav, window, scale):
    """Kaldi's fbank (25 ms povey/hamming frames every 10 ms, snip edges, DC removed,
    pre-emphasis 0.97, power spectrum of 512 points, 80 mel bands from 20 Hz to Nyquist,
    log floored at float32 epsilon), then each band's mean over time subtracted."""
    x = np.asarray(wav, dtype=np.float64) * scale
    n = 1 + (len(x) - 400) // 160
    frames = x[np.arange(400)[None] + 160 * np.arange(n)[:, None]]
    frames = frames - frames.mean(axis=1, keepdims=True)
    frames = np.concatenate([frames[:, :1] * (1 - 0.97), frames[:, 1:] - 0.97 * frames[:, :-1]], axis=1)
    i = np.arange(400)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * i / 399)
    win = hann**0.85 if window == "povey" else 0.54 - 0.46 * np.cos(2 * np.pi * i / 399)
    power = np.abs(np.fft.rfft(frames * win, n=512)) ** 2
    logmel = np.log(np.maximum(power @ _kaldi_mel_banks().T, np.finfo(np.float32).eps))
    return logmel - logmel.mean(axis=0)


@pytest.mark.parametrize("convention", list(CONVENTIONS))
def test_fbank_equals_an_independent_kaldi_fbank(clips, convention):
    c = CONVENTIONS[convention]
    for wav in clips:
        got = kaldi_fbank(wav, convention)
        ref = reference_fbank(wav, c.window, c.scale)
        assert got.dtype == np.float32 and got.shape == ref.shape == (1 + (len(wav) - 400) // 160, 80)
        assert np.abs(got - ref).max() < FBANK_TOL
        assert np.quantile(np.abs(got - ref), 0.99) < FBANK_TOL / 10
        assert np.abs(got.mean(axis=0)).max() < 1e-4  # mean-normalised over time
    # the two conventions differ (window; the waveform scale only where the log floor bites)
    other = next(k for k in CONVENTIONS if k != convention)
    assert np.abs(kaldi_fbank(clips[0], convention) - kaldi_fbank(clips[0], other)).max() > 0.1


def _torch_vectors(convention, clips):
    model = tiny_model(convention)
    out = []
    with torch.no_grad():
        for wav in clips:
            v = model(torch.from_numpy(kaldi_fbank(wav, convention))[None])[0].double().numpy()
            out.append(v / np.linalg.norm(v))
    return out


@pytest.mark.parametrize("convention", list(CONVENTIONS))
def test_vectors_equal_the_torch_model(models, clips, convention):
    enc = OnnxSpeakerEncoder(str(models[convention]), "cpu", 1)
    assert enc.convention == convention and enc.dim == tiny_model(convention).linear.out_features
    got = enc(clips)
    for g, r in zip(got, _torch_vectors(convention, clips)):
        assert g.dtype == np.float32 and g.shape == (enc.dim,)
        assert abs(np.linalg.norm(g) - 1) < 1e-6
        assert np.abs(g - r).max() < VECTOR_TOL


def test_batch_equals_one_at_a_time(models, clips):
    """Clips of different lengths, two of them of equal length (run as one batch)."""
    n = min(len(c) for c in clips)
    batch = [clips[0], clips[1][:n], clips[2][:n], clips[3], clips[4][: n // 2]]
    for path in models.values():
        enc = OnnxSpeakerEncoder(str(path), "cpu", 2)
        together = enc(batch)
        for clip, v in zip(batch, together):
            assert np.abs(v - enc([clip])[0]).max() < 1e-6


def test_bad_clips_get_audio_errors(models, clips):
    enc = OnnxSpeakerEncoder(str(models["wespeaker"]), "cpu", 1)
    nan = clips[1].copy()
    nan[100] = np.nan
    got = enc([clips[0], np.zeros(0, np.float32), clips[2], clips[3][:399], nan])
    assert [type(v).__name__ for v in got] == ["ndarray", "AudioError", "ndarray", "AudioError", "AudioError"]
    assert [got[1].reason, got[3].reason, got[4].reason] == ["too_short", "too_short", "non_finite"]
    assert isinstance(got[1], AudioError)
    for i in (0, 2):
        assert np.abs(got[i] - enc([clips[i]])[0]).max() < 1e-6


def test_other_graphs_and_files_refused(tmp_path):
    other = export_onnx(tiny_model("wespeaker"), tmp_path / "other.onnx", "fbank", "xvector")
    with pytest.raises(UsageError, match=r"other\.onnx.*'fbank'.*'xvector'") as e:
        OnnxSpeakerEncoder(str(other), "cpu", 1)
    assert "\n" not in str(e.value)
    bogus = tmp_path / "model.onnx"
    bogus.write_text("not a model\n", encoding="utf-8")
    for path in (bogus, tmp_path / "missing.onnx"):
        with pytest.raises(UsageError, match=str(path)) as e:
            OnnxSpeakerEncoder(str(path), "cpu", 1)
        assert "\n" not in str(e.value)


def test_import_is_light():
    heavy = "{'torch', 'onnxruntime', 'onnx'}"
    code = f"import sys, speechprep.encoders.onnx_speaker; print(*sorted({heavy} & set(sys.modules)))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert p.stdout.strip() == ""


@pytest.fixture(scope="module")
def titanet(tmp_path_factory):
    from speechprep.models.speaker_nemo import build_one

    return build_one("titanet", tmp_path_factory.mktemp("speaker_nemo") / "titanet.nemo")


@pytest.mark.parametrize("kind", ["wespeaker", "titanet"])
def test_the_measure_job_embeds_with_the_model_speakers_model_names(models, titanet, tmp_path, kind):
    """speakers.model an ONNX file or a NeMo .nemo (NeMo is in this env): the measure job's
    speaker vectors are the model's (its width, equal to the encoder on the same segment
    audio), every segment measured."""
    from conftest import Run, asr_lines, measure_params

    from speechprep.encoders import make_encoder
    from speechprep.io.audio import read_segment
    from speechprep.io.jsonio import read_jsonl

    path = str(titanet if kind == "titanet" else models[kind])
    segs = asr_lines(4)
    Run(tmp_path, [segs]).measure(p=measure_params(speaker_model=path))
    lines = list(read_jsonl(tmp_path / "curate" / "shard-0000.measures.jsonl"))
    emb = np.load(tmp_path / "curate" / "shard-0000.embeddings.npy")
    assert len(lines) == len(segs) and emb.shape == (len(segs), 32)
    want = make_encoder(path, "cpu", 1)([read_segment(x) for x in lines])
    np.testing.assert_allclose(emb, np.stack(want), atol=VECTOR_TOL)


def test_the_measure_job_gives_the_spoken_language_where_a_language_model_is_set(models, tmp_path):
    """curate.language_model (a tiny AmberNet-shaped .nemo): every measured segment carries its
    spoken language, its probability and the most likely ones, from the model on its audio."""
    from conftest import Run, asr_lines, measure_params

    from speechprep.encoders.nemo_speaker import NemoLanguageId
    from speechprep.io.audio import read_segment
    from speechprep.io.jsonio import read_jsonl
    from speechprep.models.speaker_nemo import LANGUAGES, build_one

    path = str(build_one("ambernet", tmp_path / "ambernet.nemo"))
    segs = asr_lines(3)
    Run(tmp_path, [segs]).measure(p=measure_params(language_model=path))
    lines = list(read_jsonl(tmp_path / "curate" / "shard-0000.measures.jsonl"))
    want = NemoLanguageId(path, "cpu", 1)([read_segment(x) for x in lines])
    for line, probs in zip(lines, want, strict=True):
        assert line["spoken_language"] == max(probs, key=probs.get) and line["spoken_language"] in LANGUAGES
        assert line["spoken_language_prob"] == pytest.approx(max(probs.values()), abs=1e-6)
        assert list(line["spoken_language_top"]) == sorted(probs, key=lambda k: -probs[k])
