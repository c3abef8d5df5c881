"""Which datasets the step runs for, and the RTTM job: each file's local speakers named by the
run's speaker ids (curation's measurements and assignments, else the nearest run centroid,
else the file's own name), read back by pyannote."""

import numpy as np
import pytest

from speechprep.diarize.params import RttmParams, runs_for
from speechprep.diarize.rttm import read_rttm
from speechprep.diarize.speakermap import speaker_names, write_rttm_shard
from speechprep.io.jsonio import write_jsonl
from speechprep.io.npyio import save_named_rows
from tests.support import config
from tests.support import params as config_params


@pytest.mark.parametrize(
    "enabled, dataset, expected",
    [
        ("auto", {"audio_dir": "a"}, True),
        ("auto", {"manifest": "m.jsonl"}, False),
        ("auto", {"audio_dir": "a", "single_speaker": True}, False),
        ("auto", {"manifest": "m.jsonl", "single_speaker": False}, True),
        (True, {"manifest": "m.jsonl"}, True),
        (True, {"audio_dir": "a", "single_speaker": True}, False),
        (False, {"audio_dir": "a", "single_speaker": False}, False),
        (True, {"manifest": "m.jsonl", "text": "given"}, False),  # a given text belongs to the whole line
    ],
)
def test_which_datasets_are_diarized(enabled, dataset, expected):
    cfg = config()
    cfg = {**cfg, "diarize": {**cfg["diarize"], "enabled": enabled}, "datasets": {"d": dataset}}
    assert runs_for(cfg, "d") is expected
    assert config()["diarize"]["enabled"] == "auto"  # the default: audio_dir datasets


def unit(v):
    v = np.asarray(v, np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
def shard(tmp_path):
    """Two files: a has spk0 and spk1 (both measured), b has spk0 (measured) and spk1 (nothing
    measured: its centroid near run speaker cluster_0001), c has spk0 (nothing measured, far
    from every run speaker), d has one speaker (its lines as VAD wrote them, no
    ``diarize_speaker``; measured)."""
    rng = np.random.default_rng(0)
    a, b = unit(rng.standard_normal(256)), unit(rng.standard_normal(256))
    far = unit(rng.standard_normal(256))
    near_b = unit(b + 0.2 * unit(rng.standard_normal(256)))
    local = [
        {"file_id": "a", "diarize_speaker": "spk0", "centroid": a.tolist()},
        {"file_id": "a", "diarize_speaker": "spk1", "centroid": b.tolist()},
        {"file_id": "b b", "diarize_speaker": "spk0", "centroid": a.tolist()},
        {"file_id": "b b", "diarize_speaker": "spk1", "centroid": near_b.tolist()},
        {"file_id": "c", "diarize_speaker": "spk0", "centroid": far.tolist()},
        {"file_id": "d", "diarize_speaker": "spk0", "centroid": far.tolist()},
    ]
    write_jsonl(tmp_path / "speakers.jsonl", local)
    measures = [
        {"id": "a_0000", "file_id": "a", "diarize_speaker": "spk0"},
        {"id": "a_0001_0", "file_id": "a", "diarize_speaker": "spk1"},
        {"id": "a_0001_1", "file_id": "a", "diarize_speaker": "spk1"},
        {"id": "a_0002", "file_id": "a", "diarize_speaker": "spk1"},
        {"id": "b b_0000", "file_id": "b b", "diarize_speaker": "spk0"},
        {"id": "d_0000", "file_id": "d"},
    ]
    write_jsonl(tmp_path / "measures.jsonl", measures)
    assign = {"a_0000": "cluster_0000", "a_0001_0": "cluster_0001", "a_0001_1": "cluster_0001"}
    assign |= {"a_0002": "cluster_0000", "b b_0000": "cluster_0000"}  # spk1 of a: two votes of three
    assign |= {"d_0000": "cluster_0001"}
    write_jsonl(
        tmp_path / "assign.jsonl", [{"id": k, "speaker": v, "speaker_distance": 0.1} for k, v in assign.items()]
    )
    save_named_rows(tmp_path / "centroids.npy", ["cluster_0000", "cluster_0001"], np.stack([a, b]))
    turns = [
        {"file_id": "a", "start": 0.5, "end": 3.0, "segment": "a_0000", "speaker": "spk0", "overlap": False},
        {"file_id": "a", "start": 3.0, "end": 5.25, "segment": "a_0001", "speaker": "spk1", "overlap": False},
        {"file_id": "b b", "start": 1.0, "end": 2.0, "segment": "b b_0000", "speaker": "spk0", "overlap": True},
        {"file_id": "b b", "start": 1.0, "end": 2.0, "segment": "b b_0000", "speaker": "spk1", "overlap": True},
        {"file_id": "d", "start": 0.0, "end": 2.5, "segment": "d_0000", "speaker": "spk0", "overlap": False},
        {"file_id": "c", "start": 0.0, "end": 1.5, "segment": "c_0000", "speaker": "spk0", "overlap": False},
    ]
    write_jsonl(tmp_path / "turns.jsonl", turns)
    return tmp_path


def test_local_speakers_named_by_the_run(shard):
    p = config_params(RttmParams)
    f = lambda name: str(shard / name)
    names = speaker_names(f("speakers.jsonl"), p, f("measures.jsonl"), f("assign.jsonl"), f("centroids.npy"))
    assert names == {
        ("a", "spk0"): "cluster_0000",
        ("a", "spk1"): "cluster_0001",  # the run id most of its measured segments got
        ("b b", "spk0"): "cluster_0000",
        ("b b", "spk1"): "cluster_0001",  # nothing measured: the nearest run speaker, within the distance
        ("c", "spk0"): "c#spk0",  # nothing measured, no run speaker near: a speaker of that file alone
        ("d", "spk0"): "cluster_0001",  # one speaker: its lines name none, the file's votes
    }
    off = speaker_names(
        f("speakers.jsonl"),
        RttmParams(max_speaker_distance=None),
        f("measures.jsonl"),
        f("assign.jsonl"),
        f("centroids.npy"),
    )
    assert off[("b b", "spk1")] == "b b#spk1"
    alone = speaker_names(f("speakers.jsonl"), p)  # a run without curation
    assert set(alone.values()) == {"a#spk0", "a#spk1", "b b#spk0", "b b#spk1", "c#spk0", "d#spk0"}


def test_rttm_of_the_shard_is_read_by_pyannote(shard):
    from pyannote.database.util import load_rttm

    f = lambda name: str(shard / name)
    p = config_params(RttmParams)
    got = write_rttm_shard(
        f("turns.jsonl"),
        f("speakers.jsonl"),
        f("x.rttm"),
        p,
        f("measures.jsonl"),
        f("assign.jsonl"),
        f("centroids.npy"),
    )
    assert got == {"turns": 6, "local_speakers": 6, "named_by_the_file_alone": 1}
    lines = (shard / "x.rttm").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "SPEAKER a 1 0.500 2.500 <NA> <NA> cluster_0000 <NA> <NA>"
    assert lines[2] == "SPEAKER b%20b 1 1.000 1.000 <NA> <NA> cluster_0000 <NA> <NA>"
    assert [t.speaker for t in read_rttm(shard / "x.rttm")][-1] == "c#spk0"
    ann = load_rttm(f("x.rttm"))
    assert set(ann) == {"a", "b%20b", "c", "d"}
    assert set(ann["d"].labels()) == {"cluster_0001"}
    assert set(ann["b%20b"].labels()) == {"cluster_0000", "cluster_0001"}  # an overlap: two voices at once
    assert ann["a"].label_duration("cluster_0001") == pytest.approx(2.25)
