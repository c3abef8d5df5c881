"""VAD on 8 kHz recordings: real voices and real music through telephone codecs, chosen on
calibration sources and reported on held-apart ones.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/vad/bin/python bench/vad/narrowband.py [--cache DIR]

Sources (tests/real_speech.py). Calibration: the LibriVox reader, the cards speaker, the ALSA
voice, KLettres en/fr/de and the raw utterances, recorded wideband, and hyperrogue's game
music (two 20 s excerpts of each track), all through every telephone codec
(``TELEPHONE_CODECS``: 8 kHz resample, G.711 u-law, GSM 06.10, G.726, Codec 2); ten long
files of those voices with music between them (``with_music_between``). Held apart: five
professional voices' telephone prompts (Asterisk: 40 each, 8 kHz as published), the
music-on-hold and ASC tracks (three 20 s excerpts each) through the same codecs, and ten
long files of those prompts with that music between them.

The music gate (``narrowband_window``, ``narrowband_music_prob``, ``narrowband_music_slope``)
is a balanced logistic regression, on the calibration frames TEN-VAD's hysteresis calls
speech, of a frame's class on its window's peak probability and the log of its spectral
centroid's spread; the fit is printed as the config's two numbers. Then, per source split
and setting: seconds of "speech" in the music-only files, the share of the seconds VAD
calls speech that are music in the long files and their frame F1 against the prompts, and
the seconds of speech found in the voice-only files (calibration: also relative to the same
recordings wideband at 0.5; held apart: of the prompts' seconds). The last rows change
``narrowband_music_cap``, the peak probability that is speech whatever the spectrum.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from speechprep.vad.narrowband import REF_SPREAD_HZ, Centroids, hysteresis_flags, moving_max, moving_stats, music_gate
from speechprep.vad.params import VadParams
from speechprep.vad.stage import make_segments, speech_flags
from tests import real_speech as R
from tests.support import params

P = params(VadParams)
HEADER = (
    "| setting | music-only files: s of speech | long files: music share of speech | long files: F1 "
    "| voice files: speech found |"
)


def analyse(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """TEN-VAD's probabilities and the frames' spectral centroids, as the VAD job reads the file."""
    c = Centroids(P.hop_size)
    probs, _, _ = speech_flags([R.read(path, 16000)[0]], P, c.feed)
    return probs, c.finish()


def sets(cache: Path, split: str) -> dict[str, list]:
    """``{"speech": [(codec, path)], "music": [(codec, path)], "long": [(path, truth)], "wide": [path]}``."""
    out: dict[str, list] = {"speech": [], "music": [], "long": [], "wide": []}
    if split == "calibration":
        voices = R.librivox() + R.cards() + R.alsa_voice() + R.klettres("en")[:8] + R.klettres("fr")[:8]
        voices += R.klettres_voices("de")[:8]
        sources = [u.path for u in voices] + [_wav(r, cache) for r in R.raw_utterances()]
        out["wide"] = sources
        tracks = [R.excerpt(t, s, 20, cache / f"x_{t.stem}_{s}.wav") for t in R.music("hyperrogue") for s in (10, 40)]
    else:
        sources = [u.path for spk in R.TELEPHONE_VOICES for u in R.telephone_prompts(spk)[::12][:40]]
        out["speech"] = [("as published", p) for p in sources]
        full = R.music("moh") + R.music("asc")
        tracks = [R.excerpt(t, s, 20, cache / f"x_{t.stem}_{s}.wav") for t in full for s in (20, 60, 100)]
    for codec in R.TELEPHONE_CODECS:
        if split == "calibration":
            coded = [R.through_codec(p, codec, cache / f"s_{k:03d}_{codec}.wav") for k, p in enumerate(sources)]
            out["speech"] += [(codec, p) for p in coded]
        out["music"] += [(codec, R.through_codec(t, codec, cache / f"m_{t.stem}_{codec}.wav")) for t in tracks]
    prompts = sources if split == "held apart" else [p for c, p in out["speech"] if c == "resample8k"]
    music = R.music("hyperrogue") if split == "calibration" else R.music("moh") + R.music("asc")
    for k in range(10):
        codec = R.TELEPHONE_CODECS[k % len(R.TELEPHONE_CODECS)]
        rng = np.random.default_rng(100 * (split == "calibration") + k)
        picked = [prompts[i] for i in rng.choice(len(prompts), size=int(rng.integers(4, 8)), replace=False)]
        src = cache / f"long_{split[0]}{k}.wav"
        truth = R.with_music_between(picked, music, src, seed=k)
        out["long"].append((R.through_codec(src, codec, cache / f"long_{split[0]}{k}_{codec}.wav"), truth))
    return out


def _wav(raw: Path, cache: Path) -> Path:
    import soundfile as sf

    out = cache / f"raw_{raw.stem}.wav"
    if not out.exists():
        sf.write(out, R.read(raw)[0], 16000, subtype="PCM_16")
    return out


def fit(data: dict[str, list], analysed: dict) -> tuple[float, float]:
    """The gate's (prob, slope) from a balanced logistic regression on the calibration frames
    that TEN-VAD's hysteresis calls speech: class ~ a * peak prob + b * ln(1 + spread) + c."""
    width = round(P.narrowband_window / P.hop_s)
    xs, ys = [], []
    labelled = [(p, np.ones(len(analysed[p][0]), bool)) for _, p in data["speech"]]
    labelled += [(p, np.zeros(len(analysed[p][0]), bool)) for _, p in data["music"]]
    labelled += [(p, _truth_frames(truth, len(analysed[p][0]))) for p, truth in data["long"]]
    for path, y in labelled:
        probs, cent = analysed[path]
        on = hysteresis_flags(probs, P.narrowband_threshold, P.narrowband_release).astype(bool)
        _, spread = moving_stats(cent[: len(probs)], width)
        xs.append(np.c_[moving_max(probs, width), np.log1p(spread)][on])
        ys.append(y[on])
    x, y = np.concatenate(xs), np.concatenate(ys).astype(float)
    mu, sd = x.mean(0), x.std(0)
    z, w = (x - mu) / sd, np.zeros(3)
    weight = np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(4000):
        g = (1 / (1 + np.exp(-(z @ w[1:] + w[0]))) - y) * weight
        w[1:] -= 0.2 * z.T @ g / len(y)
        w[0] -= 0.2 * g.mean()
    a, b = w[1:] / sd
    c = w[0] - (w[1:] * mu / sd).sum()
    # a*m + b*ln(1+s) + c >= 0  <=>  m >= prob - slope*log2((1+s)/(1+REF))
    return (-c - b * np.log1p(REF_SPREAD_HZ)) / a, b * np.log(2) / a


def _truth_frames(truth: list[tuple[float, float]], n: int) -> np.ndarray:
    y = np.zeros(n, bool)
    for a, b in truth:
        y[int(a / P.hop_s) : int(b / P.hop_s)] = True
    return y


def speech_segments(probs: np.ndarray, cent: np.ndarray, setting: str, p: VadParams) -> list[tuple[float, float]]:
    """``0.5``: TEN-VAD's own threshold; ``0.35/0.3``: the hysteresis alone; anything else: with the gate."""
    if setting == "0.5":
        flags = (probs >= 0.5).astype(np.uint8)
    else:
        flags = hysteresis_flags(probs, p.narrowband_threshold, p.narrowband_release)
        if setting != "0.35/0.3":
            flags = flags & music_gate(probs, cent, p)
    return make_segments(flags, probs, len(probs) * p.hop_s, p)


def _seconds(segs) -> float:
    return sum(b - a for a, b in segs)


def _inside(segs, truth) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in segs for c, d in truth)


def row(data: dict[str, list], analysed: dict, setting: str, p: VadParams, wide: float) -> str:
    music = sum(_seconds(speech_segments(*analysed[m], setting, p)) for _, m in data["music"])
    music_total = sum(len(analysed[m][0]) * p.hop_s for _, m in data["music"])
    called = inside = truth_s = 0.0
    for path, truth in data["long"]:
        segs = speech_segments(*analysed[path], setting, p)
        called, inside, truth_s = called + _seconds(segs), inside + _inside(segs, truth), truth_s + _seconds(truth)
    f1 = 2 * inside / (called + truth_s)
    speech = sum(_seconds(speech_segments(*analysed[s], setting, p)) for _, s in data["speech"])
    n_codecs = len({c for c, _ in data["speech"]})
    found = f"{speech / n_codecs:.1f} s a codec ({speech / n_codecs / wide:.3f})"
    return f"| {setting} | {music:.1f} of {music_total:.0f} | {(called - inside) / called:.3f} | {f1:.3f} | {found} |"


def cost(cache: Path, repeats: int = 3) -> None:
    """CPU seconds of the VAD of one 600 s 8 kHz recording (held-apart prompts end to end),
    with the gate and without (taken as wideband), repeats interleaved; medians."""
    import resource
    import statistics

    import soundfile as sf

    from speechprep.vad.stage import analyze_file

    x = np.concatenate([R.read(u.path, 8000)[0] for u in R.telephone_prompts("allison_en")[:300]])
    path = cache / "cost_600s.wav"
    sf.write(path, np.tile(x, 1 + 8000 * 600 // len(x))[: 8000 * 600], 8000, subtype="PCM_16")
    entry = {"id": "cost", "audio_filepath": str(path), "sample_rate": 8000}
    took: dict[str, list[float]] = {"gate": [], "no gate": []}
    for _ in range(repeats):
        for name, p in (("gate", P), ("no gate", replace(P, narrowband_rate=0))):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            analyze_file(entry, p)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            took[name].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    med = {k: statistics.median(v) for k, v in took.items()}
    print(
        f"600 s at 8 kHz: {med['gate']:.2f} CPU-s with the gate, {med['no gate']:.2f} without "
        f"({med['gate'] / med['no gate']:.2f}x; medians of {repeats})"
    )


def wideband(cache: Path) -> None:
    """What the gate would do on wideband files: seconds of speech TEN-VAD's own 0.5 finds,
    without and with the gate, in real music (hyperrogue and ASC, two 20 s excerpts of each
    track) and in held-apart KLettres speakers' clips (da, ml, ru, es, cs, it; 15 each)."""
    music = [
        R.excerpt(t, s, 20, cache / f"x_{t.stem}_{s}.wav")
        for t in R.music("hyperrogue") + R.music("asc")
        for s in (10, 40)
    ]
    voices = [u.path for lang in ("da", "ml", "ru", "es", "cs", "it") for u in R.klettres_voices(lang)[:15]]
    for name, paths in (("music", music), ("held-apart KLettres clips", voices)):
        found = {"0.5": 0.0, "0.5 + gate": 0.0}
        total = 0.0
        for path in paths:
            probs, cent = analyse(path)
            total += len(probs) * P.hop_s
            flags = (probs >= P.threshold).astype(np.uint8)
            for key, f in (("0.5", flags), ("0.5 + gate", flags & music_gate(probs, cent, P))):
                found[key] += _seconds(make_segments(f, probs, len(probs) * P.hop_s, P))
        print(f"wideband {name} ({total:.0f} s): " + ", ".join(f"{k} {v:.1f} s" for k, v in found.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, help="keep the coded files here (default: a temporary folder)")
    ap.add_argument("--cost", action="store_true", help="only the gate's CPU cost on a 600 s recording")
    ap.add_argument("--wideband", action="store_true", help="only what the gate would do on wideband files")
    args = ap.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp())
    cache.mkdir(parents=True, exist_ok=True)
    if args.cost:
        return cost(cache)
    if args.wideband:
        return wideband(cache)
    fitted = None
    for split in ("calibration", "held apart"):
        data = sets(cache, split)
        paths = [p for _, p in data["speech"] + data["music"]] + [p for p, _ in data["long"]] + data["wide"]
        analysed = {p: analyse(p) for p in paths}
        if split == "calibration":
            fitted = fit(data, analysed)
            print("fitted on calibration: narrowband_music_prob {:.3f}, narrowband_music_slope {:.3f}".format(*fitted))
            wide = sum(_seconds(speech_segments(*analysed[w], "0.5", P)) for w in data["wide"])
        else:
            wide = sum(len(analysed[p][0]) * P.hop_s for _, p in data["speech"])
        print(f"\n{split}: " + ", ".join(f"{len(data[k])} {k} files" for k in ("speech", "music", "long")))
        print(HEADER)
        print("|---|---|---|---|---|")
        fit_p = replace(P, narrowband_music_prob=fitted[0], narrowband_music_slope=fitted[1])
        rows = [("0.5", P), ("0.35/0.3", P), ("0.35/0.3 + gate (config)", P), ("0.35/0.3 + gate (fit)", fit_p)]
        rows += [(f"gate, cap {cap}", replace(P, narrowband_music_cap=cap)) for cap in (1.0, 0.85, 0.8)]
        for setting, p in rows:
            print(row(data, analysed, setting, p, wide))


if __name__ == "__main__":
    main()
