"""Diarization with a Sortformer model (`diarize.model`, speechprep.diarize.sortformer).

No trained Sortformer can be had here (nothing is downloaded), so two kinds of test:

* what the pipeline makes of a Sortformer's probabilities, from a *reference diarizer*: the
  probabilities a perfect model would give for conversations of real voices (0.95 where the
  conversation's truth has a voice, 0.02 elsewhere), each model window's speakers in another
  order, as a model's own are. Turns, cuts and overlaps then come from the probabilities alone,
  and the windows of a long file are linked by Resemblyzer's embeddings of the real voices;
* NeMo's own tiny random `SortformerEncLabelModel` (built from code) through the job: its
  probabilities are noise, what is checked is the plumbing (every segment accounted for, its
  windows in the stats, the model's sha256 in the job's identity).
"""

from dataclasses import replace

import numpy as np
import pytest

from speechprep.diarize import sortformer
from speechprep.diarize.lines import segment_lines
from speechprep.io.audio import SAMPLE_RATE
from tests.diarize import conversations as C
from tests.diarize import scoring
from tests.diarize.test_stage import job_files, read, shard  # noqa: F401 (shard: the job tests' files)

FRAME = 0.08  # NVIDIA's Sortformer: 8 x 10 ms feature frames an output frame


class ReferenceDiarizer:
    """The frame probabilities of a perfect 4-speaker Sortformer for ``conv``, window by window
    (the windows the job will ask for, in order); window ``k``'s columns rotated by ``k``."""

    frame_seconds, subsampling, speakers = FRAME, 8, 4

    def __init__(self, conv: C.Conversation, windows: list[tuple[float, float]]):
        self.conv, self.windows, self.calls = conv, windows, 0
        self.names = sorted({v for *_, v in conv.turns + conv.overlaps})

    def __call__(self, clip: np.ndarray) -> np.ndarray:
        a, b = self.windows[self.calls]
        assert abs(len(clip) / SAMPLE_RATE - (b - a)) < 1e-3  # the window's own audio
        k, self.calls = self.calls, self.calls + 1
        t = a + (np.arange(int(np.ceil(len(clip) / (FRAME * SAMPLE_RATE)))) + 0.5) * FRAME
        probs = np.full((len(t), self.speakers), 0.02, np.float32)
        for s, e, name in self.conv.turns + self.conv.overlaps:
            probs[(t >= s) & (t < e), (self.names.index(name) + k) % self.speakers] = 0.95
        return probs


def _diarize(model, params, conv, window: float = 90.0):
    p = replace(params, window=window)
    segments = conv.vad_segments()
    reference = ReferenceDiarizer(conv, sortformer.model_windows(segments, window))
    result = sortformer.diarize_file(sortformer.SortformerModels(reference, model), conv.audio, segments, p)
    assert reference.calls == len(reference.windows) == result.extra["model_windows"]
    return result


def test_a_dataset_chooses_its_own_diarization_model():
    """Conversations of many voices keep the windowed clustering while others use a Sortformer."""
    from speechprep.diarize.params import DiarizeParams
    from tests.support import config as defaults

    config = defaults()
    config["diarize"]["model"] = "/models/sortformer.nemo"
    config["datasets"] = {"calls": {"audio_dir": "a"}, "meetings": {"audio_dir": "b", "diarize_model": None}}
    assert DiarizeParams.select(config, "calls")["model"] == "/models/sortformer.nemo"
    assert DiarizeParams.select(config, "meetings")["model"] is None


def test_model_windows_hold_whole_segments():
    segs = [(0.0, 10.0), (12.0, 50.0), (51.0, 95.0), (100.0, 300.0), (301.0, 302.0)]
    windows = [(0.0, 50.0), (51.0, 95.0), (100.0, 190.0), (190.0, 280.0), (280.0, 302.0)]
    assert sortformer.model_windows(segs, 90.0) == windows


@pytest.mark.parametrize("seed", [25, 26])
def test_pause_free_turn_changes_are_cut_from_the_probabilities(model, params, seed):
    """Turn changes 0-0.2 s apart inside one VAD segment, real voices: every change is cut
    (within 0.5 s), nothing is dropped multi_speaker, two speakers, DER under 5 %."""
    a, b = C.pairs(1, seed=seed)[0]
    conv = C.turn_changes(a, b, seed=100 + seed)
    result = _diarize(model, params, conv)
    handled, total = scoring.changes_handled(conv, result)
    assert total >= 3 and handled == total
    assert not [d for d in result.decisions if d.reason]
    assert len(result.centroids) == 2
    assert scoring.der(conv, result, collar=0.25) < 0.05


def test_overlaps_are_where_two_speakers_are_probable(model, params):
    """Two voices at once at 0 dB: every overlapped second leaves the one-voice pieces, and
    each overlap piece names both voices."""
    a, b = C.pairs(1, seed=7)[0]
    conv = C.overlaps(a, b, seed=207)
    result = _diarize(model, params, conv)
    removed, total = scoring.overlap_removed(conv, result)
    assert total > 2 and removed / total >= 0.95
    flagged = [p for d in result.decisions for p in d.pieces if p.overlap]
    assert flagged and all({p.speaker, p.other} == {0, 1} for p in flagged)
    assert scoring.der(conv, result, collar=0.25) < 0.05


def test_long_files_windows_are_linked_by_the_speaker_model(model, params):
    """Three real voices over 120 s in 20 s windows whose speakers come in another order each
    time: linked by Resemblyzer's embeddings into the file's three speakers (DER under 5 %)."""
    conv = C.three_voices(("librivox", "klettres_lt", "klettres_fr"), seed=27, seconds=120)
    result = _diarize(model, params, conv, window=20.0)
    assert result.extra["model_windows"] >= 6
    assert len(result.centroids) == 3
    assert scoring.der(conv, result, collar=0.25) < 0.05


@pytest.fixture(scope="module")
def tiny_sortformer(tmp_path_factory):
    from speechprep.models import speaker_nemo

    return speaker_nemo.build_one("sortformer", tmp_path_factory.mktemp("sortformer") / "sortformer.nemo")


def test_the_job_runs_a_sortformer_nemo(shard, tiny_sortformer, tmp_path, params):  # noqa: F811 (the fixture)
    """The job restores the .nemo (and Resemblyzer to link windows), writes for each file what
    the module decides, ends every VAD segment once, and records the model's sha256."""
    from speechprep.diarize import stage
    from speechprep.diarize.params import DiarizeJobParams
    from speechprep.io.modelfiles import sha256_file
    from tests.support import params as config_params

    root, convs, lines = shard
    files = job_files(tmp_path)
    files = replace(files, segments=str(root / "vad" / "shard-0000.segments.jsonl"))
    p = config_params(DiarizeJobParams, device="cpu", model=str(tiny_sortformer), window=20.0)
    summary = stage.run(files, p, 1)
    out = read(files)
    ended = [x.get("diarize_source", x["id"]) for x in out["segments"]] + [r["id"] for r in out["rejects"]]
    assert sorted(ended) == sorted({*ended}) and set(ended) == {x["id"] for x in lines}
    stats = {s["id"]: s for s in out["stats"]}
    assert stats["gone"]["status"] == "failed" and summary["failed_files"] == 1
    assert stats["three"]["model_windows"] == len(sortformer.model_windows(convs["three"].vad_segments(), 20.0))
    # the file "turns" again, through the module with the same models: the same lines
    models = stage.load_model("cpu", 1, "resemblyzer", str(tiny_sortformer))
    mine = [x for x in lines if x["file_id"] == "turns"]
    spans = [(x["offset"], x["offset"] + x["duration"]) for x in mine]
    result = sortformer.diarize_file(models, convs["turns"].audio, spans, replace(params, window=20.0))
    assert [x for x in out["segments"] if x["file_id"] == "turns"] == segment_lines(mine, result, tts=False)[0]
    assert stage.job_identity(p)["diarize_model_sha256"] == sha256_file(tiny_sortformer)
    assert stage.models_name(p) == f"{tiny_sortformer} linked by Resemblyzer"
