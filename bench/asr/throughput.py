#!/usr/bin/env python3
"""ASR throughput: the stage's batching vs ``model.transcribe(paths, batch_size=B)``, same run.

    .venvs/asr/bin/python bench/asr/throughput.py [--model resources/models/demo_asr.nemo]
                                                   [--segments 80] [--batch-size 8] [--repeats 3]

Segments of mixed length (1 to 30 s) of demo speech. Baseline: each segment
written as its own WAV file and transcribed with NeMo's
``transcribe(paths, batch_size=B)`` in manifest order (what a hand-written
script does). Stage: ``speechprep.asr.stage.AsrStage`` on the model-batch runner on the same segments
read by offset/duration from their long source files, duration-sorted
batches filled to the CPU seconds budget. Prints audio-seconds per second
(medians of interleaved repeats) and the ratio (target >= 1.2x on CPU).
With ``--device cuda`` the stage's budget comes from free GPU memory.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from speechprep.asr import stage as asr
from speechprep.asr.words import NemoTranscriber
from speechprep.core import modelstage
from speechprep.core.modelstage import ShardFiles
from speechprep.demo.corpus import long_source_segments
from speechprep.io.jsonio import write_jsonl

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.support import cpu_batch, params  # noqa: E402 (the repository's tests package)


def make_segments(root: Path, n: int, rng: np.random.Generator) -> list[dict]:
    segs = long_source_segments(root, rng.uniform(1.0, 30.0, n))
    sr = 16000
    source, _ = sf.read(root / "long.flac", dtype="float32")
    for s in segs:  # the baseline's inputs: one file per segment
        a, b = int(s["offset"] * sr), int((s["offset"] + s["duration"]) * sr)
        s["_file"] = str(root / f"{s['id']}.wav")
        sf.write(s["_file"], source[a:b], sr, subtype="PCM_16")
    return segs


def parse_args() -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(REPO / "resources/models/demo_asr.nemo"))
    ap.add_argument("--segments", type=int, default=80)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--cpu-batch-seconds", type=float, default=120.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    return ap.parse_args()


def load(a: argparse.Namespace) -> tuple:
    """The model (built first when missing) on two threads: (model, sample rate, transcriber, stage params)."""
    import torch
    from nemo.utils import logging as nemo_logging

    nemo_logging.setLevel(logging.ERROR)
    torch.set_num_threads(2)
    if not Path(a.model).exists():
        from speechprep.demo.asr_model import build

        print(f"building the demo model at {a.model} (a few minutes)")
        build(REPO / "resources/demo/truth.json", Path(a.model))
    model = asr.load_model(a.model, a.device)
    sr = asr.model_sample_rate(model)
    tx = NemoTranscriber(model)
    p = params(asr.AsrParams, model=a.model, device=a.device, batch=cpu_batch(a.cpu_batch_seconds))
    return model, sr, tx, p


def time_both(a: argparse.Namespace, model, sr: int, tx, p) -> tuple[float, dict[str, list[float]], int]:
    """Time baseline and stage, interleaved, on the same segments: (audio seconds, run times, identical transcripts)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        segs = make_segments(tmp, a.segments, np.random.default_rng(0))
        audio = sum(s["duration"] for s in segs)
        shard = tmp / "shard-0000.segments.jsonl"
        write_jsonl(shard, [{k: v for k, v in s.items() if not k.startswith("_")} for s in segs])
        paths = [s["_file"] for s in segs]

        def baseline():
            with torch.inference_mode():
                out = model.transcribe(paths, batch_size=a.batch_size, verbose=False, num_workers=0)
            return [h.text for h in out]

        def stage(r):
            files = ShardFiles(str(shard), str(tmp / f"o{r}.jsonl"), str(tmp / f"r{r}.jsonl"), str(tmp / f"s{r}.jsonl"))
            modelstage.run(asr.AsrStage(p, tx, sr), files)
            return [json.loads(x)["text"] for x in (tmp / f"o{r}.jsonl").read_text(encoding="utf-8").split("\n") if x]

        baseline()  # warm-up (first dataloader set-up, lazy inits)
        times = {"baseline": [], "stage": []}
        for r in range(a.repeats):
            t = time.perf_counter()
            base_texts = baseline()
            times["baseline"].append(time.perf_counter() - t)
            t = time.perf_counter()
            stage_texts = stage(r)
            times["stage"].append(time.perf_counter() - t)
        same = sum(x == y for x, y in zip(base_texts, stage_texts))
    return audio, times, same


def print_report(a: argparse.Namespace, p, audio: float, times: dict[str, list[float]], same: int) -> None:
    """Audio seconds per second of both variants (medians), their runs and the ratio."""
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"ASR throughput: {a.segments} segments of 1-30 s, {audio / 60:.1f} min of audio, "
        f"model {Path(a.model).name} on {a.device}, median of {a.repeats} interleaved runs"
    )
    print(
        f"  baseline: transcribe(paths, batch_size={a.batch_size}), one file per segment, "
        f"manifest order: {med['baseline']:.2f} s, {audio / med['baseline']:.1f} audio-s/s  (runs: "
        + ", ".join(f"{x:.2f}" for x in times["baseline"])
        + ")"
    )
    print(
        f"  stage: sorted batches within {p.batch.cpu_seconds:.0f} padded s, read by offset from the source: "
        f"{med['stage']:.2f} s, {audio / med['stage']:.1f} audio-s/s  (runs: "
        + ", ".join(f"{x:.2f}" for x in times["stage"])
        + ")"
    )
    print(
        f"stage / baseline: {med['baseline'] / med['stage']:.2f}x   (target >= 1.2x on CPU); "
        f"identical transcripts: {same}/{a.segments}"
    )


def main() -> None:
    a = parse_args()
    model, sr, tx, p = load(a)
    audio, times, same = time_both(a, model, sr, tx, p)
    print_report(a, p, audio, times, same)


if __name__ == "__main__":
    main()
