"""Helpers for tests that run the real workflow: snakemake in a subprocess."""

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import kill_when_checkpointed  # noqa: F401 (the workflow tests take it from here)

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo"
TRUTH = json.loads((DEMO / "truth.json").read_text(encoding="utf-8"))
# The session's demo runs (local and SLURM) cut the demo corpus (32 files) into this many shards.
DEMO_SHARDS = 2


def snakemake(workdir, *args, profile=True, check=True, timeout=900):
    """Run the workflow with ``workdir`` as working directory (results/ lands there)."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
    ]
    if profile:
        cmd += ["--profile", str(REPO / "profiles" / "local"), "--cores", "2"]
    cmd += list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=timeout)
    out = p.stdout + p.stderr
    if check and p.returncode != 0:
        raise AssertionError(f"snakemake failed ({p.returncode}): {' '.join(cmd)}\n{out[-6000:]}")
    return p.returncode, out


def start_snakemake(workdir, *args):
    """Start the workflow in its own process group (to be killed as a whole)."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "--profile",
        str(REPO / "profiles" / "local"),
        "--cores",
        "2",
        *args,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill_group(proc):
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# The config section of a run whose tests do not look at diarization: its one-voice files
# would come out of the step as VAD cut them (tests/workflow/test_diarize_workflow.py).
NOT_DIARIZED = {"diarize": {"enabled": False}}

# What the session's runs share (set by the session fixture shared_dirs): the built
# text-normalisation grammars, so a run in another working directory does not build them again.
# One directory for every worker: the demo run builds them (test_tts_workflow checks it did),
# and every other run that normalises text uses the demo run's models, so it starts after.
SHARED: dict[str, str] = {}


@pytest.fixture(scope="session", autouse=True)
def shared_dirs(tmp_path_factory):
    SHARED["grammars"] = str(session_root(tmp_path_factory) / "text_normalization")


def write_config(workdir, datasets, shared_grammars=True, **sections):
    """The run's config.yaml: ``datasets`` and ``sections``; with ``shared_grammars`` the
    session's one grammar cache (``tts.normalize_grammars``) unless ``sections`` name one."""
    workdir.mkdir(parents=True, exist_ok=True)
    if shared_grammars and "grammars" in SHARED:
        sections["tts"] = {"normalize_grammars": SHARED["grammars"], **sections.get("tts", {})}
    cfg = {"datasets": datasets, **sections}
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")


def jobs_run(output, rule):
    """Wildcards of every job of ``rule`` that a snakemake run started."""
    found, current = [], None
    for line in output.splitlines():
        s = line.strip()
        if (
            s.endswith(":")
            and s.split()[-1].rstrip(":") == rule
            and s.split()[0] in ("rule", "localrule", "checkpoint", "localcheckpoint")
        ):
            current = []
            found.append(current)
        elif current is not None and s.startswith("wildcards:"):
            current.append(s[len("wildcards:") :].strip())
            current = None
        elif not s:
            current = None
    return [w[0] if w else "" for w in found]


def demo_models(work):
    """The asr and s2s config sections naming the models a demo run in ``work`` built."""
    models = work / "resources" / "models"
    return {
        "asr": {"model": str(models / "demo_asr.nemo")},
        "s2s": {
            k: str(models / f"demo_{n}")
            for k, n in (
                ("hubert", "hubert_legacy.pt"),
                ("kmeans", "km.bin"),
                ("vocoder", "vocoder.pt"),
                ("vocoder_config", "vocoder.json"),
            )
        },
    }


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def session_root(tmp_path_factory) -> Path:
    """The directory every pytest process of this session sees: with pytest-xdist
    (``make test`` runs the workflow tests on two workers), the workers' common parent."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def built_once(root: Path, name: str):
    """Hold ``root/name.lock`` while a session-wide product is built or read: yields
    (directory, done) where ``done`` is False when this process must build it (into an
    emptied directory) and then write ``directory/.done``. Another worker waiting on the
    lock finds it done; after a failed build the next one tries again from scratch."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        d = root / name
        done = (d / ".done").exists()
        if not done:
            shutil.rmtree(d, ignore_errors=True)
        yield d, done


@pytest.fixture(scope="session")
def demo_copy(tmp_path_factory):
    """A copy of the demo corpus that the session's demo runs read (no test changes it)."""
    with built_once(session_root(tmp_path_factory), "corpus") as (d, done):
        if not done:
            shutil.copytree(DEMO / "audio", d / "audio")
            (d / ".done").touch()
    return d / "audio"


@pytest.fixture(scope="session")
def demo(tmp_path_factory, demo_copy):
    """The demo pipeline, every stage, from a clean working directory: (workdir, output).
    One run per session, whichever worker needs it first; only dry runs and reports run
    in it afterwards (a test that changes a run makes its own)."""
    with built_once(session_root(tmp_path_factory), "demo") as (work, done):
        if not done:
            write_config(work, {"demo": {"audio_dir": str(demo_copy), "shards": DEMO_SHARDS}})
            _, out = snakemake(work)
            (work / "snakemake.out").write_text(out, encoding="utf-8")
            (work / ".done").touch()
    return work, (work / "snakemake.out").read_text(encoding="utf-8")


# The files in the order the workers take them (any other after these, by name). First the SLURM
# tests (their first half needs no demo run) and the file whose first test builds the demo run;
# then the longest first, so that the last file to start is a short one and the two workers end
# together (each file's test times, summed, from a `make test` run: docs/benchmarks/workflow.md, "Test suite").
ORDER = (
    "test_slurm.py",  # 1,082 s
    "test_asr_workflow.py",  # 325 s: the demo run
    "test_export_workflow.py",  # 557 s
    "test_growth.py",  # 386 s
    "test_tts_workflow.py",  # 332 s
    "test_reruns.py",  # 322 s
    "test_speaker_models_workflow.py",  # 231 s
    "test_plan.py",  # 179 s
    "test_vad_workflow.py",  # 124 s
    "test_curate_workflow.py",  # 101 s
    "test_transcribed_workflow.py",  # 76 s
    "test_report.py",  # 52 s
    "test_config.py",  # 26 s
    "test_diarize_workflow.py",  # 22 s
)


def pytest_collection_modifyitems(items):
    """Order the tests for ``make test``'s workers (pytest-xdist, one file per worker at a time,
    in this order): while one worker builds the demo run, the other runs what does not wait
    for it; inside a file, the tests that do not need the demo run first."""

    def rank(item):
        name = item.path.name
        first = ORDER.index(name) if name in ORDER else len(ORDER)
        return (first, name, "demo" in item.fixturenames)  # (the closure: slurm_demo needs demo)

    items.sort(key=rank)
