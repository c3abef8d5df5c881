"""Conversations built from real and synthetic voices, with the truth written as they are built.

A voice is a list of clips (16 kHz mono float32, its speech runs, one gain per voice): the
real speakers of ``tests/real_speech.py`` (the LibriVox reader's sentences, the
cards speaker, the ALSA voice, KLettres' letters and syllables per language) and
the demo's espeak-ng voices (their phrases cut out by ``truth.json``). A turn is
a voice's next clips, one after another with short pauses (50-150 ms, under
VAD's ``min_silence``), until it lasts what the plan says; an overlap is another
voice's clips added over a turn at the same RMS (0 dB). VAD segments are made
from the true speech by the VAD stage's own :func:`speechprep.vad.make_segments`
(merge under ``min_silence``, pad), as TEN-VAD would cut clean speech.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import soundfile as sf

from speechprep.vad.stage import VadParams, make_segments
from tests import real_speech
from tests.support import DEMO, TRUTH
from tests.support import params as config_params

SR = 16000
LEVEL = 0.05  # a voice's median clip RMS (about -26 dBFS)


def _runs(x: np.ndarray, below_peak_db: float = 35.0, bridge: float = 0.25, pad: float = 0.02) -> list[np.ndarray]:
    """The speech runs of a recording: its 10 ms frames within ``below_peak_db`` of its loudest,
    runs less than ``bridge`` s apart joined, each padded by ``pad`` (a KLettres clip is a letter
    in seconds of room noise: only the letter is kept)."""
    f = SR // 100
    n = len(x) // f
    if n == 0:
        return []
    e = 10 * np.log10(np.mean(x[: n * f].reshape(n, f) ** 2, axis=1) + 1e-12)
    on = np.flatnonzero(e > e.max() - below_peak_db)
    breaks = np.flatnonzero(np.diff(on) > bridge * 100)
    out = []
    for a, b in zip(on[np.r_[0, breaks + 1]], on[np.r_[breaks, len(on) - 1]]):
        out.append(x[max(0, a * f - int(pad * SR)) : min(len(x), (b + 1) * f + int(pad * SR))])
    return out


def _level(clips: list[np.ndarray]) -> list[np.ndarray]:
    """A voice's clips, one gain for all: their median RMS becomes ``LEVEL`` (each clip keeps
    its own loudness against the others, as a speaker's phrases do)."""
    rms = float(np.median([np.sqrt(np.mean(c**2)) for c in clips])) if clips else 1.0
    return [(c * (LEVEL / max(rms, 1e-6))).astype(np.float32) for c in clips]


def real_voice(name: str) -> list[np.ndarray]:
    """The clips of a real speaker: ``librivox``, ``cards``, ``alsa``, ``klettres_<lang>`` or
    ``tel_<speaker>`` (a held-apart voice's telephone prompts, ``real_speech.TELEPHONE_VOICES``,
    8 kHz up-sampled as the pipeline reads them)."""
    if name.startswith("klettres_"):
        utts = real_speech.klettres_voices(name.split("_", 1)[1])
    elif name.startswith("tel_"):
        utts = real_speech.telephone_prompts(name[len("tel_") :])
    else:
        utts = {"librivox": real_speech.librivox, "cards": real_speech.cards, "alsa": real_speech.alsa_voice}[name]()
    out = []
    for u in utts:
        out += [r for r in _runs(real_speech.read(u.path, SR)[0]) if len(r) >= 0.2 * SR]
    return _level(out)


def coded_voice(clips: list[np.ndarray], codec: str) -> list[np.ndarray]:
    """A voice's clips through a telephone codec (``real_speech.TELEPHONE_CODECS``) and back to
    16 kHz: all of them in one file, 0.5 s apart, coded once and cut where they were."""
    import tempfile
    from pathlib import Path

    gap = np.zeros(SR // 2, np.float32)
    starts = np.cumsum([0] + [len(c) + len(gap) for c in clips])
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "voice.wav"
        sf.write(src, np.concatenate([x for c in clips for x in (c, gap)]), SR, subtype="PCM_16")
        y = real_speech.read(real_speech.through_codec(src, codec, Path(tmp) / "coded.wav"), SR)[0]
    y = np.pad(y, (0, max(0, int(starts[-1]) - len(y))))
    return _level([y[a : a + len(c)] for a, c in zip(starts, clips)])


def espeak_voice(voice: str) -> list[np.ndarray]:
    """The demo's phrases of an espeak-ng voice (``us_male``, ``us_female``, ``scottish``, ``caribbean``)."""
    out = []
    for rel, info in sorted(TRUTH["files"].items()):
        if info.get("clean") and info.get("voice") == voice:
            x, _ = sf.read(str(DEMO / "audio" / rel), dtype="float32")
            out += [x[int(s["start"] * SR) : int(s["end"] * SR)] for s in info["speech"]]
    return _level(out)


def voice(name: str) -> list[np.ndarray]:
    """``espeak_<voice>``, a real voice (:func:`real_voice`), or ``<voice>@<codec>``: that voice
    through a telephone codec (:func:`coded_voice`)."""
    if "@" in name:
        base, codec = name.split("@")
        return coded_voice(voice(base), codec)
    return espeak_voice(name[len("espeak_") :]) if name.startswith("espeak_") else real_voice(name)


@dataclass
class Conversation:
    """A recording and its truth: speaker turns and overlaps, ``(start, end, speaker)`` in seconds."""

    audio: np.ndarray
    turns: list[tuple[float, float, str]] = field(default_factory=list)
    overlaps: list[tuple[float, float, str]] = field(default_factory=list)  # the voice talking over a turn

    @property
    def duration(self) -> float:
        return len(self.audio) / SR

    def speech(self) -> list[tuple[float, float]]:
        """The speech intervals (turns and overlaps, merged where they touch)."""
        out: list[list[float]] = []
        for s, e, _ in sorted([*self.turns, *self.overlaps]):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return [(s, e) for s, e in out]

    def vad_segments(self, params: VadParams | None = None) -> list[tuple[float, float]]:
        """VAD segments of the true speech, as the VAD stage makes them from speech frames."""
        p = params or config_params(VadParams)
        n = int(np.ceil(self.duration / p.hop_s))
        flags = np.zeros(n, np.uint8)
        for s, e in self.speech():
            flags[int(round(s / p.hop_s)) : int(round(e / p.hop_s))] = 1
        return make_segments(flags, flags.astype(np.float32), self.duration, p)

    def changes(self) -> list[float]:
        """Times where one voice's turn gives way to another's (the middle of the pause between them)."""
        t = self.turns
        return [(a[1] + b[0]) / 2 for a, b in pairwise(t) if a[2] != b[2]]


class Builder:
    """Appends turns, pauses and overlaps of voices (each voice's clips used in turn, cycling)."""

    def __init__(self, voices: dict[str, list[np.ndarray]], seed: int = 0):
        self.voices = voices
        self.next = dict.fromkeys(voices, 0)
        self.rng = np.random.default_rng(seed)
        self.parts: list[np.ndarray] = []
        self.t = 0.0
        self.conv = Conversation(np.zeros(0, np.float32))

    def _stretch(self, name: str, seconds: float) -> np.ndarray:
        clips, out, n = self.voices[name], [], 0
        while n < seconds * SR:
            if out:
                out.append(np.zeros(int(self.rng.uniform(0.05, 0.15) * SR), np.float32))
            out.append(clips[self.next[name] % len(clips)])
            self.next[name] += 1
            n = sum(len(c) for c in out)
        return np.concatenate(out)

    def pause(self, seconds: float) -> Builder:
        self.parts.append(np.zeros(int(round(seconds * SR)), np.float32))
        self.t += len(self.parts[-1]) / SR
        return self

    def turn(self, name: str, seconds: float) -> Builder:
        x = self._stretch(name, seconds)
        self.conv.turns.append((self.t, self.t + len(x) / SR, name))
        self.parts.append(x)
        self.t += len(x) / SR
        return self

    def overlap(self, name: str, seconds: float, at: float) -> Builder:
        """``name`` talks over the last turn from ``at`` s into it, for about ``seconds`` (0 dB)."""
        x = self._stretch(name, seconds)[: int(seconds * SR)]
        turn = self.parts[-1]
        a = int(at * SR)
        x = x[: max(0, len(turn) - a)]
        own = turn[a : a + len(x)]
        gain = np.sqrt(np.mean(own**2) / max(np.mean(x**2), 1e-12))
        turn[a : a + len(x)] += (x * gain).astype(np.float32)
        s = self.conv.turns[-1][0] + at
        self.conv.overlaps.append((s, s + len(x) / SR, name))
        return self

    def build(self, tail: float = 0.5) -> Conversation:
        self.pause(tail)
        self.conv.audio = np.concatenate(self.parts)
        return self.conv


# ---------------------------------------------------------------------------
# the plans the tests and bench/diarize/accuracy.py build
# ---------------------------------------------------------------------------
REAL = ("librivox", "cards", "alsa", *(f"klettres_{x}" for x in ("ar", "en", "fr", "he", "lt", "nb")))
ESPEAK = tuple(f"espeak_{x}" for x in ("us_male", "us_female", "scottish", "caribbean"))
_VOICES: dict[str, list[np.ndarray]] = {}


def voices(*names: str) -> dict[str, list[np.ndarray]]:
    """The clips of each voice named (read once per process)."""
    for n in names:
        if n not in _VOICES:
            _VOICES[n] = voice(n)
    return {n: _VOICES[n] for n in names}


# Conditions the diarization is measured in (bench/diarize/accuracy.py): the voices of each,
# ``first`` (real) and ``second`` (any of the condition's). Calibration: the voices the
# parameters were chosen on, wideband and through telephone codecs; held apart: voices they
# were never chosen on, KLettres' other speakers (wideband) and the telephone prompts'
# professional voices (8 kHz as published).
_TEL = dict(zip(REAL, ("gsm", "ulaw", "g726", "resample8k", "gsm", "ulaw", "g726", "resample8k", "gsm")))
HELD_WIDE = tuple(f"klettres_{x}" for x in ("da", "ml", "ru", "es", "cs", "it"))
HELD_TEL = tuple(f"tel_{x}" for x in real_speech.TELEPHONE_VOICES)
CONDITIONS = {
    "wideband": (REAL, REAL + ESPEAK),
    "telephone": (tuple(f"{v}@{c}" for v, c in _TEL.items()),) * 2,
    "held-wideband": (HELD_WIDE, HELD_WIDE),
    "held-telephone": (HELD_TEL, HELD_TEL),
}


def pairs(n: int, seed: int, condition: str = "wideband") -> list[tuple[str, str]]:
    """``n`` pairs of different voices of ``condition`` (``CONDITIONS``): the first always a
    real one, the second any of the condition's voices."""
    first, second = CONDITIONS[condition]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = str(rng.choice(first))
        out.append((a, str(rng.choice([v for v in second if v != a]))))
    return out


def turn_changes(a: str, b: str, seed: int) -> Conversation:
    """Four times: a turn of ``a``, 0-0.2 s, a turn of ``b`` (2.5-5 s each; one VAD segment
    holding one change), then a pause of 0.6-1 s; the voices swap places every time."""
    bl = Builder(voices(a, b), seed).pause(0.5)
    for first, second in ((a, b), (b, a), (a, b), (b, a)):
        bl.turn(first, bl.rng.uniform(2.5, 5)).pause(bl.rng.uniform(0.0, 0.2))
        bl.turn(second, bl.rng.uniform(2.5, 5)).pause(bl.rng.uniform(0.6, 1.0))
    return bl.build()


def overlaps(a: str, b: str, seed: int) -> Conversation:
    """Three times: a turn of ``a`` (7-12 s) with ``b`` talking over it at 0 dB for 1-3 s
    (at least 1.5 s from its start and 3 s from its end), a pause, a turn of ``b``, a pause."""
    bl = Builder(voices(a, b), seed).pause(0.5)
    for _ in range(3):
        d = bl.rng.uniform(7, 12)
        bl.turn(a, d).overlap(b, bl.rng.uniform(1, 3), bl.rng.uniform(1.5, d - 4.5))
        bl.pause(bl.rng.uniform(0.5, 1.0)).turn(b, bl.rng.uniform(3, 8)).pause(bl.rng.uniform(0.5, 1.0))
    return bl.build()


def three_voices(names: tuple[str, str, str], seed: int, seconds: float = 300) -> Conversation:
    """Turns of 2-15 s, never the same voice twice running; two changes in three without a
    pause (0-0.2 s), the third after 0.4-1 s."""
    bl = Builder(voices(*names), seed).pause(0.5)
    last, k = None, 0
    while bl.t < seconds:
        last = str(bl.rng.choice([v for v in names if v != last]))
        k += 1
        bl.turn(last, bl.rng.uniform(2, 15)).pause(bl.rng.uniform(0, 0.2) if k % 3 else bl.rng.uniform(0.4, 1.0))
    return bl.build()


def one_voice(name: str, seed: int, seconds: float = 25) -> Conversation:
    """One voice: turns of 2-8 s after pauses of 0.4-1 s (a VAD segment each)."""
    bl = Builder(voices(name), seed).pause(0.3)
    while bl.t < seconds:
        bl.turn(name, bl.rng.uniform(2, 8)).pause(bl.rng.uniform(0.4, 1.0))
    return bl.build()
