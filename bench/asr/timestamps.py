#!/usr/bin/env python3
"""What word timestamps and confidences cost the ASR stage, same segments, same run.

    .venvs/asr/bin/python bench/asr/timestamps.py [--model resources/models/demo_asr.nemo]
                                                  [--segments 80] [--repeats 3]

The segments of ``bench/asr/throughput.py`` (mixed 1-30 s of demo speech, read
by offset from long source files) through ``speechprep.asr.stage.AsrStage``
twice per repeat, interleaved: with ``asr.timestamps`` off and on (NeMo's
word timestamps and entropy confidences). Prints medians and the overhead
(target <= 15 % on CPU).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from throughput import REPO, make_segments

from speechprep.asr import stage as asr
from speechprep.asr.words import NemoTranscriber
from speechprep.core import modelstage
from speechprep.core.modelstage import ShardFiles
from speechprep.io.jsonio import read_jsonl, write_jsonl
from tests.support import params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(REPO / "resources/models/demo_asr.nemo"))
    ap.add_argument("--segments", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    import torch
    from nemo.utils import logging as nemo_logging

    nemo_logging.setLevel(logging.ERROR)
    torch.set_num_threads(2)
    runs = {}
    for on in (False, True):  # two instances: timestamps change the model's decoding set-up
        model = asr.load_model(a.model, "cpu")
        p = params(asr.AsrParams, model=a.model, device="cpu", timestamps=on)
        runs[on] = (NemoTranscriber(model, on), asr.model_sample_rate(model), p)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        segs = make_segments(tmp, a.segments, np.random.default_rng(0))
        audio = sum(s["duration"] for s in segs)
        shard = tmp / "shard-0000.segments.jsonl"
        write_jsonl(shard, [{k: v for k, v in s.items() if not k.startswith("_")} for s in segs])

        def stage(on, r):
            tx, sr, p = runs[on]
            out = tmp / f"o{on}{r}.jsonl"
            files = ShardFiles(str(shard), str(out), str(tmp / f"r{on}{r}.jsonl"), str(tmp / f"s{on}{r}.jsonl"))
            modelstage.run(asr.AsrStage(p, tx, sr), files)
            return list(read_jsonl(out))

        stage(False, "warm")
        times = {False: [], True: []}
        cpu = {False: [], True: []}  # process CPU seconds: less swayed by other work on a shared machine
        for r in range(a.repeats):
            for on in (False, True):
                t, c = time.perf_counter(), time.process_time()
                lines = stage(on, r)
                times[on].append(time.perf_counter() - t)
                cpu[on].append(time.process_time() - c)
            words = sum(len(x["words"] or []) for x in lines)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"ASR timestamps: {a.segments} segments of 1-30 s, {audio / 60:.1f} min of audio, "
        f"model {Path(a.model).name} on CPU, median of {a.repeats} interleaved runs"
    )
    for on, name in ((False, "off"), (True, "on (words + confidence)")):
        runs_s = ", ".join(f"{x:.2f}" for x in times[on])
        print(f"  timestamps {name}: {med[on]:.2f} s, {audio / med[on]:.1f} audio-s/s  (runs: {runs_s})")
    ratio = med[True] / med[False]
    print(f"on / off: {ratio:.3f}x, overhead {100 * (ratio - 1):+.1f} % (target <= 15 %); {words} words")
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    cpu_ratio = cpu_med[True] / cpu_med[False]
    print(
        f"CPU time: off {cpu_med[False]:.2f} s, on {cpu_med[True]:.2f} s, "
        f"on / off {cpu_ratio:.3f}x, overhead {100 * (cpu_ratio - 1):+.1f} %"
    )


if __name__ == "__main__":
    main()
