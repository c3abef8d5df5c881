"""`speakers calibrate` on real voices (Debian's recordings: the LibriVox reader, the cards
speaker, the ALSA voice, eight klettres speakers; 5 clips a file), split by speaker: with the
built-in model it chooses a cut near the shipped one and keeps held-apart voices whole; with
a lab's model (a tiny random ONNX one) it writes a block whose calibrated_for is that file's,
and either block, given as a further --configfile, passes the check before the run."""

import hashlib
import json

import pytest
import yaml

from speechprep.core.config import ConfigError, check_speaker_model, defaults, merge
from speechprep.speakers import calibrate
from tests import real_speech
from tests.support import REPO


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    utts = real_speech.distinct_voices(klettres_per_language=20)
    files = real_speech.as_files(utts, 5)
    path = tmp_path_factory.mktemp("calibrate") / "labelled.jsonl"
    lines = [{"audio_filepath": str(u.path), "speaker": u.speaker, "file_id": f} for u, f in zip(utts, files)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def config_with(block_path):
    return merge(defaults(REPO / "config" / "config.yaml"), yaml.safe_load(block_path.read_text(encoding="utf-8")))


def test_the_built_in_model_is_calibrated_and_reported_on_voices_apart(manifest, tmp_path, capsys):
    out = tmp_path / "block.yaml"
    result = calibrate.run([], str(manifest), str(out), "speaker")
    assert 0.12 <= result["threshold"] <= 0.3, result["curve"]
    cal, rep = result["calibration"], result["report"]
    assert cal["voices"] >= 4 and rep["voices"] >= 4 and cal["voices"] + rep["voices"] == 11
    assert rep["purity"] >= 0.9 and rep["inverse_purity"] >= 0.9 and rep["voice_files_under_one_id"] >= 0.9, rep
    assert rep["outliers"] <= 0.05
    text = out.read_text(encoding="utf-8")
    assert "# clips, report part (not chosen on):" in text and "scaled from Resemblyzer's" in text
    cfg = config_with(out)
    assert cfg["speakers"]["threshold"] == result["threshold"] and check_speaker_model(cfg) == "resemblyzer"
    assert "report part" in capsys.readouterr().out


def test_a_lab_model_gets_a_block_of_its_own(manifest, tmp_path):
    from speechprep.models.speaker_onnx import build_tiny

    model = build_tiny(tmp_path)["wespeaker"]
    given = tmp_path / "lab.yaml"
    given.write_text(yaml.safe_dump({"speakers": {"model": str(model)}}), encoding="utf-8")
    out = tmp_path / "block.yaml"
    result = calibrate.run([str(given)], str(manifest), str(out), "speaker")
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    assert result["calibrated_for"] == sha and result["report"]["segments"] > 0
    cfg = merge(config_with(given), yaml.safe_load(out.read_text(encoding="utf-8")))
    assert check_speaker_model(cfg) == sha
    # the TTS condition on that model: curation's vectors of it (tests/tts: reused, not computed)
    assert check_speaker_model(merge(cfg, {"tts": {"condition": str(model)}})) == sha
    other = tmp_path / "other.onnx"
    other.write_bytes(model.read_bytes())
    with pytest.raises(ConfigError, match=r"tts\.condition .*other\.onnx: the TTS features run no NeMo or ONNX"):
        check_speaker_model(merge(cfg, {"tts": {"condition": str(other)}}))


@pytest.fixture(scope="module")
def conversations(tmp_path_factory):
    """Conversations of two real voices (pause-free turn changes, and one voice talking over
    the other at 0 dB), written as 16-bit FLAC with their reference turns, each line's source
    its first voice's; split by source, both parts hold some."""
    import soundfile as sf

    from speechprep.speakers.calibrate import part_of
    from tests.diarize import conversations as C

    root = tmp_path_factory.mktemp("conversations")
    lines = []
    for k, (a, b) in enumerate(C.pairs(8, seed=11)):
        conv = (C.turn_changes if k % 2 else C.overlaps)(a, b, seed=300 + k)
        path = root / f"conv{k}.flac"
        sf.write(path, conv.audio, 16000, subtype="PCM_16")
        turns = [[round(s, 3), round(e, 3), v] for s, e, v in conv.turns + conv.overlaps]
        lines.append({"audio_filepath": str(path), "turns": turns, "source": a})
    assert {part_of(x["source"]) for x in lines} == {0, 1}
    path = root / "conversations.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_diarization_distances_are_chosen_on_conversations_split_by_source(conversations, tmp_path):
    """With reference turns the block's speakers.diarize is chosen, not scaled: on the report
    part's conversations (other sources) it catches the turn changes and the overlaps."""
    out = tmp_path / "block.yaml"
    result = calibrate.run([], str(conversations), str(out), "source")
    conv = result["conversations"]
    cal, rep = conv["calibration"], conv["report"]
    assert cal["conversations"] >= 2 and rep["conversations"] >= 2 and cal["conversations"] + rep["conversations"] == 8
    assert rep["der"] <= 0.15 and rep["changes_caught"] >= 0.8 and rep["overlaps_caught"] >= 0.5, rep
    swept = {s["key"] for s in conv["sweeps"]}
    assert {"threshold", "change_threshold", "switch_penalty", "overlap_floor"} <= swept
    text = out.read_text(encoding="utf-8")
    assert "speakers.diarize chosen on conversations" in text and "scaled from" not in text
    cfg = config_with(out)
    assert cfg["speakers"]["diarize"] == result["diarize"] and check_speaker_model(cfg) == "resemblyzer"
    assert result["calibration"] is None  # no clips: speakers.threshold stays the configured one
