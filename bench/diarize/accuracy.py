#!/usr/bin/env python3
"""Per-file diarization: changes cut, overlaps flagged, DER and one-voice segments kept whole,
on conversations of real and espeak-ng voices.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/diarize/accuracy.py \\
        [--pairs 24] [--overlap-pairs 10] [--seed 0] [--condition wideband] [--set key=value ...]

Built as tests/diarize/conversations.py builds them (the tests use a few of the
same plans with their own seeds): ``--pairs`` pairs of voices with 4 pause-free
turn changes each, ``--overlap-pairs`` pairs with 3 overlaps (0 dB, 1-3 s) each,
five minutes of three voices for each of four trios, one 25 s file per voice
alone. Prints: the share of change-holding VAD segments cut within 0.5 s of the
change or dropped (and the pairs that missed), the share of overlapped seconds
flagged or dropped, one-voice seconds flagged with them, DER (pyannote.metrics,
collar 0.5 = +-0.25 s and 0.25) per trio, and the share of one-voice segments
cut or dropped, the share of their seconds dropped and the files whose turns name
more than one speaker. ``--set`` overrides a parameter (``--set threshold=0.2``). ``--condition``
picks the voices (tests/diarize/conversations.py ``CONDITIONS``): ``wideband`` and
``telephone`` (the same real voices through telephone codecs) are where the parameters
are chosen; ``held-wideband`` (KLettres' other speakers) and ``held-telephone`` (five
professional voices' telephone prompts) report what voices never tuned on give.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.simplefilter("ignore")

TRIOS = [
    ("librivox", "klettres_lt", "klettres_fr"),
    ("cards", "klettres_nb", "klettres_en"),
    ("alsa", "klettres_ar", "espeak_scottish"),
    ("librivox", "klettres_he", "espeak_us_female"),
]


def trios(condition: str, seed: int) -> list[tuple[str, str, str]]:
    """``TRIOS`` (wideband), else four trios of the condition's voices drawn with ``seed``."""
    from tests.diarize import conversations as C

    if condition == "wideband":
        return TRIOS
    voices = C.CONDITIONS[condition][1]
    rng = np.random.default_rng(seed)
    return [tuple(str(v) for v in rng.choice(voices, 3, replace=False)) for _ in range(4)]


def run(model, p, a) -> None:
    from speechprep.diarize.core import diarize_file
    from tests.diarize import conversations as C
    from tests.diarize import scoring as S

    def diarize(conv):
        return diarize_file(model, conv.audio, conv.vad_segments(), p)

    first, second = C.CONDITIONS[a.condition]
    handled = total = 0
    missed = []
    for k, (x, y) in enumerate(C.pairs(a.pairs, a.seed, a.condition)):
        conv = C.turn_changes(x, y, a.seed * 1000 + k)
        h, t = S.changes_handled(conv, diarize(conv))
        handled, total = handled + h, total + t
        if h < t:
            missed.append(f"{x}/{y} {h}/{t}")
    print(f"turn changes: {handled}/{total} = {handled / total:.3f} cut within 0.5 s or dropped; missed: {missed}")
    removed = over = elsewhere = speech = 0.0
    for k, (x, y) in enumerate(C.pairs(a.overlap_pairs, a.seed + 1, a.condition)):
        conv = C.overlaps(x, y, a.seed * 1000 + 500 + k)
        r = diarize(conv)
        got, t = S.overlap_removed(conv, r)
        removed, over = removed + got, over + t
        flagged = [(q.start, q.end) for d in r.decisions for q in d.pieces if q.overlap]
        inside = sum(max(0.0, min(e, f1) - max(s, f0)) for f0, f1 in flagged for s, e, _ in conv.overlaps)
        elsewhere += sum(f1 - f0 for f0, f1 in flagged) - inside
        speech += sum(e - s for s, e in conv.speech())
    print(
        f"overlaps: {removed:.1f} of {over:.1f} overlapped s flagged or dropped = {removed / over:.3f}; "
        f"one-voice speech flagged with them: {elsewhere:.1f} s of {speech:.0f} s"
    )
    for trio in trios(a.condition, a.seed):
        conv = C.three_voices(trio, a.seed)
        r = diarize(conv)
        print(
            f"5 min of {'/'.join(trio)}: {len(r.centroids)} speakers, DER collar 0.5 "
            f"{S.der(conv, r, 0.5):.3f}, collar 0.25 {S.der(conv, r, 0.25):.3f}"
        )
    touched = segments = 0
    dropped, seconds, several = 0.0, 0.0, []
    for k, name in enumerate(dict.fromkeys(first + second)):
        r = diarize(C.one_voice(name, a.seed * 1000 + 900 + k))
        t, n = S.touched(r)
        touched, segments = touched + t, segments + n
        lost, total, speakers = S.one_voice_kept(r)
        dropped, seconds = dropped + lost, seconds + total
        if speakers > 1:
            several.append(f"{name} {speakers}")
    print(
        f"one voice: {touched}/{segments} segments cut or dropped = {touched / segments:.3f}; "
        f"{dropped:.1f} of {seconds:.0f} s dropped = {dropped / seconds:.3f}; files with more than one "
        f"speaker: {len(several)} of {len(dict.fromkeys(first + second))} {several}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=24)
    ap.add_argument("--overlap-pairs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--condition", default="wideband", help="wideband, telephone, held-wideband, held-telephone")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args()
    from dataclasses import asdict

    import torch

    from speechprep.diarize.params import DiarizeParams
    from speechprep.encoders import ResemblyzerEncoder
    from tests.support import params as config_params

    torch.set_num_threads(1)
    base = asdict(config_params(DiarizeParams))
    over = {}
    for kv in a.set:
        k, v = kv.split("=", 1)
        over[k] = type(base[k])(v)
    p = config_params(DiarizeParams, device="cpu", **over)
    print(f"parameters: {over or 'defaults'}")
    run(ResemblyzerEncoder("cpu", 1).model, p, a)


if __name__ == "__main__":
    main()
