"""Ingest: ids, manifests, probing, sharding, accounting."""

import json
import os
import shutil

import numpy as np
import pytest
import soundfile as sf

from speechprep.errors import UsageError
from speechprep.ingest import plan as shard_plan
from speechprep.ingest import stage as ingest
from speechprep.ingest.params import IngestParams
from speechprep.io.jsonio import read_jsonl
from tests.support import DEMO, TRUTH, config


def run(tmp_path, ds, name="t", exclude=None):
    """Ingest ``ds`` (its keys over the ingest defaults, as a rule selects them)."""
    out = tmp_path / "out"
    cfg = {**config(), "datasets": {name: ds}, "exclude": exclude}
    p = IngestParams.from_config(cfg, name, name=name)
    summary = ingest.run(p, str(out / "manifest.jsonl"), str(out / "rejects.jsonl"), str(out / "shards"), threads=2)
    manifest = list(read_jsonl(out / "manifest.jsonl"))
    rejects = list(read_jsonl(out / "rejects.jsonl"))
    shards = {p.stem: list(read_jsonl(p)) for p in sorted((out / "shards").glob("*.jsonl"))}
    return summary, manifest, rejects, shards


def tone(path, seconds=0.5, sr=16000, channels=1):
    path.parent.mkdir(parents=True, exist_ok=True)
    x = 0.1 * np.sin(np.arange(int(seconds * sr)) / sr * 2 * np.pi * 220).astype(np.float32)
    sf.write(path, np.stack([x] * channels, 1) if channels > 1 else x, sr)


def test_demo_corpus_every_file_accounted(tmp_path):
    summary, manifest, rejects, shards = run(tmp_path, {"audio_dir": str(DEMO / "audio"), "shards": 3})
    audio_files = [k for k in TRUTH["files"]]
    assert summary["inputs"] == len(audio_files) == 31  # README.txt is not audio
    by_id = {r["id"]: r for r in rejects}
    for rel, info in TRUTH["files"].items():
        fid = ingest.derive_id(rel)
        if info["expect"] == "reject" and info["stage"] == "ingest":
            assert by_id[fid]["reason"] == info["reason"]
            assert by_id[fid]["stage"] == "ingest" and by_id[fid]["detail"]
        else:
            assert fid not in by_id
    ids = [m["id"] for m in manifest]
    assert len(ids) + len(rejects) == 31 and len(set(ids)) == len(ids)
    # shards partition the manifest
    assert sorted(x["id"] for s in shards.values() for x in s) == sorted(ids)
    assert list(shards) == ["shard-0000", "shard-0001", "shard-0002"]
    m = {x["id"]: x for x in manifest}
    st = m["edge_cases__stereo_8k"]
    assert (st["sample_rate"], st["channels"]) == (8000, 2)
    assert st["duration"] == pytest.approx(TRUTH["files"]["edge_cases/stereo_8k.wav"]["duration"], abs=0.01)
    assert all(os.path.isabs(x["audio_filepath"]) for x in manifest)


def test_ids_are_stable_and_collisions_resolved_deterministically(tmp_path):
    root = tmp_path / "corpus"
    for rel in ["a/b.wav", "a/b.flac", "a__b.wav", "c.wav"]:
        tone(root / rel)
    _, manifest, rejects, _ = run(tmp_path, {"audio_dir": str(root), "shards": 2})
    ids = sorted(m["id"] for m in manifest)
    assert not rejects and len(ids) == 4 and len(set(ids)) == 4
    assert "c" in ids
    colliding = [i for i in ids if i.startswith("a__b-")]
    assert len(colliding) == 3
    # the same corpus gives the same ids again, in another directory too
    _, again, _, _ = run(tmp_path / "again", {"audio_dir": str(root), "shards": 2})
    assert sorted(m["id"] for m in again) == ids


def test_same_id_same_shard_and_new_files_do_not_move_others():
    ids = [f"spk{i}/utt{j}" for i in range(20) for j in range(20)]
    a = {i: shard_plan.shard_index(i, 7) for i in ids}
    assert a == {i: shard_plan.shard_index(i, 7) for i in reversed(ids)}
    assert set(a.values()) == set(range(7))  # spread over every shard
    counts = np.bincount(list(a.values()))
    assert counts.min() > 0.5 * counts.mean()


def test_shard_count_from_hours_or_fixed():
    entries = [{"duration": 1800.0}] * 5  # 2.5 h
    assert shard_plan.shard_count(entries, None, 1.0) == 3
    assert shard_plan.shard_count(entries, 4, 1.0) == 4
    with pytest.raises(UsageError, match="shard_hours needs"):
        shard_plan.shard_count([{"duration": None}], None, 1.0)


def test_manifest_bad_lines_rejected_not_fatal(tmp_path):
    tone(tmp_path / "audio" / "x.wav")
    tone(tmp_path / "audio" / "y.wav", channels=2)
    lines = [
        json.dumps(
            {"audio_filepath": "audio/x.wav", "text": "héllo wörld", "speaker": "s1", "gender": "female"}
        ).encode(),
        b"",  # blank lines are not inputs
        b"{not json",
        json.dumps({"id": "nofile"}).encode(),
        json.dumps({"audio_filepath": "audio/y.wav", "duration": -3}).encode(),
        b'{"audio_filepath": "audio/y.wav", "text": "caf' + b'\xe9"}',  # latin-1, not UTF-8
        json.dumps({"id": "dup", "audio_filepath": "audio/y.wav"}).encode(),
        json.dumps({"id": "dup", "audio_filepath": str(tmp_path / "audio" / "x.wav")}).encode(),
        json.dumps({"id": "gone", "audio_filepath": "audio/missing.wav"}).encode(),
        json.dumps([1, 2]).encode(),
    ]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    summary, manifest, rejects, _ = run(tmp_path, {"manifest": str(tmp_path / "in.jsonl"), "shards": 2})
    assert summary["inputs"] == 9
    reasons = sorted((r["reason"], r.get("line")) for r in rejects)
    assert reasons == [
        ("bad_encoding", 6),
        ("duplicate_id", 8),
        ("malformed_line", 3),
        ("malformed_line", 4),
        ("malformed_line", 5),
        ("malformed_line", 10),
        ("missing", None),
    ]
    enc = next(r for r in rejects if r["reason"] == "bad_encoding")
    assert enc["id"] == 6 and "UTF-8" in enc["detail"]
    assert {m["id"] for m in manifest} == {"audio__x", "dup"}
    x = next(m for m in manifest if m["id"] == "audio__x")
    assert x["text"] == "héllo wörld" and x["speaker"] == "s1" and x["gender"] == "female"  # a caption's {who}
    assert x["audio_filepath"] == str(tmp_path / "audio" / "x.wav")
    dup = next(m for m in manifest if m["id"] == "dup")
    assert dup["channels"] == 2
    # rejects file is UTF-8 JSON throughout
    json.loads((tmp_path / "out" / "rejects.jsonl").read_text(encoding="utf-8").splitlines()[0])


def test_non_utf8_file_name_reported(tmp_path):
    root = tmp_path / "corpus"
    tone(root / "ok.wav")
    bad = os.path.join(os.fsencode(root), b"caf\xe9.wav")
    shutil.copy(root / "ok.wav", bad)
    _, manifest, rejects, _ = run(tmp_path, {"audio_dir": str(root), "shards": 1})
    assert [m["id"] for m in manifest] == ["ok"]
    assert len(rejects) == 1 and rejects[0]["reason"] == "bad_encoding"
    assert "\\xe9" in rejects[0]["audio_filepath"]


def test_probe_off_trusts_manifest_and_defers_unreadable(tmp_path):
    (tmp_path / "bad.wav").write_bytes(b"garbage")
    rows = [
        {"audio_filepath": str(tmp_path / "bad.wav"), "duration": 3.0},
        {"audio_filepath": str(tmp_path / "other.wav"), "duration": 4000.0},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary, manifest, rejects, shards = run(
        tmp_path, {"manifest": str(tmp_path / "in.jsonl"), "probe": False, "shard_hours": 1.0}
    )
    assert not rejects and len(manifest) == 2  # VAD catches them later
    assert summary["shards"] == 2  # 4003 s at 1 h per shard
    assert {m["duration"] for m in manifest} == {3.0, 4000.0}


def test_a_grown_corpus_keeps_every_file_in_its_shard(tmp_path):
    """New files fill a new shard; the old shards keep their bytes and mtime; a file gone
    from the corpus leaves its shard with a line in removed.jsonl."""
    root = tmp_path / "corpus"
    for i in range(6):
        tone(root / f"f{i}.wav")
    ds = {"audio_dir": str(root), "shards": 3}
    _, _, _, first = run(tmp_path, ds)
    shard_dir = tmp_path / "out" / "shards"
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in shard_dir.iterdir()}
    tone(root / "new.wav")
    tone(root / "new2.wav")
    summary, _, _, grown = run(tmp_path, ds)
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in shard_dir.iterdir()}
    assert {k: after[k] for k in before} == before  # not rewritten
    assert sorted(set(after) - set(before)) == ["shard-0003.jsonl"]
    assert [x["id"] for x in grown["shard-0003"]] == ["new", "new2"]  # mean size of a planned shard: 2 files
    assert summary["shards"] == 4
    # a file deleted: its shard alone changes, the ledger says so
    held = next(s for s, lines in first.items() if any(x["id"] == "f0" for x in lines))
    (root / "f0.wav").unlink()
    _, _, _, shrunk = run(tmp_path, ds)
    assert {s: [x["id"] for x in v] for s, v in shrunk.items() if s != held} == {
        s: [x["id"] for x in v] for s, v in grown.items() if s != held
    }
    assert "f0" not in {x["id"] for x in shrunk.get(held, [])}
    removed = list(read_jsonl(tmp_path / "out" / "removed.jsonl"))
    assert [(r["id"], r["reason"], r["by"]) for r in removed] == [("f0", "deleted", "ingest")]
    # replan deals everything out again by hash
    _, _, _, again = run(tmp_path, {**ds, "replan": True})
    assert len(again) == 3


def test_excluded_ids_and_files_leave_the_shards_with_a_ledger_line(tmp_path):
    """A takedown: an id and a file (relative to the audio_dir) listed under exclude are
    rejected `excluded`, leave their shards (the others keep their bytes), and removed.jsonl
    names them; listed before any run, a file is only rejected (nothing to remove)."""
    root = tmp_path / "corpus"
    for i in range(6):
        tone(root / "spk" / f"f{i}.wav")
    ds = {"audio_dir": str(root), "shards": 2}
    never = tmp_path / "never.txt"
    never.write_text("# never processed\nspk__f5\n", encoding="utf-8")
    _, _, rejects, first = run(tmp_path, ds, exclude=str(never))
    assert [(r["id"], r["reason"]) for r in rejects] == [("spk__f5", "excluded")]
    assert not (tmp_path / "out" / "removed.jsonl").exists()
    listed = tmp_path / "takedown.txt"
    listed.write_text("spk__f0\nspk/f1.wav\n\n", encoding="utf-8")
    _, manifest, rejects, after = run(tmp_path, ds, exclude=str(listed))
    assert sorted((r["id"], r["reason"]) for r in rejects) == [("spk__f0", "excluded"), ("spk__f1", "excluded")]
    assert {m["id"] for m in manifest} == {"spk__f2", "spk__f3", "spk__f4", "spk__f5"}
    removed = list(read_jsonl(tmp_path / "out" / "removed.jsonl"))
    assert sorted((r["id"], r["reason"]) for r in removed) == [("spk__f0", "excluded"), ("spk__f1", "excluded")]
    for name, lines in first.items():  # a shard that held neither keeps its lines
        if not {x["id"] for x in lines} & {"spk__f0", "spk__f1"}:
            assert after[name] == lines


def test_the_plan_follows_ids_and_durations_only(tmp_path):
    """The same corpus in another folder gets the same plan; new files are packed to
    shard_hours in id order; a changed sizing or a lost plan deals the files out again."""
    entries = [{"id": f"u{i:02d}", "duration": 900.0} for i in range(8)]  # 2 h
    sizing = {"shards": None, "shard_hours": 1.0}
    first = shard_plan.plan(entries, sizing, None, False, False)
    assert first.note == "first plan" and first.plan.count == 2
    saved = tmp_path / "plan.json"
    shard_plan.save(saved, first.plan)
    old = shard_plan.load(saved)
    assert old == first.plan
    grown = shard_plan.plan(
        [*entries, *({"id": f"v{i}", "duration": 1000.0} for i in range(5))], sizing, old, False, True
    )
    assert {i: grown.plan.shards[i] for i in old.shards} == old.shards
    assert [grown.plan.shards[f"v{i}"] for i in range(5)] == [2, 2, 2, 3, 3]  # 3,000 s fit in an hour, 4,000 do not
    assert grown.added == [f"v{i}" for i in range(5)] and grown.removed == []
    assert "may run again" in shard_plan.plan(entries, sizing, None, False, True).note
    resized = shard_plan.plan(entries, {"shards": None, "shard_hours": 0.5}, old, False, True)
    assert "sizing changed" in resized.note and resized.plan.count == 4


def test_surrogate_text_and_nul_path_rejected_good_lines_kept(tmp_path):
    tone(tmp_path / "audio" / "a.wav")
    tone(tmp_path / "audio" / "b.wav")
    lines = [
        b'{"audio_filepath": "audio/a.wav", "text": "ok"}',
        b'{"audio_filepath": "audio/b.wav", "text": "\\ud83d"}',  # valid JSON, lone surrogate
        b'{"audio_filepath": "audio/b\\u0000.wav"}',  # NUL byte in the path
        b'{"audio_filepath": "audio/b.wav", "id": "x\\u0000y"}',
        b'{"audio_filepath": "audio/b.wav", "id": "b", "speaker": "\\udfff"}',
    ]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    summary, manifest, rejects, _ = run(tmp_path, {"manifest": str(tmp_path / "in.jsonl"), "shards": 1})
    assert [m["id"] for m in manifest] == ["audio__a"]
    assert sorted((r["line"], r["reason"]) for r in rejects) == [
        (2, "bad_encoding"),
        (3, "malformed_line"),
        (4, "malformed_line"),
        (5, "bad_encoding"),
    ]
    assert "surrogate" in next(r for r in rejects if r["line"] == 2)["detail"]
    assert "NUL" in next(r for r in rejects if r["line"] == 3)["detail"]
    assert summary["inputs"] == 5


def test_utf8_bom_at_the_start_of_a_manifest_is_accepted(tmp_path):
    tone(tmp_path / "a.wav")
    (tmp_path / "in.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps({"audio_filepath": "a.wav"}).encode() + b"\r\n")
    _, manifest, rejects, _ = run(tmp_path, {"manifest": str(tmp_path / "in.jsonl"), "shards": 1})
    assert not rejects and [m["id"] for m in manifest] == ["a"]


def test_every_path_in_rejects_is_absolute(tmp_path):
    lines = [
        {"audio_filepath": "sub/x.wav", "duration": "3.0"},  # string duration: malformed
        {"audio_filepath": "sub/missing.wav"},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    _, _, rejects, _ = run(tmp_path, {"manifest": str(tmp_path / "in.jsonl"), "shards": 1})
    assert [r["reason"] for r in rejects] == ["malformed_line", "missing"]
    assert [r["audio_filepath"] for r in rejects] == [
        str(tmp_path / "sub" / "x.wav"),
        str(tmp_path / "sub" / "missing.wav"),
    ]


def _fuzz_lines(rng, good):
    """Lines of every kind a damaged or foreign manifest holds: random bytes, valid lines
    with bytes flipped, cut or spliced in, JSON edge values, deep nesting."""
    specials = [
        b"\x00",
        b"\xff",
        b"\xc3",
        b"\\ud83d",
        b"\\u0000",
        b"\xef\xbb\xbf",
        b"\r",
        b"NaN",
        b"Infinity",
        b"1e400",
        b"-0",
        b'"',
        b"\\",
        b"{",
        b"[",
        b"}",
        b"]",
        b"9" * 5000,
    ]
    for _ in range(400):
        kind = rng.integers(6)
        base = bytearray(good[rng.integers(len(good))])
        if kind == 0:
            yield bytes(rng.integers(0, 256, rng.integers(1, 80), dtype=np.uint8)).replace(b"\n", b" ")
        elif kind == 1:
            for _ in range(rng.integers(1, 4)):
                base[rng.integers(len(base))] = int(rng.integers(0, 256))
            yield bytes(base).replace(b"\n", b" ")
        elif kind == 2:
            yield bytes(base[: rng.integers(1, len(base))])
        elif kind == 3:
            at = rng.integers(len(base))
            yield bytes(base[:at]) + specials[rng.integers(len(specials))] + bytes(base[at:])
        elif kind == 4:
            yield b"[" * int(rng.integers(1, 100_000)) + b"]"
        else:
            key = [b"audio_filepath", b"id", b"duration", b"text", b"speaker", b"language"][rng.integers(6)]
            val = [
                b"null",
                b"true",
                b"[]",
                b"{}",
                b"0",
                b"-1",
                b"1e308",
                b'""',
                b'"\\ud800x"',
                b"99999999999999999999999",
            ][rng.integers(10)]
            yield bytes(base[:-1]) + b', "' + key + b'": ' + val + b"}"


def test_fuzzed_manifest_lines_end_accepted_or_rejected_never_crash(tmp_path):
    """Any bytes on a line: the line ends in the manifest or in rejects; ingest never crashes."""
    tone(tmp_path / "a.wav")
    good = [
        json.dumps({"audio_filepath": "a.wav", "id": f"g{i}", "text": "héllo", "duration": 0.5}).encode()
        for i in range(5)
    ]
    rng = np.random.default_rng(0)
    lines = list(_fuzz_lines(rng, good))
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    summary, manifest, rejects, _ = run(tmp_path, {"manifest": str(tmp_path / "in.jsonl"), "shards": 2})

    def blank(x):
        try:
            return not x.decode("utf-8").strip()
        except UnicodeDecodeError:
            return False

    inputs = sum(1 for x in lines if not blank(x))
    assert summary["inputs"] == inputs == len(manifest) + len(rejects)
    assert len(manifest) >= 5 and len(rejects) > 300
    for r in rejects:
        assert r["reason"] in {"malformed_line", "bad_encoding", "duplicate_id", "missing", "unreadable", "empty"}
        assert r["audio_filepath"] is None or os.path.isabs(r["audio_filepath"])
    text = (tmp_path / "out" / "rejects.jsonl").read_text(encoding="utf-8")
    assert all(json.loads(x) for x in text.splitlines())
