"""The music detector on real speech over real music, fitted on calibration sources and
reported on held-apart ones.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/music/bin/python bench/music/detect_accuracy.py \
        [--fit] [--per-source N]

Sources (tests/music/mixes.py, licences in tests/real_speech.py). Calibration: the LibriVox
reader, the cards speaker, the ALSA voice, AN4/TIDIGITS utterances, seven KLettres speakers;
hyperrogue's and Frozen-Bubble's game music. Held apart: five professional telephone voices
(8 kHz), five other KLettres speakers; ASC's game music and the music-on-hold tracks. Each
speech segment clean, with music under it at 20, 10, 5 and 0 dB (speech power over music
power), and a piece of music alone at the speech's level, each with the file's non-speech
either side (1 s: the same music, or the recording's own quiet), without it (a file with
no pause), and, reported only (never fitted on), with 1 s of digital silence either side
(music that stops where the speech does, as in an edited file).

``--fit`` fits the two logistics of ``speechprep.encoders.music`` on the calibration part
(music: clean speech against 10 dB and louder music and music alone; speech: music alone
against the rest, with context) and prints them as the module's ``MUSIC_WEIGHTS`` and
``SPEECH_WEIGHTS``, and ``curate.max_music_prob``: the highest music_prob at which the
calibration keeps at most 0.05 of the seconds with music at 10 dB and louder
(:func:`threshold`). Then, per split, context and level: the share of
the seconds kept (music_prob at or under the threshold) and, for music alone, the share
the stage drops (music_only_prob at or over ``music.drop_prob``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from speechprep.encoders import music as D
from tests.music import mixes as M
from tests.support import REPO

MUSIC_FEATURES = ("open_pause_held", "open_quiet_held", "ctx_music")
SPEECH_FEATURES = ("ctx_rise", "level_range", "rest_range")
LOUD = (10.0, 5.0, 0.0, "music")  # the levels the detector must catch (20 dB is reported)
LOUD_KEPT = 0.05  # the share of their seconds the threshold may keep on the calibration part


def fit_logistic(X: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 1.0, steps: int = 50):
    """Weighted L2 logistic regression by Newton's method on standardised columns; the
    weights returned apply to the raw columns: ``(intercept, coefficients)``."""
    mu, sd = X.mean(axis=0), X.std(axis=0) + 1e-9
    Z = np.hstack([np.ones((len(X), 1)), (X - mu) / sd])
    beta = np.zeros(Z.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(Z @ beta, -50, 50)))
        g = Z.T @ (w * (p - y)) + l2 * np.r_[0, beta[1:]]
        H = (Z * (w * p * (1 - p))[:, None]).T @ Z + l2 * np.diag(np.r_[0, np.ones(len(beta) - 1)])
        step = np.linalg.solve(H, g)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    coef = beta[1:] / sd
    return float(beta[0] - (coef * mu).sum()), coef


def balanced(y: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Weights by seconds, each class summing to the same."""
    w = seconds.astype(float).copy()
    for c in (0, 1):
        w[y == c] /= w[y == c].sum()
    return w * len(y) / 2


CONTEXTS = {True: "the file's pauses", False: "none", "silence": "digital silence"}


def measured(split: str, per_source: int) -> list[dict]:
    rows = []
    for context in (True, False):
        for m in M.mixes(split, per_source=per_source, context=context):
            noises = {context: m.noise}
            if context:
                noises["silence"] = (np.zeros(m.sr, np.float32),) * 2
            for c, noise in noises.items():
                f = D.all_features(m.audio, m.sr, noise)
                if f is not None:
                    rows.append({"snr": m.snr, "seconds": m.seconds, "context": c, "speech": m.speech, **f})
    return rows


def fit(rows: list[dict]) -> tuple[tuple, tuple]:
    r = [x for x in rows if x["snr"] != 20.0 and x["context"] in (True, False)]
    X = np.array([[x[k] for k in MUSIC_FEATURES] for x in r])
    y = np.array([0 if x["snr"] is None else 1 for x in r])
    b, c = fit_logistic(X, y, balanced(y, np.array([x["seconds"] for x in r])), l2=1.0)
    music = (round(b, 3), {k: round(float(v), 4) for k, v in zip(MUSIC_FEATURES, c, strict=True)})
    r = [x for x in rows if x["context"] is True]
    X = np.array([[x[k] for k in SPEECH_FEATURES] for x in r])
    y = np.array([0 if x["snr"] == "music" else 1 for x in r])
    b, c = fit_logistic(X, y, balanced(y, np.array([x["seconds"] for x in r])), l2=1.0)
    speech = (round(b, 3), {k: round(float(v), 4) for k, v in zip(SPEECH_FEATURES, c, strict=True)})
    return music, speech


def probs(rows: list[dict], music_w, speech_w) -> None:
    for x in rows:
        x["music_prob"] = D._logistic(D.score(music_w, x))
        x["speech_prob"] = D._logistic(D.score(speech_w, x))
        x["music_only_prob"] = x["music_prob"] * (1 - x["speech_prob"])


def threshold(rows: list[dict]) -> float:
    """The highest music_prob (a step of 0.01) at which the calibration keeps at most
    :data:`LOUD_KEPT` of the seconds with music at 10 dB and louder (with the file's
    pauses): half the share allowed, the other half left to voices and music it never
    heard; as high as that allows, so that it keeps the most clean speech."""
    r = [x for x in rows if x["context"] is True]
    loud = [x for x in r if x["snr"] in LOUD]
    grid = np.round(np.arange(0.01, 1.0, 0.01), 2)
    ok = [t for t in grid if kept_share(loud, t) <= LOUD_KEPT]
    return float(max(ok)) if ok else 0.01


def kept_share(rows: list[dict], limit: float) -> float:
    s = sum(x["seconds"] for x in rows)
    return sum(x["seconds"] for x in rows if x["music_prob"] <= limit) / s if s else float("nan")


def table(name: str, rows: list[dict], limit: float, drop: float) -> None:
    print(f"\n{name}: share of seconds kept (music_prob <= {limit}); music alone: share dropped by the stage")
    print("| context | clean | 20 dB | 10 dB | 5 dB | 0 dB | music alone kept | music alone dropped |")
    print("|---|---|---|---|---|---|---|---|")
    for context, name in CONTEXTS.items():
        r = [x for x in rows if x["context"] == context]
        cells = [f"{kept_share([x for x in r if x['snr'] == snr], limit):.3f}" for snr in M.SNRS]
        alone = [x for x in r if x["snr"] == "music"]
        dropped = sum(x["seconds"] for x in alone if x["music_only_prob"] >= drop) / sum(x["seconds"] for x in alone)
        print(f"| {name} | {' | '.join(cells)} | {dropped:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true", help="fit the weights on the calibration part and print them")
    ap.add_argument("--per-source", type=int, default=8, help="speech segments of each speech source")
    args = ap.parse_args()
    import yaml

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))
    limit, drop = cfg["curate"]["max_music_prob"], cfg["music"]["drop_prob"]
    cal = measured("calibration", args.per_source)
    held = measured("held_out", args.per_source)
    music_w, speech_w = D.MUSIC_WEIGHTS, D.SPEECH_WEIGHTS
    if args.fit:
        music_w, speech_w = fit(cal)
        print(f"MUSIC_WEIGHTS = {music_w}\nSPEECH_WEIGHTS = {speech_w}")
    probs(cal, music_w, speech_w)
    probs(held, music_w, speech_w)
    if args.fit:
        limit = threshold(cal)
        print(f"curate.max_music_prob: {limit} (the calibration keeps at most {LOUD_KEPT} of 10 dB and louder)")
    n_cal, n_held = (len({x["speech"] for x in r if x["speech"]}) for r in (cal, held))
    n = {k: sum(1 for x in r if x["context"] is True) for k, r in (("cal", cal), ("held", held))}
    print(f"segments: calibration {n['cal']} ({n_cal} speech sources), held apart {n['held']} ({n_held})")
    table("calibration", cal, limit, drop)
    table("held apart", held, limit, drop)


if __name__ == "__main__":
    main()
