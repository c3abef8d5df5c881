"""Speaker models a lab brings, NeMo side: the tiny ``.nemo`` builders
(speechprep.models.speaker_nemo), NemoSpeakerEncoder and NemoSortformer
(speechprep.encoders.nemo_speaker), checked against NeMo's own classes on real speech
(tests.real_speech)."""

import socket
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests import real_speech
from tests.support import REPO


@pytest.fixture(scope="session")
def speaker_models(tmp_path_factory):
    """The tiny TitaNet, ECAPA and Sortformer ``.nemo`` files, built once."""
    from speechprep.models.speaker_nemo import build_tiny

    return build_tiny(tmp_path_factory.mktemp("speaker_models"))


@pytest.fixture(scope="session")
def real_clips():
    """Six real utterances of two speakers, 1.1 to 7.1 s, 16 kHz float32."""
    utterances = real_speech.librivox()[:3] + real_speech.cards()[:3]
    return [real_speech.read(u.path, 16000)[0] for u in utterances]


def nemo_embedding(model, clip: np.ndarray) -> np.ndarray:
    """NeMo's own ``forward`` on one clip, unpadded, its embedding L2-normalised."""
    with torch.inference_mode():
        _, emb = model.forward(input_signal=torch.from_numpy(clip)[None], input_signal_length=torch.tensor([len(clip)]))
    v = emb[0].double().numpy()
    return v / np.linalg.norm(v)


def test_importing_the_modules_imports_neither_nemo_nor_torch():
    code = (
        "import sys, speechprep.encoders.nemo_speaker, speechprep.models.speaker_nemo; "
        "sys.exit(sorted(m for m in ('nemo', 'torch') if m in sys.modules) or None)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.slow
def test_builder_writes_models_nemo_restores(speaker_models, tmp_path):
    from nemo.collections.asr.models import EncDecSpeakerLabelModel, SortformerEncLabelModel
    from nemo.collections.asr.modules import ConvASREncoder, ECAPAEncoder, SpeakerDecoder

    from speechprep.models.speaker_nemo import build_one

    assert sorted(speaker_models) == ["ambernet", "ecapa", "sortformer", "titanet"]
    assert not [p for p in speaker_models["titanet"].parent.iterdir() if p.suffix != ".nemo" or p.name[0] == "."]
    titanet = EncDecSpeakerLabelModel.restore_from(str(speaker_models["titanet"]), map_location="cpu")
    assert isinstance(titanet.encoder, ConvASREncoder) and isinstance(titanet.decoder, SpeakerDecoder)
    assert all(block.se and block.separable for block in titanet.cfg.encoder.jasper)
    assert titanet.cfg.decoder.pool_mode == "attention" and titanet.cfg.preprocessor.features == 80
    ecapa = EncDecSpeakerLabelModel.restore_from(str(speaker_models["ecapa"]), map_location="cpu")
    assert isinstance(ecapa.encoder, ECAPAEncoder) and isinstance(ecapa.decoder, SpeakerDecoder)
    sortformer = SortformerEncLabelModel.restore_from(str(speaker_models["sortformer"]), map_location="cpu")
    assert sortformer.sortformer_modules.n_spk == 4 and sortformer.cfg.preprocessor.sample_rate == 16000

    # seeded: the same weights again
    again = EncDecSpeakerLabelModel.restore_from(str(build_one("titanet", tmp_path / "t.nemo")), map_location="cpu")
    first, second = titanet.state_dict(), again.state_dict()
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


@pytest.mark.slow
@pytest.mark.parametrize("name, dim", [("titanet", 32), ("ecapa", 24)])
@pytest.mark.parametrize("batch_seconds", [120, 4])  # one batch; several (a long clip alone)
def test_embeddings_equal_nemo_forward_clip_by_clip(speaker_models, real_clips, name, dim, batch_seconds, monkeypatch):
    from nemo.collections.asr.models import EncDecSpeakerLabelModel

    from speechprep.encoders import nemo_speaker
    from speechprep.encoders.nemo_speaker import NemoSpeakerEncoder

    monkeypatch.setattr(nemo_speaker, "CPU_BATCH_SAMPLES", batch_seconds * 16000)
    enc = NemoSpeakerEncoder(str(speaker_models[name]), "cpu", 1)
    assert enc.dim == dim and enc.package == "nemo_toolkit" and not enc.model.training
    reference = EncDecSpeakerLabelModel.restore_from(str(speaker_models[name]), map_location="cpu").eval()
    assert len({len(c) for c in real_clips}) == len(real_clips)  # every length differs: padding in a batch
    vectors = enc(real_clips)
    for clip, v in zip(real_clips, vectors):
        assert v.dtype == np.float32 and v.shape == (dim,)
        assert abs(np.linalg.norm(v) - 1) < 1e-6
        np.testing.assert_allclose(v, nemo_embedding(reference, clip), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_unusable_clips_are_audio_errors(speaker_models, real_clips):
    from speechprep.encoders.nemo_speaker import NemoSpeakerEncoder
    from speechprep.io.audio import AudioError

    enc = NemoSpeakerEncoder(str(speaker_models["titanet"]), "cpu", 1)
    nan = real_clips[3].copy()
    nan[8000] = np.nan
    out = enc([np.zeros(0, np.float32), real_clips[4], real_clips[3][:300], nan, real_clips[3]])
    assert [x.reason if isinstance(x, AudioError) else None for x in out] == [
        "empty",
        None,
        "too_short",
        "non_finite",
        None,
    ]
    assert "0.500 s" in out[3].detail
    for clip, v in ((real_clips[4], out[1]), (real_clips[3], out[4])):
        np.testing.assert_allclose(v, nemo_embedding(enc.model, clip), rtol=0, atol=1e-5)
    assert enc([]) == []


@pytest.mark.slow
def test_restore_and_embedding_without_network(speaker_models, real_clips, monkeypatch):
    from speechprep.encoders.nemo_speaker import NemoSortformer, NemoSpeakerEncoder

    def refuse(*args, **kwargs):
        raise OSError("network access in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    with pytest.raises(OSError, match="network access"):
        socket.create_connection(("127.0.0.1", 9))
    for name in ("titanet", "ecapa"):
        enc = NemoSpeakerEncoder(str(speaker_models[name]), "cpu", 1)
        vectors = enc(real_clips[:2])
        for clip, v in zip(real_clips[:2], vectors):
            np.testing.assert_allclose(v, nemo_embedding(enc.model, clip), rtol=0, atol=1e-5)
    diarizer = NemoSortformer(str(speaker_models["sortformer"]), "cpu", 1)
    assert diarizer(real_clips[0]).shape == (89, 4)  # 7.1 s in 80 ms frames


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty file"),
        (b"not a model, just text\n" * 4, "not a tar archive"),
    ],
)
def test_not_a_nemo_file_is_refused(tmp_path, content, reason):
    from speechprep.encoders.nemo_speaker import NemoSpeakerEncoder
    from speechprep.errors import UsageError

    path = tmp_path / "speaker.nemo"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=reason) as e:
        NemoSpeakerEncoder(str(path), "cpu", 1)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UsageError, match="no such file"):
        NemoSpeakerEncoder(str(tmp_path / "missing.nemo"), "cpu", 1)


@pytest.mark.slow
def test_a_model_of_another_class_is_refused_before_restoring(speaker_models, nemo_model_file, monkeypatch):
    from nemo.collections.asr.models import EncDecSpeakerLabelModel, SortformerEncLabelModel

    from speechprep.encoders.nemo_speaker import NemoSortformer, NemoSpeakerEncoder
    from speechprep.errors import UsageError

    def restore(*args, **kwargs):
        raise AssertionError("restored a model of another class")

    monkeypatch.setattr(EncDecSpeakerLabelModel, "restore_from", restore)
    monkeypatch.setattr(SortformerEncLabelModel, "restore_from", restore)
    refused = [
        (NemoSpeakerEncoder, nemo_model_file("ctc"), "EncDecCTCModelBPE", "EncDecSpeakerLabelModel"),
        (NemoSpeakerEncoder, speaker_models["sortformer"], "SortformerEncLabelModel", "EncDecSpeakerLabelModel"),
        (NemoSortformer, speaker_models["titanet"], "EncDecSpeakerLabelModel", "SortformerEncLabelModel"),
    ]
    for cls, path, found, expected in refused:
        with pytest.raises(UsageError, match=f"{path} holds a model of class {found}, not {expected}$") as e:
            cls(str(path), "cpu", 1)
        assert "\n" not in str(e.value)


@pytest.mark.slow
def test_sortformer_probabilities_and_turns_equal_nemo_diarize(speaker_models, real_clips, tmp_path):
    from speechprep.encoders.nemo_speaker import NemoSortformer
    from speechprep.io.audio import AudioError

    diarizer = NemoSortformer(str(speaker_models["sortformer"]), "cpu", 1)
    assert (diarizer.speakers, diarizer.frame_seconds) == (4, 0.08) and not diarizer.model.training
    clips = real_clips[:2] + real_clips[3:5]
    probs = [diarizer(clip) for clip in clips]
    # random weights keep every probability within 0.02 of its speaker's mean: a threshold
    # at speaker 0's median over the first clip gives it turns of its own
    threshold = float(np.median(probs[0][:, 0]))
    postprocessing = tmp_path / "postprocessing.yaml"
    postprocessing.write_text(f"parameters:\n  onset: {threshold}\n  offset: {threshold}\n", encoding="utf-8")
    lines, tensors = diarizer.model.diarize(
        audio=clips,
        sample_rate=16000,
        batch_size=1,
        include_tensor_outputs=True,
        postprocessing_yaml=str(postprocessing),
        verbose=False,
        num_workers=0,
    )
    for clip, p, nemo_lines, nemo_probs in zip(clips, probs, lines, tensors):
        assert p.dtype == np.float32 and p.shape == (int(len(clip) / 16000 / 0.08) + 1, 4)
        np.testing.assert_allclose(p, nemo_probs[0].numpy(), rtol=0, atol=1e-5)
        turns = [(float(a), float(b), int(s.removeprefix("speaker_"))) for a, b, s in map(str.split, nemo_lines)]
        assert diarizer.turns(p, onset=threshold, offset=threshold) == turns
    assert sum(s == 0 for *_, s in diarizer.turns(probs[0], threshold, threshold)) >= 3
    out = [diarizer(x) for x in (np.zeros(0, np.float32), clips[0][:1000], np.full(16000, np.inf, np.float32))]
    assert [x.reason for x in out if isinstance(x, AudioError)] == ["empty", "too_short", "non_finite"]


@pytest.mark.slow
def test_language_probabilities_are_nemos_own_and_name_its_languages(speaker_models, real_clips, tmp_path):
    """curate.language_model: the softmax of the model's own forward, clip by clip, under the
    languages its train_ds names; the most likely is what NeMo's own get_label says."""
    import soundfile as sf
    import torch

    from speechprep.encoders.nemo_speaker import NemoLanguageId
    from speechprep.models.speaker_nemo import LANGUAGES

    lid = NemoLanguageId(str(speaker_models["ambernet"]), "cpu", 1)
    assert lid.labels == LANGUAGES
    out = lid(real_clips[:3])
    for clip, probs in zip(real_clips[:3], out, strict=True):
        with torch.inference_mode():
            logits, _ = lid.model.forward(
                input_signal=torch.from_numpy(clip)[None], input_signal_length=torch.tensor([len(clip)])
            )
        want = torch.softmax(logits.double(), -1)[0].numpy()
        np.testing.assert_allclose([probs[x] for x in LANGUAGES], want, atol=1e-6)
        sf.write(tmp_path / "clip.wav", clip, 16000, subtype="FLOAT")
        assert lid.model.get_label(str(tmp_path / "clip.wav")) == max(probs, key=probs.get)
    from speechprep.errors import UsageError

    with pytest.raises(UsageError, match="names no language for each of its 8 classes"):
        NemoLanguageId(str(speaker_models["titanet"]), "cpu", 1)
