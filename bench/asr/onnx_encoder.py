#!/usr/bin/env python3
"""Does the ASR encoder pay through ONNX Runtime on the CPU? The real-size
FastConformer encoder in eager PyTorch against its ONNX export in onnxruntime, on the same
preprocessor features of the same real speech, and the pipeline's decoding on each output.

    nice python3 bench/asr/onnx_encoder.py [--models fastconformer-ctc-large,parakeet-tdt-0.6b]
        [--seconds 60] [--threads 1,2] [--repeats 5] [--work ~/.cache/speechprep/asr_onnx]

Models and audio: ``bench/workflow/real_size.py``'s (random weights at the real size; the same real
speech, ``--seconds`` in all, in its duration-sorted batches of ``real_size.BATCH_S`` padded
seconds). Per model, the first eager worker restores the ``.nemo`` through the pipeline's
``speechprep.asr.model.load_model``, runs the preprocessor on each batch (features saved to
``--work`` as ``.npy``) and exports the encoder with NeMo's own ``model.encoder.export()``
(the TorchScript ``torch.onnx.export``, dynamic batch and time axes).

The asr env has no onnxruntime, so for each thread count two workers run side by side: eager
(``.venvs/asr``: ``model.encoder`` under ``torch.inference_mode``, ``torch.set_num_threads``)
and onnxruntime (``.venvs/s2s``: ``speechprep.s2s.runtime._session``, the S2S stage's session:
all graph optimisations, ``threads`` intra-op threads, sleeping idle threads, the arena on),
both reading the same ``.npy`` features. One untimed warm-up pass each, then ``--repeats``
passes over all the batches, interleaved (eager first on even repeats, onnxruntime first on
odd); each worker's CPU-s (user + system, ``getrusage``) per pass; the median is reported.

Then onnxruntime's encoder outputs go to the eager worker, which compares them with its own
(max |difference| over each segment's valid frames) and runs the pipeline's decoding on both
(``model.decoding``: the CTC head + greedy CTC, or TDT greedy_batch): the share of segments
whose token sequences are equal. The preprocessor and the decoding are timed once each, to
give the whole-job ratio ``(pre + eager encoder + decode) / (pre + onnx encoder + decode)``.

``--model-file NAME=PATH`` adds another ``.nemo`` under ``NAME`` (e.g. the demo model, whose
words, unlike random weights', mean something).

Figures and the command: docs/benchmarks/asr.md, "ASR encoder through ONNX Runtime".
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "workflow"))
import real_size  # noqa: E402 (the real-size models, their files, the real speech, its batches)

TAG = "@@ "  # the workers' replies; NeMo may print other lines


def reply(obj: dict) -> None:
    print(TAG + json.dumps(obj), flush=True)


def feature_files(work: Path) -> list[Path]:
    return sorted(work.glob("feats_*.npy"), key=lambda p: int(p.stem.split("_")[1]))


def load_features(work: Path) -> list[tuple]:
    """``[(features (B, mels, T) float32, lengths (B,) int64)]`` of each batch."""
    import numpy as np

    return [(np.load(p), np.load(p.with_name(p.name.replace("feats", "lens")))) for p in feature_files(work)]


# ---------------------------------------------------------------------------
# the eager worker (.venvs/asr)
# ---------------------------------------------------------------------------
def prepare(model, work: Path, seconds: float) -> dict:
    """The preprocessor's features of each batch to ``work`` (timed after a warm-up), and the encoder's export."""
    import numpy as np
    import torch

    clips = real_size.real_clips(seconds)
    batch_list = real_size.batches(clips)

    def features(b):
        sig = torch.zeros(len(b), max(map(len, b)))
        for i, c in enumerate(b):
            sig[i, : len(c)] = torch.from_numpy(c)
        with torch.inference_mode():
            return model.preprocessor(input_signal=sig, length=torch.tensor([len(c) for c in b]))

    features([clips[0][:32000]])
    cpu0 = real_size.cpu_s()
    feats = [features(b) for b in batch_list]
    pre_cpu = real_size.cpu_s() - cpu0
    work.mkdir(parents=True, exist_ok=True)
    for i, (f, n) in enumerate(feats):
        np.save(work / f"feats_{i}.npy", f.numpy().astype(np.float32))
        np.save(work / f"lens_{i}.npy", n.numpy().astype(np.int64))
    t, c = time.perf_counter(), real_size.cpu_s()
    # a copy: NeMo's export changes the module in place (ConvASREncoder: masked convolutions off)
    copy.deepcopy(model.encoder).export(str(work / "encoder.onnx"))
    export = {"export_wall_s": time.perf_counter() - t, "export_cpu_s": real_size.cpu_s() - c}
    meta = {"audio_s": sum(map(len, clips)) / 16000, "segments": len(clips), "batches": len(batch_list)}
    onnx_mb = sum(p.stat().st_size for p in work.iterdir() if p.suffix not in (".npy", ".json")) / 1e6
    meta.update(pre_cpu_s=pre_cpu, onnx_mb=onnx_mb, **export)  # onnx_mb: with its external data (> 2 GB)
    (work / "meta.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
    return meta


def eager_pass(model, feats: list) -> list:
    """The encoder on each batch: ``[(encoded (B, D, T'), encoded lengths)]``."""
    import torch

    out = []
    with torch.inference_mode():
        for f, n in feats:
            enc, elen = model.encoder(audio_signal=torch.from_numpy(f), length=torch.from_numpy(n))
            out.append((enc, elen))
    return out


def decode(model, enc, elen) -> list[list[int]]:
    """The pipeline's decoding of one batch's encoder output: each segment's token ids."""
    import torch

    with torch.inference_mode():
        if hasattr(model, "joint"):
            hyps = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=elen)
        else:
            hyps = model.decoding.ctc_decoder_predictions_tensor(model.decoder(encoder_output=enc), elen)
    hyps = hyps[0] if isinstance(hyps, tuple) else hyps
    return [[int(t) for t in h.y_sequence] for h in hyps]


def compare(model, work: Path, eager: list) -> dict:
    """onnxruntime's outputs (``work/ort_*.npy``) against eager: max |diff| over the valid
    frames, max |eager|, tokens equal per segment, the decoding's CPU-s (eager's outputs)."""
    import numpy as np
    import torch

    diff, scale, equal, segments, dec_cpu, tokens = 0.0, 0.0, 0, 0, 0.0, 0
    for i, (enc, elen) in enumerate(eager):
        got = torch.from_numpy(np.load(work / f"ort_{i}.npy"))
        got_len = torch.from_numpy(np.load(work / f"ort_len_{i}.npy"))
        if got.shape != enc.shape or not torch.equal(got_len.long(), elen.long()):
            raise SystemExit(f"batch {i}: onnxruntime gives {tuple(got.shape)}, eager {tuple(enc.shape)}")
        for j, n in enumerate(elen.tolist()):
            diff = max(diff, float((enc[j, :, :n] - got[j, :, :n]).abs().max()))
            scale = max(scale, float(enc[j, :, :n].abs().max()))
        c = real_size.cpu_s()
        ref = decode(model, enc, elen)
        dec_cpu += real_size.cpu_s() - c
        hyp = decode(model, got, got_len.to(elen.dtype))
        equal += sum(a == b for a, b in zip(ref, hyp))
        segments += len(ref)
        tokens += sum(map(len, ref))
    out = {"max_abs_diff": diff, "max_abs_eager": scale, "segments": segments, "tokens_equal": equal}
    return {**out, "decode_cpu_s": dec_cpu, "tokens": tokens}


def eager_worker(name: str, path: str, threads: int, work: Path, seconds: float) -> None:
    import torch

    torch.set_num_threads(threads)
    from speechprep.asr.model import load_model

    model = load_model(path, "cpu")
    meta = prepare(model, work, seconds) if not (work / "encoder.onnx").is_file() else {}
    feats = load_features(work)
    params = sum(p.numel() for p in model.encoder.parameters())
    reply({"ready": True, "encoder_parameters": params, **meta})
    out = None
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "run":
            c, t = real_size.cpu_s(), time.perf_counter()
            out = eager_pass(model, feats)
            reply({"cpu_s": real_size.cpu_s() - c, "wall_s": time.perf_counter() - t})
        elif cmd == "compare":
            reply(compare(model, work, out))
        elif cmd == "quit":
            return


# ---------------------------------------------------------------------------
# the onnxruntime worker (.venvs/s2s)
# ---------------------------------------------------------------------------
def ort_worker(threads: int, work: Path) -> None:
    import numpy as np

    from speechprep.s2s.runtime import _session

    t, c = time.perf_counter(), real_size.cpu_s()
    session = _session(work / "encoder.onnx", threads, spinning=False, arena=True)
    names = [i.name for i in session.get_inputs()]
    feats = load_features(work)
    reply({"ready": True, "inputs": names, "session_wall_s": time.perf_counter() - t,
           "session_cpu_s": real_size.cpu_s() - c})  # fmt: skip
    out = None
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "run":
            c, t = real_size.cpu_s(), time.perf_counter()
            out = [session.run(None, dict(zip(names, (f, n)))) for f, n in feats]
            reply({"cpu_s": real_size.cpu_s() - c, "wall_s": time.perf_counter() - t})
        elif cmd == "dump":
            for i, (enc, elen) in enumerate(out):
                np.save(work / f"ort_{i}.npy", enc)
                np.save(work / f"ort_len_{i}.npy", elen)
            reply({"dumped": len(out)})
        elif cmd == "quit":
            return


# ---------------------------------------------------------------------------
# the parent
# ---------------------------------------------------------------------------
class Worker:
    """A worker process in an env; ``ask(cmd)`` sends one line and returns its reply."""

    def __init__(self, env: str, args: list[str], threads: int, log: Path, **extra: str):
        wenv = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
        wenv.update(extra)
        cmd = [str(REPO / ".venvs" / env / "bin" / "python"), __file__, *args]
        self.log = open(log, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self.p = subprocess.Popen(cmd, env=wenv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, text=True)  # fmt: skip

    def read(self) -> dict:
        for line in self.p.stdout:
            if line.startswith(TAG):
                return json.loads(line[len(TAG) :])
        raise SystemExit(f"worker {self.p.args[2:]} ended ({self.p.wait()}); see {self.log.name}")

    def ask(self, cmd: str) -> dict:
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.read()

    def close(self) -> None:
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait()
        self.log.close()


def run_pair(a, name: str, threads: int) -> dict:
    """One model on ``threads`` threads: the interleaved repeats, then the comparison."""
    work = Path(a.work).expanduser() / name
    files = dict(x.split("=", 1) for x in a.model_file)
    path = files[name] if name in files else str(Path(a.dir).expanduser() / real_size.real_size_files()[name])
    log = Path(a.work).expanduser() / "workers.log"
    work.mkdir(parents=True, exist_ok=True)
    eager = Worker("asr", ["--eager", name, path, str(threads), str(work), str(a.seconds)], threads, log)
    ready = eager.read()
    workers = [("eager", eager)]
    if a.passive:  # the same eager encoder, its OpenMP threads sleeping when idle instead of spinning
        args = ["--eager", name, path, str(threads), str(work), str(a.seconds)]
        workers.append(("eager_passive", Worker("asr", args, threads, log, OMP_WAIT_POLICY="PASSIVE")))
        workers[-1][1].read()
    ort = Worker("s2s", ["--ort", str(threads), str(work)], threads, log)
    ort_ready = ort.read()
    workers.append(("onnxruntime", ort))
    for _, w in workers:
        w.ask("run")  # warm-up
    runs = {key: [] for key, _ in workers}
    for rep in range(a.repeats):  # each repeat starts one runtime further on
        for key, w in workers[rep % len(workers) :] + workers[: rep % len(workers)]:
            runs[key].append(w.ask("run"))
    ort.ask("dump")
    cmp = eager.ask("compare")
    for _, w in workers:
        w.close()
    meta = json.loads((work / "meta.json").read_text(encoding="utf-8"))
    out = {"model": name, "threads": threads, "runs": runs, "compare": cmp, "meta": meta}
    out.update(encoder_parameters=ready["encoder_parameters"], session=ort_ready)
    return out


def summary(r: dict, eager: str = "eager") -> dict:
    """Medians per audio hour: CPU-s of ``eager`` (or ``eager_passive``) and onnxruntime, their
    CPU and wall ratios, and the CPU ratio with the preprocessor and the decoding added."""
    per_h = 3600 / r["meta"]["audio_s"]
    med = {
        k: {m: statistics.median(x[m] for x in v) * per_h for m in ("cpu_s", "wall_s")} for k, v in r["runs"].items()
    }
    e, o = med[eager]["cpu_s"], med["onnxruntime"]["cpu_s"]
    pre, dec = r["meta"]["pre_cpu_s"] * per_h, r["compare"]["decode_cpu_s"] * per_h
    out = {"eager": e, "ort": o, "ratio": e / o, "wall_ratio": med[eager]["wall_s"] / med["onnxruntime"]["wall_s"]}
    return {**out, "pre": pre, "dec": dec, "job_ratio": (pre + e + dec) / (pre + o + dec)}


def report(results: list[dict]) -> None:
    head = "| model | threads | eager encoder CPU-s / audio h | onnxruntime | ratio (eager / ort): CPU, wall |"
    print(f"\n{head} + preprocessor + decoding: CPU ratio | max abs diff (max abs eager) | segments, equal tokens |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        c = r["compare"]
        for eager in (k for k in r["runs"] if k != "onnxruntime"):
            s, label = summary(r, eager), "" if eager == "eager" else " (eager: OMP_WAIT_POLICY=PASSIVE)"
            print(
                f"| {r['model']}{label} | {r['threads']} | {s['eager']:.0f} | {s['ort']:.0f} | "
                f"**{s['ratio']:.2f}x**, {s['wall_ratio']:.2f}x | "
                f"{s['job_ratio']:.2f}x (pre {s['pre']:.0f}, decoding {s['dec']:.0f}) | "
                f"{c['max_abs_diff']:.2e} ({c['max_abs_eager']:.1f}) | {c['tokens_equal']} / {c['segments']} |"
            )
    for r in results:
        runs = "; ".join(k + " [" + ", ".join(f"{x['cpu_s']:.1f}" for x in v) + "]" for k, v in r["runs"].items())
        print(f"{r['model']} x{r['threads']}: CPU-s per pass: {runs}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("--eager", "--ort"):
        sys.path.insert(0, str(REPO))
        if sys.argv[1] == "--eager":
            name, path, threads, work, seconds = sys.argv[2:7]
            eager_worker(name, path, int(threads), Path(work), float(seconds))
        else:
            ort_worker(int(sys.argv[2]), Path(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="fastconformer-ctc-large,parakeet-tdt-0.6b")
    ap.add_argument("--seconds", type=float, default=60.0, help="real speech, in all (s)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--passive", action="store_true", help="also eager with OMP_WAIT_POLICY=PASSIVE")
    ap.add_argument("--dir", default=str(Path.home() / ".cache/speechprep/real_size"))
    ap.add_argument("--work", default=str(Path.home() / ".cache/speechprep/asr_onnx"))
    ap.add_argument("--model-file", action="append", default=[], help="NAME=PATH: another .nemo (e.g. the demo model)")
    ap.add_argument("--json", help="write every pair's figures here")
    a = ap.parse_args()
    real_size.print_machine()
    results = []
    for name in a.models.split(","):
        for threads in map(int, a.threads.split(",")):
            results.append(run_pair(a, name, threads))
            s = summary(results[-1])
            print(f"{name} x{threads}: eager {s['eager']:.0f}, onnxruntime {s['ort']:.0f} CPU-s / audio h", flush=True)
    print(f"load average after: {os.getloadavg()}")
    report(results)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
