"""`snakemake --report` after a run: a self-contained HTML report with the stage plots."""

import csv

import pytest
from conftest import snakemake

pytestmark = pytest.mark.slow  # real snakemake runs


def check_report(work, out_name="report.html"):
    snakemake(work, "--report", str(work / out_name))
    html = (work / out_name).read_text(encoding="utf-8", errors="replace")
    for name in (
        "duration_hist.png",
        "speech_ratio_hist.png",
        "segments_per_file.png",
        "rejects_by_reason.png",
        "throughput.png",
        "stages.csv",
    ):
        assert name in html, name
    assert len(html) > 100_000  # the plots are embedded, not linked
    with open(work / "results" / "demo" / "report" / "stages.csv", encoding="utf-8") as f:
        rows = {r["stage"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"vad", "asr", "s2s", "curate", "tts"}
    assert all(int(r["shard_jobs"]) == 3 and float(r["job_seconds"]) > 0 for r in rows.values())
    assert int(rows["vad"]["rejected"]) == 4
    # curation's count is every segment it dropped, as its rejects files list them
    curate = work / "results" / "demo" / "curate"
    dropped = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in curate.glob("shard-*.rejects.jsonl"))
    assert dropped > 0 and int(rows["curate"]["rejected"]) == dropped


def test_report_after_a_local_run(demo):
    check_report(demo[0])
