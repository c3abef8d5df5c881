#!/usr/bin/env python3
"""What ``snr_db`` reads on real recordings, clean and with white noise added at known SNRs, and
on the demo corpus: the figures behind ``curate.min_snr_db``.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/curate/snr_calibration.py

Real recordings (tests/real_speech.py): each file as recorded, its speech where the
frames are within 30 dB of its loudest (plus 0.1 s, as VAD pads), its non-speech the
rest of the file. With noise: 1.5 s of noise-only either side, white noise over all of
it at ``10 log10(S / N)`` in ``curate.snr_band_hz`` (S: the clean speech's mean band power
per frame over the segment, N: the noise's), written as 16-bit WAV and read back, as in
tests/curate/test_snr.py. Demo corpus: the phrases of resources/demo/truth.json as segments
(the variants take their source's phrases), through ``NonSpeech`` and ``snr_db``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from speechprep.curate import measures as M  # noqa: E402
from speechprep.curate.nonspeech import NonSpeech  # noqa: E402
from speechprep.io.audio import read_segment  # noqa: E402
from tests import real_speech as R  # noqa: E402
from tests.support import config  # noqa: E402

SR = 16000
CFG = config()["curate"]
BAND, SECONDS = tuple(CFG["snr_band_hz"]), CFG["snr_noise_seconds"]


def snr(line: dict) -> float | None:
    return M.snr_db(read_segment(line), NonSpeech([line], SECONDS).read(line), SR, BAND)


def bounds(x: np.ndarray) -> tuple[int, int]:
    db = 10 * np.log10(M.band_frame_power(x, SR, BAND) + 1e-20)
    on = np.flatnonzero(db > db.max() - 30)
    return max(0, on[0] * 256 - 1600), min(len(x), on[-1] * 256 + 1024 + 1600)


def line_for(path: Path, y: np.ndarray, a: int, b: int) -> dict:
    sf.write(path, np.clip(y, -1, 1), SR, subtype="PCM_16")
    return {"id": path.stem, "audio_filepath": str(path), "offset": a / SR, "duration": (b - a) / SR}


def real(tmp: Path) -> None:
    sources = {
        "librivox (LibriVox reader, 64 kb/s MP3 source)": R.librivox(),
        "cards (one speaker)": R.cards(),
        "alsa voice (edited, digital silence)": R.alsa_voice(),
        "klettres en+fr": R.klettres("en") + R.klettres("fr")[:10],
    }
    added = (0, 5, 10, 15, 20, 30)
    print(f"{'source':48s} {'n':>3s} {'clean min/median':>17s}  " + "  ".join(f"{s:>2d} dB: min..max" for s in added))
    rng = np.random.default_rng(0)
    for name, us in sources.items():
        clean, noisy = [], {s: [] for s in added}
        for j, u in enumerate(us):
            x = R.read(u.path, SR)[0].astype(np.float64)
            a, b = bounds(x)
            clean.append(snr(line_for(tmp / f"c{j}.wav", x, a, b)))
            pad = int(1.5 * SR)
            for s in added:
                n = rng.standard_normal(len(x) + 2 * pad)
                s_band = M.band_frame_power(x[a:b], SR, BAND).mean()
                g = np.sqrt(s_band / M.band_frame_power(n[pad + a : pad + b], SR, BAND).mean() / 10 ** (s / 10))
                y = np.concatenate([np.zeros(pad), x, np.zeros(pad)]) + g * n
                noisy[s].append(snr(line_for(tmp / f"n{j}_{s}.wav", y, pad + a, pad + b)))
        print(
            f"{name:48s} {len(us):3d} {min(clean):8.1f}/{np.median(clean):6.1f}  "
            + "  ".join(f"{min(v):6.1f}..{max(v):5.1f}" for v in noisy.values())
        )


def demo() -> None:
    truth = json.loads((REPO / "resources/demo/truth.json").read_text(encoding="utf-8"))["files"]
    reads: dict[str, list[float]] = {}
    for rel, info in sorted(truth.items()):
        src = truth.get(info.get("variant_of", ""), info)
        if "speech" not in src or info.get("expect") != "ok":
            continue
        path = str(REPO / "resources/demo/audio" / rel)
        lines = [
            {"audio_filepath": path, "offset": sp["start"], "duration": sp["end"] - sp["start"]} for sp in src["speech"]
        ]
        ns = NonSpeech(lines, SECONDS)
        key = "clean" if info.get("clean") else rel
        reads.setdefault(key, []).extend(M.snr_db(read_segment(s), ns.read(s), SR, BAND) for s in lines)
    print("demo corpus (segments = truth phrases):")
    for k, v in reads.items():
        print(f"  {k:32s} {len(v):3d} segments: {min(v):6.1f} .. {max(v):6.1f} dB")


if __name__ == "__main__":
    print(f"snr_db, band {BAND} Hz, non-speech up to {SECONDS} s either side")
    with tempfile.TemporaryDirectory() as t:
        real(Path(t))
    demo()
