"""The curation report of a verified dataset: hours kept as a function of the WER threshold."""

import csv
import json

import pytest

from speechprep.report import curation as cr
from speechprep.report import wer

T = {"max_wer": 0.25, "max_cer": 0.15, "max_edge_chars": 6}


def seg(i, hours, **kw):
    return {"id": f"s{i}", "audio_filepath": "/nonexistent/s.wav", "offset": 0.0, "duration": hours * 3600,
            "text": "a b", **kw}  # fmt: skip


def lines():
    kept = [
        seg(0, 1.0, wer=0.0, cer=0.0, tier="basic"),
        seg(1, 2.0, wer=0.2, cer=0.1, tier="basic"),
        seg(2, 0.5, tier="basic"),
    ]  # not verified: kept at every threshold
    dropped = [
        seg(3, 4.0, wer=0.4, cer=0.1, reason="transcript_mismatch", failed=["transcript_mismatch"]),
        seg(4, 8.0, wer=0.6, cer=0.5, reason="transcript_mismatch", failed=["transcript_mismatch"]),  # CER too
        seg(5, 16.0, wer=0.1, cer=0.0, reason="low_snr", failed=["low_snr"]),  # fails another check
        seg(
            6, 32.0, wer=0.9, cer=0.1, edge_end_deleted=9, reason="transcript_mismatch", failed=["transcript_mismatch"]
        ),  # edge characters too
    ]
    return kept, dropped


def test_hours_kept_by_wer_threshold():
    kept, dropped = lines()
    rows = {r["name"]: r for r in wer.kept_by_wer(kept, dropped, T)}
    assert rows["0"]["hours"] == pytest.approx(1.5) and rows["0"]["segments"] == 2
    assert rows["0.2"]["hours"] == pytest.approx(3.5)
    assert rows["0.25"]["hours"] == pytest.approx(3.5)  # what curation kept at max_wer 0.25
    assert rows["0.4"]["hours"] == pytest.approx(7.5) and rows["1"]["hours"] == pytest.approx(7.5)
    assert rows["off"]["hours"] == pytest.approx(7.5)  # seg 4 (CER), 5 (low_snr), 6 (edges) never come back
    assert rows["0.4"]["share_of_hours"] == pytest.approx(7.5 / 63.5)
    assert wer.kept_by_wer([seg(0, 1.0, tier="basic")], [], T) == []  # nothing verified: no section


def test_the_page_and_the_table_show_it(tmp_path):
    kept, dropped = lines()
    res = tmp_path / "results" / "ds"
    (res / "curate").mkdir(parents=True)
    for name, rows in (("shard-0000.jsonl", kept), ("shard-0000.rejects.jsonl", dropped)):
        (res / "curate" / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cr.make(res, T, tmp_path / "report")
    with open(tmp_path / "report" / "curation.csv", encoding="utf-8") as f:
        by_wer = {r["name"]: r for r in csv.DictReader(f) if r["kind"] == wer.KIND}
    assert float(by_wer["0.25"]["hours"]) == pytest.approx(3.5) and len(by_wer) == len(wer.GRID) + 1
    page = (tmp_path / "report" / "curation.html").read_text(encoding="utf-8")
    assert "Hours kept by WER threshold" in page and "<img alt='kept by WER' src='data:image/png;base64," in page
    assert "dropped: transcript_mismatch" in page
