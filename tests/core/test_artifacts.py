"""A shard job's per-segment arrays placed one line at a time (speechprep.core.artifacts):
the same files and fields as placing the shard's lines at once, one array read at a time."""

import numpy as np
import pytest
import soundfile as sf

from speechprep.core.artifacts import WAV, Kind, Scratch, read_wav
from speechprep.io.npyio import load_ref, pack_npy


def scratch(tmp_path, n=5):
    s = Scratch(tmp_path / "scratch", (Kind("codes", "int32"), Kind("wav", WAV)))
    rng = np.random.default_rng(0)
    ids = [f"seg/{k}" for k in range(n)]  # an id that is not a file name
    for k, i in enumerate(ids):
        s.save("codes", i, rng.integers(0, 500, size=7 * k, dtype=np.int32))  # the first is empty
        s.save("wav", i, rng.uniform(-0.5, 0.5, 800 + 100 * k).astype(np.float32))
    return s, ids


def test_packed_one_line_at_a_time_writes_what_np_save_writes_for_the_whole_shard(tmp_path):
    s, ids = scratch(tmp_path)
    codes = [np.load(s.path("codes", i)) for i in ids]
    wavs = [sf.read(s.path("wav", i), dtype="int16")[0] for i in ids]
    lines = [{"id": i} for i in ids]
    dirs = {"codes": tmp_path / "out" / "codes", "wav": tmp_path / "out" / "wav"}
    with s.placing(dirs, "packed", ids) as place:
        for line in lines:
            place(line)
            assert not (dirs["codes"] / "packed.npy").exists()  # renamed into place at the end
    whole = pack_npy(tmp_path / "whole.npy", codes, np.int32)
    assert (dirs["codes"] / "packed.npy").read_bytes() == (tmp_path / "whole.npy").read_bytes()
    assert [line["codes"].rsplit("#", 1)[1] for line in lines] == [r.rsplit("#", 1)[1] for r in whole]
    for line, c, w in zip(lines, codes, wavs, strict=True):
        np.testing.assert_array_equal(load_ref(line["codes"]), c)
        np.testing.assert_array_equal(np.round(read_wav(line["wav"]) * 32768).astype(np.int16), w)


def test_files_moved_one_line_at_a_time_and_out_of_order_refused(tmp_path):
    s, ids = scratch(tmp_path, 3)
    lines = [{"id": i} for i in ids]
    s.place(lines, {"codes": tmp_path / "out"}, "files")
    assert [line["codes"] for line in lines] == [
        str(s.path("codes", i)).replace(str(s.root / "codes"), str(tmp_path / "out")) for i in ids
    ]
    s2, ids2 = scratch(tmp_path / "again", 3)
    with (
        pytest.raises(ValueError, match="out of the order"),
        s2.placing({"codes": tmp_path / "p"}, "packed", ids2) as place,
    ):
        place({"id": ids2[1]})
    assert not (tmp_path / "p" / "packed.npy").exists()  # nothing half written left
