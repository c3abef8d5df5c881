"""The curation jobs end to end on the demo corpus: clean speech kept, damaged variants
dropped with their reason, accounting, summary and speakers, resume after SIGKILL."""

import json

import numpy as np
import pytest
from conftest import Run, as_file, asr_lines, damage, s2s_units, write_variant

from speechprep.io.audio import read_segment
from speechprep.io.jsonio import read_jsonl
from speechprep.io.npyio import load_npy


@pytest.mark.slow  # builds the demo S2S models for the units
def test_defaults_keep_clean_speech_and_drop_damaged_variants(tmp_path, models):
    clean = asr_lines()
    var_dir = tmp_path / "variants"
    var_dir.mkdir()
    base = clean[::8]  # one phrase of each voice
    variants, expect = [], {}
    for k, s in enumerate(base):
        x = read_segment(s)
        for name, audio, reason in (
            ("noise0", damage.add_noise(x, 0.0, seed=k), "low_snr"),
            ("clipped", damage.hard_clip(x, 20.0), "clipped"),
            ("band8k", damage.band_limit(x), "narrowband"),
        ):
            v = write_variant(var_dir, s, name, audio)
            variants.append(v)
            expect[v["id"]] = reason
    orig = clean[1]
    copy = as_file(var_dir, orig)  # the same samples in another file (another shard): an exact duplicate
    mp3 = write_variant(var_dir, orig, "mp3", damage.reencode(read_segment(orig), fmt="MP3", gain_db=-4.0))
    units = s2s_units({x["id"]: read_segment(x) for x in (orig, mp3)}, tmp_path)
    units[copy["id"]] = units[orig["id"]]
    shards = [clean[:16] + variants, [*clean[16:], copy, mp3]]
    run = Run(tmp_path, shards, units)
    summary = run.all(models)

    kept, rejects = run.kept(), run.rejects()
    reasons = {r["id"]: r for r in rejects}
    trio = {orig["id"], copy["id"], mp3["id"]}
    # every other clean phrase kept, with its measures and a tier
    assert {s["id"] for s in clean} - trio <= {k["id"] for k in kept}, [reasons.get(s["id"]) for s in clean]
    for k in kept:
        for f in (
            "dnsmos_sig",
            "dnsmos_bak",
            "dnsmos_ovrl",
            "dnsmos_p808",
            "lufs",
            "peak_dbfs",
            "clipping_ratio",
            "snr_db",
            "bandwidth_hz",
            "chars_per_s",
            "speaker",
            "speaker_distance",
            "tier",
            "text",
            "offset",
        ):
            assert k[f] is not None, (k["id"], f)
        assert k["tier"] in ("premium", "standard", "basic")
        emb = np.load(k["embedding_file"], mmap_mode="r")[k["embedding_row"]]
        assert emb.shape == (256,) and abs(float(np.linalg.norm(emb)) - 1) < 1e-4
    # every damaged variant dropped, with its reason and its measures
    for vid, reason in expect.items():
        assert reasons[vid]["reason"] == reason, reasons[vid]
        assert reasons[vid]["stage"] == "curate" and reasons[vid]["detail"]
        assert reasons[vid]["dnsmos_ovrl"] is not None and reasons[vid]["snr_db"] is not None
    # one of the three copies kept, the other two dropped as its duplicates
    kept_trio = [k["id"] for k in kept if k["id"] in trio]
    assert len(kept_trio) == 1
    for d in trio - set(kept_trio):
        assert reasons[d]["reason"] == "duplicate" and reasons[d]["duplicate_of"] == kept_trio[0], reasons[d]
    assert {reasons[d]["duplicate_kind"] for d in trio - set(kept_trio)} <= {"exact", "acoustic"}
    if kept_trio[0] != mp3["id"]:
        assert reasons[mp3["id"]]["duplicate_kind"] == "acoustic"  # the fingerprint ties the MP3 copy first
    # accounting: every input in exactly one of kept or rejects
    ids = [s["id"] for shard in shards for s in shard]
    assert sorted(ids) == sorted([k["id"] for k in kept] + [r["id"] for r in rejects])
    assert not {k["id"] for k in kept} & set(reasons)
    # summary and speakers
    assert summary["kept"] == len(kept) and summary["rejected"] == len(rejects) == summary["segments"] - len(kept)
    assert summary["rejects_by_reason"] == {
        r: sum(x["reason"] == r for x in rejects) for r in sorted({x["reason"] for x in rejects})
    }
    assert sum(t["segments"] for t in summary["tiers"].values()) == len(kept)
    assert abs(summary["kept_hours"] - sum(k["duration"] for k in kept) / 3600) < 1e-5
    speakers = list(read_jsonl(tmp_path / "curate" / "speakers.jsonl"))
    assert {s["speaker"] for s in speakers} == {k["speaker"] for k in kept}
    assert sum(s["n_segments"] for s in speakers) == len(kept)
    for s in speakers:
        c = load_npy(s["centroid"], np.float32, 1)
        assert c.shape == (256,) and abs(float(np.linalg.norm(c)) - 1) < 1e-4
    json.dumps(summary)


def test_audio_rejects_and_given_speakers(tmp_path, models):
    segs = asr_lines(4)
    bad = tmp_path / "corrupt.wav"
    bad.write_bytes(b"RIFF\x00\x00junk" * 10)
    extra = [
        {"id": "corrupt", "audio_filepath": str(bad), "offset": 0.0, "duration": 1.0, "text": "hi"},
        {"id": "tiny", "audio_filepath": segs[0]["audio_filepath"], "offset": 0.5, "duration": 0.1, "text": "a"},
    ]
    named = [{**s, "speaker": "alice" if k % 2 else "bob"} for k, s in enumerate(segs)]
    run = Run(tmp_path, [named + extra])
    run.all(models)
    reasons = {r["id"]: r["reason"] for r in run.rejects()}
    assert reasons["corrupt"] == "unreadable" and reasons["tiny"] == "too_short"
    kept = run.kept()
    assert sorted(k["id"] for k in kept) == sorted(s["id"] for s in segs)
    assert {k["id"]: k["speaker"] for k in kept} == {s["id"]: s["speaker"] for s in named}
    # the annotate job: every segment it could read has its annotations on its kept line
    unread = read_jsonl(tmp_path / "curate" / "shard-0000.annotation_rejects.jsonl")
    assert {r["id"]: r["reason"] for r in unread} == {"corrupt": "unreadable", "tiny": "too_short"}
    assert all(k["pitch_mean"] > 60 and k["reverb"] > 0 and k["monotony"] >= 0 for k in kept)
    clusters = json.loads((tmp_path / "curate" / "speaker_clusters.json").read_text(encoding="utf-8"))
    assert {c["speaker"]: c["source"] for c in clusters["centroids"]} == {"alice": "given", "bob": "given"}


def test_a_dataset_whose_curation_keeps_nothing_fails_its_summary_naming_the_reasons(tmp_path, models):
    """Real speech (the LibriVox reader) as a model that does not know it transcribes it: every
    line's confidence under the threshold. The summary job fails, with the reasons and counts."""
    from speechprep.errors import NothingKept
    from tests import real_speech

    lines = []
    for k, u in enumerate(real_speech.librivox()):
        x, sr = real_speech.read(u.path)
        lines.append(
            {
                "id": f"librivox_{k:04d}",
                "file_id": f"librivox_{k:04d}",
                "audio_filepath": str(u.path),
                "offset": 0.0,
                "duration": round(len(x) / sr, 3),
                "text": u.text,
                "confidence": 0.05,
            }
        )
    run = Run(tmp_path, [lines])
    with pytest.raises(NothingKept, match=r"curation kept none of 5 segments \(low_confidence: 5"):
        run.all(models)
    assert json.loads((tmp_path / "curate" / "summary.json").read_text(encoding="utf-8"))["kept"] == 0


def test_a_shard_run_again_measures_only_what_changed_and_no_model_for_the_rest(tmp_path, models, caplog):
    """The shard lost a segment: the others are taken from the job's reuse store but for
    those whose noise (the file's pauses next to them, read for the SNR) moved; the same
    shard again loads no model at all."""
    from conftest import measure_params

    from speechprep.curate.nonspeech import NonSpeech

    segs = asr_lines(4)
    Run(tmp_path, [segs]).measure(models=models)
    first = {x["id"]: x for x in read_jsonl(tmp_path / "curate" / "shard-0000.measures.jsonl")}
    kinds = ("embeddings", "minhash", "fingerprint")  # the stacked rows (a fingerprint: a structured row)
    stacked = lambda: {k: np.load(tmp_path / "curate" / f"shard-0000.{k}.npy", allow_pickle=False) for k in kinds}
    rows = {k: dict(zip(first, a)) for k, a in stacked().items()}
    seconds = measure_params().snr_noise_seconds
    was, now = NonSpeech(segs, seconds), NonSpeech(segs[:3], seconds)
    moved = [s["id"] for s in segs[:3] if was.pieces(s) != now.pieces(s)]
    assert len(moved) < 3
    caplog.set_level("INFO")
    Run(tmp_path, [segs[:3]]).measure(models=models)
    assert f"{3 - len(moved)} of 3 segments reused from the store" in caplog.text
    again = {x["id"]: x for x in read_jsonl(tmp_path / "curate" / "shard-0000.measures.jsonl")}
    assert {k: v for k, v in again.items() if k not in moved} == {k: first[k] for k in again if k not in moved}
    for kind, a in stacked().items():  # a reused segment's rows come back from the store's copies
        assert len(a) == 3
        for k, row in zip(again, a):
            assert row.tobytes() == rows[kind][k].tobytes() or k in moved, (kind, k)
    caplog.clear()
    Run(tmp_path, [segs[:3]]).measure(models=None)  # would load DNSMOS and Resemblyzer
    assert "3 of 3 segments reused from the store" in caplog.text and "loaded on" not in caplog.text
    assert {x["id"]: x for x in read_jsonl(tmp_path / "curate" / "shard-0000.measures.jsonl")} == again
    for kind, a in stacked().items():
        assert all(row.tobytes() == rows[kind][k].tobytes() or k in moved for k, row in zip(again, a)), kind
