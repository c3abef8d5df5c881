"""`snakemake --report` after a run: a self-contained HTML report with the stage plots."""

import csv
import re
import subprocess

import pytest
from conftest import DEMO_SHARDS, snakemake

from tests.support import REPO, Browser, chromium

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
        "curation.html",
        "curation_metrics.png",
        "speakers_by_hours.png",
        "diarization_turns.png",
        "curation.csv",
        "annotations.html",
        "annotations.png",
    ):
        assert name in html, name
    assert len(html) > 100_000  # the plots are embedded, not linked
    with open(work / "results" / "demo" / "report" / "stages.csv", encoding="utf-8") as f:
        rows = {r["stage"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"vad", "diarize", "music", "asr", "s2s", "curate", "tts"}  # the demo is diarized
    assert all(int(r["shard_jobs"]) == DEMO_SHARDS and float(r["job_seconds"]) > 0 for r in rows.values())
    assert int(rows["vad"]["rejected"]) == 4
    # curation's count is every segment it dropped, as its rejects files list them
    curate = work / "results" / "demo" / "curate"
    dropped = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in curate.glob("shard-*.rejects.jsonl"))
    assert dropped > 0 and int(rows["curate"]["rejected"]) == dropped


def test_report_after_a_local_run(demo):
    check_report(demo[0])


# Run in the loaded page: waits until every <audio> has its metadata (or an
# error) and the first one plays, then says what the browser saw.
PROBE = """(async () => {
  const tables = {};
  document.querySelectorAll('table[class]').forEach(t => {
    tables[t.className] = (tables[t.className] || 0) + t.tBodies[0].rows.length; });
  const audios = [...document.querySelectorAll('audio')];
  const audio = await Promise.all(audios.map(a => new Promise(done => {
    if (a.readyState >= 1) return done({expected: +a.dataset.duration, duration: a.duration});
    a.addEventListener('loadedmetadata', () => done({expected: +a.dataset.duration, duration: a.duration}));
    a.addEventListener('error', () => done({error: a.error && a.error.code}), true);
    a.load();
  })));
  const first = audios[0];
  first.muted = true;
  const playing = await new Promise(done => {
    first.addEventListener('playing', () => done(true), {once: true});
    first.play().catch(e => done(String(e)));
  });
  return {tables, audio, playing};
})()"""


def test_curation_page_in_a_browser(demo, tmp_path):
    """The listening page in headless Chromium: it loads, its tables are filled, every
    <audio> decodes to its segment's duration and one plays; a screenshot is kept."""
    work = demo[0]
    report = work / "results" / "demo" / "report"
    page = report / "curation.html"
    text = page.read_text(encoding="utf-8")
    assert "src=" in text and "http" not in re.sub(r'data:[^"\']*', "", text)  # nothing fetched
    browser = Browser(chromium(), tmp_path / "profile", "--autoplay-policy=no-user-gesture-required")
    try:
        browser.open(page.as_uri())
        seen = browser.evaluate(PROBE)
        shot = report / "curation_screenshot.png"
        browser.screenshot(shot)
    finally:
        browser.close()
    with open(report / "curation.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert seen["tables"]["summary"] == len(rows) > 3
    assert seen["tables"]["thresholds"] > 5 and seen["tables"]["speakers"] >= 1
    # one example group per non-empty tier and drop reason, up to 3 segments each (the
    # diarization's rows have none: its segments are counted, not curated)
    expected = sum(min(3, int(r["segments"])) for r in rows if r["kind"] in ("kept", "dropped"))
    assert len(seen["audio"]) == expected
    for a in seen["audio"]:
        assert "error" not in a, a
        assert abs(a["duration"] - a["expected"]) < 0.02, a
    assert seen["playing"] is True
    # the screenshot shows a page, not a blank window: many non-white pixels
    inked = subprocess.run(
        [str(REPO / ".venvs/report/bin/python"), "-c", INKED, str(shot)], capture_output=True, text=True, check=True
    ).stdout
    assert float(inked) > 0.05, inked


def test_annotations_page_in_a_browser(demo, tmp_path):
    """The annotations page in headless Chromium: its caption tables are filled, and the
    lowest and highest pitch, speaking rate and reverberation (2 segments each) play."""
    page = demo[0] / "results" / "demo" / "report" / "annotations.html"
    browser = Browser(chromium(), tmp_path / "profile", "--autoplay-policy=no-user-gesture-required")
    try:
        browser.open(page.as_uri())
        seen = browser.evaluate(PROBE)
    finally:
        browser.close()
    assert seen["tables"]["captions"] >= 1 and seen["tables"]["common"] >= 1
    assert len(seen["audio"]) == 3 * 2 * 2 and seen["playing"] is True
    for a in seen["audio"]:
        assert "error" not in a and abs(a["duration"] - a["expected"]) < 0.02, a
    text = page.read_text(encoding="utf-8")
    assert "<th>caption</th><td>A speaker speaks " in text and "<th>phonemes</th>" in text


INKED = """import sys
import numpy as np
from PIL import Image
a = np.asarray(Image.open(sys.argv[1]).convert("L"))
print((a < 200).mean())
"""
