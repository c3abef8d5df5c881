"""Diarization's windows embedded by a speaker model a lab brings (`speakers.model`): a NeMo
TitaNet-shaped `.nemo` and a WeSpeaker-convention `.onnx`, tiny and random (built from code),
on a conversation of two real voices. Their figures mean nothing (random weights); what is
checked is the plumbing: every window embedded by the model's own vectors, one file's turns."""

import numpy as np
import pytest

from speechprep.diarize import stage
from speechprep.diarize.core import diarize_file
from speechprep.diarize.embed import WINDOW_S, EncoderWindows
from speechprep.io.audio import SAMPLE_RATE
from tests.diarize import conversations as C


@pytest.fixture(scope="module")
def lab_models(tmp_path_factory):
    from speechprep.models import speaker_nemo, speaker_onnx

    root = tmp_path_factory.mktemp("speaker_models")
    return {"titanet": speaker_nemo.build_one("titanet", root / "titanet.nemo"), **speaker_onnx.build_tiny(root)}


@pytest.fixture(scope="module")
def conversation():
    a, b = C.pairs(1, seed=25)[0]
    return C.turn_changes(a, b, seed=100)


@pytest.mark.parametrize("kind, dim", [("titanet", 32), ("wespeaker", 32), ("3d-speaker", 24)])
def test_a_lab_model_embeds_every_window_and_diarizes_a_file(lab_models, conversation, params, kind, dim):
    model = stage.load_model("cpu", 1, str(lab_models[kind]))
    assert isinstance(model, EncoderWindows)
    segments = conversation.vad_segments()
    win = model.window_embeddings(conversation.audio, segments, params.hop, params.batch)
    assert win.emb.shape == (len(win), dim) and np.allclose(np.linalg.norm(win.emb, axis=1), 1, atol=1e-5)
    assert (win.end - win.start <= WINDOW_S + 1e-9).all() and len(set(win.segment.tolist())) == len(segments)
    # each window's vector is the model's on that window's own samples
    for i in (0, len(win) // 2, len(win) - 1):
        a, b = int(round(win.start[i] * SAMPLE_RATE)), int(round(win.end[i] * SAMPLE_RATE))
        np.testing.assert_allclose(win.emb[i], model.encoder([conversation.audio[a:b]])[0], atol=1e-5)
    result = diarize_file(model, conversation.audio, segments, params)
    turns = result.turns()
    assert turns and 1 <= len({t.speaker for t in turns}) <= 4
