#!/usr/bin/env python3
"""Speaker embeddings per second: the pipeline's encoders (``speakers.model``) against each
library's own loop, same run, on real speech.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/speakers/embeddings.py \\
        [--models resemblyzer tiny /models/titanet-l.nemo ...] [--clips 256] [--seconds 1.6] \\
        [--repeats 3] [--threads 1] [--device cpu|cuda] [--per-forward 1 2 4 8 16 64]

The clips are the diarization's windows (``--seconds`` each, 1.6 s by default) cut from real
recordings (Debian's: the LibriVox reader, the cards speaker, the ALSA voice, KLettres'
speakers; tests/real_speech.py). ``tiny`` builds NeMo's tiny random TitaNet and the tiny
WeSpeaker / 3D-Speaker ONNX models from code (speechprep.models); any ``.nemo`` or ``.onnx``
path is read as ``speakers.model`` reads it (e.g. the real-size TitaNet-L of
``python -m speechprep models build-real-size``). Per model, repeats interleaved, medians:

* ours: :func:`speechprep.encoders.make_encoder`, every clip in one call (it batches them:
  Resemblyzer's partials through the LSTM together, NeMo's clips padded to 8 s a forward on
  the CPU (120 s on a GPU),
  ONNX clips of one length a run);
* loop: the library's own way, one clip a call: Resemblyzer's ``preprocess_wav`` and
  ``embed_utterance``, NeMo's
  ``EncDecSpeakerLabelModel.infer_segment``, one ONNX Runtime run per clip (as WeSpeaker's
  and 3D-Speaker's extraction scripts do, on the same Kaldi fbank).

Prints embeddings per second of each, their ratio, and the largest 1 - cosine between the
two ways' vectors. ``--per-forward N ...``: for each ``.nemo`` model, ours again with at most
``N`` clips a forward (``encoders.nemo_speaker.CPU_BATCH_SAMPLES``, 8 s of audio by default;
``BATCH_SAMPLES``, 120 s, on a GPU).
``--device cuda`` runs both on a GPU (ONNX on the CUDA provider when the
env has it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.simplefilter("ignore")


def clips(n: int, seconds: float) -> list[np.ndarray]:
    """``n`` windows of ``seconds`` from real speech, in turn from each voice."""
    from tests.diarize import conversations as C

    voices = C.voices("librivox", "cards", "alsa", "klettres_en", "klettres_fr", "klettres_lt")
    width, out = int(seconds * 16000), []
    streams = [np.concatenate(v) for v in voices.values()]
    k = 0
    while len(out) < n:
        s = streams[k % len(streams)]
        at = (k // len(streams)) * width % max(1, len(s) - width)
        out.append(s[at : at + width].astype(np.float32))
        k += 1
    return out


def tiny_models(out: Path) -> list[str]:
    from speechprep.models import speaker_nemo, speaker_onnx

    onnx = speaker_onnx.build_tiny(out)
    titanet = speaker_nemo.build_one("titanet", out / "titanet.nemo")
    return [str(titanet), str(onnx["wespeaker"]), str(onnx["3d-speaker"])]


def loop_of(spec: str, encoder):
    """The library's own one-clip-a-call loop for the encoder ``spec`` made."""
    if spec == "resemblyzer":
        from resemblyzer import preprocess_wav

        return lambda xs: [encoder.model.embed_utterance(preprocess_wav(x)) for x in xs]
    if spec.endswith(".nemo"):
        return lambda xs: [encoder.model.infer_segment(x)[0].reshape(-1).cpu().numpy() for x in xs]
    return lambda xs: [encoder([x])[0] for x in xs]


def unit(v) -> np.ndarray:
    v = np.asarray(v, np.float64).reshape(-1)
    return v / np.linalg.norm(v)


def bench(spec: str, data: list[np.ndarray], repeats: int, threads: int, device: str) -> dict:
    from speechprep.encoders import make_encoder

    encoder = make_encoder(spec, device, threads)
    loop = loop_of(spec, encoder)
    encoder(data[:4]), loop(data[:4])  # warm: lazy imports, kernel caches
    times: dict[str, list[float]] = {"ours": [], "loop": []}
    got: dict[str, list] = {}
    for _ in range(repeats):
        for name, call in (("ours", encoder), ("loop", loop)):
            t = time.perf_counter()
            got[name] = call(data)
            times[name].append(time.perf_counter() - t)
    diff = max(1 - float(unit(a) @ unit(b)) for a, b in zip(got["ours"], got["loop"], strict=True))
    ours, theirs = (len(data) / statistics.median(times[k]) for k in ("ours", "loop"))
    return {"model": Path(spec).name, "ours": ours, "loop": theirs, "ratio": ours / theirs, "diff": diff}


def per_forward(spec: str, data: list[np.ndarray], sizes: list[int], repeats: int, threads: int, device: str):
    """Embeddings/s of ours on a ``.nemo`` model at each of ``sizes`` clips a forward."""
    from speechprep.encoders import make_encoder, nemo_speaker

    name = "BATCH_SAMPLES" if device.startswith("cuda") else "CPU_BATCH_SAMPLES"
    encoder, default = make_encoder(spec, device, threads), getattr(nemo_speaker, name)
    encoder(data[:2])
    times: dict[int, list[float]] = {n: [] for n in sizes}
    try:
        for _ in range(repeats):
            for n in sizes:
                setattr(nemo_speaker, name, n * max(len(x) for x in data))
                t = time.perf_counter()
                encoder(data)
                times[n].append(time.perf_counter() - t)
    finally:
        setattr(nemo_speaker, name, default)
    return {n: len(data) / statistics.median(t) for n, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["resemblyzer", "tiny"])
    ap.add_argument("--clips", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=1.6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--per-forward", type=int, nargs="*", default=[])
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    data = clips(a.clips, a.seconds)
    with tempfile.TemporaryDirectory() as tmp:
        specs = [m for spec in a.models for m in (tiny_models(Path(tmp)) if spec == "tiny" else [spec])]
        print(f"{a.clips} clips of {a.seconds} s of real speech, {a.threads} thread(s), {a.device}")
        print("| model | ours (embeddings/s) | library's loop | ratio | max 1 - cos |")
        print("|---|---|---|---|---|")
        for spec in specs:
            r = bench(spec, data, a.repeats, a.threads, a.device)
            print(f"| {r['model']} | {r['ours']:.1f} | {r['loop']:.1f} | {r['ratio']:.2f} | {r['diff']:.1e} |")
        for spec in (s for s in specs if a.per_forward and s.endswith(".nemo")):
            rates = per_forward(spec, data, a.per_forward, a.repeats, a.threads, a.device)
            print(
                f"{Path(spec).name}: embeddings/s by clips a forward: "
                + ", ".join(f"{n}: {r:.2f}" for n, r in rates.items())
            )


if __name__ == "__main__":
    main()
