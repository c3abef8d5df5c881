#!/usr/bin/env python3
"""The dataset-level curation jobs of the scale benchmarks, each in a fresh process.

    python bench/curate/fresh_process.py speakers|duplicates DIR   # prints one JSON line

``DIR`` holds per-shard files as the measure job writes them
(``shard-NNNN.measures.jsonl`` and ``.embeddings.npy`` or ``.minhash.npy`` + ``.fingerprint.npy``) and the
job's ``params.json``; the job's outputs go beside them. The line has the job's
report, its wall time (``seconds``) and the process's peak RSS (``peak_rss_mb``, VmHWM).
Used by bench/speakers/clustering.py and bench/curate/duplicates_scale.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # this checkout's speechprep, not the one a venv installed


def job(name: str, root: Path) -> dict:
    from speechprep.curate import stage
    from speechprep.jobs import JOBS
    from speechprep.workflow.probe import peak_rss_mb

    shards = sorted(p.name.split(".")[0] for p in root.glob("shard-*.measures.jsonl"))

    def files(suffix: str) -> list[str]:
        return [str(root / f"{s}.{suffix}") for s in shards]

    p = JOBS[f"curate {name}"].params.from_dict(json.loads((root / "params.json").read_text(encoding="utf-8")))
    t = time.perf_counter()
    if name == "speakers":
        speakers = stage.SpeakerFiles(
            ["bench"],
            [len(shards)],
            files("measures.jsonl"),
            files("embeddings.npy"),
            files("speakers.jsonl"),
            [str(root / "speaker_clusters.json")],
        )
        report = stage.run_speakers(speakers, str(root / "speakers"), str(root / "run_speaker_clusters.json"), p)
    else:
        report = stage.run_duplicates(
            files("measures.jsonl"), files("minhash.npy"), files("duplicates.jsonl"), p, files("fingerprint.npy")
        )
    return {
        "seconds": time.perf_counter() - t,
        **report,
        "peak_rss_mb": peak_rss_mb(),  # VmHWM: ru_maxrss can carry the parent's high-water mark
    }


def in_fresh_process(name: str, root: Path, params: dict) -> dict:
    """Write ``params.json`` into ``root`` and run job ``name`` there in a new interpreter."""
    (root / "params.json").write_text(json.dumps(params), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, __file__, name, str(root)]
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", env=env)
    if p.returncode:
        raise RuntimeError(f"the {name} job failed (exit {p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(job(sys.argv[1], Path(sys.argv[2]))))
