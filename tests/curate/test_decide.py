"""Decisions: thresholds -> reasons, tiers, accounting; a threshold change touches no measurement."""

import hashlib
from dataclasses import replace

import pytest
from conftest import Run, asr_lines, damage, params, write_variant

from speechprep.curate.decide import MEASURED, ORDER, decide, failures, tier
from speechprep.io.audio import read_segment
from speechprep.io.jsonio import read_jsonl

GOOD = {
    "id": "a",
    "audio_filepath": "/x.wav",
    "offset": 0.5,
    "duration": 2.0,
    "text": "hello there",
    "dnsmos_sig": 3.5,
    "dnsmos_bak": 4.0,
    "dnsmos_ovrl": 3.4,
    "dnsmos_p808": 3.6,
    "lufs": -20.0,
    "peak_dbfs": -3.0,
    "clipping_ratio": 0.0,
    "dc_offset": 0.0,
    "snr_db": 30.0,
    "bandwidth_hz": 8000.0,
    "chars_per_s": 12.0,
    "words_per_s": 2.5,
    "text_unit_ratio": 0.5,
    "n_units": 100,
    "pcm_sha256": "0" * 64,
}
P = params("decide")


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"clipping_ratio": 0.05}, "clipped"),
        ({"bandwidth_hz": 3900.0}, "narrowband"),
        ({"snr_db": 2.0}, "low_snr"),
        ({"dnsmos_ovrl": 1.2}, "low_quality"),
        ({"chars_per_s": 45.0}, "speaking_rate"),
        ({"chars_per_s": 1.0}, "speaking_rate"),
        ({"confidence": 0.2}, "low_confidence"),
    ],
)
def test_each_threshold_gives_its_reason(change, reason):
    ok, line = decide({**GOOD, **change}, "s1", 0.1, None, P)
    assert not ok and line["reason"] == reason and line["failed"] == [reason]
    assert line["stage"] == "curate" and line["id"] == "a" and line["audio_filepath"] == "/x.wav"
    given = {**GOOD, **change}
    assert all(line[k] == v for k, v in given.items() if k in MEASURED)  # the measures travel with the reject
    assert line["duration"] == 2.0 and line["speaker"] == "s1"


def test_duplicate_and_speaker_outlier():
    ok, line = decide(GOOD, "s1", 0.1, {"duplicate_of": "b", "kind": "near", "similarity": 0.8}, P)
    assert not ok and line["reason"] == "duplicate" and line["duplicate_of"] == "b"
    assert line["duplicate_kind"] == "near" and line["duplicate_similarity"] == 0.8
    ok, line = decide(GOOD, "s1", P.max_speaker_distance + 0.01, None, P)
    assert not ok and line["reason"] == "speaker_outlier" and line["speaker_distance"] > P.max_speaker_distance


def test_first_reason_in_order_and_all_listed():
    bad = {**GOOD, "snr_db": 0.0, "dnsmos_ovrl": 1.0, "clipping_ratio": 0.5}
    assert [r for r, _ in failures(bad, 0.9, "b", P)] == [
        "clipped",
        "low_snr",
        "low_quality",
        "duplicate",
        "speaker_outlier",
    ]
    assert set(ORDER) == {
        "overlap",
        "clipped",
        "narrowband",
        "background_music",
        "low_snr",
        "low_quality",
        "transcript_mismatch",
        "repetitive_text",
        "wrong_language",
        "speaking_rate",
        "low_confidence",
        "duplicate",
        "speaker_outlier",
    }


def test_an_overlap_is_dropped_for_tts_whatever_its_measures():
    """A piece the diarization flagged (two voices at once; ASR kept it, flagged) never reaches TTS."""
    line = {**GOOD, "diarize_speaker": "spk0", "overlap": True, "overlap_speaker": "spk1"}
    ok, out = decide(line, "s1", 0.1, None, P)
    assert not ok and out["reason"] == "overlap" and out["failed"] == ["overlap"]
    assert "spk0 and spk1" in out["detail"] and out["duration"] == 2.0
    assert decide({**GOOD, "diarize_speaker": "spk0"}, "s1", 0.1, None, P)[0]  # one voice: kept


def test_null_turns_a_check_off_and_missing_measures_fail_nothing():
    off = params("decide", min_snr_db=None, min_confidence=None)
    assert decide({**GOOD, "snr_db": -5.0, "confidence": 0.0}, "s", 0.1, None, off)[0]
    assert decide({**GOOD, "text_unit_ratio": None, "snr_db": None}, "s", None, None, P)[0]
    assert (
        decide({**GOOD, "text_unit_ratio": 9.0}, "s", 0.1, None, params("decide", max_text_unit_ratio=2.0))[1]["reason"]
        == "speaking_rate"
    )


def test_tiers():
    assert tier(P.tier_premium, P) == "premium" and tier(P.tier_premium - 1e-6, P) == "standard"
    assert tier(P.tier_standard, P) == "standard" and tier(P.tier_standard - 1e-6, P) == "basic"
    ok, line = decide({**GOOD, "dnsmos_ovrl": 2.0}, "s", 0.1, None, P)
    assert ok and line["tier"] == "basic" and line["speaker_distance"] == 0.1
    assert {k: line[k] for k in GOOD} == {**GOOD, "dnsmos_ovrl": 2.0}  # the segment's fields and measures


def _digests(root):
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / "curate").glob("*"))
        if p.is_file() and (".measures." in p.name or p.suffix == ".npy" or ".measure_rejects." in p.name)
    }


def test_threshold_change_reruns_only_the_decision(tmp_path, models):
    segs = asr_lines(6)
    noisy = write_variant(tmp_path, segs[0], "noise5", damage.add_noise(read_segment(segs[0]), 5.0))
    run = Run(tmp_path, [[*segs, noisy]])
    run.measure(models=models)
    run.speakers()
    run.duplicates()
    before = _digests(tmp_path)
    assert len(before) == 5  # measures, measure_rejects, embeddings, minhash, fingerprint
    run.decide()
    strict = {r["id"]: r["reason"] for r in run.rejects()}
    assert strict == {noisy["id"]: "low_snr"}
    first = (tmp_path / "curate" / "shard-0000.jsonl").read_bytes()
    # looser thresholds: the noisy variant is kept; the measurements are the same files
    run.decide(params("decide", min_snr_db=None, min_dnsmos_ovrl=None))
    assert run.rejects() == [] and len(run.kept()) == 7
    assert _digests(tmp_path) == before
    # and the decision is a function of measurements and thresholds alone
    run.decide()
    assert (tmp_path / "curate" / "shard-0000.jsonl").read_bytes() == first
    kept = {k["id"]: k for k in read_jsonl(tmp_path / "curate" / "shard-0000.jsonl")}
    assert set(kept) | set(strict) == {s["id"] for s in [*segs, noisy]} and not set(kept) & set(strict)


def test_an_excluded_speaker_leaves_the_kept_lines_and_the_ledger_says_so(tmp_path):
    """A takedown of a speaker: every segment of a speaker listed in the run's exclude
    file is rejected `excluded` by the decide job (no model runs), the others are kept as
    they were, and the summary job records each in the dataset's removed.jsonl once."""
    from speechprep.curate import stage
    from speechprep.io.jsonio import write_jsonl

    lines = [{**GOOD, "id": f"seg{k}"} for k in range(4)]
    write_jsonl(tmp_path / "m.jsonl", lines)
    write_jsonl(
        tmp_path / "s.jsonl",
        [{"id": x["id"], "speaker": f"s{k % 2}", "speaker_distance": 0.1} for k, x in enumerate(lines)],
    )
    for f in ("d.jsonl", "mr.jsonl"):
        write_jsonl(tmp_path / f, [])
    (tmp_path / "exclude.txt").write_text("# asked to be removed\ns1\n", encoding="utf-8")
    inputs = [str(tmp_path / f) for f in ("m.jsonl", "mr.jsonl", "s.jsonl", "d.jsonl")]
    out, rej = tmp_path / "out.jsonl", tmp_path / "rej.jsonl"
    stage.run_decide(*inputs, str(out), str(rej), P)
    everyone = out.read_bytes()
    stage.run_decide(*inputs, str(out), str(rej), P, str(tmp_path / "exclude.txt"))
    assert [x["id"] for x in read_jsonl(out)] == ["seg0", "seg2"]
    assert {(r["id"], r["reason"]) for r in read_jsonl(rej)} == {("seg1", "excluded"), ("seg3", "excluded")}
    kept_before = [x for x in everyone.decode("utf-8").splitlines() if '"speaker": "s0"' in x]
    assert out.read_text(encoding="utf-8").splitlines() == kept_before  # the others as they were
    (tmp_path / "clusters.json").write_text('{"centroids": []}', encoding="utf-8")
    ledger = tmp_path / "removed.jsonl"
    for _ in range(2):  # a rerun of the summary adds nothing
        stage.run_summary([str(out)], [str(rej)], str(tmp_path / "clusters.json"), str(tmp_path / "sum.json"),
                          str(tmp_path / "spk.jsonl"), params("summary"), str(ledger))  # fmt: skip
    assert sorted((r["id"], r["reason"], r["by"]) for r in read_jsonl(ledger)) == [
        ("seg1", "excluded", "curate"),
        ("seg3", "excluded", "curate"),
    ]


def test_music_under_the_speech_is_dropped_as_background_music_and_measured():
    """A line whose music_prob (the music stage's) is over max_music_prob is dropped
    background_music before the SNR and DNSMOS checks, which music misleads; a line without
    one (the music stage off) fails nothing; a kept line carries its figure."""
    ok, out = decide({**GOOD, "music_prob": 0.9, "snr_db": 5.0}, "s1", 0.1, None, P)
    assert not ok and out["reason"] == "background_music" and out["failed"][:2] == ["background_music", "low_snr"]
    assert out["music_prob"] == 0.9 and "max_music_prob" in out["detail"]
    ok, out = decide({**GOOD, "music_prob": 0.1}, "s1", 0.1, None, P)
    assert ok and out["music_prob"] == 0.1
    assert decide(GOOD, "s1", 0.1, None, P)[0]
    off = replace(P, max_music_prob=None)
    assert decide({**GOOD, "music_prob": 0.99}, "s1", 0.1, None, off)[0]
