"""The plan's memory probe of ingest (speechprep.workflow.probe): the job on a manifest of
synthetic lines, which it holds all at once: its memory grows with them."""

import json
import subprocess
import sys

from speechprep.core.config import defaults
from speechprep.jobs import job_params
from tests.support import REPO


def test_ingest_on_more_lines_holds_more_memory(tmp_path):
    cfg = defaults(REPO / "config" / "config.yaml")
    cfg["datasets"] = {"big": {"manifest": str(tmp_path / "unused.jsonl")}}
    params = job_params("ingest run", cfg, "big", name="big")
    got = []
    for n in (2000, 60000):
        out = tmp_path / f"{n}.json"
        cmd = [sys.executable, "-m", "speechprep", "probe", "ingest run", "--items", str(n)]
        cmd += ["--dir", str(tmp_path / "in"), "--params", params, "--out", str(out)]
        p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=600)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
        got.append(json.loads(out.read_text(encoding="utf-8")))
    assert [g["items"] for g in got] == [2000, 60000]
    assert got[1]["peak_rss_mb"] > got[0]["peak_rss_mb"] + 30, got  # about 2 KB a line
