#!/usr/bin/env python3
"""Real 1-4 s segments as the pipeline cuts them, for ``bench/curate/throughput.py --real``.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/vad/bin/python bench/curate/real_clips.py OUT_DIR \
        [--per-voice 110] [--per-other 12]

Real recordings of a dozen voices (tests/real_speech.py): the five telephone voices
(8 kHz prompts, ``--per-voice`` files each), six KLettres speakers and the cards
speaker (16-44.1 kHz, ``--per-other`` files each). Every file goes through the VAD
stage's own per-file analysis (:func:`speechprep.vad.stage.analyze_file`, TEN-VAD,
the config's defaults, the narrowband settings for 8 kHz files), and a file is kept
when VAD finds exactly one segment of 1 to 4 s in it: one segment per file, with the
file's leading and trailing non-speech around it, as the measure job sees a corpus
of short prompts. Files are taken in path order, so the set is the same on every
machine. Writes ``OUT_DIR/segments.jsonl`` (the segment lines as ASR passes them
on, ``text``: the words of the file name, ``speaker``, ``language``) and
``OUT_DIR/units.jsonl`` (S2S-like units, 50 a second: what MinHash hashes; the S2S
models are not run here). Runs in the VAD environment (TEN-VAD).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import soundfile as sf

from speechprep.io.jsonio import write_jsonl
from speechprep.vad.params import VadParams
from speechprep.vad.stage import analyze_file
from tests import real_speech as R
from tests.support import params

KLETTRES = ("en", "fr", "he", "lt", "ml", "nb")
MIN_S, MAX_S = 1.0, 4.0


def sources(per_voice: int, per_other: int):
    """``(speaker, [utterances])`` of every voice, the telephone ones first."""
    for speaker in R.TELEPHONE_VOICES:
        yield speaker, R.telephone_prompts(speaker), per_voice
    for lang in KLETTRES:
        yield f"klettres_{lang}", R.klettres_voices(lang), per_other
    yield "cards_speaker", R.cards(), per_other


def one_segment(u: R.Utterance, k: int, p: VadParams) -> dict | None:
    """The file's only VAD segment as an ASR line, or None when VAD finds none, several,
    or one outside 1-4 s."""
    info = sf.info(str(u.path))
    if not MIN_S <= info.duration <= MAX_S + 6:
        return None
    entry = {
        "id": f"{u.speaker}__{k:04d}",
        "audio_filepath": str(u.path.resolve()),
        "sample_rate": info.samplerate,
        "duration": info.duration,
        "speaker": u.speaker,
        "language": u.language,
    }
    out = analyze_file(entry, p)
    segs = getattr(out, "data", {}).get("segments", [])
    if len(segs) != 1 or not MIN_S <= segs[0]["duration"] <= MAX_S:
        return None
    words = u.text or " ".join(w for w in re.split(r"[^a-zA-Z]+", u.path.stem) if w)
    return {**segs[0], "text": words}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--per-voice", type=int, default=110)
    ap.add_argument("--per-other", type=int, default=12)
    a = ap.parse_args()
    p = params(VadParams, text="asr")
    segs = []
    for speaker, utterances, want in sources(a.per_voice, a.per_other):
        got = []
        for k, u in enumerate(utterances):
            if len(got) == want:
                break
            s = one_segment(u, k, p)
            if s is not None:
                got.append(s)
        print(f"{speaker}: {len(got)} segments, {sum(s['duration'] for s in got):.0f} s")
        segs += got
    a.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(a.out / "segments.jsonl", segs)
    rng = np.random.default_rng(0)  # units of a 1000-unit k-means, 50 a second, in runs of 1-3 frames
    write_jsonl(a.out / "units.jsonl", [_units(s, rng) for s in segs])
    total = sum(s["duration"] for s in segs)
    print(f"{len(segs)} segments, {total:.0f} s ({total / 60:.1f} min) in {a.out}")


def _units(s: dict, rng) -> dict:
    n = int(s["duration"] * 50)
    units = np.repeat(rng.integers(0, 1000, n), rng.integers(1, 4, n))[:n]
    return {"id": s["id"], "units": units.tolist(), "frame_rate": 50.0}


if __name__ == "__main__":
    main()
