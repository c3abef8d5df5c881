#!/usr/bin/env python3
"""Curation measurements: the ``curate measure`` job vs a plain per-segment loop, same run.

    /path/to/curate-venv/bin/python bench/curate_throughput.py [--segments 30] [--repeats 3]

Segments of mixed length (1 to 15 s) of demo speech, read by offset/duration
from one long file (``speechprep.demo.long_source_segments``, as the TTS benchmark), with S2S-like
units. Both variants compute the same measures of every segment:

* loop: one segment at a time: read, ``speechmos.dnsmos.run``, pyloudnorm's
  meter, peak, clipping, DC, SNR (its file's non-speech), bandwidth, speaking rate, unit ratio,
  PCM sha256, MinHash, acoustic fingerprint, then Resemblyzer ``embed_utterance(preprocess_wav(x))``
  (what a hand-written script does), one JSON line and one ``.npy`` each;
* stage: ``speechprep.curate.measure.run`` (batches of ``batch_seconds``;
  DNSMOS windows batched with their full-resolution convolutions shared,
  Resemblyzer partials of a batch in one forward; resumable, atomic writes),
  ``curate.threads`` = 2.

Each variant runs in its own process, models loaded and run once on 2 s of
noise before the clock starts,
repeats interleaved; prints segments per second (median), the ratio, the
CPU time ratio (steadier than wall time on a shared machine), peak RSS, and
the largest difference between the two variants' numbers.
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

from speechprep.curate.decide import MEASURED as FIELDS
from speechprep.demo import long_source_segments

REPO = Path(__file__).resolve().parents[1]


def measure_params():
    from speechprep.curate.params import MeasureParams
    from tests.support import params

    return params(MeasureParams, device="cpu", hash_cache=None)


def run_variant(variant: str, d: Path, out: Path) -> dict:
    import torch

    from speechprep.core.audio import read_segment
    from speechprep.core.jsonio import read_jsonl, write_jsonl
    from speechprep.core.modelstage import ShardFiles
    from speechprep.curate import measure
    from speechprep.curate import measures as M
    from speechprep.curate.duplicates import minhash_signature
    from speechprep.curate.fingerprint import fingerprint, unpack
    from speechprep.curate.nonspeech import NonSpeech

    torch.set_num_threads(2)
    p = measure_params()
    warm = [np.random.default_rng(0).standard_normal(16000 * 2).astype(np.float32) * 0.1]  # first calls, off the clock
    M.snr_db(warm[0], [], 16000, tuple(p.snr_band_hz))
    segs = list(read_jsonl(d / "segments.jsonl"))
    units = {u["id"]: u["units"] for u in read_jsonl(d / "units.jsonl")}
    if variant == "stage":
        models = measure.Models(p, "cpu", threads=2)
        models(warm)
        t, cpu = time.perf_counter(), time.process_time()
        files = ShardFiles(
            str(d / "segments.jsonl"),
            str(out / "measures.jsonl"),
            str(out / "rejects.jsonl"),
            str(out / ".partial" / "shard.jsonl"),
        )
        emb, mh, fp = str(out / "embeddings.npy"), str(out / "minhash.npy"), str(out / "fingerprint.npy")
        measure.run(files, p, str(d / "units.jsonl"), emb, mh, fp, threads=2, models=models)
    else:
        import pyloudnorm
        from resemblyzer import VoiceEncoder, preprocess_wav
        from speechmos import dnsmos

        enc = VoiceEncoder("cpu", verbose=False)
        meter = pyloudnorm.Meter(16000)
        dnsmos.run(warm[0], 16000)  # loads its ONNX sessions
        enc.embed_utterance(preprocess_wav(warm[0]))
        lines, embs, sigs, fps = [], [], [], []
        t, cpu = time.perf_counter(), time.process_time()
        non_speech = NonSpeech(segs, p.snr_noise_seconds)
        for s in segs:
            x = read_segment(s, 16000, p.min_duration)
            u = units.get(s["id"])
            d_ = dnsmos.run(x, 16000)
            lufs = meter.integrated_loudness(x.astype(np.float64)) if len(x) >= 0.4 * 16000 else None
            cps, wps = M.speaking_rate(s.get("text"), len(x) / 16000)
            lines.append(
                {
                    "id": s["id"],
                    "dnsmos_sig": float(d_["sig_mos"]),
                    "dnsmos_bak": float(d_["bak_mos"]),
                    "dnsmos_ovrl": float(d_["ovrl_mos"]),
                    "dnsmos_p808": float(d_["p808_mos"]),
                    "lufs": float(lufs) if lufs is not None and np.isfinite(lufs) else None,
                    "peak_dbfs": M.peak_dbfs(x),
                    "clipping_ratio": M.clipping_ratio(x, p.clip_level),
                    "dc_offset": M.dc_offset(x),
                    "snr_db": M.snr_db(x, non_speech.read(s), 16000, tuple(p.snr_band_hz)),
                    "bandwidth_hz": M.bandwidth_hz(x, 16000, p.bandwidth_floor_db),
                    "chars_per_s": cps,
                    "words_per_s": wps,
                    "text_unit_ratio": M.text_unit_ratio(s.get("text"), u),
                    "n_units": len(u) if u is not None else None,
                    "pcm_sha256": M.pcm_sha256(x),
                }
            )
            sigs.append(minhash_signature(u, p.minhash_ngram, p.minhash_perm))
            fps.append(fingerprint(x))
            embs.append(enc.embed_utterance(preprocess_wav(x)))
            np.save(out / f"{s['id']}.npy", embs[-1])
        write_jsonl(out / "measures.jsonl", lines)
        np.save(out / "embeddings.npy", np.stack(embs))
        np.save(out / "minhash.npy", np.stack(sigs))
        np.save(out / "fingerprint.npy", np.stack([f if f is not None else unpack(None)[1] for f in fps]))
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "segments": len(segs),
        "out": str(out),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def compare(loop: Path, stage: Path) -> dict[str, float]:
    """Largest absolute difference per field between the two variants' results (0 = identical)."""
    from speechprep.core.jsonio import read_jsonl

    a = {x["id"]: x for x in read_jsonl(loop / "measures.jsonl")}
    b = {x["id"]: x for x in read_jsonl(stage / "measures.jsonl")}
    assert a.keys() == b.keys(), "the variants measured different segments"
    diff = {}
    for f in FIELDS:
        if f == "pcm_sha256":
            diff[f] = float(sum(a[i][f] != b[i][f] for i in a))
            continue
        diff[f] = max(abs(a[i][f] - b[i][f]) if a[i][f] is not None else float(b[i][f] is not None) for i in a)
    order = [b[i]["embedding_row"] for i in a]
    diff["embedding"] = float(np.abs(np.load(loop / "embeddings.npy") - np.load(stage / "embeddings.npy")[order]).max())
    diff["minhash"] = float((np.load(loop / "minhash.npy") != np.load(stage / "minhash.npy")[order]).sum())
    fl, fs = np.load(loop / "fingerprint.npy"), np.load(stage / "fingerprint.npy")[order]
    diff["fingerprint"] = float(sum(a.tobytes() != b.tobytes() for a, b in zip(fl, fs, strict=True)))
    return diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--_variant", help=argparse.SUPPRESS)
    ap.add_argument("--_dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._variant:
        d = Path(a._dir)
        out = Path(tempfile.mkdtemp(dir=d))
        print(json.dumps(run_variant(a._variant, d, out)))
        return

    from speechprep.core.jsonio import write_jsonl

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        segs = long_source_segments(d, np.random.default_rng(0).uniform(1.0, 15.0, a.segments), "a segment")
        write_jsonl(d / "segments.jsonl", segs)
        write_jsonl(
            d / "units.jsonl",
            [
                {"id": s["id"], "units": [(i * 7) % 50 for i in range(int(s["duration"] * 50))], "frame_rate": 50.0}
                for s in segs
            ],
        )
        audio = sum(s["duration"] for s in segs)
        print(f"{len(segs)} segments, {audio:.0f} s of audio, CPU, {a.repeats} repeats")
        res: dict[str, list[dict]] = {"loop": [], "stage": []}
        for r in range(a.repeats):
            for variant in ("loop", "stage") if r % 2 == 0 else ("stage", "loop"):
                p = subprocess.run(
                    [sys.executable, __file__, "--_variant", variant, "--_dir", tmp],
                    capture_output=True,
                    text=True,
                    encoding="utf-8",
                )
                if p.returncode:
                    sys.exit(f"{variant} failed:\n{p.stderr[-3000:]}")
                m = json.loads(p.stdout.strip().splitlines()[-1])
                res[variant].append(m)
                print(
                    f"  {variant:5s} repeat {r}: {m['segments'] / m['seconds']:.3f} segments/s "
                    f"({m['seconds']:.1f} s wall, {m['cpu_seconds']:.1f} s CPU), peak RSS {m['peak_rss_mb']:.0f} MB",
                    flush=True,
                )
        rate = {k: statistics.median(m["segments"] / m["seconds"] for m in v) for k, v in res.items()}
        rss = {k: statistics.median(m["peak_rss_mb"] for m in v) for k, v in res.items()}
        pairs = [s["seconds"] / l_["seconds"] for l_, s in zip(res["loop"], res["stage"], strict=False)]
        print(
            f"loop : {rate['loop']:.3f} segments/s (median), {rate['loop'] * audio / len(segs):.2f}x realtime, "
            f"peak RSS {rss['loop']:.0f} MB"
        )
        print(
            f"stage: {rate['stage']:.3f} segments/s (median), {rate['stage'] * audio / len(segs):.2f}x realtime, "
            f"peak RSS {rss['stage']:.0f} MB"
        )
        cpu = {k: statistics.median(m["cpu_seconds"] for m in v) for k, v in res.items()}
        print(
            f"stage / loop: {rate['stage'] / rate['loop']:.2f}x segments per second (per repeat: "
            + ", ".join(f"{1 / x:.2f}x" for x in pairs)
            + f"); {cpu['loop'] / cpu['stage']:.2f}x less CPU time "
            f"(median {cpu['stage']:.1f} s vs {cpu['loop']:.1f} s)"
        )
        diff = compare(Path(res["loop"][-1]["out"]), Path(res["stage"][-1]["out"]))
        print("largest difference, loop vs stage: " + ", ".join(f"{k} {v:.2g}" for k, v in diff.items()))


if __name__ == "__main__":
    main()
