#!/usr/bin/env python3
"""What each model stage costs on CPU at the sizes labs run, on real speech: CPU-seconds per
audio hour on 1 and 2 threads, peak resident memory per batch-second, and the fixed part
(imports + model restore) a job pays once per shard.

    nice python3 bench/workflow/real_size.py [--seconds 120] [--threads 1,2] [--models all]
        [--dir ~/.cache/speechprep/real_size] [--json out.json]

Models: random weights at each real architecture and size
(``python -m speechprep models build-real-size``, built first if missing): they cost the
FLOPs and memory of the trained ones. Audio: real recordings (``python3 tests/real_speech.py``):
the LibriVox reader, the playing-card speaker, the ALSA voice, and telephone prompts of one
voice joined into ~12 s segments (8 kHz, resampled to 16 kHz), ``--seconds`` in all.

Each (model, threads) runs in a fresh worker process in the model's stage environment
(``.venvs/asr`` or ``.venvs/s2s``), loading the model through the pipeline's own code:

* ASR: ``speechprep.asr.model.load_model`` (the ``asr run`` job's), then two passes over the
  same duration-sorted batches: the split pass (preprocessor + FastConformer encoder, then
  the decoder: TDT greedy_batch with the model's ``max_symbols`` 10, or the CTC head and
  greedy CTC), and ``NemoTranscriber`` (the job's call: NeMo's own ``transcribe()``, one
  call per batch, no timestamps). Random weights make the TDT decoder emit whatever it
  emits: the tokens it emitted per audio second are printed with it;
* S2S: ``speechprep.s2s.fairseq_legacy.load`` of the fairseq checkpoint, then
  ``speechprep.s2s.models.dense_features`` (the torch path: the conv extractor per segment,
  the transformer batched) to layer 6 (base, as textlesslib's units) or 24 (large, all);
* speakers: ``speechprep.encoders.make_encoder`` of the TitaNet-L ``.nemo`` (embeddings).

Batches of the passes are filled to ``BATCH_S`` padded seconds. CPU seconds are the worker's
own (user + system, all threads; ``getrusage``) over the batches. Memory, measured before the
passes: batches of 10, 30 and 60 padded seconds (1, 3, 6 pieces of 10 s of the same speech), in
growing order; before each the process's peak (VmHWM) is reset (``/proc/self/clear_refs``),
after it the peak is read, less the resident memory (VmRSS) after the restore, a 2 s warm-up
batch, ``gc.collect()`` and ``malloc_trim(0)`` (without those two, batches reuse the memory the
restore freed; the restore's own peak is printed apart). MB per batch-second: the
least-squares slope of those against the padded seconds, and the 60 s batch's ratio. The
passes' peak RSS is printed too. Fixed part: the worker's wall and CPU seconds from its start
to the end of its imports, then of the restore, then of the warm-up batch.

Figures and the command: docs/benchmarks/real_size.md, "Real-size models".
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BATCH_S = 60.0  # padded seconds per batch of the passes (s2s.batch.cpu_seconds; asr's is 120)
PROBE_S = (10.0, 30.0, 60.0)  # the memory probe's batches: 1, 3, 6 pieces of 10 s
# name: (kind, environment, what it runs)
MODELS = {
    "parakeet-tdt-0.6b": ("asr", "asr", "FastConformer TDT 0.6B: encoder | decoder | transcribe()"),
    "fastconformer-ctc-large": ("asr", "asr", "FastConformer CTC large: encoder | decoder | transcribe()"),
    "hubert-base": ("s2s", "s2s", "HuBERT base features, layer 6"),
    "hubert-large": ("s2s", "s2s", "HuBERT large features, layer 24"),
    "titanet-l": ("speaker", "asr", "TitaNet-L embeddings"),
}
S2S_LAYER = {"hubert-base": 6, "hubert-large": 24}


# ---------------------------------------------------------------------------
# the worker: one model, one thread count
# ---------------------------------------------------------------------------
def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def status_mb(key: str) -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(key)


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


def real_clips(seconds: float) -> list:
    """Real speech at 16 kHz, ``seconds`` in all (module docstring)."""
    import numpy as np

    sys.path.insert(0, str(REPO / "tests"))
    import real_speech

    clips = [real_speech.read(u.path, 16000)[0] for f in (real_speech.librivox, real_speech.cards) for u in f()]
    clips += [real_speech.read(u.path, 16000)[0] for u in real_speech.alsa_voice()]
    gap, piece = np.zeros(4800, np.float32), []
    for u in real_speech.telephone_prompts("allison_en"):
        if sum(map(len, clips)) >= seconds * 16000:
            break
        piece += [real_speech.read(u.path, 16000)[0], gap]
        if sum(map(len, piece)) >= 12 * 16000:
            clips.append(np.concatenate(piece))
            piece = []
    kept, total = [], 0
    for c in clips:
        if total < seconds * 16000:
            kept.append(np.ascontiguousarray(c, dtype=np.float32))
            total += len(c)
    return kept


def batches(clips: list, budget: float = BATCH_S) -> list[list]:
    """Duration-sorted batches, each filled up to ``budget`` padded seconds."""
    out, cur = [], []
    for c in sorted(clips, key=len):
        if cur and len(c) * (len(cur) + 1) > budget * 16000:
            out.append(cur)
            cur = []
        cur.append(c)
    return [*out, cur] if cur else out


def probe(run, clips: list) -> list:
    """``[(padded s, peak RSS - RSS before the first probe, MB)]`` of batches of growing size
    (``PROBE_S``): 10 s pieces of the real speech joined end to end."""
    import numpy as np

    audio = np.concatenate(clips)
    pieces = [audio[i : i + 160000] for i in range(0, len(audio) - 159999, 160000)]
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    base, out = status_mb("VmRSS"), []
    for seconds in PROBE_S:
        batch = [pieces[i % len(pieces)] for i in range(int(seconds // 10))]
        reset_peak()
        run(batch)
        out.append((seconds, status_mb("VmHWM") - base))
    return out


def measure(run, batch_list: list) -> dict:
    """CPU and wall seconds of ``run`` over the batches, and each batch's memory above the RSS before it."""
    cpu0, wall0, mem, extra = cpu_s(), time.perf_counter(), [], {}
    for b in batch_list:
        rss = status_mb("VmRSS")
        reset_peak()
        for k, v in (run(b) or {}).items():  # counts (tokens) add up
            extra[k] = extra.get(k, 0) + v
        peak = status_mb("VmHWM")
        mem.append((len(b) * max(map(len, b)) / 16000, peak - rss))
        extra["peak_rss_mb"] = max(extra.get("peak_rss_mb", 0), peak)
    return {"cpu_s": cpu_s() - cpu0, "wall_s": time.perf_counter() - wall0, "batch_mem": mem, **extra}


def asr_parts(model):
    """``(encoder, decoder)`` runs of a NeMo CTC or RNNT/TDT model on a batch (the split pass)."""
    import torch

    state = {}

    def encoder(b):
        sig = torch.zeros(len(b), max(map(len, b)))
        for i, c in enumerate(b):
            sig[i, : len(c)] = torch.from_numpy(c)
        lens = torch.tensor([len(c) for c in b])
        with torch.inference_mode():
            feats, flen = model.preprocessor(input_signal=sig, length=lens)
            state["enc"] = model.encoder(audio_signal=feats, length=flen)

    def decoder(b):
        enc, elen = state.pop("enc")
        with torch.inference_mode():
            if hasattr(model, "joint"):
                hyps = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=elen)
            else:
                hyps = model.decoding.ctc_decoder_predictions_tensor(model.decoder(encoder_output=enc), elen)
        hyps = hyps[0] if isinstance(hyps, tuple) else hyps
        return {"tokens": sum(len(h.y_sequence) for h in hyps)}

    return encoder, decoder


def split_pass(encoder, decoder, batch_list: list) -> tuple[dict, dict]:
    """The encoder and the decoder measured apart over the same batches."""
    enc = {"cpu_s": 0.0, "wall_s": 0.0, "batch_mem": []}
    dec = {"cpu_s": 0.0, "wall_s": 0.0, "batch_mem": [], "tokens": 0}
    for b in batch_list:
        for run, acc in ((encoder, enc), (decoder, dec)):
            m = measure(run, [b])
            for k in acc:
                acc[k] += m.get(k, 0) if k != "batch_mem" else m[k]
    return enc, dec


def load(name: str, path: Path, threads: int):
    """Import what the stage's job imports and restore its model through the pipeline's code:
    ``(model, {fixed part}, run on a batch)``."""
    kind = MODELS[name][0]
    t, c = time.perf_counter(), cpu_s()
    import torch

    torch.set_num_threads(threads)
    if kind == "asr":
        from speechprep.asr.model import load_model
        from speechprep.asr.words import NemoTranscriber
    elif kind == "s2s":
        from speechprep.s2s import fairseq_legacy
        from speechprep.s2s.models import dense_features
    else:
        from speechprep.encoders import make_encoder
    fixed = {"import_wall_s": time.perf_counter() - t, "import_cpu_s": cpu_s() - c}
    t, c = time.perf_counter(), cpu_s()
    if kind == "asr":
        model = load_model(str(path), "cpu")
        transcriber = NemoTranscriber(model, timestamps=False)
        run = lambda b: transcriber(b, "en") and None
    elif kind == "s2s":
        model, _, task, _ = fairseq_legacy.load(path)
        norm = bool(task.cfg.normalize)
        run = lambda b: dense_features(model, b, S2S_LAYER[name], norm) and None
    else:
        model = make_encoder(str(path), "cpu", threads)
        run = lambda b: model(b) and None
    fixed.update(restore_wall_s=time.perf_counter() - t, restore_cpu_s=cpu_s() - c)
    return model, fixed, run


def worker(name: str, path: Path, threads: int, seconds: float, t_start: float) -> dict:
    """One model on ``threads`` threads: the fixed part, then the passes (module docstring)."""
    kind = MODELS[name][0]
    start_s = time.time() - t_start  # the interpreter's start, before this function
    model, fixed, run = load(name, path, threads)
    fixed["start_s"] = start_s
    fixed["restore_peak_mb"] = status_mb("VmHWM")  # the restore's own peak (archive, weights copied)
    gc.collect()  # the restore leaves cycles holding memory (NeMo: ~0.4 GB of the CTC large's 1.5 GB)
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # what the restore freed goes back: the baseline is what stays
    fixed["rss_after_restore_mb"] = status_mb("VmRSS")
    clips = real_clips(seconds)
    warm = measure(run, [[clips[0][:32000]]])
    fixed.update(warmup_wall_s=warm["wall_s"], warmup_cpu_s=warm["cpu_s"])
    batch_list = batches(clips)
    out_probe = probe(run, clips)  # first: the passes' batches would leave memory the allocator keeps
    out = {"model": name, "threads": threads, "audio_s": sum(map(len, clips)) / 16000, "segments": len(clips)}
    out["parameters"] = sum(p.numel() for p in getattr(model, "model", model).parameters())
    if kind == "asr":
        out["encoder"], out["decoder"] = split_pass(*asr_parts(model), batch_list)
        out["max_symbols"] = getattr(getattr(model.cfg.decoding, "greedy", {}), "max_symbols", None)
    out["job"] = measure(run, batch_list)
    out["fixed"], out["probe"] = fixed, out_probe
    return out


# ---------------------------------------------------------------------------
# the parent: build, run each worker, report
# ---------------------------------------------------------------------------
def per_batch_second(batch_mem: list) -> dict:
    """MB per padded batch-second: the least-squares slope over the probe's batches, and the largest one's ratio."""
    xs, ys = [s for s, _ in batch_mem], [m for _, m in batch_mem]
    n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if n > 1 and var > 0 else None
    big = max(range(n), key=lambda i: xs[i])
    return {"slope_mb_per_s": slope, "largest_batch_s": xs[big], "largest_mb_per_s": ys[big] / xs[big]}


def row(r: dict, part: str) -> dict:
    m = r[part]
    out = {
        "model": r["model"],
        "part": part,
        "threads": r["threads"],
        "cpu_s_per_audio_h": m["cpu_s"] * 3600 / r["audio_s"],
    }
    out["audio_h_per_core_h"] = r["audio_s"] / m["cpu_s"]
    out["rtf_wall"] = m["wall_s"] / r["audio_s"]
    out.update(per_batch_second(r["probe"]))
    if "tokens" in m:
        out["tokens_per_audio_s"] = m["tokens"] / r["audio_s"]
    return out


def run_worker(a, name: str, threads: int) -> dict:
    env = MODELS[name][1]
    python = REPO / ".venvs" / env / "bin" / "python"
    path = Path(a.dir) / real_size_files()[name]
    wenv = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
    cmd = [str(python), __file__, "--worker", name, str(path), str(threads), str(a.seconds), repr(time.time())]
    p = subprocess.run(cmd, env=wenv, cwd=REPO, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"worker {name} x{threads} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def real_size_files() -> dict:
    sys.path.insert(0, str(REPO))
    from speechprep.models.real_size import MODELS as BUILT

    return {name: spec[2] for name, spec in BUILT.items()}


def report(results: list[dict]) -> None:
    head = "| model | part | threads | CPU-s / audio h | audio h / core-h | wall RTF |"
    print(f"\n{head} MB / batch-s (slope; largest batch) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for part in ("encoder", "decoder", "job"):
            if part in r:
                x = row(r, part)
                slope = "-" if x["slope_mb_per_s"] is None else f"{x['slope_mb_per_s']:.1f}"
                tok = f" ({x['tokens_per_audio_s']:.1f} tokens/s)" if "tokens_per_audio_s" in x else ""
                print(
                    f"| {r['model']} | {part}{tok} | {r['threads']} | {x['cpu_s_per_audio_h']:.0f} | "
                    f"{x['audio_h_per_core_h']:.2f} | {x['rtf_wall']:.3f} | {slope}; "
                    f"{x['largest_mb_per_s']:.1f} at {x['largest_batch_s']:.0f} s |"
                )
    head = "| model | threads | parameters | start s | imports s (CPU) | restore s (CPU) | warm-up s |"
    print(f"\n{head} restore peak MB | RSS after restore MB | passes' peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        f = r["fixed"]
        print(
            f"| {r['model']} | {r['threads']} | {r['parameters'] / 1e6:.1f} M | {f['start_s']:.1f} | "
            f"{f['import_wall_s']:.1f} ({f['import_cpu_s']:.1f}) | "
            f"{f['restore_wall_s']:.1f} ({f['restore_cpu_s']:.1f}) | "
            f"{f['warmup_wall_s']:.1f} | {f['restore_peak_mb']:.0f} | {f['rss_after_restore_mb']:.0f} | "
            f"{r['job']['peak_rss_mb']:.0f} |"
        )


def print_machine() -> None:
    """The CPU, its cores and the load average before a run (the machines are shared)."""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    print(f"{cpu}, {os.cpu_count()} cores; load average before: {os.getloadavg()}", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        name, path, threads, seconds, t0 = sys.argv[2:7]
        sys.path.insert(0, str(REPO))
        print(json.dumps(worker(name, Path(path), int(threads), float(seconds), float(t0))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="real speech, in all (s)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--dir", default=str(Path.home() / ".cache/speechprep/real_size"))
    ap.add_argument("--json", help="write every worker's figures here")
    a = ap.parse_args()
    names = a.models.split(",")
    build = [str(REPO / ".venvs/asr/bin/python"), "-m", "speechprep", "models", "build-real-size", "--out", a.dir]
    subprocess.run([*build, "--only", *names], cwd=REPO, check=True, capture_output=True)
    print_machine()
    results = []
    for name in names:
        for threads in map(int, a.threads.split(",")):
            results.append(run_worker(a, name, threads))
            r = results[-1]
            print(f"{name} x{threads}: {r['job']['cpu_s']:.1f} CPU-s for {r['audio_s']:.1f} s of audio", flush=True)
    print(f"load average after: {os.getloadavg()}")
    report(results)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
