#!/usr/bin/env python3
"""The captions' measures on real voices, and what the labels cost per audio hour.

    .venvs/curate/bin/python bench/tts/labels.py annotations [--repeats 3]
    .venvs/tts/bin/python bench/tts/labels.py phonemes [--repeats 3]

``annotations`` (curate env): per real voice (tests/real_speech.py; calibration voices
and the held-apart telephone voices, 8 kHz read at 16 kHz), the median over its
recordings of ``pitch_mean`` (SwiftF0, as the annotate job computes it) and of Praat's
autocorrelation pitch on the same audio, and the share of recordings within 5%; the
reverberation estimate of each recording dry and in synthetic rooms (RT60 0.3, 0.6,
1.0 s; tests/curate/test_annotations.py builds them the same way): the share ranked
in that order and the median estimate per room. Then the cost: CPU seconds per audio
hour of :func:`speechprep.curate.annotate.annotations` against a plain loop calling the
same libraries (SwiftF0's ``detect`` and the reverberation estimate) on the same clips,
medians of ``--repeats`` same-run passes.

``phonemes`` (tts env): CPU seconds per audio hour of
:class:`speechprep.tts.phonemes.Phonemizer` (phonemes and Piper's ids) against a plain
loop over ``piper_phonemize`` on the same transcripts (the LibriVox and cards readers'
sentences), and the rate's unit the manifests read.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests import real_speech as R  # noqa: E402

SR = 16000


def cpu(fn, repeats: int) -> float:
    """Median process CPU seconds of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def voices() -> dict[str, list]:
    return {
        "klettres_de letters (F)": R.klettres("de", "alpha"),
        "klettres_de syllables (M)": R.klettres("de", "syllab"),
        "librivox reader (M)": R.librivox(),
        "cards speaker (M)": R.cards(),
        "alsa voice (F)": R.alsa_voice(),
        **{f"{v} (held apart)": R.telephone_prompts(v, 60) for v in R.TELEPHONE_VOICES},
    }


def pitch_table(p) -> None:
    sys.path.insert(0, str(REPO / "tests" / "curate"))
    from test_annotations import praat_median

    from speechprep.curate.annotate import annotations

    print("voice | recordings | pitch_mean median (Hz) | Praat's (Hz) | difference | recordings within 5%")
    for name, utts in voices().items():
        pairs = []
        for u in utts:
            x = R.read(u.path, SR)[0]
            a, b = annotations(x, p)["pitch_mean"], praat_median(x)
            if a is not None and b is not None:
                pairs.append((a, b))
        ours, praat = (float(np.median([q[i] for q in pairs])) for i in (0, 1))
        within = np.mean([abs(a / b - 1) <= 0.05 for a, b in pairs])
        print(f"{name} | {len(pairs)} | {ours:.1f} | {praat:.1f} | {ours / praat - 1:+.1%} | {within:.0%}")


def pieces(clips: list, rng) -> list:
    """Each clip cut into consecutive pieces of 0.6-1.5 s (uniform), the last one kept
    from 0.5 s, silent ones (RMS under 1e-3) left out: short segments like prompts, from
    the calibration voices."""
    out = []
    for x in clips:
        pos = 0
        while pos < len(x):
            n = int(rng.uniform(0.6, 1.5) * SR)
            piece, pos = x[pos : pos + n], pos + n
            if len(piece) >= 0.5 * SR and np.sqrt(np.mean(piece**2)) >= 1e-3:
                out.append(piece)
    return out


def reverb_table() -> None:
    from scipy.signal import fftconvolve

    sys.path.insert(0, str(REPO / "tests" / "curate"))
    from test_annotations import room

    from speechprep.curate import measures as M

    voices = R.librivox() + R.cards() + R.alsa_voice() + R.klettres("en", "syllab")
    calibration = [R.read(u.path, SR)[0] for u in voices]
    sets = {
        "calibration voices": calibration,
        "calibration voices cut in 0.6-1.5 s pieces": pieces(calibration, np.random.default_rng(2)),
        "telephone voices (held apart)": [
            R.read(u.path, SR)[0] for v in R.TELEPHONE_VOICES for u in R.telephone_prompts(v, 40)
        ],
    }
    print("\nrecordings | n | ranked dry < 0.3 < 0.6 < 1.0 s | median estimate dry / 0.3 / 0.6 / 1.0 (s)")
    for name, clips in sets.items():
        rng = np.random.default_rng(1)
        rooms = [room(t, rng) for t in (0.3, 0.6, 1.0)]
        rows = [[M.reverb_s(y, SR) for y in [x, *(fftconvolve(x, h)[: len(x)] for h in rooms)]] for x in clips]
        ranked = np.mean([all(a < b for a, b in itertools.pairwise(r)) for r in rows])
        medians = " / ".join(f"{np.median([r[i] for r in rows]):.2f}" for i in range(4))
        print(f"{name} | {len(rows)} | {ranked:.1%} | {medians}")


def annotation_cost(p, repeats: int) -> None:
    from speechprep.curate import measures as M
    from speechprep.curate import pitch as F0
    from speechprep.curate.annotate import annotations

    xs = [R.read(u.path, SR)[0] for u in R.librivox() + R.cards() + R.telephone_prompts("allison_en", 100)]
    hours = sum(len(x) for x in xs) / SR / 3600
    detector = F0.detector()

    def plain():
        for x in xs:
            r = detector.detect(x, SR, fmin=p.pitch_range_hz[0], fmax=p.pitch_range_hz[1])
            f0 = r.pitch_hz[r.confidence >= p.pitch_voicing]
            (f0.mean(), f0.std(), M.reverb_s(x, SR))

    ours = cpu(lambda: [annotations(x, p) for x in xs], repeats)
    base = cpu(plain, repeats)
    print(f"\nannotations: {ours / hours:.0f} CPU-s per audio hour; plain loop {base / hours:.0f}", end="")
    print(f"; ratio {base / ours:.2f}x")
    print(f"({len(xs)} recordings, {hours * 3600:.0f} s of audio, median of {repeats})")


def phoneme_cost(repeats: int) -> None:
    from piper_phonemize import phoneme_ids_espeak, phonemize_espeak

    from speechprep.tts.phonemes import Phonemizer

    utts = R.librivox() + R.cards()
    hours = sum(len(R.read(u.path)[0]) / R.read(u.path)[1] for u in utts) / 3600
    texts = [u.text.lower() for u in utts] * 20
    hours *= 20
    ph = Phonemizer({"en": "en-us"})

    def plain():
        for t in texts:
            flat = [c for s in phonemize_espeak(t, "en-us") for c in s]
            phoneme_ids_espeak(flat)

    ours = cpu(lambda: [ph.ids(ph.phonemes(t, "en")) for t in texts], repeats)
    base = cpu(plain, repeats)
    print(f"phonemes: {ours / hours:.1f} CPU-s per audio hour; plain loop {base / hours:.1f}; ratio {base / ours:.2f}x")
    print(f"({len(texts)} transcripts, {hours * 3600:.0f} s of audio, median of {repeats})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("annotations", "phonemes"))
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if a.part == "phonemes":
        phoneme_cost(a.repeats)
        return
    from speechprep.curate.params import AnnotateParams
    from tests.support import params

    p = params(AnnotateParams, device="cpu")
    pitch_table(p)
    reverb_table()
    annotation_cost(p, a.repeats)


if __name__ == "__main__":
    main()
