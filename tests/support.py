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
CONFIG_FILE = REPO / "config" / "config.yaml"


def english_grammars(fallback: Path) -> tuple[Path, dict]:
    """The English text-normalisation grammars, built as rule tts_grammars builds them, and
    their ``grammars.json`` (the build's seconds among it). ``make test`` names a folder the
    stage suites share (``SPEECHPREP_TEST_CACHE``): the first suite that needs them builds
    them there under a lock and the others read them (a build is about 50 CPU-s); without
    it they are built into ``fallback``."""
    import fcntl

    from speechprep.text import spoken

    root = os.environ.get("SPEECHPREP_TEST_CACHE")
    d = Path(root) / "text_normalization" / "en" if root else fallback
    d.parent.mkdir(parents=True, exist_ok=True)
    with open(d.parent / "en.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = d.parent / "en.done"
        if not done.exists():  # (a build that failed half-way is made again from scratch)
            spoken.build_grammars("en", d)
            done.touch()
    return d, json.loads((d / spoken.INFO).read_text(encoding="utf-8"))


def config() -> dict:
    """config/config.yaml: every default."""
    from speechprep.core.config import defaults

    return defaults(CONFIG_FILE)


def params(cls, **overrides):
    """A job's parameters as a run of config/config.yaml selects them, with ``overrides``."""
    return cls.from_config(config(), **overrides)


def cpu_batch(seconds: float):
    """A model stage's ``batch`` block of ``seconds`` padded audio seconds (the tests run on the CPU)."""
    from speechprep.core.config import BatchBudget

    return BatchBudget(cpu_seconds=seconds, seconds_per_gib=1.0, gpu_reserve_gib=0.0, max_seconds=seconds)


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


def kill_when_checkpointed(proc, checkpoint, n, timeout=900):
    """SIGKILL ``proc``'s process group (start it with ``start_new_session=True``) once
    the job's resume file ``checkpoint`` holds ``n`` finished items (lines after its
    fingerprint line); returns how many it held when the kill landed (read again after
    it: the job may finish another item between the count and the kill)."""
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
    if checkpoint.exists():  # complete lines only: a line cut short by the kill is redone
        done = checkpoint.read_text(encoding="utf-8").count("\n") - 1
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


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe
    (``--remote-debugging-pipe``: JSON messages ending in NUL on fds 3 and 4), so a
    test waits for what the page does instead of guessing a time. One page."""

    def __init__(self, path: str, profile: Path, *flags: str):
        import subprocess

        to_browser, self._w = os.pipe()
        self._r, from_browser = os.pipe()
        args = [
            "--headless",
            "--no-sandbox",  # root
            "--disable-gpu",
            "--disable-quic",  # this closed network: no background connections
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            *flags,
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser}', path, *args],
            pass_fds=(to_browser, from_browser),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buf, self._id = b"", 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def call(self, method: str, timeout: float = 120.0, **params):
        """Send one command (to the page once attached) and return its result."""
        import select

        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if getattr(self, "_session", None):
            msg["sessionId"] = self._session
        os.write(self._w, json.dumps(msg).encode("utf-8") + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError(f"{method}: no answer from chromium in {timeout} s")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError(f"{method}: chromium exited ({self.proc.poll()})")
            self._buf += chunk

    def open(self, url: str, width: int = 1280, height: int = 2400) -> None:
        """Load ``url`` in a ``width`` x ``height`` window and wait for its load event."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=url)
        self.evaluate("new Promise(r => document.readyState === 'complete' ? r() : addEventListener('load', r))")

    def evaluate(self, expression: str, timeout: float = 120.0):
        """The value of a JavaScript expression (a promise is awaited)."""
        res = self.call(
            "Runtime.evaluate", timeout=timeout, expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"javascript: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, path: Path) -> None:
        import base64

        Path(path).write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        os.close(self._w)
        os.close(self._r)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - a browser that does not stop is killed
            self.proc.kill()
