"""Shared by the curation tests: parameters, the real models, demo segments and their
damaged variants as audio files, HuBERT units from the demo S2S models, a shard run."""

import json
import os
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechprep.core.modelstage import ShardFiles
from speechprep.curate import annotate, measure, stage
from speechprep.demo import damage
from speechprep.io.audio import read_segment
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.jobs import JOBS
from tests.support import DEMO, REPO, TRUTH, config, demo_file, demo_segments

warnings.simplefilter("ignore")

_CFG = config()


def params(job, **overrides):
    """A curation job's parameters: the config defaults with ``overrides``."""
    return JOBS[f"curate {job}"].params.from_config(_CFG, **overrides)


def measure_params(**kw):
    return params("measure", device="cpu", **kw)


@pytest.fixture(scope="session")
def models():
    """DNSMOS + Resemblyzer, loaded once."""
    return measure.Models(measure_params(), "cpu", threads=2)


def asr_lines(n=None):
    """The clean demo phrases as ASR lines (with their true text and voice)."""
    return demo_segments(n, text=True, voice=True)


def whole_clips():
    """Every clean demo file as one segment (``voice`` kept for the tests)."""
    out = []
    for rel, info in sorted(TRUTH["files"].items()):
        if info.get("clean"):
            out.append(
                {
                    **demo_file(rel),
                    "offset": 0.0,
                    "duration": info["duration"],
                    "voice": info["voice"],
                    "text": " ".join(s["text"] for s in info["speech"]),
                }
            )
    return out


def write_variant(dir_: Path, seg: dict, name: str, audio: np.ndarray, fmt: str = "WAV") -> dict:
    """``audio`` written as a file; a segment line for the whole of it, with ``seg``'s text."""
    path = dir_ / f"{seg['id']}@{name}.{fmt.lower()}"
    sf.write(path, audio, 16000, format=fmt)
    return {
        "id": f"{seg['id']}@{name}",
        "file_id": f"{seg['id']}@{name}",
        "audio_filepath": str(path),
        "offset": 0.0,
        "duration": round(len(audio) / 16000, 4),
        "text": seg.get("text", ""),
    }


def as_file(dir_: Path, seg: dict) -> dict:
    """A demo segment cut out into its own file (what its variants are compared with)."""
    return write_variant(dir_, seg, "orig", read_segment(seg))


_S2S_PYTHON = REPO / ".venvs" / "s2s" / "bin" / "python"


def s2s_units(clips: dict[str, np.ndarray], work: Path) -> dict[str, list[int]]:
    """HuBERT units of each clip from the demo S2S models (tests/curate/s2s_units.py,
    run in the S2S environment, which has fairseq)."""
    if not _S2S_PYTHON.exists():
        pytest.skip(f"the S2S environment ({_S2S_PYTHON}) computes HuBERT units; it is not set up here")
    npz, out = work / "clips.npz", work / "units.json"
    np.savez(npz, **clips)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run(
        [str(_S2S_PYTHON), str(Path(__file__).with_name("s2s_units.py")), str(DEMO / "truth.json"), str(npz), str(out)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


def units_lines(units: dict[str, list[int]]) -> list[dict]:
    return [{"id": k, "units": v, "frame_rate": 50.0} for k, v in units.items()]


class Run:
    """One dataset's curation, job by job, under ``root``; shards given as lists of ASR lines."""

    def __init__(self, root: Path, shards: list[list[dict]], units: dict[str, list[int]] | None = None):
        self.root = root
        self.names = [f"shard-{k:04d}" for k in range(len(shards))]
        units = units or {}
        for name, segs in zip(self.names, shards, strict=False):
            write_jsonl(root / "asr" / f"{name}.jsonl", segs)
            write_jsonl(
                root / "s2s" / f"{name}.units.jsonl",
                units_lines({s["id"]: units[s["id"]] for s in segs if s["id"] in units}),
            )

    def f(self, name: str, what: str) -> Path:
        return self.root / "curate" / f"{name}.{what}"

    def measure(self, p=None, models=None, names=None):
        for name in names or self.names:
            files = ShardFiles(
                str(self.root / "asr" / f"{name}.jsonl"),
                str(self.f(name, "measures.jsonl")),
                str(self.f(name, "measure_rejects.jsonl")),
                str(self.root / "curate" / ".partial" / f"{name}.jsonl"),
            )
            units = str(self.root / "s2s" / f"{name}.units.jsonl")
            emb, mh = str(self.f(name, "embeddings.npy")), str(self.f(name, "minhash.npy"))
            fp = str(self.f(name, "fingerprint.npy"))
            measure.run(files, p or measure_params(), units, emb, mh, fp, threads=2, models=models)

    def speakers(self, p=None):
        files = stage.SpeakerFiles(
            [self.root.name],
            [len(self.names)],
            [str(self.f(n, "measures.jsonl")) for n in self.names],
            [str(self.f(n, "embeddings.npy")) for n in self.names],
            [str(self.f(n, "speakers.jsonl")) for n in self.names],
            [str(self.root / "curate" / "speaker_clusters.json")],
        )
        centroids = str(self.root / "curate" / "speakers")
        return stage.run_speakers(
            files, centroids, str(self.root / "run_speaker_clusters.json"), p or params("speakers")
        )

    def duplicates(self, p=None):
        return stage.run_duplicates(
            [str(self.f(n, "measures.jsonl")) for n in self.names],
            [str(self.f(n, "minhash.npy")) for n in self.names],
            [str(self.f(n, "duplicates.jsonl")) for n in self.names],
            p or params("duplicates"),
            fingerprint=[str(self.f(n, "fingerprint.npy")) for n in self.names],
        )

    def annotate(self):
        for name in self.names:
            files = ShardFiles(
                str(self.root / "asr" / f"{name}.jsonl"),
                str(self.f(name, "annotations.jsonl")),
                str(self.f(name, "annotation_rejects.jsonl")),
                str(self.root / "curate" / ".partial_annotate" / f"{name}.jsonl"),
            )
            annotate.run(files, params("annotate", device="cpu"))

    def decide(self, p=None):
        for n in self.names:
            notes = self.f(n, "annotations.jsonl")
            stage.run_decide(
                str(self.f(n, "measures.jsonl")),
                str(self.f(n, "measure_rejects.jsonl")),
                str(self.f(n, "speakers.jsonl")),
                str(self.f(n, "duplicates.jsonl")),
                str(self.root / "curate" / f"{n}.jsonl"),
                str(self.f(n, "rejects.jsonl")),
                p or params("decide"),
                annotations=str(notes) if notes.exists() else None,
            )

    def summary(self):
        return stage.run_summary(
            [str(self.root / "curate" / f"{n}.jsonl") for n in self.names],
            [str(self.f(n, "rejects.jsonl")) for n in self.names],
            str(self.root / "curate" / "speaker_clusters.json"),
            str(self.root / "curate" / "summary.json"),
            str(self.root / "curate" / "speakers.jsonl"),
            params("summary"),
        )

    def all(self, models=None):
        self.measure(models=models)
        self.annotate()
        self.speakers()
        self.duplicates()
        self.decide()
        return self.summary()

    def kept(self) -> list[dict]:
        return [x for n in self.names for x in read_jsonl(self.root / "curate" / f"{n}.jsonl")]

    def rejects(self) -> list[dict]:
        return [x for n in self.names for x in read_jsonl(self.f(n, "rejects.jsonl"))]


__all__ = [
    "DEMO",
    "REPO",
    "TRUTH",
    "Run",
    "as_file",
    "asr_lines",
    "damage",
    "measure_params",
    "params",
    "s2s_units",
    "whole_clips",
    "write_variant",
]
