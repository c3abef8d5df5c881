"""Speech TEN-VAD finds in real recordings through 8 kHz (resampled, GSM), and in noise, by threshold.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/vad/bin/python bench/vad_narrowband.py

Real speech (tests/real_speech.py: the LibriVox reader, the cards speaker, the ALSA voice,
KLettres en and de letters) as recorded (wide) and through 8 kHz; noise (ALSA's Noise.wav,
white, pink) at 16 and 8 kHz. Each column is the seconds of speech in the segments VAD
makes with speech starting at the onset probability and lasting while the release holds
(the rest of `vad` as in config/config.yaml). The narrowband setting is the onset and
release at which 8 kHz speech is found about as fully as wideband speech at 0.5.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
import soxr

from tests.support import params

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.vad.stage import VadParams, hysteresis_flags, make_segments, speech_flags
from tests import real_speech as R

SETTINGS = [(0.5, 0.5), (0.5, 0.35), (0.4, 0.3), (0.35, 0.3), (0.35, 0.25), (0.3, 0.2)]


def speech_seconds(x: np.ndarray, p: VadParams) -> list[float]:
    probs, _, n = speech_flags([x], p)
    return [sum(b - a for a, b in make_segments(hysteresis_flags(probs, *s), probs, n / 16000, p)) for s in SETTINGS]


def main() -> None:
    p = params(VadParams)
    tmp = Path(tempfile.mkdtemp())
    utts = R.librivox() + R.cards() + R.alsa_voice() + R.klettres("en")[:8] + R.klettres("de")[:6]
    rows: dict[str, np.ndarray] = {}
    for u in utts:
        for codec in ("wide", "resample8k", "gsm"):
            src = (
                u.path
                if codec == "wide"
                else R.through_codec(u.path, codec, tmp / f"{codec}_{u.speaker}_{u.path.stem}.wav")
            )
            rows[codec] = rows.get(codec, 0) + np.array(speech_seconds(R.read(src, 16000)[0], p))
    rng = np.random.default_rng(0)
    noise = {
        "ALSA Noise.wav": R.read(R.fetch("alsa-utils") / "usr/share/sounds/alsa/Noise.wav", 16000)[0],
        "white": rng.normal(0, 0.05, 160000).astype(np.float32),
        "pink": (np.cumsum(rng.normal(0, 0.01, 160000)) * 0.02).astype(np.float32),
    }
    for name, x in noise.items():
        rows[f"{name}, 16 kHz"] = np.array(speech_seconds(x, p))
        rows[f"{name}, 8 kHz"] = np.array(speech_seconds(soxr.resample(soxr.resample(x, 16000, 8000), 8000, 16000), p))
    print(f"{len(utts)} real utterances; seconds of speech found at onset/release:")
    print("| input | " + " | ".join(f"{a}/{b}" for a, b in SETTINGS) + " |")
    print("|---|" + "---|" * len(SETTINGS))
    for name, v in rows.items():
        print(f"| {name} | " + " | ".join(f"{x:.1f}" for x in v) + " |")


if __name__ == "__main__":
    main()
