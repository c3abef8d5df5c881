#!/usr/bin/env python3
"""Curation measurements: the ``curate measure`` job vs a plain per-segment loop, same run.

    /path/to/curate-venv/bin/python bench/curate/throughput.py [--segments 30] [--repeats 3]

Segments of mixed length (1 to 15 s) of demo speech, read by offset/duration
from one long file (``speechprep.demo.long_source_segments``, as the TTS benchmark), with S2S-like
units. Both variants compute the same measures of every segment:

* loop: one segment at a time: read, ``speechmos.dnsmos.run``, pyloudnorm's
  meter, peak, clipping, DC, SNR (its file's non-speech), bandwidth, speaking rate, unit ratio,
  PCM sha256, MinHash, acoustic fingerprint, then Resemblyzer ``embed_utterance(preprocess_wav(x))``
  (what a hand-written script does), one JSON line and one ``.npy`` each;
* stage: ``speechprep.curate.measure.run`` (batches of ``batch.cpu_seconds``;
  DNSMOS windows batched with their full-resolution convolutions shared,
  Resemblyzer partials of a batch in one forward; resumable, atomic writes),
  ``curate.threads`` = 2.

Each variant runs in its own process, models loaded and run once on 2 s of
noise before the clock starts,
repeats interleaved; prints segments per second (median), the ratio, the
CPU time ratio (steadier than wall time on a shared machine), peak RSS, and
the largest difference between the two variants' numbers.

On real short clips (docs/benchmarks/curate.md, "Curation on short clips"):

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/curate/throughput.py \
        --real DIR [--repeats 3] [--baseline TREE] [--breakdown N]

``DIR`` holds real 1-4 s segments of a dozen voices, one per file, cut by the VAD
stage (``bench/curate/real_clips.py``, run in the VAD environment the first time).
The ``curate measure`` job runs as rules/curate.smk runs it (``python -m speechprep
... curate measure --threads 2``, models loaded inside, every fixed cost counted),
each run in a fresh process; its CPU seconds (user + system, all threads, from
``wait4``) per hour of segments, wall time and peak RSS are the medians of
``--repeats`` runs. ``--baseline TREE``: the same job with the ``speechprep`` of
another checkout (``git archive REV speechprep envs | tar -x -C TREE``) first on
``PYTHONPATH``, runs interleaved, with the same-run ratios and the largest
differences between their outputs. ``--breakdown N``: the CPU seconds of each measure
and of the fixed costs on the first ``N`` segments (0: all), one segment at a time,
each model on one thread, in this process: CPU seconds per hour of segments per measure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests.support, from any working directory

from speechprep.curate.decide import MEASURED as FIELDS  # noqa: E402
from speechprep.demo.corpus import long_source_segments  # noqa: E402


def measure_params():
    from speechprep.curate.params import MeasureParams
    from tests.support import params

    return params(MeasureParams, device="cpu", hash_cache=None)


def run_variant(variant: str, d: Path, out: Path) -> dict:
    """Run one variant on the segments in ``d``, outputs in ``out``: its wall and CPU seconds and peak RSS."""
    import torch

    from speechprep.core.modelstage import ShardFiles
    from speechprep.curate import measure
    from speechprep.curate import measures as M
    from speechprep.io.jsonio import read_jsonl

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
        t, cpu = run_loop(p, segs, units, out, warm)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "segments": len(segs),
        "out": str(out),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_loop(p, segs: list[dict], units: dict, out: Path, warm: list[np.ndarray]) -> tuple[float, float]:
    """Load and warm the loop's models, then measure segment by segment: the clocks' readings at its start."""
    import pyloudnorm
    from resemblyzer import VoiceEncoder, preprocess_wav
    from speechmos import dnsmos

    from speechprep.curate.duplicates import minhash_signature
    from speechprep.curate.fingerprint import fingerprint, unpack
    from speechprep.curate.nonspeech import NonSpeech
    from speechprep.io.audio import read_segment
    from speechprep.io.jsonio import write_jsonl

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
        lines.append(loop_line(p, s, x, u, d_, lufs, non_speech))
        sigs.append(minhash_signature(u, p.minhash_ngram, p.minhash_perm))
        fps.append(fingerprint(x))
        embs.append(enc.embed_utterance(preprocess_wav(x)))
        np.save(out / f"{s['id']}.npy", embs[-1])
    write_jsonl(out / "measures.jsonl", lines)
    np.save(out / "embeddings.npy", np.stack(embs))
    np.save(out / "minhash.npy", np.stack(sigs))
    np.save(out / "fingerprint.npy", np.stack([f if f is not None else unpack(None)[1] for f in fps]))
    return t, cpu


def loop_line(p, s: dict, x: np.ndarray, u: list[int] | None, d_: dict, lufs, non_speech) -> dict:
    """The loop's JSON line of one segment, from its audio, units, DNSMOS scores and loudness."""
    from speechprep.curate import measures as M

    cps, wps = M.speaking_rate(s.get("text"), len(x) / 16000)
    return {
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


def compare(loop: Path, stage: Path) -> dict[str, float]:
    """Largest absolute difference per field between the two variants' results (0 = identical)."""
    from speechprep.io.jsonio import read_jsonl

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


# -- real short clips ---------------------------------------------------------------------------
def real_corpus(d: Path) -> tuple[list[dict], float]:
    """The segments in ``d`` (made by bench/curate/real_clips.py in the VAD environment when
    missing) and their hours."""
    from speechprep.io.jsonio import read_jsonl

    if not (d / "segments.jsonl").exists():
        vad = REPO / ".venvs" / "vad" / "bin" / "python"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        subprocess.run([str(vad), str(REPO / "bench" / "curate" / "real_clips.py"), str(d)], check=True, env=env)
    segs = list(read_jsonl(d / "segments.jsonl"))
    return segs, sum(float(s["duration"]) for s in segs) / 3600


def run_job(d: Path, out: Path, tree: Path) -> dict:
    """``curate measure`` as rules/curate.smk runs it (2 threads), ``tree``'s speechprep first on the
    path, in a fresh process: its wall time, CPU seconds (user + system, every thread) and peak RSS."""
    from speechprep.jobs import job_params
    from tests.support import config

    params = {**json.loads(job_params("curate measure", config())), "device": "cpu", "hash_cache": None}
    files = {k: str(out / f"shard.{k}") for k in ("measures.jsonl", "embeddings.npy", "minhash.npy", "fingerprint.npy")}
    cmd = [sys.executable, "-m", "speechprep", "--env-file", str(REPO / "envs" / "curate.yaml"), "curate", "measure"]
    cmd += ["--segments", str(d / "segments.jsonl"), "--units", str(d / "units.jsonl"), "--params", json.dumps(params)]
    cmd += ["--threads", "2", "--resume", str(out / ".partial" / "shard.jsonl"), "--out", files["measures.jsonl"]]
    cmd += ["--embeddings", files["embeddings.npy"], "--minhash", files["minhash.npy"]]
    cmd += ["--fingerprint", files["fingerprint.npy"], "--rejects", str(out / "shard.measure_rejects.jsonl")]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "job.log", "w", encoding="utf-8") as log:
        t = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(tree)}  # and run in tree: python -m puts the working directory first
        child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tree)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        sys.exit(f"the job failed ({child.returncode}): {(out / 'job.log').read_text(encoding='utf-8')[-3000:]}")
    return {
        "seconds": time.perf_counter() - t,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "out": str(out),
    }


def measure_outputs(out: Path) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """A job's lines by id and its embedding, MinHash and fingerprint rows in line order."""
    from speechprep.io.jsonio import read_jsonl

    lines = {x["id"]: x for x in read_jsonl(out / "shard.measures.jsonl")}
    rows = [np.load(out / f"shard.{k}.npy") for k in ("embeddings", "minhash", "fingerprint")]
    return lines, *rows


def compare_jobs(a_dir: Path, b_dir: Path) -> dict[str, float]:
    """Largest absolute difference per measure between two jobs' outputs (counts of differing
    values for strings, differing rows for MinHash and fingerprints)."""
    (a, ea, ma, fa), (b, eb, mb, fb) = measure_outputs(a_dir), measure_outputs(b_dir)
    assert a.keys() == b.keys(), "the jobs measured different segments"
    diff: dict[str, float] = {}
    for f in FIELDS:
        pairs = [(a[i][f], b[i][f]) for i in a]
        if any(isinstance(x, str) for x, _ in pairs):
            diff[f] = float(sum(x != y for x, y in pairs))
        else:
            diff[f] = max((abs(x - y) if x is not None and y is not None else float(x != y)) for x, y in pairs)
    ra, rb = [a[i]["embedding_row"] for i in a], [b[i]["embedding_row"] for i in a]
    diff["embedding"] = float(np.abs(ea[ra] - eb[rb]).max())
    diff["minhash"] = float((ma[ra] != mb[rb]).any(axis=1).sum())
    diff["fingerprint"] = float(sum(x.tobytes() != y.tobytes() for x, y in zip(fa[ra], fb[rb], strict=True)))
    return diff


def jobs_main(a, d: Path, hours: float, tmp: Path) -> None:
    """The job (and the baseline's) ``a.repeats`` times, interleaved; medians and same-run ratios."""
    trees = {"current": REPO, **({"baseline": a.baseline.resolve()} if a.baseline else {})}
    res: dict[str, list[dict]] = {k: [] for k in trees}
    for r in range(a.repeats):
        for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
            m = run_job(d, tmp / f"{name}{r}", trees[name])
            res[name].append(m)
            cpu = m["cpu_seconds"]
            print(
                f"  {name:8s} repeat {r}: {cpu:.1f} CPU-s ({cpu / hours:.0f} per audio hour), "
                f"{m['seconds']:.1f} s wall, peak RSS {m['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    med = {
        k: {f: statistics.median(m[f] for m in v) for f in ("cpu_seconds", "seconds", "peak_rss_mb")}
        for k, v in res.items()
    }
    for k, m in med.items():
        print(
            f"{k}: {m['cpu_seconds'] / hours:.0f} CPU-s per audio hour (median {m['cpu_seconds']:.1f} CPU-s), "
            f"{m['seconds']:.1f} s wall, {hours * 3600 / m['seconds']:.1f}x real time, "
            f"peak RSS {m['peak_rss_mb']:.0f} MB"
        )
    if a.baseline:
        cpu = [b["cpu_seconds"] / c["cpu_seconds"] for b, c in zip(res["baseline"], res["current"], strict=True)]
        wall = [b["seconds"] / c["seconds"] for b, c in zip(res["baseline"], res["current"], strict=True)]
        ratios = lambda xs: ", ".join(f"{x:.2f}x" for x in xs)
        print(f"baseline / current, per repeat: CPU {ratios(cpu)}; wall {ratios(wall)}")
        diff = compare_jobs(Path(res["baseline"][-1]["out"]), Path(res["current"][-1]["out"]))
        print("largest difference, baseline vs current: " + ", ".join(f"{k} {v:.2g}" for k, v in diff.items()))


class Clock:
    """CPU seconds (this process, every thread) by name, each call's own: the time of a timed
    call inside another counts for the inner one only."""

    def __init__(self):
        self.cpu: Counter = Counter()
        self.stack: list[str] = []

    def time(self, name: str, f, *args):
        c = time.process_time()
        self.stack.append(name)
        try:
            return f(*args)
        finally:
            self.stack.pop()
            spent = time.process_time() - c
            self.cpu[name] += spent
            if self.stack:
                self.cpu[self.stack[-1]] -= spent

    def wrap(self, name: str, f):
        return lambda *args: self.time(name, f, *args)


def _dnsmos_part(part: str, x) -> str:
    """The breakdown's name of a run of one part of DNSMOS (speechprep.curate.dnsmos)."""
    if part == "full":
        return "DNSMOS P.835 full-resolution convolutions" + (" (window edges)" if len(x) > 1 else "")
    return {
        "mid": "DNSMOS P.835 pooling + convolution",
        "back": "DNSMOS P.835 per window",
        "p808": "DNSMOS P.808 model",
    }[part]


def _timed_models(clock: Clock, models) -> None:
    """Route the models' pieces through ``clock``: DNSMOS's parts, Resemblyzer's preprocessing and mel."""
    import resemblyzer
    from resemblyzer import audio

    dn = models.dnsmos
    run, feats = dn._run, dn._p808_features
    dn._run = lambda part, x: clock.time(_dnsmos_part(part, x), run, part, x)
    dn._p808_features = clock.wrap("DNSMOS P.808 spectrogram", feats)
    resemblyzer.preprocess_wav = clock.wrap("Resemblyzer preprocessing (VAD, level)", resemblyzer.preprocess_wav)
    audio.wav_to_mel_spectrogram = clock.wrap("Resemblyzer mel", audio.wav_to_mel_spectrogram)


def breakdown(segs: list[dict], d: Path) -> Counter:
    """CPU seconds of each measure over ``segs``, one segment at a time, every model on one thread,
    plus the fixed costs (imports in a fresh process, model load)."""
    import torch

    from speechprep.curate import measure
    from speechprep.curate import measures as M
    from speechprep.curate.duplicates import minhash_signature
    from speechprep.curate.fingerprint import fingerprint
    from speechprep.curate.nonspeech import NonSpeech
    from speechprep.io.audio import read_segment
    from speechprep.io.jsonio import read_jsonl

    torch.set_num_threads(1)
    p, clock = measure_params(), Clock()
    imports = "import torch, onnxruntime, librosa, resemblyzer, speechmos.dnsmos, speechprep.curate.measure"
    child = subprocess.Popen([sys.executable, "-c", imports], env={**os.environ, "PYTHONPATH": str(REPO)})
    usage = os.wait4(child.pid, 0)[2]
    clock.cpu["fixed: interpreter + imports"] = usage.ru_utime + usage.ru_stime
    models = clock.time("fixed: model load", measure.Models, p, "cpu", 1)
    units = {u["id"]: u["units"] for u in read_jsonl(d / "units.jsonl")}
    non_speech = NonSpeech(segs, p.snr_noise_seconds)
    for s in segs:  # first calls (lazy imports, caches) off the clock
        x = read_segment(s, 16000, p.min_duration)
        measure.signal_measures(x, s, units.get(s["id"]), p, non_speech.read(s)), fingerprint(x), models.dnsmos([x])
        break
    _timed_models(clock, models)
    signal = {
        "loudness (LUFS)": lambda x, n: M.lufs(x, 16000),
        "peak, clipping, DC": lambda x, n: (M.peak_dbfs(x), M.clipping_ratio(x, p.clip_level), M.dc_offset(x)),
        "SNR (speech band)": lambda x, n: M.snr_db(x, n, 16000, tuple(p.snr_band_hz)),
        "bandwidth": lambda x, n: M.bandwidth_hz(x, 16000, p.bandwidth_floor_db),
        "PCM sha256": lambda x, n: M.pcm_sha256(x),
        "acoustic fingerprint": lambda x, n: fingerprint(x),
    }

    def text_and_units(s: dict, u: list[int] | None, n: int) -> tuple:
        rates = M.speaking_rate(s.get("text"), n / 16000)
        return rates, M.text_unit_ratio(s.get("text"), u), minhash_signature(u, p.minhash_ngram, p.minhash_perm)

    batch = []
    for s in segs:
        x = clock.time("read audio", read_segment, s, 16000, p.min_duration)
        noise = clock.time("read the file's non-speech (SNR)", non_speech.read, s)
        for name, f in signal.items():
            clock.time(name, f, x, noise)
        u = units.get(s["id"])
        clock.time("rates, MinHash", text_and_units, s, u, len(x))
        clock.time("DNSMOS other (windows, maps, scores)", models.dnsmos, [x])
        batch.append(x)
        if sum(map(len, batch)) >= p.batch.cpu_seconds * 16000 or s is segs[-1]:
            clock.time("Resemblyzer LSTM (and the rest)", models.speaker, batch)
            batch = []
    return clock.cpu


def real_main(a) -> None:
    """--real: the job's CPU per hour of real short segments, and (--breakdown) per measure."""
    d = a.real.resolve()
    segs, hours = real_corpus(d)
    durations = [float(s["duration"]) for s in segs]
    voices = len({s.get("speaker") for s in segs})
    print(
        f"{len(segs)} real segments of {min(durations):.2f}-{max(durations):.2f} s (median "
        f"{statistics.median(durations):.2f} s), {hours * 60:.1f} min, {voices} voices, one file each; CPU"
    )
    if a.repeats:
        with tempfile.TemporaryDirectory() as tmp:
            jobs_main(a, d, hours, Path(tmp))
    if a.breakdown is None:
        return
    part = segs[: a.breakdown or None]
    h = sum(float(s["duration"]) for s in part) / 3600
    cpu = breakdown(part, d)
    total = sum(v for k, v in cpu.items() if not k.startswith("fixed"))
    print(f"per measure, {len(part)} segments ({h * 60:.1f} min), one at a time, one thread each:")
    for name, v in sorted(cpu.items(), key=lambda kv: -kv[1]):
        if not name.startswith("fixed"):
            print(f"  {name:58s} {v:8.2f} CPU-s {v / h:7.1f} CPU-s per audio hour {100 * v / total:5.1f} %")
    print(f"  {'all measures':58s} {total:8.2f} CPU-s {total / h:7.1f} CPU-s per audio hour")
    for name, v in cpu.items():
        if name.startswith("fixed"):
            print(f"  {name:58s} {v:8.2f} CPU-s per job ({v / hours:.1f} per audio hour in a job of this corpus)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--real", type=Path, help="real short clips (made there by bench/curate/real_clips.py once)")
    ap.add_argument("--baseline", type=Path, help="with --real: a checkout whose speechprep runs the job beside")
    ap.add_argument("--breakdown", type=int, help="with --real: CPU per measure on the first N segments (0: all)")
    ap.add_argument("--_variant", help=argparse.SUPPRESS)
    ap.add_argument("--_dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._variant:
        d = Path(a._dir)
        out = Path(tempfile.mkdtemp(dir=d))
        print(json.dumps(run_variant(a._variant, d, out)))
        return
    if a.real:
        real_main(a)
    else:
        demo_main(a)


def demo_main(a) -> None:
    """The loop and the stage on demo segments of 1-15 s, interleaved."""
    from speechprep.io.jsonio import write_jsonl

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
