#!/usr/bin/env python3
"""Per-file diarization: the step per audio hour against a plain per-window embedding loop, same run.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/diarize/throughput.py \\
        [--minutes 5] [--repeats 3] [--threads 1] [--hop 0.25] [--sortformer MODEL.nemo]

A conversation of three real voices (the LibriVox reader, KLettres' Lithuanian and
French speakers; turns of 2-15 s, a third of them after a pause, the rest
0-0.2 s after the last; built as tests/diarize/conversations.py builds them), its
VAD segments from the true speech. Three variants, repeats interleaved, each on
the same windows (Resemblyzer's 1.6 s partials every ``--hop`` s inside each
segment):

* loop: the plain way, one ``VoiceEncoder.embed_utterance`` call per window on the
  window's own samples (mel spectrogram and LSTM forward per window);
* windows: :func:`speechprep.diarize.embed.window_embeddings`, one mel spectrogram
  per VAD segment, sliced, every window through the LSTM in batches;
* step: :func:`speechprep.diarize.core.diarize_file`, the windows and then all the
  rest (change scores, pieces, clustering, Viterbi turns, change points, overlaps,
  segment decisions);
* sortformer (with ``--sortformer``, a Sortformer ``.nemo``, e.g. the real-size one of
  ``python -m speechprep models build-real-size``): :func:`speechprep.diarize.sortformer.diarize_file`,
  the model over 90 s windows (``diarize.window``) plus the same windows for linking;
* job: the workflow's shard job (:func:`speechprep.diarize.stage.run`) on the
  conversation written as a FLAC file with its VAD segment lines: the step, plus
  decoding the audio around the segments and writing every output (no resume file).

Prints wall seconds (median), seconds per audio hour, audio seconds per second, the
loop/step and loop/windows ratios, CPU seconds, and the largest difference between
the loop's and the batched windows' vectors (1 - cosine). torch runs ``--threads``
intra-op threads.
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


def conversation(minutes: float, seed: int = 0):
    from tests.diarize import conversations as C

    return C.three_voices(("librivox", "klettres_lt", "klettres_fr"), seed, seconds=minutes * 60)


def job_variant(model, conv, segs, threads: int, hop: float, tmp: Path):
    """The shard job on the conversation as a FLAC file and its segment lines."""
    import soundfile as sf

    from speechprep.diarize import stage
    from speechprep.diarize.params import DiarizeJobParams
    from speechprep.io.jsonio import write_jsonl
    from tests.support import params as config_params

    sf.write(tmp / "conv.flac", conv.audio, 16000, subtype="PCM_16")
    lines = [
        {
            "id": f"conv_{k:04d}",
            "file_id": "conv",
            "audio_filepath": str(tmp / "conv.flac"),
            "offset": s,
            "duration": e - s,
        }
        for k, (s, e) in enumerate(segs)
    ]
    write_jsonl(tmp / "vad.jsonl", lines)
    files = stage.DiarizeFiles(str(tmp / "vad.jsonl"), *(str(tmp / f"{k}.jsonl") for k in ("s", "r", "t", "k", "st")))
    p = config_params(DiarizeJobParams, device="cpu", hop=hop)
    return lambda: stage.run(files, p, threads, model=model)


def sortformer_variant(path: str, model, conv, segs, p, threads: int):
    """The Sortformer ``path`` over the file's windows, linked by ``model``'s windows."""
    from speechprep.diarize import sortformer
    from speechprep.encoders.nemo_speaker import NemoSortformer

    both = sortformer.SortformerModels(NemoSortformer(path, "cpu", threads), model)
    return lambda: sortformer.diarize_file(both, conv.audio, segs, p)


def timed(fn):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t, time.process_time() - c, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hop", type=float, default=0.25)
    ap.add_argument("--sortformer", default=None)
    a = ap.parse_args()

    import torch

    from speechprep.diarize.core import diarize_file
    from speechprep.diarize.embed import window_embeddings, window_loop, windows_per_batch
    from speechprep.diarize.params import DiarizeParams
    from speechprep.encoders import ResemblyzerEncoder
    from tests.support import params as config_params

    torch.set_num_threads(a.threads)
    model = ResemblyzerEncoder("cpu", a.threads).model
    p = config_params(DiarizeParams, device="cpu", hop=a.hop)
    conv = conversation(a.minutes)
    segs = conv.vad_segments()
    batch = windows_per_batch(model, p.batch)
    speech = sum(e - s for s, e in segs)
    warm = window_embeddings(model, conv.audio, segs[:1], p.hop, batch)  # librosa's first call, torch's
    window_loop(model, conv.audio, warm)
    win = window_embeddings(model, conv.audio, segs, p.hop, batch)
    variants = {
        "loop": lambda: window_loop(model, conv.audio, win),
        "windows": lambda: window_embeddings(model, conv.audio, segs, p.hop, batch).emb,
        "step": lambda: diarize_file(model, conv.audio, segs, p),
        "job": job_variant(model, conv, segs, a.threads, a.hop, Path(tempfile.mkdtemp())),
    }
    if a.sortformer:
        variants["sortformer"] = sortformer_variant(a.sortformer, model, conv, segs, p, a.threads)
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    out = {}
    for _ in range(a.repeats):
        for name, fn in variants.items():
            w, c, out[name] = timed(fn)
            wall[name].append(w)
            cpu[name].append(c)
    gap = 1 - np.einsum("ij,ij->i", out["loop"], out["windows"])
    hours = conv.duration / 3600
    print(
        f"{conv.duration:.0f} s of audio ({speech:.0f} s in {len(segs)} VAD segments), {len(win)} windows "
        f"every {p.hop} s, {len(out['step'].centroids)} speakers found; torch threads {a.threads}; "
        f"median of {a.repeats} interleaved runs"
    )
    print("| | wall (s) | s per audio hour | audio-s/s | CPU (s) |\n|---|---|---|---|---|")
    for name in variants:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"| {name} | {w:.2f} | {w / hours:.0f} | {conv.duration / w:.0f} | {c:.2f} |")
    loop, step, batched, job = (statistics.median(wall[k]) for k in ("loop", "step", "windows", "job"))
    print(f"loop / step: {loop / step:.2f}x; loop / windows: {loop / batched:.2f}x; loop / job: {loop / job:.2f}x")
    print(
        f"1 - cosine between the loop's and the batched windows' vectors: median {np.median(gap):.1e}, "
        f"largest {gap.max():.1e} (the mel's edge frames: framed with or without the audio around)"
    )


if __name__ == "__main__":
    main()
