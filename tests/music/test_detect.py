"""The music detector on real voices over real music (tests/music/mixes.py: Debian's
recordings, licences in tests/real_speech.py), judged only on held-apart voices and music the
detector's weights were never fitted on; TEN-VAD's mistakes on held-apart music; a lab's
AudioSet-class tagger through the ONNX seam (a small model built here from code)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speechprep.curate.nonspeech import NonSpeech
from speechprep.encoders import music as D
from speechprep.errors import UsageError
from speechprep.io.audio import read_segment, stream_mono
from speechprep.music.stage import _pauses, pause_spans
from tests.music import mixes as M
from tests.support import REPO, config

CFG = config()
LIMIT = CFG["curate"]["max_music_prob"]
DROP = CFG["music"]["drop_prob"]


def kept(rows, snr):
    r = [(m, p) for m, p in rows if m.snr == snr]
    return sum(m.seconds for m, p in r if p <= LIMIT) / sum(m.seconds for m, _ in r)


@pytest.fixture(scope="module")
def held_out():
    det = D.load(CFG["music"])
    ms = M.mixes("held_out", per_source=8)  # as bench/music/detect_accuracy.py reports it
    return det, [(m, p) for m, p in zip(ms, det.probs([(m.audio, m.sr) for m in ms], [m.noise for m in ms]))]


def test_held_apart_speech_over_music_is_flagged_and_clean_speech_kept(held_out):
    """Five telephone voices and five KLettres speakers over ASC's and the music-on-hold
    tracks (none of them fitted on): clean speech keeps >= 0.95 of its seconds, speech over
    music at 10 dB and louder keeps under 0.10 (20 dB is only reported)."""
    _, rows = held_out
    assert len({m.speech for m, _ in rows if m.speech}) == 10 and {m.music for m, _ in rows} >= {"asc", "moh"}
    assert all(p is not None and 0.0 <= p <= 1.0 for _, p in rows)
    assert kept(rows, None) >= 0.95
    for snr in (10.0, 5.0, 0.0, "music"):
        assert kept(rows, snr) < 0.10, snr
    assert kept(rows, 20.0) < kept(rows, None)


def test_the_segment_alone_still_flags_the_music(held_out):
    """A file with no pause to read: the segment's own floor is judged."""
    det, _ = held_out
    ms = [m for m in M.mixes("held_out", per_source=2, seed=2, context=False, snrs=(None, 10.0, 0.0))]
    rows = list(zip(ms, det.probs([(m.audio, m.sr) for m in ms])))
    assert kept(rows, None) >= 0.9
    assert kept(rows, 10.0) < 0.2 and kept(rows, 0.0) < 0.1


def test_music_ten_vad_takes_for_speech_never_reaches_asr(tmp_path):
    """20 s of each held-apart music track through TEN-VAD (the VAD stage's own env and
    settings): what it calls speech is dropped before ASR, by the music-with-no-voice rule
    mostly and by curation's limit, where nothing separates it, for the rest."""
    det = D.load(CFG["music"])
    paths = M.music_excerpts("held_out", 20.0, tmp_path)
    segments = M.ten_vad_segments(paths)
    assert set(segments) == {str(p) for p in paths}
    non_speech = NonSpeech([s for ss in segments.values() for s in ss], CFG["curate"]["snr_noise_seconds"])
    taken = reached = alone = 0.0
    for ss in segments.values():
        for s in ss:
            x = np.concatenate(list(stream_mono(s["audio_filepath"], 16000, 60.0, s["offset"], s["duration"])))
            a = det.assess(x, 16000, non_speech.read(s))
            taken += s["duration"]
            if a is None or not a.dropped(DROP, LIMIT):
                reached += s["duration"]
            if a is None or not a.dropped(DROP):
                alone += s["duration"]
    assert taken > 1.0  # TEN-VAD does take some of this music for speech
    assert reached == 0.0
    assert alone <= 0.3 * taken  # music with no voice, told apart from speech over music


def test_a_voice_that_holds_its_harmonics_between_quiet_pauses_is_not_music():
    """The demo's espeak-ng voices hold their harmonics as notes do; between their words they
    fall between their syllables, where music under a voice (or alone) sounds on. Each spoken
    stretch of the demo (resources/demo/truth.json, cut as tightly as the voice), read with
    its file's pauses as the music stage reads them, stays under curate.max_music_prob, while
    the same stretches with real music under them at 10 dB, pauses and all, go over it."""
    det = D.load(CFG["music"])
    root = REPO / "resources" / "demo" / "audio"
    truth = json.loads((root.parent / "truth.json").read_text(encoding="utf-8"))["files"]
    music, _ = M.R.read(M.R.music("hyperrogue")[1], 16000)
    voice, mixed = [], []
    for rel, f in truth.items():
        path = str(root / rel)
        spans = [(round(s["start"], 2), round(s["end"] - s["start"], 2)) for s in f.get("speech") or []]
        segs = [
            {"id": f"{rel}#{i}", "audio_filepath": path, "offset": a, "duration": d} for i, (a, d) in enumerate(spans)
        ]
        around = pause_spans(segs)
        for s in segs:
            x, pauses = read_segment(s, 16000), _pauses(s["audio_filepath"], around[s["id"]])
            voice.append(det.music_prob(x, 16000, pauses))
            if len(mixed) < 8 and pauses:
                m = music[16000 * (10 + len(mixed)) :]
                level = np.sqrt(np.mean(x**2)) / 10 ** (10 / 20) / (np.sqrt(np.mean(m[: 16000 * 8] ** 2)) + 1e-12)
                under = [m[: len(p)] * level for p in pauses]
                mixed.append(det.music_prob(x + m[: len(x)] * level, 16000, [p + u for p, u in zip(pauses, under)]))
    assert len(voice) >= 40 and max(voice) <= LIMIT, sorted(voice)[-5:]
    assert len(mixed) == 8 and min(mixed) > LIMIT, mixed


def test_short_silent_and_damaged_audio(held_out):
    det, _ = held_out
    assert det.music_prob(np.zeros(1000, np.float32), 16000) is None  # under 0.2 s: no figure
    silent = det.assess(np.zeros(16000, np.float32), 16000)
    assert silent is not None and silent.music_prob < LIMIT
    bad = np.full(16000, np.nan, np.float32)
    assert det.music_prob(bad, 16000) is not None  # a figure, never an exception
    x, sr = M.R.read(M.R.librivox()[0].path)
    assert det.music_prob(x, sr) == pytest.approx(det.music_prob(x.astype(np.float64) * 1.0, sr))


def test_unknown_detectors_and_missing_models_are_refused(tmp_path):
    with pytest.raises(UsageError, match="not one of"):
        D.load({"detector": "panns"})
    with pytest.raises(UsageError, match=r"needs music\.model"):
        D.load({"detector": "onnx", "model": None})
    with pytest.raises(UsageError, match="no such file"):
        D.load({"detector": "onnx", "model": str(tmp_path / "absent.onnx")})
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(UsageError, match="not an ONNX model"):
        D.load({"detector": "onnx", "model": str(junk)})


def tagger(path, classes=527, music=137, speech=0, logits=False, frames=False):
    """An AudioSet-shaped tagger built from code: waveform (batch, samples) -> (batch,
    classes). Its "music" output rises with the waveform's mean power, its "speech" output
    falls with it (what a real tagger learns is not what this proves: only the loading, the
    rate, the index and the output's shape and scale)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.zeros((1, classes), np.float32)
    b = np.full(classes, -3.0, np.float32)
    w[0, music], b[music] = 400.0, -2.0
    w[0, speech], b[speech] = -400.0, 2.0
    nodes = [
        helper.make_node("Mul", ["wave", "wave"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", "axes"], ["power"], keepdims=1),
        helper.make_node("MatMul", ["power", "w"], ["z0"]),
        helper.make_node("Add", ["z0", "b"], ["z"]),
    ]
    out = "z"
    if not logits:
        nodes.append(helper.make_node("Sigmoid", ["z"], ["p"]))
        out = "p"
    if frames:  # (batch, frames, classes): two frames, the second the clip's
        nodes.append(helper.make_node("Unsqueeze", [out, "one"], ["u"]))
        nodes.append(helper.make_node("Concat", ["u", "u"], ["f"], axis=1))
        out = "f"
    shape = ["batch", 2, classes] if frames else ["batch", classes]
    graph = helper.make_graph(
        nodes,
        "tagger",
        [helper.make_tensor_value_info("wave", TensorProto.FLOAT, ["batch", "samples"])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, shape)],
        [
            numpy_helper.from_array(np.array([1], np.int64), "axes"),
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(b, "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("logits,frames", [(False, False), (True, False), (False, True)])
def test_a_lab_tagger_through_the_onnx_seam(tmp_path, logits, frames):
    path = tagger(tmp_path / "tagger.onnx", logits=logits, frames=frames)
    det = D.load({**CFG["music"], "detector": "onnx", "model": str(path), "model_rate": 16000})
    assert det.kind == "onnx"
    x, sr = M.R.read(M.R.cards()[0].path)
    quiet, loud = x * 0.01, x / np.abs(x).max() * 0.9
    a, b = det.assess(quiet, sr), det.assess(loud, sr)
    assert 0.0 <= a.music_prob < b.music_prob <= 1.0 and a.speech_prob > b.speech_prob
    # the output index is the config's: another class reads the model's constant -3 logit
    other = D.load({"detector": "onnx", "model": str(path), "output_index": 5, "model_rate": 16000})
    assert other.music_prob(loud, sr) == pytest.approx(1 / (1 + np.exp(3.0)), abs=1e-4)
    probs = det.probs([(quiet, sr), (loud, sr), (x[:100], sr)])
    assert probs[0] == pytest.approx(a.music_prob, abs=1e-5) and probs[2] is None
    with pytest.raises(UsageError, match="is not one of its 527 outputs"):
        D.load({"detector": "onnx", "model": str(path), "output_index": 600})
