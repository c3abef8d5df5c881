"""The packed layout's arrays: one file per shard and kind, lines naming "<file>#<offset>:<length>"."""

import os

import numpy as np

from speechprep.io.npyio import load_ref, pack_npy, parse_ref, save_npy


def test_packed_slices_read_back_equal_and_plain_paths_still_load(tmp_path):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (5, 0, 256, 1)]
    refs = pack_npy(tmp_path / "condition" / "packed.npy", arrays, np.float32)
    assert [parse_ref(r)[1:] for r in refs] == [(0, 5), (5, 0), (5, 256), (261, 1)]
    for a, r in zip(arrays, refs):
        got = load_ref(r, np.float32, 1)
        assert got.dtype == np.float32 and np.array_equal(got, a)
    whole = np.load(tmp_path / "condition" / "packed.npy")
    assert whole.shape == (262,)  # one 1-D file, readable by plain numpy
    plain = tmp_path / "a#b.npy"  # a '#' in a plain path is not a packed reference
    save_npy(plain, np.arange(3, dtype=np.int32))
    assert parse_ref(str(plain)) is None and load_ref(str(plain), np.int32, 1).tolist() == [0, 1, 2]


def test_wrong_type_out_of_range_or_missing_pack_reads_as_absent(tmp_path):
    refs = pack_npy(tmp_path / "codes.npy", [np.arange(4), np.arange(3)], np.int32)
    assert load_ref(refs[1], np.float32, 1) is None
    assert load_ref(refs[1], np.int32, 2) is None
    path, offset, _ = parse_ref(refs[1])
    assert load_ref(f"{path}#{offset}:99", np.int32, 1) is None
    assert load_ref(str(tmp_path / "gone.npy#0:1")) is None


def test_a_rewritten_pack_is_read_again_not_from_a_stale_map(tmp_path):
    p = tmp_path / "codes.npy"
    r = pack_npy(p, [np.arange(4)], np.int32)[0]
    assert load_ref(r, np.int32).tolist() == [0, 1, 2, 3]
    r2 = pack_npy(p, [np.arange(10, 16)], np.int32)[0]
    st = os.stat(p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a coarse clock can give the same mtime
    assert load_ref(r2, np.int32).tolist() == [10, 11, 12, 13, 14, 15]


def test_at_most_a_bounded_number_of_packs_stay_mapped(tmp_path):
    from speechprep.io import npyio

    refs = [pack_npy(tmp_path / f"{k}.npy", [np.full(3, k)], np.int32)[0] for k in range(npyio.MAPPED_FILES + 6)]
    for k, r in enumerate(refs):
        assert load_ref(r, np.int32).tolist() == [k, k, k]
    assert len(npyio._mapped) <= npyio.MAPPED_FILES
    assert load_ref(refs[0], np.int32).tolist() == [0, 0, 0]  # an evicted pack is mapped again
