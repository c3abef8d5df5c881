"""Plots and a stage table for `snakemake --report` (works after local and SLURM runs).

Everything is read from the workflow's own outputs: per-file VAD statistics,
every stage's rejects, the stages' per-shard outputs, and the `benchmark:`
files Snakemake writes for each shard job (wall seconds), which give the
throughput per stage in audio seconds per second.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..io.jsonio import atomic_open, read_jsonl


def _bench_seconds(path: str) -> float:
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return sum(float(r["s"]) for r in rows)


def stage_table(res: Path, stages: list[str]) -> list[dict[str, Any]]:
    """One row per stage: inputs, outputs, rejects, audio hours, job seconds, throughput."""
    rows = []
    shard_audio = {}
    for st in sorted((res / "vad").glob("shard-*.stats.jsonl")):
        shard_audio[st.name.split(".")[0]] = sum(r["duration"] for r in read_jsonl(st))
    seg_audio = {}
    for sg in sorted((res / "vad").glob("shard-*.segments.jsonl")):
        seg_audio[sg.name.split(".")[0]] = sum(r["duration"] for r in read_jsonl(sg))
    diarized = ["diarize"] if (res / "benchmarks" / "diarize").is_dir() else []  # a step, not a stage
    for stage in ["vad", *diarized] + [s for s in stages if s != "vad"]:
        bench = sorted((res / "benchmarks" / stage).glob("shard-*.tsv"))
        seconds = sum(_bench_seconds(str(b)) for b in bench)
        audio = sum((shard_audio if stage == "vad" else seg_audio).get(b.stem, 0.0) for b in bench)
        rejects = sum(1 for p in (res / stage).glob("shard-*.rejects.jsonl") for _ in read_jsonl(p))
        rows.append(
            {
                "stage": stage,
                "shard_jobs": len(bench),
                "rejected": rejects,
                "audio_hours": round(audio / 3600, 4),
                "job_seconds": round(seconds, 1),
                "audio_seconds_per_second": round(audio / seconds, 1) if seconds else None,
            }
        )
    return rows


def make(res: str | Path, stages: list[str], out_dir: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res, out = Path(res), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stats = [r for p in sorted((res / "vad").glob("shard-*.stats.jsonl")) for r in read_jsonl(p)]
    written = []

    def save(fig, name):
        p = out / name
        with atomic_open(p, "wb") as f:
            fig.savefig(f, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        written.append(p)

    for key, name, title, xlabel in (
        ("duration", "duration_hist.png", "File durations", "seconds"),
        ("speech_ratio", "speech_ratio_hist.png", "Speech ratio per file", "speech / duration"),
        ("n_segments", "segments_per_file.png", "Segments per file", "segments"),
    ):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.hist([r[key] for r in stats] or [0], bins=30, color="#4477aa")
        ax.set_title(f"{title} ({len(stats)} files)")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("files")
        save(fig, name)

    reasons: Counter = Counter()
    for p in [res / "rejects" / "ingest.jsonl", *sorted(res.glob("*/shard-*.rejects.jsonl"))]:
        if p.exists():
            for r in read_jsonl(p):
                reasons[f"{r['stage']}: {r['reason']}"] += 1
    fig, ax = plt.subplots(figsize=(6, 0.5 + 0.35 * max(1, len(reasons))))
    labels = sorted(reasons) or ["(none)"]
    ax.barh(labels, [reasons.get(k, 0) for k in labels], color="#cc6677")
    ax.set_title(f"Rejects by stage and reason ({sum(reasons.values())})")
    ax.set_xlabel("inputs")
    save(fig, "rejects_by_reason.png")

    table = stage_table(res, stages)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar([r["stage"] for r in table], [r["audio_seconds_per_second"] or 0 for r in table], color="#228833")
    ax.set_title("Throughput per stage (audio seconds per job second)")
    ax.set_ylabel("x realtime")
    save(fig, "throughput.png")

    p = out / "stages.csv"
    with atomic_open(p) as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(table)
    written.append(p)
    with atomic_open(out / "rejects.json") as f:
        f.write(json.dumps(dict(sorted(reasons.items())), indent=1) + "\n")
    written.append(out / "rejects.json")
    return written
