"""RTTM as the contract words it, read back by pyannote's own reader; ids with spaces survive."""

from speechprep.diarize.rttm import RttmTurn, format_line, read_rttm, write_rttm


def test_line_format():
    line = format_line(RttmTurn("spk_file_0001", 1.5, 2.25, "cluster_0003"))
    assert line == "SPEAKER spk_file_0001 1 1.500 2.250 <NA> <NA> cluster_0003 <NA> <NA>\n"


def test_round_trip_and_pyannote_reads_it(tmp_path):
    from pyannote.database.util import load_rttm

    turns = [
        RttmTurn("talk__show_01", 0.0, 3.2, "spk0"),
        RttmTurn("talk__show_01", 3.2, 1.75, "spk1"),
        RttmTurn("interview with spaces %", 10.125, 0.5, "spk0"),
        RttmTurn("ünïcödé__日本", 1.0, 1.0, "spk 2"),
    ]
    path = tmp_path / "diarize" / "shard-0000.rttm"
    assert write_rttm(path, turns) == 4
    assert read_rttm(path) == turns
    text = path.read_text(encoding="utf-8")
    assert "interview%20with%20spaces%20%25" in text and all(len(x.split()) == 10 for x in text.splitlines())
    ann = load_rttm(str(path))
    assert set(ann) == {"talk__show_01", "interview%20with%20spaces%20%25", "ünïcödé__日本"}
    got = sorted((s.start, s.end, label) for s, _, label in ann["talk__show_01"].itertracks(yield_label=True))
    assert got == [(0.0, 3.2, "spk0"), (3.2, 4.95, "spk1")]


def test_empty_shard_and_other_lines(tmp_path):
    path = tmp_path / "x.rttm"
    assert write_rttm(path, []) == 0 and path.read_text(encoding="utf-8") == ""
    path.write_text("SPKR-INFO f 1 <NA> <NA> <NA> unknown a <NA> <NA>\n\n" + format_line(RttmTurn("f", 0, 1, "a")))
    assert read_rttm(path) == [RttmTurn("f", 0.0, 1.0, "a")]
