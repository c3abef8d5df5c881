"""Synthetic input of the ingest job, for the plan's memory probe
(:mod:`speechprep.workflow.probe`): a manifest of ``n`` lines with their durations
(2-12 s), the text when the dataset's ``text`` mode reads it, unprobed (the files need not
exist: ingest holds every line, which is what grows with ``n``), the dataset's other
settings as they are."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

from .params import IngestParams


def run(root: Path, n: int, like: dict, p: IngestParams) -> tuple[dict, IngestParams]:
    """The ingest job's files and parameters for a manifest of ``n`` lines under ``root``."""
    rng = random.Random(0)
    manifest = root / "probe.jsonl"
    with open(manifest, "w", encoding="utf-8") as f:
        for i in range(n):
            line = {"audio_filepath": f"{root}/corpus/spk{i % 5000:04d}/utt{i:08d}.flac"}
            line["duration"] = round(rng.uniform(2.0, 12.0), 3)
            if p.text != "asr":
                line["text"] = f"utterance number {i} of the corpus"
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    files = {"manifest": str(root / "manifest.jsonl"), "rejects": str(root / "rejects.jsonl")}
    files["shards"] = str(root / "shards")
    changed = {"audio_dir": None, "manifest": str(manifest), "probe": False, "exclude": None, "replan": True}
    return files, dataclasses.replace(p, **changed)
