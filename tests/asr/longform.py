"""A long recording with its text, built from the demo clips, with the true sentence bounds.

The demo's 32 clean phrases (four espeak-ng voices) in a shuffled order, again
and again, with pauses of ``gap`` seconds, written block by block (a 2-hour
file never sits in memory). The text is a book's: every phrase a sentence
("The clock struck 9." for "the clock struck nine": digits are aligned in
spoken form), every fifth sentence two phrases joined by a comma. With
``intro``, the text opens with sentences nobody reads; with ``announcement``, a
real human voice (the LibriVox reader's sentences) speaks in the middle, which
the text lacks; with ``outro``, the text ends with a sentence nobody reads.
Used by tests/asr/test_transcripts_align.py and bench/asr/align_memory.py."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from speechprep.io.audio import read_segment
from tests.support import DEMO, TRUTH

INTRO = (
    "Chapter one of the book of demo phrases, read for speech prep. "
    "This preface was written by the editor in 1811 and nobody reads it aloud."
)
OUTRO = "Here ends the book, and what follows was never read."
WRITTEN = {"nine": "9", "one": "1", "two": "2"}  # words written as digits in the book's text
SR = 16000


@dataclass
class Recording:
    path: Path
    text: str
    duration: float
    sentences: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, written text)
    announcement: tuple[float, float] | None = None


def phrases() -> list[tuple[np.ndarray, str]]:
    """Each clean phrase's audio (its speech +- 0.05 s) and text."""
    out = []
    for rel, info in sorted(TRUTH["files"].items()):
        if not info.get("clean"):
            continue
        for sp in info["speech"]:
            seg = {"audio_filepath": str(DEMO / "audio" / rel), "offset": sp["start"] - 0.05,
                   "duration": sp["end"] - sp["start"] + 0.1}  # fmt: skip
            out.append((read_segment(seg), sp["text"]))
    return out


def written(text: str) -> str:
    return " ".join(WRITTEN.get(w, w) for w in text.split())


def build(
    path: Path, minutes: float, seed: int = 0, gap: tuple[float, float] = (0.4, 1.2),
    intro: bool = True, announcement: list[np.ndarray] | None = None, outro: bool = True,
) -> Recording:  # fmt: skip
    """Write the recording (16 kHz mono PCM_16 WAV) and return its text and truth."""
    rng = random.Random(seed)
    clips = phrases()
    rec = Recording(path, "", 0.0)
    texts = [INTRO] if intro else []
    t = 0.0
    with sf.SoundFile(str(path), "w", SR, 1, "PCM_16") as f:

        def put(x: np.ndarray) -> float:
            nonlocal t
            f.write(x)
            start, t = t, t + len(x) / SR
            return start

        put(np.zeros(int(0.5 * SR), np.float32))
        order: list[int] = []
        k = 0
        while t < minutes * 60:
            if not order:
                order = rng.sample(range(len(clips)), len(clips))
            if announcement is not None and rec.announcement is None and t >= minutes * 30:
                a = put(np.concatenate(announcement))
                rec.announcement = (a, t)
                put(np.zeros(int(0.7 * SR), np.float32))
            pair = k % 5 == 4 and len(order) >= 2
            idx = [order.pop(), order.pop()] if pair else [order.pop()]
            start = put(clips[idx[0]][0]) + 0.05
            if pair:
                put(np.zeros(int(rng.uniform(0.25, 0.45) * SR), np.float32))
                put(clips[idx[1]][0])
            end = t - 0.05
            words = ", ".join(written(clips[i][1]) for i in idx)
            sentence = words[0].upper() + words[1:] + "."
            rec.sentences.append((start, end, sentence))
            texts.append(sentence)
            put(np.zeros(int(rng.uniform(*gap) * SR), np.float32))
            k += 1
    rec.duration = t
    rec.text = " ".join(texts + ([OUTRO] if outro else []))
    return rec
