#!/usr/bin/env python3
"""Synthesize the bundled demo corpus with espeak-ng (run once; output is committed).

    .venvs/vad/bin/python scripts/make_demo_corpus.py [--out resources/demo]

Writes ``audio/<voice>/clipNN.{wav,flac}`` (16 kHz mono, two phrases separated by
a known silence, a faint noise floor), ``audio/edge_cases/*`` (deliberately bad
or unusual files), ``audio/variants/*`` (damaged copies of clean clips that the
curation stage must drop: noise at 0 and 30 dB, clipping, telephone bandwidth,
an exact and a re-encoded duplicate) and ``truth.json``
with, per file, the speech intervals and their texts or the outcome the
pipeline must produce. Needs espeak-ng on PATH; the demo itself does not.
``--variants-only`` rewrites only the variants, from the committed clean clips.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

SR = 16000
VOICES = {  # directory name -> espeak-ng voice
    "us_male": "en-us",
    "us_female": "en-us+f3",
    "scottish": "en-gb-scotland+travis",
    "caribbean": "en-029+steph",
}
PHRASES = [
    "the cat sat on the mat",
    "a red bus goes to town",
    "we like green apples",
    "open the door please",
    "the sun is very hot",
    "my dog can run fast",
    "put the cup on the table",
    "she reads a good book",
    "it is cold outside today",
    "he plays the old piano",
    "turn left at the bridge",
    "the bird sings at dawn",
    "we eat rice and fish",
    "close the window now",
    "the train is late again",
    "they walk in the park",
    "bring me some water",
    "the lamp is too bright",
    "a small boat on the lake",
    "the clock struck nine",
    "my hands are very cold",
    "the milk is in the fridge",
    "please sit down here",
    "the road is long and wet",
    "we sing a happy song",
    "the box is full of toys",
    "look at the tall tree",
    "the baby is asleep",
    "a fox ran past the farm",
    "the tea is still warm",
    "paint the fence blue",
    "the moon is out tonight",
]
NOISE = 3e-4  # noise floor (about -70 dBFS), so silence is not digital zero


def speak(text: str, voice: str) -> np.ndarray:
    """espeak-ng -> float32 mono at SR, leading/trailing silence trimmed."""
    wav = subprocess.run(["espeak-ng", "-v", voice, "--stdout", text], check=True, capture_output=True).stdout
    x, sr = sf.read(io.BytesIO(wav), dtype="float32")
    x = soxr.resample(x, sr, SR).astype(np.float32)
    loud = np.flatnonzero(np.abs(x) > 0.01 * np.abs(x).max())
    return x[loud[0] : loud[-1] + 1]


def compose(rng, pieces, gaps):
    """Interleave silences (``gaps``, len(pieces)+1, seconds) and speech."""
    out, t, spans = [], 0.0, []
    for i, (text, x) in enumerate(pieces):
        g = np.zeros(int(round(gaps[i] * SR)), np.float32)
        out.append(g)
        t += len(g) / SR
        spans.append({"start": round(t, 4), "end": round(t + len(x) / SR, 4), "text": text})
        out.append(x)
        t += len(x) / SR
    out.append(np.zeros(int(round(gaps[-1] * SR)), np.float32))
    y = np.concatenate(out)
    y = y + rng.normal(0.0, NOISE, len(y)).astype(np.float32)
    return np.clip(y, -1, 1).astype(np.float32), spans


# Damaged copies of clean clips: (name, source, damage, what curation does with them)
VARIANTS = [
    ("noise_0db", "us_female/clip02.wav", ("noise", 0.0), {"curate": "reject", "reason": "low_snr"}),
    # 30 dB of noise passes every quality check: what drops it is being a (near) copy of its source
    ("noise_30db", "scottish/clip03.flac", ("noise", 30.0), {"curate": "near_duplicate"}),
    ("clipped", "scottish/clip01.wav", ("clip", 20.0), {"curate": "reject", "reason": "clipped"}),
    ("narrowband", "caribbean/clip03.flac", ("band", 8000), {"curate": "reject", "reason": "narrowband"}),
    ("exact_dup", "us_male/clip04.flac", ("copy", None), {"curate": "reject", "reason": "duplicate"}),
    # MP3 at -4 dB: near (not exact) copies; their units' n-grams overlap, how much depends on the HuBERT
    ("near_dup", "us_female/clip04.flac", ("reencode", -4.0), {"curate": "near_duplicate"}),
]


def write_variants(audio: Path, files: dict) -> None:
    """``audio/variants/*``: the damaged copies, and their truth (the source's speech)."""
    from speechprep.demo import damage

    (audio / "variants").mkdir(parents=True, exist_ok=True)
    for k, (name, src, (kind, arg), outcome) in enumerate(VARIANTS):
        x, sr = sf.read(audio / src, dtype="float32")
        if kind == "noise":
            y = damage.add_noise(x, arg, seed=k)
        elif kind == "clip":
            y = damage.hard_clip(x, arg)
        elif kind == "band":
            y = damage.band_limit(x, sr, arg)
        elif kind == "reencode":
            y = damage.reencode(x, sr, "MP3", arg)
        else:
            y = x
        rel = f"variants/{name}.{'flac' if kind == 'copy' else 'wav'}"
        sf.write(audio / rel, y, sr, subtype="PCM_16")
        info = files[src]
        files[rel] = {
            "expect": "ok",
            "clean": False,
            "variant_of": src,
            "voice": info["voice"],
            "duration": info["duration"],
            "speech": info["speech"],
            **outcome,
        }


def write_truth(out: Path, truth: dict) -> None:
    """``truth.json`` in ``out``."""
    (out / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def rewrite_variants(out: Path) -> None:
    """``--variants-only``: the variants again from the committed clean clips, and their truth."""
    truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    truth["files"] = {k: v for k, v in truth["files"].items() if not k.startswith("variants/")}
    write_variants(out / "audio", truth["files"])
    write_truth(out, truth)


def write_clean_clips(audio: Path, rng: np.random.Generator, files: dict) -> None:
    """``audio/<voice>/clipNN.{wav,flac}``: four clips of two phrases per voice, and their truth."""
    phrase_iter = iter(PHRASES)
    for name, voice in VOICES.items():
        for k in range(1, 5):
            texts = [next(phrase_iter), next(phrase_iter)]
            pieces = [(t, speak(t, voice)) for t in texts]
            gaps = [rng.uniform(0.3, 0.7), rng.uniform(0.6, 1.0), rng.uniform(0.3, 0.6)]
            y, spans = compose(rng, pieces, gaps)
            ext = "wav" if k <= 2 else "flac"
            rel = f"{name}/clip{k:02d}.{ext}"
            (audio / name).mkdir(parents=True, exist_ok=True)
            sf.write(audio / rel, y, SR, subtype="PCM_16")
            files[rel] = {
                "expect": "ok",
                "clean": True,
                "voice": name,
                "duration": round(len(y) / SR, 4),
                "speech": spans,
            }


def say(text: str) -> tuple[str, np.ndarray]:
    """``text`` and its speech in the us_male voice: a piece for :func:`compose`."""
    return text, speak(text, VOICES["us_male"])


def write_rejected(edge: Path, rng: np.random.Generator, files: dict) -> None:
    """The edge cases that ingest or VAD must reject: unreadable, empty, non-finite, silent, too short."""
    (edge / "corrupt.wav").write_bytes(b"RIFF" + rng.integers(0, 256, 2044, dtype=np.uint8).tobytes())
    files["edge_cases/corrupt.wav"] = {"expect": "reject", "stage": "ingest", "reason": "unreadable"}
    (edge / "zero_length.wav").write_bytes(b"")
    files["edge_cases/zero_length.wav"] = {"expect": "reject", "stage": "ingest", "reason": "empty"}
    sf.write(edge / "header_only.wav", np.zeros(0, np.int16), SR, subtype="PCM_16")
    files["edge_cases/header_only.wav"] = {"expect": "reject", "stage": "ingest", "reason": "empty"}

    y, _ = compose(rng, [say("the cat sat on the mat")], [0.3, 0.3])
    y[len(y) // 2 : len(y) // 2 + 50] = np.nan
    sf.write(edge / "nan_float.wav", y, SR, subtype="FLOAT")
    files["edge_cases/nan_float.wav"] = {"expect": "reject", "stage": "vad", "reason": "non_finite"}
    y = rng.normal(0, 0.05, SR // 2).astype(np.float32)
    y[100] = np.inf
    sf.write(edge / "inf_float.wav", y, SR, subtype="FLOAT")
    files["edge_cases/inf_float.wav"] = {"expect": "reject", "stage": "vad", "reason": "non_finite"}

    y = rng.normal(0.0, NOISE, 2 * SR).astype(np.float32)
    sf.write(edge / "silence.wav", y, SR, subtype="PCM_16")
    files["edge_cases/silence.wav"] = {"expect": "reject", "stage": "vad", "reason": "no_speech"}
    sf.write(edge / "too_short.wav", rng.normal(0, 0.1, 160).astype(np.float32), SR, subtype="PCM_16")
    files["edge_cases/too_short.wav"] = {"expect": "reject", "stage": "vad", "reason": "too_short"}


def write_unusual(edge: Path, rng: np.random.Generator, files: dict) -> None:
    """The unusual but usable edge cases: stereo at 8 kHz and mono at 44.1 kHz."""
    # Unusual but usable: resampled / mixed down by the pipeline, never rejected.
    y, spans = compose(rng, [say("a red bus goes to town"), say("we like green apples")], [0.5, 0.8, 0.5])
    y8 = soxr.resample(y, SR, 8000)
    sf.write(edge / "stereo_8k.wav", np.stack([y8, 0.5 * y8], axis=1), 8000, subtype="PCM_16")
    files["edge_cases/stereo_8k.wav"] = {
        "expect": "ok",
        "clean": False,
        "duration": round(len(y) / SR, 4),
        "speech": spans,
        "sample_rate": 8000,
        "channels": 2,
        "curate": "reject",  # telephone bandwidth
        "reason": "narrowband",
    }
    y, spans = compose(rng, [say("open the door please")], [0.5, 0.5])
    sf.write(edge / "rate_44k.wav", soxr.resample(y, SR, 44100), 44100, subtype="PCM_16")
    files["edge_cases/rate_44k.wav"] = {
        "expect": "ok",
        "clean": False,
        "duration": round(len(y) / SR, 4),
        "speech": spans,
        "sample_rate": 44100,
        "channels": 1,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "resources" / "demo"))
    ap.add_argument("--variants-only", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    if args.variants_only:
        rewrite_variants(out)
        return
    audio = out / "audio"
    rng = np.random.default_rng(20261121)
    truth = {"sample_rate": SR, "voices": VOICES, "files": {}}
    write_clean_clips(audio, rng, truth["files"])

    edge = audio / "edge_cases"
    edge.mkdir(parents=True, exist_ok=True)
    files = truth["files"]
    write_rejected(edge, rng, files)
    write_unusual(edge, rng, files)
    (edge / "README.txt").write_text("Not audio: ignored by ingest (extension not listed).\n", encoding="utf-8")

    write_variants(audio, files)
    write_truth(out, truth)
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {len(files)} files under {audio} ({total / 1e6:.2f} MB with truth.json)")


if __name__ == "__main__":
    main()
