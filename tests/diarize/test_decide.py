"""What becomes of one VAD segment, given its change times and overlaps (no audio needed)."""

from dataclasses import asdict, fields

import pytest

from speechprep.diarize.core import decide_segment
from speechprep.diarize.params import DiarizeParams
from tests.support import config, params

P = params(DiarizeParams, device="cpu")


def speaker_by_time(*edges):
    """``labels_at`` for a segment whose speakers change at ``edges``: 0, 1, 0, ..."""
    return lambda a, b: sum(1 for t in edges if t <= (a + b) / 2) % 2


def test_one_speaker_is_kept_whole():
    d = decide_segment(3, (1.0, 6.0), [], speaker_by_time(), [], P)
    assert d.reason is None and not d.cut and [(p.start, p.end, p.speaker) for p in d.pieces] == [(1.0, 6.0, 0)]


def test_short_segment_of_one_speaker_is_kept():
    d = decide_segment(0, (2.0, 2.1), [], speaker_by_time(), [], P)
    assert d.reason is None and not d.cut and len(d.pieces) == 1


def test_cut_at_each_change_and_slivers_dropped():
    d = decide_segment(0, (0.0, 10.0), [4.0, 9.9], speaker_by_time(4.0, 9.9), [], P)
    assert d.cut and [(p.start, p.end, p.speaker) for p in d.pieces] == [(0.0, 4.0, 0), (4.0, 9.9, 1)]
    assert d.trimmed == pytest.approx(0.1)  # under min_speech (0.25 s): dropped, counted


def test_turn_shorter_than_a_window_is_multi_speaker():
    d = decide_segment(0, (0.0, 8.0), [3.0, 4.0], speaker_by_time(3.0, 4.0), [], P)
    assert d.reason == "multi_speaker" and not d.pieces and "1.0" in d.detail


def test_overlap_is_a_piece_of_its_own():
    d = decide_segment(0, (0.0, 12.0), [], speaker_by_time(), [(4.0, 6.5, 0, 1)], P)
    assert [(p.start, p.end, p.overlap, p.other) for p in d.pieces] == [
        (0.0, 4.0, False, None),
        (4.0, 6.5, True, 1),
        (6.5, 12.0, False, None),
    ]
    # an overlap reaching past the segment is clipped to it
    d = decide_segment(0, (5.0, 12.0), [], speaker_by_time(), [(4.0, 6.5, 0, 1)], P)
    assert (d.pieces[0].start, d.pieces[0].end, d.pieces[0].overlap) == (5.0, 6.5, True)


def test_the_parameters_are_the_config_section_and_the_keys_it_shares():
    cfg = config()
    p = params(DiarizeParams)
    assert {f.name for f in fields(DiarizeParams)} == (set(cfg["diarize"]) - {"threads", "enabled"}) | set(
        cfg["speakers"]["diarize"]
    ) | {
        "speaker_model",
        "speaker_model_sha256",
        "speaker_linkage",
        "speaker_threshold",
        "min_speech",
        "bandwidth_floor_db",
    }
    assert (p.speaker_threshold, p.min_speech) == (cfg["speakers"]["threshold"], cfg["vad"]["min_speech"])
    assert {k: getattr(p, k) for k in cfg["speakers"]["diarize"]} == cfg["speakers"]["diarize"]
    assert p.bandwidth_floor_db == cfg["curate"]["bandwidth_floor_db"]
    narrow = p.for_band(True)
    assert (narrow.threshold, narrow.speaker_threshold) == (p.narrowband_threshold, p.narrowband_merge)
    assert p.for_band(False) == p
    with pytest.raises(Exception, match="unknown"):
        DiarizeParams.from_dict({**asdict(p), "hopp": 0.5})
