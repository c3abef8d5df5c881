"""What the tests of every stage share: the demo corpus and its truth, segments of it,
stage parameters from config/config.yaml. Importable from any stage's venv."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "resources" / "demo"
TRUTH = json.loads((DEMO / "truth.json").read_text(encoding="utf-8"))


def file_id(rel: str) -> str:
    """The id ingest derives from a demo path (``us_male/clip01.wav`` -> ``us_male__clip01``)."""
    return rel.replace("/", "__").rsplit(".", 1)[0]


def demo_file(rel: str) -> dict:
    """A manifest entry of a demo file."""
    return {"id": file_id(rel), "audio_filepath": str(DEMO / "audio" / rel)}


def demo_segments(n: int | None = None, pad: float = 0.0, text: bool = False, voice: bool = False) -> list[dict]:
    """The clean demo clips' spoken phrases as VAD segments (``pad`` s added on each
    side), optionally with their true ``text`` and the ``voice``."""
    segs = []
    for rel, info in sorted(TRUTH["files"].items()):
        if not info.get("clean"):
            continue
        for k, sp in enumerate(info["speech"]):
            seg = {
                "id": f"{file_id(rel)}_{k:04d}",
                "file_id": file_id(rel),
                "audio_filepath": str(DEMO / "audio" / rel),
                "offset": round(sp["start"] - pad, 3),
                "duration": round(sp["end"] - sp["start"] + 2 * pad, 3),
            }
            if text:
                seg["text"] = sp["text"]
            if voice:
                seg["voice"] = info["voice"]
            segs.append(seg)
    return segs[:n] if n else segs


def mark_slow(items, fixtures: set[str]) -> None:
    """For a suite's ``pytest_collection_modifyitems``: a test that uses one of
    ``fixtures`` (a trained or built model, a legacy fixture venv) is ``slow``,
    so ``make test-fast`` leaves it out."""
    import pytest

    for item in items:
        if fixtures & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def kill_when_checkpointed(proc, checkpoint, n, timeout=300):
    """SIGKILL ``proc``'s process group (start it with ``start_new_session=True``) once
    the job's resume file ``checkpoint`` holds ``n`` finished items (lines after its
    fingerprint line); returns how many it held."""
    deadline = time.monotonic() + timeout
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpoint.exists():
            done = checkpoint.read_text(encoding="utf-8").count("\n") - 1
            if done >= n:
                break
        time.sleep(0.02)
    assert proc.poll() is None, "the shard finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the whole group (a snakemake run and its job) at once
    proc.wait()
    return done


def chromium() -> str:
    """Path of Debian's headless Chromium for the browser tests; installed with apt-get
    when missing and running as root (as CI does), else the test is skipped."""
    import shutil
    import subprocess

    import pytest

    path = shutil.which("chromium")
    if path is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, capture_output=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=False, capture_output=True, env=env)
        path = shutil.which("chromium")
    if path is None:
        pytest.skip("no chromium (as root: apt-get install chromium)")
    return path


def chromium_cmd(path: str, profile: Path) -> list[str]:
    """Headless Chromium on this closed network: no sandbox (root), no background
    connections, a fresh profile."""
    return [
        path,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]
