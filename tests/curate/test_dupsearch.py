"""The duplicates job's array search (speechprep.curate.dupsearch): candidate pairs from
sorted band keys, the cap on long runs, exact groups, the job over shard files (real
recordings, a real MP3 copy), and the errors of inputs that do not belong together."""

import json

import numpy as np
import pytest
from conftest import params

from speechprep.curate import dupsearch as S
from speechprep.curate import fingerprint as FP
from speechprep.curate import stage
from speechprep.curate.measures import pcm_sha256
from speechprep.errors import UsageError
from speechprep.io.jsonio import read_jsonl, write_jsonl
from tests import real_speech as R


def pairs_of(codes: np.ndarray, n: int) -> set[tuple[int, int]]:
    return {(int(c // n), int(c % n)) for c in codes}


def test_runs_give_all_pairs_and_long_runs_a_chain():
    n = 1000
    keys = np.array([5, 5, 5, 7, 9, 9] + [3] * 100, np.uint64)
    owner = np.array([4, 2, 9, 1, 8, 8, *range(100, 200)], np.int64)  # 8 twice under one key: once
    codes, capped = S.run_pairs(keys, owner, n, max_run=4)
    got = pairs_of(codes, n)
    assert {(2, 4), (2, 9), (4, 9)} <= got and not any(8 in p or 1 in p for p in got)
    long = {p for p in got if p[0] >= 100}
    assert capped == 1 and len(long) == 99 + 98 + 97  # each row with the next three
    assert all(0 < b - a <= 3 for a, b in long)
    codes, capped = S.run_pairs(keys, owner, n, max_run=200)
    assert capped == 0 and len(pairs_of(codes, n)) == 3 + 100 * 99 // 2


def test_sketches_pair_only_close_anchors():
    """Items sharing a key pair only when their sketches differ in at most ``sketch_max`` bits;
    a row's two anchors under one key keep their own sketches, and a row never pairs with itself."""
    n = 100
    keys = np.array([5, 5, 5, 5, 7, 7], np.uint64)
    owner = np.array([1, 2, 3, 3, 4, 4], np.int64)
    sketch = np.array([0, 0b111, 2**64 - 1, 0b1, 0, 0], np.uint64)
    codes, _ = S.run_pairs(keys, owner, n, 64, sketch, sketch_max=3)
    assert pairs_of(codes, n) == {(1, 2), (1, 3), (2, 3)}  # 3 through its second anchor; 4 alone
    codes, _ = S.run_pairs(keys, owner, n, 64, sketch, sketch_max=1)
    assert pairs_of(codes, n) == {(1, 3)}
    packed = keys << np.uint64(S.OWNER_BITS) | owner.astype(np.uint64)
    assert np.array_equal(S.run_pairs_packed(packed, n, 64, sketch, 1)[0], codes)


def test_the_jobs_lsh_finds_what_lsh_candidates_says(tmp_path):
    """On real recordings (one speaker's syllables, whose anchors meet in bands, and real codec
    copies), the band files' pairs are exactly the pairs :func:`fingerprint.lsh_candidates` calls
    candidates (what bench/curate/duplicates_calibration.py measures recall with)."""
    utts = R.klettres_voices("lt")[:16] + R.librivox()[:2]
    paths = [u.path for u in utts] + [
        R.through_codec(utts[k].path, codec, tmp_path / f"c{k}.wav", gain_db=3.0, delay_s=0.2)
        for k, codec in ((0, "gsm"), (16, "mp3"))
    ]
    rows = [FP.fingerprint(R.read(p, 16000)[0]) for p in paths]
    assert all(r is not None for r in rows) and len(rows) == 20
    rows = np.stack(rows)
    p = params("duplicates")
    bits, bands, sketch_max = p.fingerprint_band_bits, p.fingerprint_bands, p.fingerprint_sketch_max_diff
    n = len(rows)
    got = set()
    lsh = S.lsh_bands(
        S.Rows([rows]), np.ones(n, bool), S.fingerprint_keys(bits), bits, bands, 64, str(tmp_path),
        S.fingerprint_sketches(bits), sketch_max,
    )  # fmt: skip
    for codes, _ in lsh:
        got |= pairs_of(codes, n)
    i, j = np.triu_indices(n, 1)
    want = FP.lsh_candidates(rows[i], rows[j], bits, bands, sketch_max)
    assert got == {(int(a), int(b)) for a, b in zip(i[want], j[want], strict=True)}
    loose = FP.lsh_candidates(rows[i], rows[j], bits, bands, 64)
    assert want.sum() < loose.sum()  # the sketches turn some of one speaker's pairs away
    assert FP.lsh_candidates(rows[[0, 16]], rows[[-2, -1]], bits, bands, sketch_max).all()  # the copies stay


def test_minhash_banding_is_datasketchs():
    from datasketch.lsh import _optimal_param

    for thr, perm in ((0.35, 128), (0.5, 64), (0.8, 256)):
        assert S.minhash_bands(thr, perm) == _optimal_param(thr, perm, 0.5, 0.5)


def test_exact_edges_tie_every_copy_to_the_first():
    sha = np.array([[1, 2, 3, 4], [9, 9, 9, 9], [1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4]], np.uint64)
    edges, rep = S.exact_edges(sha)
    assert sorted(map(tuple, edges.T.tolist())) == [(2, 0), (4, 0)]
    assert rep.tolist() == [True, True, False, True, False]


def shard_files(root, name, lines, fps, num_perm=16):
    """A shard as the measure job writes it, without units (no MinHash)."""
    write_jsonl(root / f"{name}.measures.jsonl", lines)
    np.save(root / f"{name}.minhash.npy", np.zeros((len(lines), num_perm), np.uint64))
    np.save(root / f"{name}.fingerprint.npy", np.stack(fps) if fps else np.zeros(0, FP.DTYPE))
    return [str(root / f"{name}.{k}") for k in ("measures.jsonl", "minhash.npy", "fingerprint.npy", "duplicates.jsonl")]


def line(id_, x, fp, snr=40.0):
    return {"id": id_, "pcm_sha256": pcm_sha256(x), "dnsmos_ovrl": 3.0, "snr_db": snr, "bandwidth_hz": 7000.0,
            "minhash": False, "fingerprint": fp is not None}  # fmt: skip


def test_the_job_over_shards_finds_exact_and_codec_copies(tmp_path):
    """Two shards of real recordings: an exact copy and a real MP3 copy (-6 dB, 0.3 s later) in the
    second shard are duplicates of the first shard's recording; the other recordings stay."""
    utts = R.librivox() + R.cards()
    audio = {f"u{k}": R.read(u.path, 16000)[0] for k, u in enumerate(utts)}
    mp3 = R.through_codec(utts[0].path, "mp3", tmp_path / "copy.wav", gain_db=-6.0, delay_s=0.3)
    audio["mp3"] = R.read(mp3, 16000)[0]
    audio["same"] = audio["u0"].copy()
    fp = {k: FP.fingerprint(x) for k, x in audio.items()}
    zero = FP.unpack(None)[1]
    a = [k for k in audio if k.startswith("u")][:6]
    b = [k for k in audio if k not in a]
    fa = shard_files(tmp_path, "shard-0000", [line(k, audio[k], fp[k]) for k in a], [fp[k] for k in a])
    fb = shard_files(tmp_path, "shard-0001", [line(k, audio[k], fp[k], 30.0) for k in b], [fp[k] or zero for k in b])
    report = stage.run_duplicates([fa[0], fb[0]], [fa[1], fb[1]], [fa[3], fb[3]], params("duplicates"), [fa[2], fb[2]])
    assert not list(read_jsonl(fa[3]))
    got = {d["id"]: d for d in read_jsonl(fb[3])}
    assert set(got) == {"mp3", "same"} and {d["duplicate_of"] for d in got.values()} == {"u0"}
    assert got["same"]["kind"] == "exact" and got["mp3"]["kind"] == "acoustic"
    assert got["mp3"]["similarity"] >= params("duplicates").acoustic_duplicate_score
    assert report["exact"] == 1 and report["acoustic"] == 1 and report["segments"] == len(audio)
    json.dumps(report)
    assert not list(tmp_path.glob(".duplicates-*"))  # the band files are gone


def test_a_copy_added_later_never_replaces_the_first_ingested_one(tmp_path):
    """Corpus growth: a run keeps a real MP3 copy (the only copy then); the clean original
    and an exact copy of it arrive later, in a new shard. Though cleaner, the original is the
    duplicate: the copy an earlier run kept stays kept, and the first shard's output is as it
    was. Without the earlier run's record, the cleaner original would have won."""
    utts = R.librivox()[:4]
    audio = {f"u{k}": R.read(u.path, 16000)[0] for k, u in enumerate(utts)}
    audio["mp3"] = R.read(R.through_codec(utts[0].path, "mp3", tmp_path / "copy.wav", delay_s=0.3), 16000)[0]
    fp = {k: FP.fingerprint(x) for k, x in audio.items()}
    old, new = ["mp3", "u1", "u2", "u3"], ["u0"]
    fa = shard_files(tmp_path, "shard-0000", [line(k, audio[k], fp[k], 20.0) for k in old], [fp[k] for k in old])
    seen, p = str(tmp_path / "seen.npy"), params("duplicates")
    stage.run_duplicates([fa[0]], [fa[1]], [fa[3]], p, [fa[2]], seen=seen)
    first = (tmp_path / "shard-0000.duplicates.jsonl").read_bytes()
    assert not list(read_jsonl(fa[3]))
    fb = shard_files(tmp_path, "shard-0001", [line(k, audio[k], fp[k], 40.0) for k in new], [fp[k] for k in new])
    ran = lambda seen: stage.run_duplicates([fa[0], fb[0]], [fa[1], fb[1]], [fa[3], fb[3]], p, [fa[2], fb[2]], seen)
    ran(seen)
    assert (tmp_path / "shard-0000.duplicates.jsonl").read_bytes() == first
    (dup,) = read_jsonl(fb[3])
    assert (dup["id"], dup["duplicate_of"], dup["kind"]) == ("u0", "mp3", "acoustic")
    second = [(tmp_path / f"shard-000{k}.duplicates.jsonl").read_bytes() for k in (0, 1)]
    ran(seen)  # a third run, both copies searched before: the one kept stays kept
    assert [(tmp_path / f"shard-000{k}.duplicates.jsonl").read_bytes() for k in (0, 1)] == second
    assert sorted(np.load(seen, allow_pickle=False)["run"].tolist()) == [1, 1, 1, 1, 2]  # u0: the second run's
    ran(None)  # with no record of what ran before, the cleaner copy wins
    assert [d["duplicate_of"] for d in read_jsonl(fa[3])] == ["u0"]


def unit_shard(root, name, units):
    """A shard of segments with S2S units (``units``: id -> unit sequence) and no fingerprint."""
    from speechprep.curate.duplicates import minhash_signature

    ids = list(units)
    pcm = {i: np.asarray(units[i], np.float32) / 1000 for i in ids}  # each its own audio, as far as hashes go
    write_jsonl(root / f"{name}.measures.jsonl", [line(i, pcm[i], None) | {"minhash": True} for i in ids])
    np.save(root / f"{name}.minhash.npy", np.stack([minhash_signature(units[i], 3, 128) for i in ids]))
    np.save(root / f"{name}.fingerprint.npy", np.zeros(len(ids), FP.DTYPE))
    return [str(root / f"{name}.{k}") for k in ("measures.jsonl", "minhash.npy", "fingerprint.npy", "duplicates.jsonl")]


def test_a_new_segment_tying_two_kept_ones_leaves_both_kept(tmp_path):
    """Corpus growth: two segments kept by a first run, unlike each other, and a later
    one whose units hold both (each pair of it and one of them at a Jaccard similarity of about
    0.5, over the 0.35 threshold): the later one is the copy, of the better of the two, and
    neither of the first two becomes a copy of the other; a fourth run with an unrelated
    segment changes none of the earlier outputs."""
    rng = np.random.default_rng(7)
    a, b, d = (rng.integers(0, 500, 300).tolist() for _ in range(3))
    shards = [unit_shard(tmp_path, "shard-0000", {"a": a, "b": b}), unit_shard(tmp_path, "shard-0001", {"c": a + b})]
    shards.append(unit_shard(tmp_path, "shard-0002", {"d": d}))
    seen, p = str(tmp_path / "seen.npy"), params("duplicates")

    def run(k):
        fs = shards[:k]
        stage.run_duplicates([f[0] for f in fs], [f[1] for f in fs], [f[3] for f in fs], p, [f[2] for f in fs], seen)
        return [(tmp_path / f"shard-000{j}.duplicates.jsonl").read_bytes() for j in range(k)]

    assert run(1) == [b""]
    got = run(2)
    (dup,) = read_jsonl(shards[1][3])
    assert got[0] == b"" and dup["id"] == "c" and dup["duplicate_of"] in ("a", "b") and dup["kind"] == "near"
    assert run(3) == [*got, b""]
    run_none = stage.run_duplicates(*[[f[k] for f in shards[:2]] for k in (0, 1, 3)], p, [f[2] for f in shards[:2]])
    assert run_none["near"] + run_none["linked"] == 2  # with no record, one of the first two is a copy too


def test_the_seen_record_holds_digests_and_reads_a_text_one(tmp_path):
    """The record of searched ids is 36 bytes an id (its digest, sorted and unique, whatever
    the ids' length, the run that first searched it, and its rows' digests); a record an
    earlier version wrote as ids and runs, as the ids' text, or as their digests alone, is read
    as the same ids (the last two searched by run 1), with no row digests."""
    ids = [f"spk{i % 7:02d}/utt{i:05d}_ß" for i in range(50)]
    table = S.Table(
        [np.array([i.encode("utf-8") for i in ids[:30]]), np.array([i.encode("utf-8") for i in ids[30:]])],
        np.array([0, 30, 50], np.int64),
        *([np.zeros((50, 4), np.uint64)] + [np.zeros(50)] * 3 + [np.zeros(50, bool)] * 2),
    )
    path = str(tmp_path / "seen.npy")
    S.Seen(np.zeros(0, S.Seen.DTYPE)).save_with(path, table)
    a = np.load(path, allow_pickle=False)
    assert a.dtype == S.Seen.ROWS and len(a) == 50 and (np.sort(a["id"]) == a["id"]).all() and (a["run"] == 1).all()
    seen = S.Seen.load(path)
    assert all(i in seen for i in ids) and "spk00/utt99999_ß" not in seen and len(seen) == 50
    np.save(tmp_path / "runs.npy", a[["id", "run"]].astype(S.Seen.RECORD))  # ids and runs alone
    assert S.Seen.load(str(tmp_path / "runs.npy")).run_of(ids[7]) == 1 and not S.Seen.load(path).sig.any()
    np.save(tmp_path / "text.npy", np.asarray(sorted(ids[:10]), dtype=str))
    old = S.Seen.load(str(tmp_path / "text.npy"))
    assert [i in old for i in ids] == [True] * 10 + [False] * 40
    old.save_with(path, table)  # the union, as digests; the ids it adds are the next run's
    assert [S.Seen.load(path).run_of(i) for i in ids] == [1] * 10 + [2] * 40
    now = S.Verified.empty(50)
    now.sig[:], now.fp[:] = np.arange(1, 51, dtype=np.uint64), np.arange(101, 151, dtype=np.uint64)
    S.Seen(S.Seen.of(x.encode("utf-8") for x in ids[::3])).save_with(path, table, now)  # merged with 17
    got = S.Seen.load(path)
    empty = {k: np.zeros((0, 2), "S16") if k.endswith("tried") else np.zeros(0, bool) for k in S.PAIR_ARRAYS}
    assert got.verified(table, empty).sig.tolist() == list(range(1, 51))
    assert got.fp[np.searchsorted(got.digests, S.Seen.of([ids[40].encode("utf-8")]))[0]] == 141
    np.save(tmp_path / "digests.npy", a["id"])  # a record of digests alone: run 1
    assert S.Seen.load(str(tmp_path / "digests.npy")).run_of(ids[3]) == 1
    np.save(tmp_path / "other.npy", np.array([b"ab", b"cd"]))  # not a record: empty, as a torn one
    assert len(S.Seen.load(str(tmp_path / "other.npy"))) == 0
    (tmp_path / "torn.npy").write_bytes(b"\x93NUMPY")
    assert len(S.Seen.load(str(tmp_path / "torn.npy"))) == 0 and len(S.Seen.load(str(tmp_path / "none.npy"))) == 0


def test_inputs_that_do_not_belong_together_are_refused(tmp_path):
    x = R.read(R.cards()[0].path, 16000)[0]
    fp = FP.fingerprint(x)
    m, mh, f, out = shard_files(tmp_path, "shard-0000", [line("a", x, fp)], [fp])
    p = params("duplicates")
    with pytest.raises(UsageError, match="as many"):
        stage.run_duplicates([m], [mh], [out], p, [])
    np.save(tmp_path / "wrong.npy", np.zeros((1, 8), np.float32))
    with pytest.raises(UsageError, match="not a fingerprint array"):
        stage.run_duplicates([m], [mh], [out], p, [str(tmp_path / "wrong.npy")])
    write_jsonl(m, [line("a", x, fp), line("b", x, fp)])
    with pytest.raises(UsageError, match="2 lines but its arrays have 1 rows"):
        stage.run_duplicates([m], [mh], [out], p, [f])


def test_a_grown_corpus_verifies_only_pairs_touching_new_rows(tmp_path):
    """Corpus growth: the pairs a run verified are kept beside its record, so the next run
    verifies only candidates that touch a new or changed row, and decides exactly as a run that
    verifies every pair again. Real recordings: a first shard holding a real GSM copy of one of
    them; a second shard, added later, with a real MP3 copy of another. Then the first shard's
    copy changes (its fingerprint becomes another recording's): its pairs are verified again."""
    import shutil

    utts = (R.librivox() + R.cards())[:5]
    audio = {f"u{k}": R.read(u.path, 16000)[0] for k, u in enumerate(utts)}
    audio["gsm"] = R.read(R.through_codec(utts[0].path, "gsm", tmp_path / "gsm.wav"), 16000)[0]
    audio["mp3"] = R.read(R.through_codec(utts[1].path, "mp3", tmp_path / "mp3.wav", delay_s=0.2), 16000)[0]
    fp = {k: FP.fingerprint(x) for k, x in audio.items()}
    p = params("duplicates")

    def corpus(root, shards):
        root.mkdir()
        return [shard_files(root, n, [line(k, audio[k], fp[k]) for k in ks], [fp[k] for k in ks]) for n, ks in shards]

    def run(fs, seen):
        r = stage.run_duplicates(*[[f[k] for f in fs] for k in (0, 1, 3)], p, [f[2] for f in fs], seen)
        return r["candidates"], [list(read_jsonl(f[3])) for f in fs]

    plan = [("shard-0000", ["u0", "u2", "u3", "gsm"]), ("shard-0001", ["u1", "u4", "mp3"])]
    kept, full = corpus(tmp_path / "kept", plan), corpus(tmp_path / "full", plan)
    for fs in (kept, full):
        first, _ = run(fs[:1], str(fs[0][0]).replace("shard-0000.measures.jsonl", "seen.npy"))
    assert first["acoustic_pairs"] == 1 and first["acoustic_candidates_verified"] >= 1
    seen_kept, seen_full = (str(tmp_path / d / "seen.npy") for d in ("kept", "full"))

    def grown(fs, seen, verify_all):
        if verify_all:  # as if the pairs had never been kept: every candidate verified again
            (tmp_path / "full" / "seen_pairs.npz").unlink()
        return run(fs, seen)

    (c_kept, out_kept), (c_full, out_full) = grown(kept, seen_kept, False), grown(full, seen_full, True)
    assert out_kept == out_full
    pairs = lambda out: {frozenset((d["id"], d["duplicate_of"])) for s in out for d in s}
    assert pairs(out_kept) == {frozenset(("gsm", "u0")), frozenset(("mp3", "u1"))}
    assert c_kept["acoustic_pairs_kept"] == 1 and c_full["acoustic_pairs_kept"] == 0
    assert c_kept["acoustic_candidates_verified"] < c_full["acoustic_candidates_verified"]
    again, _ = run(kept, seen_kept)
    assert again["acoustic_candidates_verified"] == 0 and again["acoustic_pairs_kept"] == 2
    # the GSM copy's row changes (its fingerprint now u2's): its pairs are verified again
    for d in ("kept", "full"):
        a = np.load(tmp_path / d / "shard-0000.fingerprint.npy")
        a[3] = fp["u2"]
        np.save(tmp_path / d / "shard-0000.fingerprint.npy", a)
    shutil.copy(tmp_path / "kept" / "seen.npy", tmp_path / "full" / "seen.npy")
    (c_kept, out_kept), (c_full, out_full) = grown(kept, seen_kept, False), grown(full, seen_full, True)
    assert out_kept == out_full and c_kept["acoustic_pairs_kept"] == 1  # mp3 ~ u1 kept, gsm's verified
    assert pairs(out_kept) == {frozenset(("mp3", "u1")), frozenset(("gsm", "u2"))}


def test_kept_judgements_equal_verifying_every_pair_when_chains_or_runs_change(tmp_path):
    """The kept candidates never decide what verifying every pair would not: with runs of equal
    band keys paired as chains (``max_run`` 2), a pair of two unchanged rows that becomes a
    candidate only because a row between them changed is verified; a kept pair that is no
    longer a candidate is not a pair; and after a run killed between writing its pairs and its
    record, the pairs are not read with the older record. Each time against the same state with
    the pairs file deleted (every candidate verified)."""
    import shutil

    from speechprep.io import npyio

    m = S.Match(jaccard=0.8, acoustic=0.5, fp_bits=24, fp_bands=42, fp_sketch_max=16, max_run=2)
    rng = np.random.default_rng(0)
    rand = lambda: rng.integers(0, 2**63, 64, dtype=np.uint64)  # 64 MinHash values: 5 bands of 11

    def run(root, rows):
        root.mkdir(exist_ok=True)
        write_jsonl(root / "m.jsonl", [{"id": i, "minhash": True, "fingerprint": False} for i, _ in rows])
        np.save(root / "s.npy", np.stack([r for _, r in rows]))
        np.save(root / "f.npy", np.zeros(len(rows), FP.DTYPE))
        S.run_job([str(root / "m.jsonl")], [str(root / "s.npy")], [str(root / "f.npy")], [str(root / "o.jsonl")], m,
                  str(root / "seen.npy"))  # fmt: skip
        return list(read_jsonl(root / "o.jsonl"))

    def both(name, rows):
        full = tmp_path / f"{name}_full"
        shutil.copytree(tmp_path / name, full)
        (full / "seen_pairs.npz").unlink()
        got = run(tmp_path / name, rows)
        assert got == run(full, rows), name
        return got

    a = rand()
    run(tmp_path / "chain", [("a", a), ("x", a.copy()), ("b", a.copy())])  # a-x, x-b: a-b never a candidate
    assert [d["id"] for d in both("chain", [("a", a), ("x", rand()), ("b", a.copy())])] == ["b"]

    b, x = a.copy(), a.copy()
    b[44:55], x[44:] = rand()[:11], rand()[:20]  # b: a's but in band 4 (J 0.83); x: bands 0-3 (J 0.69)
    run(tmp_path / "gone", [("a", a), ("x", rand()), ("b", b)])  # a ~ b verified and kept
    assert both("gone", [("a", a), ("x", x), ("b", b)]) == []  # x now between them in every shared band

    c = rand()
    run(tmp_path / "killed", [("a", a), ("b", a.copy()), ("c", c)])
    save_npy = npyio.save_npy
    try:  # the second run writes its pairs, then is killed before its record
        npyio.save_npy = lambda p, arr: (
            (_ for _ in ()).throw(KeyboardInterrupt) if str(p).endswith("seen.npy") else save_npy(p, arr)
        )
        with pytest.raises(KeyboardInterrupt):
            run(tmp_path / "killed", [("c", c)])
    finally:
        npyio.save_npy = save_npy
    assert [d["id"] for d in both("killed", [("a", a), ("b", a.copy()), ("c", c)])] == ["b"]
