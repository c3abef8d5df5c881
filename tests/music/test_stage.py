"""The music job (speechprep.music.stage) on real speech over real music: every segment ends
in its lines or its rejects, each line carries music_prob, music alone is dropped where the
detector says so, and a flagged file's segments are separated into the shard's vocals FLAC
that their lines then name. The separation model is one built from code (random weights):
these prove the plumbing, not the separation."""

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechprep.core.failures import SystematicFailure
from speechprep.io.audio import read_segment
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.music import stage
from speechprep.music.params import MusicParams
from tests import real_speech as R
from tests.music.models import MDX_SMALL, mdx_onnx
from tests.support import config

RATE = 16000


def _level(x: np.ndarray, rms: float) -> np.ndarray:
    return x * (rms / (np.sqrt(np.mean(x**2)) + 1e-12))


def recordings(d: Path) -> list[dict]:
    """Two real recordings as VAD would leave them: ``mixed.wav`` (the LibriVox reader, clean
    then over hyperrogue's music at 10 dB, then the music alone), ``clean.wav`` (the cards
    speaker, clean) and a segment of a file that is gone."""
    music, _ = R.read(R.music("hyperrogue")[1], RATE)
    lines = []
    for name, voices, kinds in (
        ("mixed", R.librivox()[:3], ("clean", "music10", "music")),
        ("clean", R.cards()[:2], ("clean", "clean")),
    ):
        parts, t = [np.zeros(RATE // 2, np.float32)], 0.5
        for k, (u, kind) in enumerate(zip(voices, kinds, strict=True)):
            x = _level(R.read(u.path, RATE)[0], 0.05)
            m = _level(music[RATE * (10 + 10 * k) :][: len(x)], 0.05 / 10 ** (10 / 20))
            x = {"clean": x, "music10": x + m, "music": _level(m, 0.05)}[kind].astype(np.float32)
            lines.append({"id": f"{name}_{k:04d}", "file_id": name, "audio_filepath": str(d / f"{name}.wav"),
                          "offset": round(t, 2), "duration": round(len(x) / RATE, 2), "kind": kind})  # fmt: skip
            parts += [x, np.zeros(RATE // 2, np.float32)]
            t = round(t + len(x) / RATE + 0.5, 2)
        sf.write(d / f"{name}.wav", np.concatenate(parts), RATE)
    gone = {"id": "gone_0000", "file_id": "gone", "audio_filepath": str(d / "gone.wav"), "offset": 0.0, "duration": 2.0}
    return [*lines, {**gone, "kind": "missing"}]


def files(d: Path, name: str = "shard-0000") -> stage.MusicFiles:
    m = d / name
    return stage.MusicFiles(str(d / f"{name}.jsonl"), f"{m}.segments.jsonl", f"{m}.rejects.jsonl", f"{m}.vocals",
                            str(d / ".partial" / f"{name}.jsonl"))  # fmt: skip


def params(**music) -> MusicParams:
    cfg = config()
    cfg["separate"].update(MDX_SMALL)
    for k, v in music.items():
        section, key = k.split("__") if "__" in k else ("music", k)
        cfg[section][key] = v
    return MusicParams.from_config(cfg, "demo")


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    d = tmp_path_factory.mktemp("music")
    lines = recordings(d)
    write_jsonl(d / "shard-0000.jsonl", lines)
    return d, lines


def test_every_segment_is_judged_and_accounted_for(shard):
    d, lines = shard
    f = files(d, "judged")
    write_jsonl(f.segments, lines)
    summary = stage.run(f, params(drop_prob=None))
    out = list(read_jsonl(f.out))
    assert [x["id"] for x in out] == [x["id"] for x in lines] and list(read_jsonl(f.rejects)) == []
    assert summary["separated"] == 0 and not list(Path(f.vocals).iterdir())
    by = {x["id"]: x for x in out}
    assert by["gone_0000"]["music_prob"] is None  # unreadable: ASR rejects it for its reason
    for x in out:
        assert {k: x[k] for k in lines[0]} == next(s for s in lines if s["id"] == x["id"])  # nothing else changed
        if x["kind"] != "missing":
            assert 0.0 <= x["music_prob"] <= 1.0 and "separated" not in x
    clean = [x["music_prob"] for x in out if x["kind"] == "clean"]
    assert by["mixed_0002"]["music_prob"] > max(clean)  # music alone over every clean segment


def test_music_alone_is_dropped_before_any_model_stage(shard):
    d, lines = shard
    f = files(d, "dropped")
    write_jsonl(f.segments, lines)
    stage.run(f, params(drop_prob=0.0))  # everything judged is music "with no speech" at 0
    out, rejects = list(read_jsonl(f.out)), list(read_jsonl(f.rejects))
    assert [x["id"] for x in out] == ["gone_0000"]
    assert sorted(r["id"] for r in rejects) == sorted(x["id"] for x in lines if x["kind"] != "missing")
    for r in rejects:
        assert r["stage"] == "music" and r["reason"] == "background_music" and 0 <= r["music_prob"] <= 1
        assert "music.drop_prob" in r["detail"]


def test_a_flagged_file_is_separated_and_its_lines_point_at_the_vocals(shard, tmp_path):
    d, lines = shard
    model = mdx_onnx(tmp_path / "mdx.onnx", MDX_SMALL["mdx_dim_f_set"], 2 ** MDX_SMALL["mdx_dim_t_set"])
    before = {x["id"]: x for x in read_jsonl(files(d, "judged").out)}
    flag = (before["mixed_0001"]["music_prob"] + max(before[i]["music_prob"] for i in ("clean_0000", "clean_0001"))) / 2
    if not before["mixed_0001"]["music_prob"] > flag:
        pytest.skip("the detector does not rank speech over music above the clean recording's speech")
    f = files(d, "separated")
    write_jsonl(f.segments, lines)
    summary = stage.run(f, params(drop_prob=None, separate__model=str(model), separate__min_music_prob=flag))
    out = {x["id"]: x for x in read_jsonl(f.out)}
    assert set(out) == {x["id"] for x in lines} and summary["separated_files"] == 1
    flac = Path(f.vocals) / "separated.flac"
    info = sf.info(str(flac))
    assert info.samplerate == RATE and info.channels == 1  # the recording's rate, not the model's 44.1 kHz
    at = 0.0
    for src in lines:
        x = out[src["id"]]
        if src["file_id"] != "mixed":  # a file with nothing over min_music_prob is read as it was
            assert "separated" not in x and x["audio_filepath"] == src["audio_filepath"]
            continue
        assert x["separated"] is True and x["music_prob_before"] == before[src["id"]]["music_prob"]
        assert 0 <= x["music_prob"] <= 1
        assert (x["unseparated_audio_filepath"], x["unseparated_offset"]) == (src["audio_filepath"], src["offset"])
        assert x["audio_filepath"] == str(flac.resolve()) and x["duration"] == src["duration"]
        assert x["offset"] == pytest.approx(at) and round(x["offset"] * 100, 6) % 1 == 0  # whole 10 ms, end to end
        audio = read_segment(x, RATE)
        assert len(audio) == round(src["duration"] * RATE) and np.sqrt(np.mean(audio**2)) > 1e-4
        at += x["duration"]
    assert not (d / ".partial" / "separated").exists()  # the vocals' scratch went with the resume file


def test_a_separator_failing_on_everything_fails_the_shard_loudly(shard, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    dim_f = MDX_SMALL["mdx_dim_f_set"]
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["b", 4, dim_f, 32])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["b", 4, dim_f, 1])
    node = helper.make_node("ReduceMean", ["input", "axes"], ["output"], keepdims=1)
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [3])
    m = helper.make_model(
        helper.make_graph([node], "short", [x], [y], [axes]), opset_imports=[helper.make_opsetid("", 18)]
    )
    m.ir_version = 9
    onnx.save(m, str(tmp_path / "short.onnx"))  # one frame out of 32: its inverse STFT is too short
    d, lines = shard
    f = files(d, "failing")
    write_jsonl(f.segments, lines)
    with pytest.raises(SystematicFailure):
        stage.run(f, params(drop_prob=None, separate__model=str(tmp_path / "short.onnx"), separate__min_music_prob=0.0))
    assert not Path(f.out).exists()


def test_a_segment_s_context_is_the_file_s_pauses_either_side_never_other_speech():
    segs = [
        {"id": "a", "offset": 0.5, "duration": 2.0},
        {"id": "b", "offset": 2.5, "duration": 1.0},  # meets a: one stretch of speech
        {"id": "c", "offset": 4.0, "duration": 1.0},
        {"id": "d", "offset": 5.05, "duration": 1.0},  # 50 ms after c: no pause worth reading
    ]
    spans = stage.pause_spans(segs)
    assert spans["a"] == spans["b"] == [(0.0, 0.5), (3.5, 4.0)]
    assert spans["c"] == [(3.5, 4.0)] and spans["d"] == [(6.05, 7.05)]


def test_a_named_channel_is_judged_alone_and_its_vocals_drop_it(shard, tmp_path):
    """The recordings on channel 1 of real 2-channel files, hyperrogue's music loud on channel 0:
    each segment and its pauses are judged from channel 1 alone, as the mono files' are (the
    same music_prob); a separated line names its one-channel vocals, the source's channel kept
    as unseparated_channel."""
    d, lines = shard
    music, _ = R.read(R.music("hyperrogue")[2], RATE)
    for name in ("mixed", "clean"):
        x = sf.read(d / f"{name}.wav", dtype="float32")[0]
        sf.write(tmp_path / f"{name}.wav", np.stack([_level(np.resize(music, len(x)), 0.2), x], axis=1), RATE)
    mono = [x for x in lines if x["kind"] != "missing"]
    stereo = [{**x, "audio_filepath": str(tmp_path / f"{x['file_id']}.wav"), "channel": 1} for x in mono]
    got = {}
    for name, segs in (("mono", mono), ("stereo", stereo)):
        f = files(tmp_path, name)
        write_jsonl(f.segments, segs)
        stage.run(f, params(drop_prob=None))
        got[name] = {x["id"]: x["music_prob"] for x in read_jsonl(f.out)}
    assert got["stereo"] == got["mono"] and len(got["mono"]) == len(mono)
    resume = str(tmp_path / "r.jsonl")
    line = {**stereo[0], "separated": True, "vocals_rate": RATE}
    vocals = stage.vocals_path(resume, line["id"])
    vocals.parent.mkdir(parents=True)
    np.save(vocals, np.zeros(int(line["duration"] * RATE), np.float32))
    stage.write_vocals(str(tmp_path / "v"), [line], resume)
    assert "channel" not in line and line["unseparated_channel"] == 1
    assert sf.info(line["audio_filepath"]).channels == 1
