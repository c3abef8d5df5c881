#!/usr/bin/env python3
"""TTS audio features: the tts_features job vs the same extractors in a plain loop, same run.

    .venvs/tts/bin/python bench/tts/features.py [--segments 60] [--repeats 3] [--device cpu]

Segments of mixed length (1 to 15 s) of demo speech, read by offset/duration
from one long file. Both variants write codes, a Resemblyzer condition vector
and openSMILE eGeMAPSv02 functionals per segment as .npy files.

* loop: one segment at a time: read, ``preprocess_wav`` + ``embed_utterance``,
  ``Smile.process_signal``, three ``np.save`` (what a hand-written script does);
* stage: ``speechprep.tts.features.run`` (batches from the seconds budget,
  Resemblyzer partials of a whole batch in one forward, openSMILE in a thread
  pool beside it, resumable, atomic writes), ``tts.threads`` = 2.

Each variant runs in its own process, models loaded before the clock starts;
prints segments per second (median of interleaved repeats), the ratio, and
each process's peak RSS. With ``--device cuda`` the stage's batch budget
comes from free GPU memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from speechprep.demo.corpus import long_source_segments
from tests.support import params

REPO = Path(__file__).resolve().parents[2]


def run_variant(variant: str, segs_path: Path, units_path: Path, out: Path, device: str) -> dict:
    import torch

    from speechprep.core.modelstage import ShardFiles
    from speechprep.encoders import Encoders
    from speechprep.io.audio import read_segment
    from speechprep.io.jsonio import read_jsonl, write_jsonl
    from speechprep.io.npyio import save_npy
    from speechprep.tts import features
    from speechprep.tts.features import TtsParams

    torch.set_num_threads(2)
    segs = list(read_jsonl(segs_path))
    units = {u["id"]: u["units"] for u in read_jsonl(units_path)}
    if variant == "stage":
        p = params(TtsParams, device=device)
        enc = Encoders(p.condition, p.emotion, device, threads=2)
        write_jsonl(out / "s2s_rejects.jsonl", [])
        t = time.perf_counter()
        arrays = {k: str(out / "shard" / k) for k in features.FEATURES}
        files = ShardFiles(
            str(segs_path),
            str(out / "index.jsonl"),
            str(out / "rejects.jsonl"),
            str(out / ".partial" / "shard.jsonl"),
            arrays,
        )
        features.run(files, p, str(units_path), str(out / "s2s_rejects.jsonl"), threads=2, encoders=enc)
    else:
        import opensmile
        from resemblyzer import VoiceEncoder, preprocess_wav

        enc = VoiceEncoder(device, verbose=False)
        smile = opensmile.Smile(
            feature_set=opensmile.FeatureSet.eGeMAPSv02, feature_level=opensmile.FeatureLevel.Functionals
        )
        for kind in ("codes", "condition", "emo_vec"):
            (out / kind).mkdir(parents=True)
        t = time.perf_counter()
        for s in segs:
            wav = read_segment(s)
            save_npy(out / "codes" / f"{s['id']}.npy", np.asarray(units[s["id"]], dtype=np.int32))
            save_npy(out / "condition" / f"{s['id']}.npy", enc.embed_utterance(preprocess_wav(wav)))
            emo = smile.process_signal(wav, 16000).to_numpy(dtype=np.float32).reshape(-1)
            save_npy(out / "emo_vec" / f"{s['id']}.npy", emo)
    seconds = time.perf_counter() - t
    return {
        "seconds": seconds,
        "segments": len(segs),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--_variant", help=argparse.SUPPRESS)
    ap.add_argument("--_dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._variant:
        d = Path(a._dir)
        out = Path(tempfile.mkdtemp(dir=d))
        print(json.dumps(run_variant(a._variant, d / "segments.jsonl", d / "units.jsonl", out, a.device)))
        return

    from speechprep.io.jsonio import write_jsonl

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        segs = long_source_segments(d, np.random.default_rng(0).uniform(1.0, 15.0, a.segments), "a segment")
        write_jsonl(d / "segments.jsonl", segs)
        write_jsonl(d / "units.jsonl", [{"id": s["id"], "units": list(range(int(s["duration"] * 50)))} for s in segs])
        audio = sum(s["duration"] for s in segs)
        print(f"{len(segs)} segments, {audio:.0f} s of audio, device {a.device}, {a.repeats} repeats")
        res: dict[str, list[dict]] = {"loop": [], "stage": []}
        for r in range(a.repeats):
            for variant in ("loop", "stage") if r % 2 == 0 else ("stage", "loop"):
                p = subprocess.run(
                    [sys.executable, __file__, "--_variant", variant, "--_dir", tmp, "--device", a.device],
                    capture_output=True,
                    text=True,
                    encoding="utf-8",
                    check=True,
                )
                m = json.loads(p.stdout.strip().splitlines()[-1])
                res[variant].append(m)
                print(
                    f"  {variant:5s} repeat {r}: {m['segments'] / m['seconds']:.2f} segments/s, "
                    f"peak RSS {m['peak_rss_mb']:.0f} MB",
                    flush=True,
                )
        rate = {k: statistics.median(m["segments"] / m["seconds"] for m in v) for k, v in res.items()}
        rss = {k: statistics.median(m["peak_rss_mb"] for m in v) for k, v in res.items()}
        print(f"loop : {rate['loop']:.2f} segments/s (median), peak RSS {rss['loop']:.0f} MB")
        print(f"stage: {rate['stage']:.2f} segments/s (median), peak RSS {rss['stage']:.0f} MB")
        print(
            f"stage / loop: {rate['stage'] / rate['loop']:.2f}x segments per second, "
            f"{rss['stage'] / rss['loop']:.2f}x peak memory"
        )


if __name__ == "__main__":
    main()
