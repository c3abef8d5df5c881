"""Real speech over real music at known levels, for the music detector's tests and its
benchmark (bench/music/detect_accuracy.py).

Speech and music are real recordings from Debian's archive (tests/real_speech.py, each
package's licence there), plus one music source of this module's own:

- fb-music-high (GPL-2+, the Frozen-Bubble authors): one 207 s tracker module
  (``frozen-mainzik-2p.xm``), rendered by ffmpeg's libopenmpt.

Calibration (the detector's settings are fitted on these): the LibriVox reader, the cards
speaker, the ALSA voice and the raw AN4/TIDIGITS utterances, each as recorded and again
through a real telephone codec (GSM 06.10, G.711 u-law, G.726 or a plain 8 kHz resample, in
turn), and KLettres' speakers of
:data:`CAL_KLETTRES` (three consecutive clips of a speaker joined by 0.3 s pauses, one
segment as VAD cuts it); hyperrogue's and Frozen-Bubble's music. Held apart (only reported
on): the five professional telephone voices (Asterisk prompts of 1.5 s or more, 8 kHz as
published) and KLettres' speakers of :data:`HELD_KLETTRES`; ASC's game music and the
music-on-hold tracks.

A :class:`Mix` is one segment as the music stage reads it: the speech (its leading and
trailing silence trimmed, as VAD cuts it) with music under it at ``snr`` dB (the speech's
power over the music's; ``None``: clean; ``"music"``: the music alone, what VAD takes for
speech), and ``noise``: the file's non-speech either side of it (1 s of the same music at
the same level where there is music, the recording's own quiet otherwise), as
:class:`speechprep.curate.nonspeech.NonSpeech` reads it.
"""

from __future__ import annotations

import functools
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests import real_speech as R

FB_MUSIC = ("fb-music-high", "GPL-2+ (Frozen-Bubble authors; /usr/share/games/frozen-bubble/snd)")
CAL_KLETTRES = ("en", "fr", "de", "ar", "da", "cs", "es")
HELD_KLETTRES = ("he", "lt", "ml", "nb", "ru")
SNRS = (None, 20.0, 10.0, 5.0, 0.0, "music")
CONTEXT_S = 1.0
# the speech's power is that of its frames within this of its loudest (its words, not its pauses)
ACTIVE_DB = 30.0


@dataclass(frozen=True)
class Mix:
    audio: np.ndarray  # float32 mono
    sr: int
    noise: tuple  # the file's non-speech either side (float32 arrays at sr)
    speech: str  # speech source ("" for music alone)
    music: str  # music source ("" for clean speech)
    snr: object  # None (clean), dB, or "music"
    split: str  # "calibration" or "held_out"

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sr

    @property
    def has_music(self) -> bool:
        return self.snr is not None


def frozen_bubble() -> list[Path]:
    """Frozen-Bubble's module rendered once to a 16 kHz WAV (ffmpeg's libopenmpt)."""
    d = R.fetch(FB_MUSIC[0])
    out = R.root() / "fb-music-high.rendered" / "frozen-mainzik-2p.wav"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        src = d / "usr/share/games/frozen-bubble/snd/frozen-mainzik-2p.xm"
        tmp = out.with_suffix(".part.wav")
        cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(src), "-ac", "1", "-ar", "16000", *R.PCM16]
        subprocess.run([*cmd, str(tmp)], check=True)
        tmp.rename(out)
    return [out]


def music_tracks(split: str) -> dict[str, list[Path]]:
    """Music tracks by source."""
    if split == "calibration":
        return {"hyperrogue": R.music("hyperrogue"), "frozen_bubble": frozen_bubble()}
    return {"asc": R.music("asc"), "moh": R.music("moh")}


@dataclass(frozen=True)
class Speech:
    audio: np.ndarray
    sr: int
    source: str
    head: np.ndarray  # the recording's own quiet before and after the words
    tail: np.ndarray


TELEPHONE_CODECS = ("gsm", "ulaw", "g726", "resample8k")


def _telephone(path: Path, codec: str) -> Path:
    """``path`` through a real telephone codec, decoded to an 8 kHz WAV (cached by name)."""
    out = R.root() / "music_telephone" / f"{path.parent.name}_{path.stem}_{codec}.wav"
    if not out.exists():
        src = path
        if path.suffix == ".raw":  # headerless: sox needs a WAV
            import soundfile as sf

            src = out.with_suffix(".src.wav")
            out.parent.mkdir(parents=True, exist_ok=True)
            sf.write(src, R.read(path)[0], 16000, subtype="PCM_16")
        R.through_codec(src, codec, out)
    return out


def _trim(x: np.ndarray, sr: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = sr // 100
    frames = x[: len(x) // n * n].reshape(-1, n)
    level = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    loud = np.flatnonzero(level >= level.max() - 40.0)
    if not len(loud):
        return x, x[:0], x[:0]
    a, b = loud[0] * n, (loud[-1] + 1) * n
    return x[a:b], x[:a], x[b:]


def _speech(x: np.ndarray, sr: int, source: str) -> Speech:
    words, head, tail = _trim(x.astype(np.float32), sr)
    return Speech(words, sr, source, head, tail)


def speech_sources(split: str, per_source: int) -> list[Speech]:
    """Up to ``per_source`` speech segments of each source of ``split``."""
    out: list[Speech] = []
    if split == "calibration":
        groups = {
            "librivox": R.librivox(),
            "cards": R.cards(),
            "alsa": R.alsa_voice(),
            "an4_tidigits": [R.Utterance(p, "raw") for p in R.raw_utterances()],
        }
        for name, utts in groups.items():
            for k, u in enumerate(utts[:per_source]):
                out.append(_speech(*R.read(u.path, 16000), name))
                # the same voice as a telephone line carries it (8 kHz, a real codec)
                codec = TELEPHONE_CODECS[k % len(TELEPHONE_CODECS)]
                out.append(_speech(*R.read(_telephone(u.path, codec)), f"{name}_{codec}"))
        langs = CAL_KLETTRES
    else:
        for voice in R.TELEPHONE_VOICES:
            taken = 0
            for u in R.telephone_prompts(voice):
                if taken >= per_source:
                    break
                x, sr = R.read(u.path)
                if len(x) >= 1.5 * sr:
                    out.append(_speech(x, sr, voice))
                    taken += 1
        langs = HELD_KLETTRES
    for lang in langs:
        clips = [R.trimmed(*R.read(u.path, 16000)) for u in R.klettres(lang)]
        for k in range(0, min(len(clips) - 2, 3 * per_source), 3):
            gap = np.zeros(int(0.3 * 16000), np.float32)
            joined = np.concatenate([clips[k], gap, clips[k + 1], gap, clips[k + 2]])
            out.append(_speech(joined, 16000, f"klettres_{lang}"))
    return out


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)) + 1e-20))


def active_rms(x: np.ndarray, sr: int) -> float:
    n = max(1, sr // 100)
    frames = x[: len(x) // n * n].reshape(-1, n)
    p = np.mean(np.square(frames, dtype=np.float64), axis=1)
    level = 10 * np.log10(p + 1e-20)
    return float(np.sqrt(p[level >= level.max() - ACTIVE_DB].mean()))


@functools.lru_cache(maxsize=64)
def _track(path: str, sr: int) -> np.ndarray:
    return R.read(Path(path), sr)[0]


def _excerpt(rng: random.Random, tracks: list[Path], n: int, sr: int) -> np.ndarray:
    m = _track(str(rng.choice(tracks)), sr)
    lo, hi = int(0.05 * len(m)), max(int(0.05 * len(m)) + 1, len(m) - n)  # past a track's opening
    a = rng.randrange(lo, hi) if hi > lo else 0
    piece = m[a : a + n]
    if len(piece) < n:
        piece = np.pad(piece, (0, n - len(piece)))
    return piece.astype(np.float32)


def mixes(split: str, per_source: int = 6, snrs=SNRS, seed: int = 0, context: bool = True) -> list[Mix]:
    """Every speech segment of ``split`` at every level of ``snrs``, each over a piece of
    one track drawn (by ``seed``) from the split's music sources in turn."""
    rng = random.Random(seed)
    speech = speech_sources(split, per_source)
    music = music_tracks(split)
    names = sorted(music)
    out = []
    level = 0.05  # the speech's active RMS
    for i, s in enumerate(speech):
        x = s.audio * (level / (active_rms(s.audio, s.sr) + 1e-12))
        head = s.head * (level / (active_rms(s.audio, s.sr) + 1e-12))
        tail = s.tail * (level / (active_rms(s.audio, s.sr) + 1e-12))
        c = int(CONTEXT_S * s.sr)
        for snr in snrs:
            name = names[(i + len(out)) % len(names)]
            if snr is None:
                noise = tuple(p for p in (head, tail) if len(p)) if context else ()
                out.append(Mix(x.astype(np.float32), s.sr, noise, s.source, "", None, split))
                continue
            piece = _excerpt(rng, music[name], len(x) + 2 * c, s.sr)
            m_level = level * 10 ** (-(0.0 if snr == "music" else float(snr)) / 20)
            piece = piece * (m_level / _rms(piece))
            under = piece[c : c + len(x)]
            seg = under if snr == "music" else x + under
            noise = (piece[:c], piece[c + len(x) :]) if context else ()
            out.append(Mix(seg.astype(np.float32), s.sr, noise, "" if snr == "music" else s.source, name, snr, split))
    return out


_VAD_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from speechprep.vad.params import VadParams
from speechprep.vad.stage import analyze_file
from tests.support import params
p = params(VadParams)
for path in sys.argv[2:]:
    out = analyze_file({"id": path, "audio_filepath": path}, p)
    segs = [{k: s[k] for k in ("offset", "duration")} for s in getattr(out, "data", {}).get("segments", [])]
    print(json.dumps({"audio_filepath": path, "segments": segs}))
"""


def music_excerpts(split: str, seconds: float, dest: Path) -> list[Path]:
    """``seconds`` of each of the split's music tracks (from a third of the way in), as WAVs."""
    out = []
    for name, tracks in music_tracks(split).items():
        for t in tracks:
            x, sr = R.read(t)
            start = len(x) / sr / 3
            out.append(R.excerpt(t, start, seconds, dest / f"{name}_{t.stem}_{int(seconds)}s.wav"))
    return out


def ten_vad_segments(paths: list[Path]) -> dict[str, list[dict]]:
    """TEN-VAD's speech segments of each file, as the VAD stage cuts them (run in the VAD
    stage's own env, ``.venvs/vad``, with config/config.yaml's settings)."""
    import json
    import os

    py = R.REPO / ".venvs" / "vad" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(R.REPO)}
    p = subprocess.run(
        [str(py), "-c", _VAD_SCRIPT, str(R.REPO), *map(str, paths)], capture_output=True, text=True, env=env
    )
    if p.returncode != 0:
        raise RuntimeError(f"TEN-VAD in .venvs/vad failed: {p.stderr[-800:]}")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return {x["audio_filepath"]: [{**s, "audio_filepath": x["audio_filepath"]} for s in x["segments"]] for x in lines}


@dataclass(frozen=True)
class Span:
    """A stretch of a long recording (:func:`long_recordings`) and what it holds."""

    path: str
    start: float
    end: float
    snr: object  # as :attr:`Mix.snr`: None (clean), dB, or "music" (music alone)
    speech: str  # speech source ("" for music alone)


BLOCK_GAP_S = 2.0  # the room's quiet between two blocks of a long recording
QUIET_DB = -60.0  # that quiet's level under the speech's


def long_recordings(split: str, dest: Path, speakers: int = 5, per_block: int = 2, seed: int = 0):
    """Long recordings as a lab holds them, one per speaker of ``split``'s 16 kHz sources (the
    KLettres speakers: the telephone voices would be dropped for their band, not their music):
    a block of ``per_block`` of the speaker's segments (1 s apart; taken again from the first
    where the speaker has too few) at each level of
    :data:`SNRS`, the music under a block running from 1 s before its first word to 1 s
    after its last (its pauses hold it, as in a recording with music underneath), music alone
    for 4 s, and the room's quiet between blocks. Returns the WAVs (16-bit, 16 kHz) and every
    speech or music-alone :class:`Span` with its level."""
    import soundfile as sf

    rng = random.Random(seed)
    sr, level = 16000, 0.05
    by_source: dict[str, list[Speech]] = {}
    for s in speech_sources(split, per_source=per_block * (len(SNRS) - 1)):
        if s.sr == sr and s.source.startswith("klettres_"):
            by_source.setdefault(s.source, []).append(s)
    music = music_tracks(split)
    names = sorted(music)
    noise = np.random.default_rng(seed)
    paths, spans = [], []
    dest.mkdir(parents=True, exist_ok=True)
    for k, (source, segs) in enumerate(sorted(by_source.items())[:speakers]):
        path = dest / f"{source}.wav"
        parts, t, used = [], 0.0, 0

        def quiet(seconds: float) -> np.ndarray:
            n = int(round(seconds * sr))
            return (noise.standard_normal(n) * level * 10 ** (QUIET_DB / 20)).astype(np.float32)

        for snr in SNRS:
            parts.append(quiet(BLOCK_GAP_S))
            t += BLOCK_GAP_S
            if snr == "music":
                block, words = np.zeros(4 * sr, np.float32), [(0.0, 4.0)]
            else:
                block, words, at = [quiet(1.0)], [], 1.0
                for s in (segs[(used + i) % len(segs)] for i in range(per_block)):  # again where too few
                    x = s.audio * (level / (active_rms(s.audio, sr) + 1e-12))
                    block += [x.astype(np.float32), quiet(1.0)]
                    words.append((at, at + len(x) / sr))
                    at += len(x) / sr + 1.0
                used += per_block
                block = np.concatenate(block)
            if snr is not None:
                name = names[(k + len(spans)) % len(names)]
                piece = _excerpt(rng, music[name], len(block), sr)
                m_level = level * 10 ** (-(0.0 if snr == "music" else float(snr)) / 20)
                block = block + piece * (m_level / _rms(piece))
            parts.append(block.astype(np.float32))
            for a, b in words:
                spans.append(Span(str(path), round(t + a, 3), round(t + b, 3), snr, "" if snr == "music" else source))
            t += len(block) / sr
        parts.append(quiet(BLOCK_GAP_S))
        if not path.exists():  # the same recording each time: a run's inputs keep their mtime
            sf.write(path, np.clip(np.concatenate(parts), -1, 1), sr, subtype="PCM_16")
        paths.append(path)
    return paths, spans


def fates(spans: list[Span], results: Path, dataset: str) -> dict[object, dict[str, float]]:
    """Per level, the seconds of VAD's segments over its spans by what became of them in a
    run's ``results/<dataset>``: ``kept`` (in the TTS manifests), ``<stage>:<reason>`` (in
    that stage's rejects); a segment counts for the level of the span it overlaps most."""
    import json

    res = Path(results) / dataset

    def lines(pattern: str) -> list[dict]:
        return [json.loads(x) for p in sorted(res.glob(pattern)) for x in p.read_text(encoding="utf-8").splitlines()]

    fate = {x["id"]: "kept" for x in lines("tts/*_manifest.jsonl")}
    for stage in ("vad", "music", "asr", "curate", "tts"):
        for r in lines(f"{stage}/*rejects.jsonl"):
            fate.setdefault(r["id"], f"{stage}:{r['reason']}")
    out: dict[object, dict[str, float]] = {}
    for seg in lines("vad/*.segments.jsonl"):
        a, b = float(seg["offset"]), float(seg["offset"]) + float(seg["duration"])
        over = [(min(b, s.end) - max(a, s.start), s) for s in spans if s.path == seg["audio_filepath"]]
        best = max(over, key=lambda x: x[0], default=(0.0, None))
        level = best[1].snr if best[0] > 0 else "outside"
        row = out.setdefault(level, {})
        row[fate.get(seg["id"], "lost")] = row.get(fate.get(seg["id"], "lost"), 0.0) + b - a
    return out
