"""The demo pipeline through curation: what it drops and why, speakers, what TTS then reads."""

import json

import numpy as np
import pytest
from conftest import NOT_DIARIZED, TRUTH, demo_models, jobs_run, read_jsonl, snakemake, write_config

pytestmark = pytest.mark.slow  # real snakemake runs

CONTRACT = (
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
)


def file_id(rel):
    return rel.replace("/", "__").rsplit(".", 1)[0]


def curated(res):
    kept = [x for p in sorted((res / "curate").glob("shard-*[0-9].jsonl")) for x in read_jsonl(p)]
    dropped = [x for p in sorted((res / "curate").glob("shard-*.rejects.jsonl")) for x in read_jsonl(p)]
    return kept, dropped


def test_damaged_variants_dropped_for_their_reason_clean_speech_kept(demo):
    work, _ = demo
    res = work / "results" / "demo"
    kept, dropped = curated(res)
    assert kept and not {x["id"] for x in kept} & {x["id"] for x in dropped}
    for line in kept:
        assert all(k in line for k in CONTRACT), sorted(set(CONTRACT) - set(line))
        assert line["tier"] in ("premium", "standard", "basic")
    reasons = {x["id"]: x for x in dropped}
    kept_ids = {x["id"] for x in kept}
    for rel, info in TRUTH["files"].items():
        fid = file_id(rel)
        if info.get("clean"):  # every clean phrase is kept
            for k in range(len(info["speech"])):
                assert f"{fid}_{k:04d}" in kept_ids, (rel, reasons.get(f"{fid}_{k:04d}"))
        elif info.get("curate") == "reject":
            for k in range(len(info["speech"])):
                r = reasons[f"{fid}_{k:04d}"]
                assert r["reason"] == info["reason"] and r["stage"] == "curate", (rel, r)
                if info["reason"] == "duplicate":  # of the same phrase of its source
                    assert r["duplicate_of"] == f"{file_id(info['variant_of'])}_{k:04d}"
        elif info.get("curate") == "near_duplicate":  # a noisy copy, an MP3 copy at another gain
            # the fingerprint ties each phrase to its source's (their truth intervals score 1.1-1.2, the
            # threshold is 0.42); asked of some phrase, as the VAD cuts the copy apart
            found = [k for k in range(len(info["speech"])) if f"{fid}_{k:04d}" in reasons]
            assert found, (rel, "no phrase found as a near duplicate")
            for k in found:
                r = reasons[f"{fid}_{k:04d}"]
                assert r["reason"] == "duplicate" and r["duplicate_of"] == f"{file_id(info['variant_of'])}_{k:04d}"
    summary = json.loads((res / "curate" / "summary.json").read_text(encoding="utf-8"))
    assert summary["kept"] == len(kept) and summary["rejected"] == len(dropped)
    assert sum(summary["rejects_by_reason"].values()) == len(dropped)
    assert sum(t["segments"] for t in summary["tiers"].values()) == len(kept)


def test_speakers_and_their_centroids(demo):
    work, _ = demo
    res = work / "results" / "demo"
    kept, _ = curated(res)
    speakers = read_jsonl(res / "curate" / "speakers.jsonl")
    assert {x["speaker"] for x in speakers} == {x["speaker"] for x in kept}
    for s in speakers:
        c = np.load(s["centroid"])
        assert c.shape == (256,) and abs(np.linalg.norm(c) - 1) < 1e-4
        assert s["n_segments"] == sum(x["speaker"] == s["speaker"] for x in kept)
    by_file = {}
    for x in kept:  # speakers are found per source file: a file's segments share one
        by_file.setdefault(x["file_id"], set()).add(x["speaker"])
    assert all(len(v) == 1 for v in by_file.values())
    by_voice = {}  # the four demo voices are four speakers: one per voice, a different one each
    for rel, info in TRUTH["files"].items():
        if info.get("clean"):
            by_voice.setdefault(info["voice"], set()).update(by_file[file_id(rel)])
    assert len(by_voice) == 4 and all(len(v) == 1 for v in by_voice.values()), by_voice
    assert len(set.union(*by_voice.values())) == 4, by_voice
    assert len(speakers) == 4, [(s["speaker"], s["n_segments"]) for s in speakers]


def tts_rejected(res):
    return [x for p in sorted((res / "tts").glob("shard-*.rejects.jsonl")) for x in read_jsonl(p)]


def test_tts_keeps_the_kept_segments_with_their_speaker_vectors(demo):
    work, _ = demo
    res = work / "results" / "demo"
    kept, dropped = curated(res)
    lines = [x for k in ("train", "val") for x in read_jsonl(res / "tts" / f"{k}_manifest.jsonl")]
    assert {x["id"] for x in lines} == {x["id"] for x in kept} - {x["id"] for x in tts_rejected(res)}
    assert not {x["id"] for x in lines} & {x["id"] for x in dropped}
    rows = {x["id"]: x for x in kept}
    for x in lines[:10]:  # the condition vector is the curation stage's, not recomputed
        k = rows[x["id"]]
        stored = np.load(k["embedding_file"])[k["embedding_row"]]
        assert np.array_equal(np.load(x["condition"]), stored)
        assert x["speaker"] == k["speaker"] and x["tier"] == k["tier"]


def test_annotations_binned_in_the_summary_and_captions_in_the_manifests(demo):
    """Curation's pitch, monotony and reverberation reach the TTS manifests with the SNR and
    the speaking rate; curate/summary.json bins them; each line's caption names its bins."""
    work, _ = demo
    res = work / "results" / "demo"
    annotations = json.loads((res / "curate" / "summary.json").read_text(encoding="utf-8"))["annotations"]
    assert annotations["bins"] == 7
    for k in ("pitch_mean", "pitch_std", "monotony", "reverb", "snr_db", "chars_per_s"):
        assert len(annotations["edges"][k]) == 6 and annotations["edges"][k] == sorted(annotations["edges"][k]), k
    assert 70 < annotations["medians"]["pitch_mean"] < 400 and annotations["by_speaker"]
    lines = [x for k in ("train", "val") for x in read_jsonl(res / "tts" / f"{k}_manifest.jsonl")]
    kept = {x["id"]: x for x in curated(res)[0]}
    for x in lines:
        assert x["speaking_rate"] > 0 and x["reverb"] == kept[x["id"]]["reverb"] > 0
        assert all(x[k] == kept[x["id"]][k] for k in ("pitch_mean", "pitch_std", "monotony", "snr_db"))
    described = [x["description"] for x in lines if x["description"]]
    assert len(described) >= 0.9 * len(lines) and all(d.startswith("A speaker speaks ") for d in described)
    stats = json.loads((res / "tts" / "stats.json").read_text(encoding="utf-8"))
    assert stats["captions"]["counts"]["described"] == len(described) and stats["speaking_rate_unit"] == "phonemes/s"


def test_a_threshold_change_reruns_decisions_not_measurements(tmp_path, demo, demo_copy):
    work, _ = demo
    base = {**demo_models(work), **NOT_DIARIZED}
    audio = demo_copy / "variants"
    write_config(tmp_path, {"v": {"audio_dir": str(audio), "shards": 1}}, **base)
    snakemake(tmp_path)
    measures = tmp_path / "results" / "v" / "curate" / "shard-0000.measures.jsonl"
    before = measures.read_bytes(), measures.stat().st_mtime_ns
    write_config(tmp_path, {"v": {"audio_dir": str(audio), "shards": 1}}, **base, curate={"min_snr_db": -20})
    _, out = snakemake(tmp_path)
    ran = {
        r: jobs_run(out, r)
        for r in (
            "curate_measure",
            "curate_speakers",
            "curate_duplicates",
            "curate_decide",
            "curate_summary",
            "tts_features",
            "tts_manifest",
        )
    }
    assert ran["curate_decide"] and ran["curate_summary"] and ran["tts_manifest"], out[-3000:]
    assert not ran["curate_measure"] and not ran["curate_speakers"] and not ran["curate_duplicates"]
    assert not ran["tts_features"]  # the features cover every measured segment; the manifests pick
    assert (measures.read_bytes(), measures.stat().st_mtime_ns) == before
    _, dropped = curated(tmp_path / "results" / "v")
    assert "low_snr" not in {x["reason"] for x in dropped}  # the 0 dB copy now fails a later check or is kept
