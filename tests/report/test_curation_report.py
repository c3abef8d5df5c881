"""The curation report (tables, cost of each check, examples, the self-contained page)
on synthetic curation outputs with real audio."""

import base64
import csv
import io
import json
import re

import numpy as np
import pytest
import soundfile as sf

from speechprep.report import curation as cr

THRESHOLDS = {"min_dnsmos_ovrl": 1.7, "min_snr_db": 12, "max_clipping_ratio": 0.001, "tier_standard": 2.8}


def seg(i, duration, **kw):
    return {"id": f"s{i:03d}", "offset": 0.5, "duration": duration, "text": "a b", **kw}


def test_table_hours_per_tier_and_reason_and_the_cost_of_each_check():
    kept = [seg(0, 3600.0, tier="premium"), seg(1, 1800.0, tier="basic"), seg(2, 1800.0, tier="basic")]
    dropped = [
        seg(3, 3600.0, reason="clipped", failed=["clipped", "low_snr"]),
        seg(4, 1800.0, reason="low_snr", failed=["low_snr"]),
        seg(5, 900.0, reason="duplicate"),  # a line without `failed` counts for its reason
    ]
    rows = {(r["kind"], r["name"]): r for r in cr.table(kept, dropped)}
    assert rows["kept", "premium"]["hours"] == 1.0 and rows["kept", "standard"]["segments"] == 0
    assert rows["kept", "basic"] == pytest.approx(
        {"kind": "kept", "name": "basic", "segments": 2, "hours": 1.0, "share_of_hours": 1.0 / 3.75}
    )
    assert rows["dropped", "clipped"]["hours_failing"] == 1.0 and rows["dropped", "clipped"]["hours_only"] == 0.0
    # low_snr drops 0.5 h itself, but 1.5 h fail it; turning it off gives back only the 0.5 h
    assert rows["dropped", "low_snr"]["hours"] == 0.5
    assert rows["dropped", "low_snr"]["hours_failing"] == 1.5 and rows["dropped", "low_snr"]["hours_only"] == 0.5
    assert rows["dropped", "duplicate"]["hours_only"] == 0.25
    assert sum(r["share_of_hours"] for r in rows.values()) == pytest.approx(1.0)
    # reasons by hours dropped, after the tiers
    assert [r["name"] for r in cr.table(kept, dropped)][3:] == ["clipped", "low_snr", "duplicate"]


def test_examples_spread_along_the_deciding_measure():
    rows = [seg(i, 1.0, snr_db=float(v)) for i, v in enumerate([5, 1, 9, 3, 7, 2, 8])]
    picked = cr.examples(rows, "snr_db", 3)
    assert [r["snr_db"] for r in picked] == [1.0, 5.0, 9.0]  # worst, middle, borderline
    assert cr.examples(rows[:2], "snr_db", 3) == sorted(rows[:2], key=lambda r: r["snr_db"])
    # without the measure: a stable pick by id hash, the same every time
    no_key = [seg(i, 1.0) for i in range(10)]
    assert cr.examples(no_key, "snr_db", 3) == cr.examples(list(reversed(no_key)), "snr_db", 3)
    assert len({r["id"] for r in cr.examples(no_key, None, 3)}) == 3


@pytest.fixture
def results(tmp_path):
    """A dataset's curation outputs over a real 44.1 kHz stereo source file."""
    sr = 44100
    t = np.arange(int(sr * 6.0)) / sr
    tone = 0.3 * np.sin(2 * np.pi * 440 * t)
    src = tmp_path / "src.wav"
    sf.write(src, np.stack([tone, tone], axis=1), sr)
    res = tmp_path / "results" / "ds"
    cur = res / "curate"
    cur.mkdir(parents=True)

    def line(i, **kw):
        return {**seg(i, 1.0 + 0.25 * i, audio_filepath=str(src)), "dnsmos_ovrl": 2.0 + 0.2 * i, **kw}

    kept = [line(i, tier="basic" if i < 4 else "standard", speaker="spk_a", snr_db=30.0) for i in range(6)]
    dropped = [line(6 + i, reason="low_snr", failed=["low_snr"], snr_db=float(i)) for i in range(4)]
    dropped.append({**line(10, reason="clipped", failed=["clipped"]), "audio_filepath": str(tmp_path / "gone.wav")})
    for name, rows in (("shard-0000.jsonl", kept), ("shard-0000.rejects.jsonl", dropped)):
        (cur / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    speakers = [{"speaker": "spk_a", "source": "manifest", "n_segments": 6, "hours": 0.01}]
    (cur / "speakers.jsonl").write_text(json.dumps(speakers[0]) + "\n", encoding="utf-8")
    return res, kept, dropped


def test_make_writes_the_table_plots_and_a_page_to_listen_to(results, tmp_path):
    res, kept, dropped = results
    out = tmp_path / "report"
    written = cr.make(res, THRESHOLDS, out)
    names = ["curation.csv", "curation_metrics.png", "speakers_by_hours.png", "diarization_turns.png", "curation.html"]
    assert [p.name for p in written] == names
    with open(out / "curation.csv", encoding="utf-8") as f:
        rows = {(r["kind"], r["name"]): r for r in csv.DictReader(f)}
    assert int(rows["kept", "basic"]["segments"]) == 4 and int(rows["kept", "standard"]["segments"]) == 2
    assert int(rows["dropped", "low_snr"]["segments"]) == 4 and int(rows["dropped", "clipped"]["segments"]) == 1
    for png in written[1:3]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    page = (out / "curation.html").read_text(encoding="utf-8")
    # 3 of 4 basic, 2 standard, 3 of 4 low_snr examples play; the moved file says why it cannot
    audio = re.findall(r'<audio [^>]*data-duration="([\d.]+)"><source src="data:audio/flac;base64,([^"]+)"', page)
    assert len(audio) == 3 + 2 + 3
    assert page.count("audio unavailable: missing") == 1
    by_duration = {f"{r['duration']:.3f}": r for r in kept + dropped}
    for duration, b64 in audio:
        x, sr = sf.read(io.BytesIO(base64.b64decode(b64)))
        assert sr == 16000 and x.ndim == 1  # as curation measured it: 16 kHz mono
        assert abs(len(x) - float(duration) * sr) <= 1 and duration in by_duration
    # low_snr examples are the worst, a middle one and the borderline, in that order
    low = page.split("dropped: low_snr")[1].split("<h3")[0]
    assert [float(v) for v in re.findall(r"<th>snr_db</th><td>([\d.]+)</td>", low)] == [0.0, 2.0, 3.0]
    assert "min_snr_db" in page and "<img alt='metrics' src='data:image/png;base64," in page
    assert "spk_a" in page


def test_diarization_rows_and_turns_on_a_timeline(results, tmp_path):
    """Where the diarization ran: hours cut, dropped multi_speaker, flagged overlap in the table,
    and the turns of the most changed files, one row per speaker (the RTTM's run ids)."""
    res, _, _ = results
    d = res / "diarize"
    d.mkdir()
    stats = [
        {
            "id": "talk a",
            "speech_s": 60.0,
            "cut": 3,
            "cut_s": 36.0,
            "multi_speaker": 1,
            "multi_speaker_s": 4.0,
            "overlap": 1,
            "overlap_s": 1.8,
            "trimmed_s": 0.2,
        },
        {
            "id": "calm",
            "speech_s": 120.0,
            "cut": 0,
            "cut_s": 0.0,
            "multi_speaker": 0,
            "multi_speaker_s": 0.0,
            "overlap": 0,
            "overlap_s": 0.0,
            "trimmed_s": 0.0,
        },
    ]
    (d / "shard-0000.stats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stats), encoding="utf-8")
    reject = {
        "id": "talk a_0003",
        "file_id": "talk a",
        "stage": "diarize",
        "reason": "multi_speaker",
        "offset": 40.0,
        "duration": 4.0,
    }
    (d / "shard-0000.rejects.jsonl").write_text(json.dumps(reject) + "\n", encoding="utf-8")
    # (start, duration, speaker): A, B with A over it (14-15.8 s: an overlap), A, a multi_speaker
    # segment (40-44 s), a speaker of this file alone
    turns = [(0.5, 11.5, "cluster_0000"), (12.0, 2.0, "cluster_0001"), (14.0, 1.8, "cluster_0001")]
    turns += [(14.0, 1.8, "cluster_0000"), (15.8, 4.2, "cluster_0001"), (21.0, 18.0, "cluster_0000")]
    turns += [(45.0, 10.0, "talk%20a#spk2")]
    rttm = "".join(f"SPEAKER talk%20a 1 {s:.3f} {t:.3f} <NA> <NA> {n} <NA> <NA>\n" for s, t, n in turns)
    (d / "shard-0000.rttm").write_text(rttm, encoding="utf-8")
    out = tmp_path / "report"
    cr.make(res, THRESHOLDS, out)
    with open(out / "curation.csv", encoding="utf-8") as f:
        rows = {(r["kind"], r["name"]): r for r in csv.DictReader(f)}
    assert float(rows["diarize", "cut"]["hours"]) == pytest.approx(0.01) and rows["diarize", "cut"]["segments"] == "3"
    assert float(rows["diarize", "multi_speaker"]["share_of_hours"]) == pytest.approx(4.0 / 180, abs=1e-6)
    assert float(rows["diarize", "overlap"]["hours"]) == pytest.approx(1.8 / 3600, abs=1e-6)
    assert rows["diarize", "trimmed"]["segments"] == ""
    png = out / "diarization_turns.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000
    page = (out / "curation.html").read_text(encoding="utf-8")
    assert "<img alt='turns' src='data:image/png;base64," in page and "multi_speaker" in page
    from speechprep.report.diarization import load, most_changed

    diar = load(res)
    assert most_changed(diar["stats"]) == ["talk a"]  # a file nothing happened to is not drawn
    assert {t[3] for t in diar["turns"]} == {"cluster_0000", "cluster_0001", "talk a#spk2"}  # decoded
