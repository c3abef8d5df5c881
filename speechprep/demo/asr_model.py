"""Build the demo ASR model: a tiny character CTC model trained on the demo corpus.

NOT a speech recognizer. It is a 135k-parameter NeMo ``EncDecCTCModel``
(ConvASR encoder) trained for under a minute of CPU on the demo's clean
phrases and their ground-truth texts, so that the real NeMo loading and
transcription code can run end to end offline. On the demo corpus it
reproduces those texts; on anything else its output is meaningless.

Training stops on a criterion, not on a step count: after the schedule's
``STEPS`` batches, every clean phrase, cut at its true bounds and at each of
``PADS`` wider, must come out of greedy CTC decoding exactly; until it does,
training goes on in blocks of ``EXTRA_BLOCK`` batches (each a short cosine
cycle), at most ``MAX_EXTRA``, and past that the build fails saying so. Another
CPU (other BLAS kernels, AVX-512 or not) lands on other weights; the criterion,
not bit-exactness, is what makes the model right there too.

    python -m speechprep demo asr-model --truth resources/demo/truth.json --out resources/models/demo_asr.nemo
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path

from ..errors import SpeechprepError
from ..io.model_archive import save_nemo

log = logging.getLogger("speechprep.demo")
LABELS = [" "] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["'"]
# Training always runs on this many threads, whatever the job was given: thread
# count changes the order of float reductions, and with it the trained weights. One
# thread: a model this small gains nothing from two (two spent 6x the CPU time).
# The weights, their gradients and the optimizer are float64 (NeMo's preprocessor
# computes its features in float32 whatever it is given); the criterion reads, and the
# file holds, the float32 model. float64 costs ~13 % more time here and makes the
# trajectory far less sensitive to the order of float reductions.
TRAIN_THREADS = 1
# For checking that the criterion holds on other floating-point paths (docs/benchmarks/demo.md,
# "The demo ASR model on other CPUs"): threads for the training math, and oneDNN off.
THREADS_ENV, MKLDNN_ENV = "SPEECHPREP_DEMO_TRAIN_THREADS", "SPEECHPREP_DEMO_TRAIN_MKLDNN"
SAMPLE_RATE = 16000
STEPS = 600  # the schedule's batches: the demo's clean phrases are all right from 300 (bench/demo/asr_model.py)
BATCH = 16
# Each side of a training cut is moved by a uniform draw in JITTER (s; negative: into the
# words), each time the phrase is drawn. The criterion reads each clean phrase cut at its true
# bounds and PADS wider each side: TEN-VAD's segments end within VAD's 0.03 s pad and its onset
# latency of the words.
JITTER = (-0.02, 0.15)
PADS = (0.0, 0.03, 0.06, 0.1)
EXTRA_BLOCK, EXTRA_LR = 100, 0.002  # batches between checks past the schedule, and each block's peak rate
MAX_EXTRA = 800  # extra batches at most: past them the build fails


def phrases(truth_path: Path) -> list[dict]:
    """The demo's clean phrases: ``{"file", "start", "end", "file_duration", "text"}``."""
    truth = json.loads(truth_path.read_text(encoding="utf-8"))
    return [
        {"file": rel, "start": sp["start"], "end": sp["end"], "file_duration": info["duration"], "text": sp["text"]}
        for rel, info in sorted(truth["files"].items())
        if info.get("clean")
        for sp in info["speech"]
    ]


def cut_row(phrase: dict, before: float, after: float) -> dict:
    """``phrase`` cut ``before`` s earlier and ``after`` s later than its words (a negative
    value cuts into them), inside its file: ``{"file", "offset", "duration", "text"}``."""
    a = max(0.0, phrase["start"] - before)
    b = min(phrase["file_duration"], phrase["end"] + after)
    return {"file": phrase["file"], "offset": a, "duration": b - a, "text": phrase["text"]}


FEATURES, WIDTH = 64, 128  # mel features in, channels of the ConvASR blocks


def _block(filters, kernel, stride=1, residual=False) -> dict:
    """One separable ConvASR (Jasper) block."""
    return {
        "filters": filters,
        "repeat": 1,
        "kernel": [kernel],
        "stride": [stride],
        "dilation": [1],
        "dropout": 0.0,
        "residual": residual,
        "separable": True,
    }


def _modules() -> dict:
    """The preprocessor, encoder and decoder configs of the demo model."""
    return {
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "normalize": "per_feature",
            "window_size": 0.025,
            "window_stride": 0.01,
            "features": FEATURES,
            "n_fft": 512,
            "dither": 0.0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConvASREncoder",
            "feat_in": FEATURES,
            "activation": "relu",
            "conv_mask": True,
            "jasper": [
                _block(WIDTH, 11, stride=2),
                _block(WIDTH, 13, residual=True),
                _block(WIDTH, 15, residual=True),
                _block(WIDTH, 17, residual=True),
                _block(WIDTH, 1),
            ],
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.ConvASRDecoder",
            "feat_in": WIDTH,
            "num_classes": len(LABELS),
            "vocabulary": LABELS,
        },
    }


def model_config():
    from omegaconf import OmegaConf

    return OmegaConf.create({"sample_rate": 16000, "labels": LABELS, **_modules()})


def _cut(x, row: dict):
    a = int(round(row["offset"] * SAMPLE_RATE))
    return x[a : a + int(round(row["duration"] * SAMPLE_RATE))]


def _batches(rows: list[dict], audio: dict, batch_size: int, steps: int, seed: int):
    """``steps`` batches of ``(signal, lengths, targets, target lengths)`` tensors: the phrases
    shuffled once an epoch (``seed``), each cut afresh from its file's audio held in memory with
    its edges moved by a draw from ``JITTER`` (each side apart), so the model does not depend
    on exactly where VAD cuts."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    order: list[int] = []
    for _ in range(steps):
        if len(order) < batch_size:
            order += rng.permutation(len(rows)).tolist()
        pick, order = order[:batch_size], order[batch_size:]
        cuts = [cut_row(rows[i], *rng.uniform(*JITTER, size=2)) for i in pick]
        clips = [_cut(audio[c["file"]], c) for c in cuts]
        tokens = [[LABELS.index(c) for c in rows[i]["text"]] for i in pick]
        signal = torch.zeros(len(pick), max(map(len, clips)))
        targets = torch.zeros(len(pick), max(map(len, tokens)), dtype=torch.long)
        for j, (c, t) in enumerate(zip(clips, tokens)):
            signal[j, : len(c)] = torch.from_numpy(c)
            targets[j, : len(t)] = torch.tensor(t)
        yield signal, torch.tensor([len(c) for c in clips]), targets, torch.tensor([len(t) for t in tokens])


def _schedule(step: int, steps: int, warmup: int = 20, lr: float = 0.01, min_lr: float = 1e-4) -> float:
    """Linear warm-up, then cosine annealing to ``min_lr`` (NeMo's CosineAnnealing)."""
    import math

    if step < warmup:
        return lr * (step + 1) / warmup
    x = (step - warmup) / max(1, steps - warmup)
    return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * min(1.0, x)))


def criterion_cuts(truth_path: Path, pads=None) -> list[dict]:
    """The rows the criterion reads: each clean phrase at its true bounds and ``pads`` (``PADS``) wider."""
    pads = PADS if pads is None else pads
    return [{**cut_row(ph, pad, pad), "pad": pad} for ph in phrases(truth_path) for pad in pads]


def greedy_texts(model, clips, batch_size: int = BATCH) -> list[str]:
    """Greedy CTC decoding of ``clips`` (16 kHz float32 arrays) by the model in eval mode, as
    NeMo's greedy decoder does: the best label a frame, repeats merged, blanks dropped."""
    import torch

    blank = len(LABELS)
    texts = []
    with torch.inference_mode():
        for a in range(0, len(clips), batch_size):
            part = clips[a : a + batch_size]
            x = torch.zeros(len(part), max(map(len, part)))
            for j, c in enumerate(part):
                x[j, : len(c)] = torch.from_numpy(c)
            log_probs, enc_len, _ = model(input_signal=x, input_signal_length=torch.tensor([len(c) for c in part]))
            for row, n in zip(log_probs.argmax(-1).tolist(), enc_len.tolist()):
                ids = [t for k, t in enumerate(row[:n]) if t != blank and (k == 0 or t != row[k - 1])]
                texts.append("".join(LABELS[t] for t in ids))
    return texts


def as_saved(model, saved):
    """``saved`` (a float32 model of the same config) given ``model``'s weights, in eval mode:
    what the file holds and the pipeline runs."""
    saved.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in model.state_dict().items()})
    return saved.eval()


def check(model, saved, cuts: list[dict], audio: dict) -> dict:
    """The criterion on ``cuts``, read by ``model`` as saved (:func:`as_saved` into ``saved``):
    ``{"met", "phrases", "wrong_cuts", "word_errors", "words", "wer", "wrong"}`` (``wrong``:
    the first few ``(reference, heard)`` pairs)."""
    import editdistance

    heard = greedy_texts(as_saved(model, saved), [_cut(audio[r["file"]], r) for r in cuts])
    errors = sum(editdistance.eval(r["text"].split(), h.split()) for r, h in zip(cuts, heard))
    words = sum(len(r["text"].split()) for r in cuts)
    wrong = [(r["text"], h) for r, h in zip(cuts, heard) if h != r["text"]]
    return {
        "met": not wrong,
        "phrases": len(cuts),
        "wrong_cuts": len(wrong),
        "word_errors": errors,
        "words": words,
        "wer": round(errors / max(1, words), 4),
        "wrong": wrong[:3],
    }


class CriterionUnmet(SpeechprepError):
    """A demo model's build did not meet its criterion within its bound: the ASR model did not
    transcribe every clean phrase exactly within the extra batches allowed; the S2S k-means
    (:mod:`.s2s_models`) found no seed that met its criterion within the fits allowed."""

    exit_code = 4


def _read_audio(root: Path, names) -> dict:
    import soundfile as sf

    audio = {}
    for name in sorted(set(names)):
        x, rate = sf.read(root / name, dtype="float32", always_2d=True)
        assert rate == SAMPLE_RATE, f"{name}: the demo's clean clips are {SAMPLE_RATE} Hz"
        audio[name] = x.mean(axis=1)
    return audio


def build(truth_path: Path, out: Path, steps: int = STEPS, max_extra: int = MAX_EXTRA, seed: int = 0) -> dict:
    """Train NeMo's ``EncDecCTCModel`` with its own forward pass and CTC loss, the demo audio
    decoded once and held in memory (no data loader, no Lightning trainer), on one thread with
    fixed seeds: ``steps`` batches of the schedule, then extra blocks until :func:`check`'s
    criterion is met (at most ``max_extra`` batches, else :class:`CriterionUnmet`)."""
    import torch

    threads, mkldnn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    torch.set_num_threads(int(os.environ.get(THREADS_ENV, TRAIN_THREADS)))
    torch.backends.mkldnn.enabled = os.environ.get(MKLDNN_ENV, "1") != "0"
    try:
        return _build(truth_path, out, steps, max_extra, seed)
    finally:
        torch.set_num_threads(threads)
        torch.backends.mkldnn.enabled = mkldnn


def _train(model, opt, batches, n: int, lr_at) -> float:
    """``n`` batches of ``batches`` through the float64 model, the rate ``lr_at(k)`` at batch ``k``:
    the last batch's loss."""
    for step in range(n):
        x, xl, y, yl = next(batches)
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        log_probs, enc_len, _ = model(input_signal=x.double(), input_signal_length=xl)
        loss = model.loss(log_probs=log_probs, targets=y, input_lengths=enc_len, target_lengths=yl)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss)


def _build(truth_path: Path, out: Path, steps: int, max_extra: int, seed: int) -> dict:
    import torch
    from nemo.collections.asr.models import EncDecCTCModel

    torch.manual_seed(seed)
    random.seed(seed)
    rows = phrases(truth_path)
    cuts = criterion_cuts(truth_path)
    audio = _read_audio(truth_path.parent / "audio", [r["file"] for r in rows + cuts])
    model = EncDecCTCModel(cfg=model_config()).double()
    saved = EncDecCTCModel(cfg=model_config())
    n_params = sum(p.numel() for p in model.parameters())
    log.info(
        "demo ASR model: %d parameters, %d phrases, %d steps on %d CPU thread(s), oneDNN %s",
        n_params,
        len(rows),
        steps,
        torch.get_num_threads(),
        "on" if torch.backends.mkldnn.enabled else "off",
    )
    opt = torch.optim.AdamW(model.parameters(), lr=_schedule(0, steps), weight_decay=0.0)
    batches = _batches(rows, audio, BATCH, steps + max_extra, seed)
    t0 = time.monotonic()
    model.train()

    loss = _train(model, opt, batches, steps, lambda k: _schedule(k, steps))
    extra, result = 0, check(model, saved, cuts, audio)
    log.info(
        "after %d steps: %d of %d phrase cuts wrong, WER %.4f", steps, result["wrong_cuts"], len(cuts), result["wer"]
    )
    while not result["met"]:
        if extra >= max_extra:
            raise CriterionUnmet(
                f"demo ASR model: after {steps} + {extra} batches {result['word_errors']} of {result['words']} words "
                f"of the clean phrases still wrong (e.g. {result['wrong'][0]}); the bound is {max_extra} extra batches"
            )
        loss = _train(model, opt, batches, EXTRA_BLOCK, lambda k: _schedule(k, EXTRA_BLOCK, warmup=0, lr=EXTRA_LR))
        extra += EXTRA_BLOCK
        result = check(model, saved, cuts, audio)
        log.info(
            "after %d + %d steps: %d phrase cuts wrong, WER %.4f", steps, extra, result["wrong_cuts"], result["wer"]
        )
    train_s = time.monotonic() - t0
    save_nemo(as_saved(model, saved), out)
    info = {
        "parameters": n_params,
        "steps": steps + extra,
        "extra_steps": extra,
        "train_seconds": round(train_s, 1),
        "loss": round(loss, 4),
        "criterion": {k: result[k] for k in ("phrases", "words", "wer")},
    }
    log.info("demo ASR model saved to %s: criterion met (every clean phrase exact): %s", out, info)
    return info
