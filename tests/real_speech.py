"""Real human speech for the tests, from Debian's archive, and real codecs to damage it.

Synthetic voices only prove that the code agrees with espeak-ng. These are real
recordings that nobody here made, fetched with ``apt-get download NAME`` and
unpacked with ``dpkg -x`` (nothing is installed) into ``.cache/real_speech/``
(or ``$SPEECHPREP_REAL_SPEECH``), once; ``scripts/run_tests.sh`` fetches them
before any suite runs (``python3 tests/real_speech.py``).

- pocketsphinx-testdata (BSD-2-Clause, CMU Sphinx): an audiobook reader's sentences
  (LibriVox, 16 kHz, with ``transcription``); a speaker reading playing cards
  (``cards/``, with transcripts); AN4/TIDIGITS raw utterances.
- klettres-data (GPL-2+, KDE KLettres): one real speaker per language saying
  letters and syllables (ogg).
- alsa-utils (GPL-2, ALSA project): one real voice naming loudspeaker positions
  (48 kHz wav).
- hyperrogue-music (GPL-2+, Zeno Rogue): 17 real game-music tracks (ogg, 48-136 s).

Those are the calibration sources: settings are chosen on them. The held-apart
sources below are only reported on, never tuned to (``HELD_OUT``):

- asterisk-core-sounds-{en,fr,it,ru}-wav (CC-BY-SA-3.0 / CC-BY-3.0 for ru):
  professional telephone prompts, 8 kHz, one voice each (Allison Smith,
  June Wallack, Carlo Flora, Maxim Topal's IVR voice), 500-600 files of 0.3-10 s.
- asterisk-prompt-it-menardi-wav (CC-BY-SA-3.0, Marco Menardi and Paola Dal Zot):
  the same kind, another Italian voice.
- asterisk-moh-opsound-wav (CC-BY-SA-3.0: Macroform, Manolo Camp, Reno Project):
  five music-on-hold tracks, 8 kHz, 73-322 s.
- asc-music (GPL-2+, Michael Kievernagel): three game-music tracks (mp3, 290-441 s).

Real text, for the transcript checks (:func:`fortunes`): quotations people wrote, in
fortune's packages: fortunes-min (BSD-3-Clause, English), fortunes-de (GPL-2+, Andreas
Tille), fortunes-es (GPL-2+, Agustín Martín Domingo) for calibration; fortunes-it (a
collection its packagers declare uncopyrighted) and fortunes-ru (GPL-2, Pavel Maryanov)
held apart.

Codecs are real too: sox (GSM 06.10, MP3 through libsox-fmt-all) and ffmpeg
(G.722, Opus), Debian packages that ``scripts/setup.sh`` installs when root.
This module imports nothing beyond the standard library and numpy/soundfile, so
every stage's venv can use it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {
    "pocketsphinx-testdata": "BSD-2-Clause (Carnegie Mellon University, CMU Sphinx)",
    "klettres-data": "GPL-2+ (KDE KLettres authors)",
    "alsa-utils": "GPL-2 (ALSA project; /usr/share/sounds/alsa)",
    "hyperrogue-music": "GPL-2+ (Zeno Rogue; /usr/share/hyperrogue/music)",
    "asterisk-core-sounds-en-wav": "CC-BY-SA-3.0 (Allison Smith, Digium)",
    "asterisk-core-sounds-fr-wav": "CC-BY-SA-3.0 (June Wallack, Digium)",
    "asterisk-core-sounds-it-wav": "CC-BY-SA-3.0 (Carlo Flora)",
    "asterisk-core-sounds-ru-wav": "CC-BY-3.0 (Maxim Topal, ivrvoice.ru)",
    "asterisk-prompt-it-menardi-wav": "CC-BY-SA-3.0 (Marco Menardi and Paola Dal Zot)",
    "asterisk-moh-opsound-wav": "CC-BY-SA-3.0 (Macroform, Manolo Camp, Reno Project)",
    "asc-music": "GPL-2+ (Michael Kievernagel)",
    "fortunes-min": "BSD-3-Clause (The Regents of the University of California)",
    "fortunes-de": "GPL-2+ (Andreas Tille)",
    "fortunes-es": "GPL-2+ (Agustín Martín Domingo)",
    "fortunes-it": "not copyrighted, as its packagers declare (a collection of quotations)",
    "fortunes-ru": "GPL-2 (Pavel Maryanov)",
}
# Sources that settings are never chosen on: the figures on them are what a user with
# voices and music this project never heard should expect (docs/stages/README.md).
HELD_OUT = (
    "asterisk-core-sounds-en-wav",
    "asterisk-core-sounds-fr-wav",
    "asterisk-core-sounds-it-wav",
    "asterisk-core-sounds-ru-wav",
    "asterisk-prompt-it-menardi-wav",
    "asterisk-moh-opsound-wav",
    "asc-music",
    "fortunes-it",
    "fortunes-ru",
)
FORTUNES = {"en": "fortunes-min", "de": "fortunes-de", "es": "fortunes-es", "it": "fortunes-it", "ru": "fortunes-ru"}
PSPHINX = "usr/share/pocketsphinx/test/data"


def root() -> Path:
    return Path(os.environ.get("SPEECHPREP_REAL_SPEECH") or REPO / ".cache" / "real_speech")


def fetch(package: str) -> Path:
    """``root()/package``: the package's files, unpacked once (``apt-get download`` + ``dpkg -x``)."""
    dest = root() / package
    if (dest / ".complete").exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        p = subprocess.run(["apt-get", "download", package], cwd=tmp, capture_output=True, text=True)
        debs = list(Path(tmp).glob(f"{package}_*.deb"))
        if not debs:
            raise RuntimeError(
                f"cannot fetch Debian's {package} for the real-speech tests (apt-get download: "
                f"{p.stderr.strip()[-500:] or p.returncode}); run 'apt-get update' first"
            )
        unpacked = Path(tmp) / "x"
        subprocess.run(["dpkg", "-x", str(debs[0]), str(unpacked)], check=True)
        (unpacked / ".complete").write_text(debs[0].name + "\n", encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        unpacked.rename(dest)
    return dest


def fetch_all() -> None:
    for name in PACKAGES:
        fetch(name)


def fortunes(language: str) -> list[str]:
    """The quotations of fortune's package for ``language`` (:data:`FORTUNES`) as an ASR
    model writes a transcript: lower case, without punctuation or the attribution, one
    string each (10 to 200 characters, at least 5 letters), in the package's order."""
    d = fetch(FORTUNES[language]) / "usr" / "share" / "games" / "fortunes"
    out = []
    for f in sorted(
        p for p in d.rglob("*") if p.is_file() and p.suffix not in (".dat", ".u8") and "off" not in p.parts
    ):
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # an older file in another encoding
        for quote in text.split("\n%\n"):
            q = re.sub(r"\s+", " ", quote).strip()
            q = re.sub(r"\s--.*$", "", q)  # the attribution
            q = re.sub(r"\s+", " ", re.sub(r"[^\w' ]+", " ", q.lower())).strip()
            if 10 <= len(q) <= 200 and len(re.findall(r"[^\W\d_]", q)) >= 5:  # words, not ASCII art
                out.append(q)
    return out


@dataclass(frozen=True)
class Utterance:
    path: Path
    speaker: str
    text: str | None = None
    language: str = "en"


def librivox() -> list[Utterance]:
    """Five sentences of Sense and Sensibility read by one LibriVox reader (16 kHz), with their text."""
    d = fetch("pocketsphinx-testdata") / PSPHINX / "librivox"
    return _transcribed(d, d / "transcription", "librivox_reader")


def cards() -> list[Utterance]:
    """One speaker naming playing cards (16 kHz), with their text."""
    d = fetch("pocketsphinx-testdata") / PSPHINX / "cards"
    return _transcribed(d, d / "cards.transcription", "cards_speaker")


def _transcribed(d: Path, transcription: Path, speaker: str) -> list[Utterance]:
    out = []
    for line in transcription.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\s*<s>(.*)</s>\s*\((\S+)\)", line)
        if m:
            out.append(Utterance(d / f"{m.group(2)}.wav", speaker, " ".join(m.group(1).split())))
    return out


def raw_utterances() -> list[Path]:
    """Headerless 16-bit 16 kHz mono utterances (``goforward``, ``numbers``, ``something``, TIDIGITS)."""
    d = fetch("pocketsphinx-testdata") / PSPHINX
    return sorted([*d.glob("*.raw"), *d.glob("tidigits/*.raw")])


def klettres(language: str, kind: str = "alpha") -> list[Utterance]:
    """One real speaker of ``language`` saying letters (``alpha``) or syllables (``syllab``), ogg."""
    d = fetch("klettres-data") / "usr/share/klettres" / language / kind
    return [Utterance(p, f"klettres_{language}", None, language) for p in sorted(d.glob("*.ogg"))]


def klettres_languages() -> list[str]:
    d = fetch("klettres-data") / "usr/share/klettres"
    return sorted(p.name for p in d.iterdir() if (p / "alpha").is_dir())


def alsa_voice() -> list[Utterance]:
    """One real voice naming loudspeaker positions (48 kHz); ``Noise.wav`` is not speech and is left out."""
    d = fetch("alsa-utils") / "usr/share/sounds/alsa"
    return [Utterance(p, "alsa_voice") for p in sorted(d.glob("*.wav")) if p.name != "Noise.wav"]


# the telephone prompts' voices: (package, folder) by speaker
TELEPHONE_VOICES = {
    "allison_en": ("asterisk-core-sounds-en-wav", "en_US_f_Allison", "en"),
    "june_fr": ("asterisk-core-sounds-fr-wav", "fr_CA_f_June", "fr"),
    "carlo_it": ("asterisk-core-sounds-it-wav", "it_IT_m_Carlo", "it"),
    "ivr_ru": ("asterisk-core-sounds-ru-wav", "ru_RU_f_IvrvoiceRU", "ru"),
    "menardi_it": ("asterisk-prompt-it-menardi-wav", "it_IT_f_Menardi", "it"),
}


def telephone_prompts(speaker: str, limit: int | None = None) -> list[Utterance]:
    """A held-apart professional voice's telephone prompts (8 kHz wav, ``TELEPHONE_VOICES``),
    sorted by path; the ``silence/`` folder is left out."""
    package, folder, language = TELEPHONE_VOICES[speaker]
    d = fetch(package) / "usr/share/asterisk/sounds" / folder
    paths = sorted(p for p in d.rglob("*.wav") if p.parent.name != "silence")
    return [Utterance(p, speaker, None, language) for p in paths[:limit]]


MUSIC = {
    "hyperrogue": ("hyperrogue-music", "usr/share/hyperrogue/music", "*.ogg"),
    "asc": ("asc-music", "usr/share/games/asc/music", "*.mp3"),
    "moh": ("asterisk-moh-opsound-wav", "usr/share/asterisk/moh", "*.wav"),
}


def music(pack: str) -> list[Path]:
    """Real music tracks: ``hyperrogue`` (calibration), ``asc`` and ``moh`` (held apart)."""
    package, folder, pattern = MUSIC[pack]
    return sorted((fetch(package) / folder).glob(pattern))


# klettres names a language, not a person. bench/speakers/calibration.py measures
# (docs/stages/speakers.md, "Speakers on real voices"): German's letters (F0 about 220 Hz)
# and syllables (about 109 Hz) are two people; cs/en_GB, es/nl, pt_BR/tn, de/nds,
# hu/nds, cs/uk, en_GB/it, ru/tn sit as close in Resemblyzer's space as one
# speaker's own clips and may be one person. These languages' speakers resemble
# no other language's: surely different people.
KLETTRES_DISTINCT = ("ar", "da", "en", "fr", "he", "lt", "ml", "nb")


def klettres_voices(language: str) -> list[Utterance]:
    """A klettres language's letters then syllables, ``speaker`` its person (German's two split)."""
    out = []
    for kind in ("alpha", "syllab"):
        who = f"klettres_{language}" + ("_syllab" if language == "de" and kind == "syllab" else "")
        out += [Utterance(u.path, who, None, language) for u in klettres(language, kind)]
    return out


def distinct_voices(klettres_per_language: int | None = None) -> list[Utterance]:
    """Real voices of surely different people, several recordings each: the LibriVox
    reader, the cards speaker, the ALSA voice and ``KLETTRES_DISTINCT`` (the first
    ``klettres_per_language`` clips of each, letters first)."""
    out = librivox() + cards() + alsa_voice()
    for lang in KLETTRES_DISTINCT:
        out += klettres_voices(lang)[:klettres_per_language]
    return out


def as_files(utterances: list[Utterance], per_file: int) -> list[str]:
    """A source file id for each utterance: klettres clips (a letter or a syllable, about a
    second) in groups of ``per_file`` consecutive clips of one speaker, as the segments of one
    recording; every other utterance is a file of its own."""
    seen: dict[str, int] = {}
    out = []
    for u in utterances:
        k = seen[u.speaker] = seen.get(u.speaker, -1) + 1
        out.append(f"{u.speaker}/{k // per_file}" if u.speaker.startswith("klettres_") else str(u.path))
    return out


def read(path: Path, sample_rate: int | None = None):
    """``(mono float32 samples, rate)`` of a real recording (``.raw``: 16-bit 16 kHz), resampled if asked."""
    import numpy as np
    import soundfile as sf

    if path.suffix == ".raw":
        x, sr = np.fromfile(path, dtype="<i2").astype(np.float32) / 32768.0, 16000
    else:
        x, sr = sf.read(str(path), dtype="float32", always_2d=True)
        x = x.mean(axis=1)
    if sample_rate and sample_rate != sr:
        import soxr

        x, sr = soxr.resample(x, sr, sample_rate).astype(np.float32), sample_rate
    return x, sr


# ---------------------------------------------------------------------------
# real codecs
# ---------------------------------------------------------------------------
CODECS = ("gsm", "g722", "opus", "mp3", "resample8k")
# what a telephone line does to a voice (all decoded to 8 kHz): G.711 u-law, GSM 06.10,
# G.726 ADPCM at 32 kbit/s, Codec 2 at 3200 bit/s, and a plain resample
TELEPHONE_CODECS = ("resample8k", "ulaw", "gsm", "g726", "codec2")
_FFMPEG_8K = {
    "g726": (["-c:a", "g726", "-b:a", "32k"], "coded.wav"),
    "codec2": (["-c:a", "libcodec2", "-mode", "3200"], "coded.c2"),
}
PCM16 = ["-c:a", "pcm_s16le"]


def through_codec(src: Path, codec: str, out: Path, gain_db: float = 0.0, delay_s: float = 0.0) -> Path:
    """``src`` passed through a real codec (``CODECS``, ``TELEPHONE_CODECS``) and decoded back
    to a 16-bit WAV at ``out`` (8 kHz for ``TELEPHONE_CODECS``, 16 kHz otherwise), with
    ``gain_db`` and ``delay_s`` of silence before it. Uses Debian's sox and ffmpeg."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.wav"
        rate = 8000 if codec in TELEPHONE_CODECS else 16000
        effects = ["gain", f"{gain_db}"] + (["pad", f"{delay_s}"] if delay_s else [])
        _run(["sox", str(src), "-c", "1", "-b", "16", "-r", str(rate), str(pre), *effects])
        if codec == "resample8k":
            shutil.copyfile(pre, out)
            return out
        if codec == "ulaw":
            coded = Path(tmp) / "coded.wav"
            _run(["sox", str(pre), "-e", "u-law", "-b", "8", str(coded)])
            _run(["sox", str(coded), "-e", "signed-integer", "-b", "16", str(out)])
            return out
        if codec in _FFMPEG_8K:
            args, name = _FFMPEG_8K[codec]
            coded = Path(tmp) / name
            _run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(pre), *args, str(coded)])
            _run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(coded), "-ar", "8000", *PCM16, str(out)])
            return out
        if codec in ("gsm", "mp3"):
            coded = Path(tmp) / f"coded.{codec}"
            _run(["sox", str(pre), *(["-C", "32"] if codec == "mp3" else []), str(coded)])
            _run(["sox", str(coded), "-b", "16", str(out)])
            return out
        args = {"g722": ["-c:a", "g722"], "opus": ["-c:a", "libopus", "-b:a", "16k"]}[codec]
        coded = Path(tmp) / ("coded.g722" if codec == "g722" else "coded.ogg")
        _run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(pre), *args, str(coded)])
        decode = ["-ar", "16000", *PCM16, str(out)]
        _run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(coded), *decode])
    return out


@dataclass(frozen=True)
class Copy:
    source: Utterance
    path: Path  # the copy, decoded to a 16-bit WAV
    codec: str
    gain_db: float
    delay_s: float


COPY_GAINS_DB = (-6.0, -3.0, 3.0, 6.0)


def codec_copies(sources: list[Utterance], dest: Path, codecs=CODECS, seed: int = 0) -> list[Copy]:
    """Each source through each codec (``through_codec``) with a gain of +-3 or +-6 dB and 0.1-0.5 s
    of silence before it, both drawn from ``seed`` per copy; files cached in ``dest`` by name."""
    import random

    rng = random.Random(seed)
    out = []
    for k, u in enumerate(sources):
        src = u.path
        if src.suffix == ".raw":  # headerless: sox needs a WAV
            import soundfile as sf

            src = dest / f"src{k:04d}.wav"
            if not src.exists():
                dest.mkdir(parents=True, exist_ok=True)
                sf.write(src, read(u.path)[0], 16000, subtype="PCM_16")
        for codec in codecs:
            gain, delay = rng.choice(COPY_GAINS_DB), round(rng.uniform(0.1, 0.5), 3)
            path = dest / f"{k:04d}_{codec}_{gain:+.0f}dB_{int(delay * 1000)}ms.wav"
            if not path.exists():
                through_codec(src, codec, path, gain_db=gain, delay_s=delay)
            out.append(Copy(u, path, codec, gain, delay))
    return out


def excerpt(src: Path, start: float, seconds: float, out: Path) -> Path:
    """``seconds`` of ``src`` from ``start``, mono, as a 16-bit WAV at its own rate (cached by name)."""
    import soundfile as sf

    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        x, sr = read(src)
        a = max(0, min(int(start * sr), len(x) - int(seconds * sr)))  # the last `seconds` of a shorter track
        sf.write(out, x[a : a + int(seconds * sr)], sr, subtype="PCM_16")
    return out


def trimmed(x, sr: int, floor_db: float = 40.0):
    """``x`` without its leading and trailing silence: from its first to its last 10 ms frame
    within ``floor_db`` of its loudest."""
    import numpy as np

    n = sr // 100
    frames = x[: len(x) // n * n].reshape(-1, n)
    level = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    loud = np.flatnonzero(level >= level.max() - floor_db)
    return x[loud[0] * n : (loud[-1] + 1) * n] if len(loud) else x


def with_music_between(prompts: list[Path], music: list[Path], out: Path, seed: int) -> list[tuple[float, float]]:
    """One 8 kHz recording as an IVR or a radio makes it: each prompt (``trimmed``, levelled
    to one RMS) after 0-0.4 s of silence, then 0-0.4 s of silence and 3-10 s of one of two of ``music``'s
    tracks 0-10 dB quieter; written to ``out`` (16-bit WAV). Returns the prompts' (start, end) s."""
    import random

    import numpy as np
    import soundfile as sf

    rng = random.Random(seed)
    tracks = [read(m, 8000)[0] for m in rng.sample(music, 2)]
    parts, truth, t = [], [], 0

    def put(x):
        nonlocal t
        parts.append(x.astype(np.float32))
        t += len(x)

    for k, path in enumerate(prompts):
        put(np.zeros(int(rng.uniform(0, 0.4) * 8000)))
        x = trimmed(read(path, 8000)[0], 8000)
        start = t
        put(x * (0.05 / (np.sqrt(np.mean(x**2)) + 1e-9)))
        truth.append((start / 8000, t / 8000))
        put(np.zeros(int(rng.uniform(0, 0.4) * 8000)))
        m, n = tracks[k % 2], int(rng.uniform(3, 10) * 8000)
        a = rng.randrange(0, max(1, len(m) - n))
        piece = m[a : a + n]
        put(piece * (0.05 / (np.sqrt(np.mean(piece**2)) + 1e-9)) * 10 ** (-rng.uniform(0, 10) / 20))
    out.parent.mkdir(parents=True, exist_ok=True)
    sf.write(out, np.clip(np.concatenate(parts), -1, 1), 8000, subtype="PCM_16")
    return truth


def _run(cmd: list[str]) -> None:
    if shutil.which(cmd[0]) is None:
        raise RuntimeError(f"{cmd[0]} is not installed (Debian: apt-get install sox libsox-fmt-all ffmpeg)")
    if cmd[0] == "sox":  # repeatable: sox seeds its dither at random unless told (-R), so copies differ per run
        cmd = [cmd[0], "-R", *cmd[1:]]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.strip()[-500:]}")


if __name__ == "__main__":
    fetch_all()
    print(f"real speech in {root()}: {', '.join(PACKAGES)}", file=sys.stderr)
