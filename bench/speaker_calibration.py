#!/usr/bin/env python3
"""Speaker clustering on real voices: purity and inverse purity by linkage and threshold.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/speaker_calibration.py \\
        [--voices distinct|all] [--per-language 60] [--per-file 3 5 10] [--methods complete average weighted] \\
        [--thresholds 0.16 0.18 ...]

Real recordings from tests/real_speech.py (Debian's pocketsphinx-testdata,
klettres-data and alsa-utils): ``distinct``, the voices that are surely
different people (``real_speech.distinct_voices``); ``all``, every klettres
language besides (a language taken as one person, German as two), where some
languages may share one person; at most ``--per-language`` clips of each klettres
language (letters first), so that no voice outweighs the others. Each clip is embedded once with speechprep's
Resemblyzer encoder (cached under ``$SPEECHPREP_REAL_SPEECH/speaker_calibration.npz``).
Klettres clips (one letter or syllable, about a second) are grouped ``--per-file``
at a time into source files of one speaker; the other voices' clips are a file
each. :func:`speechprep.curate.speakers.assign_speakers_by_file` (what the
speakers job runs with ``speaker_unit: file``) clusters them; each cell is
``purity / inverse purity / speakers found`` over segments (purity: share in
their cluster's majority voice; inverse purity: share in their voice's majority
cluster). Figures: docs/stages.md, "Speakers on real voices".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import real_speech as R  # noqa: E402


def embed(utts: list[R.Utterance]) -> tuple[np.ndarray, np.ndarray]:
    """(embeddings of the clips Resemblyzer finds a voice in, their indices), cached by path."""
    from speechprep.encoders import ResemblyzerEncoder

    cache = R.root() / "speaker_calibration.npz"
    have: dict[str, np.ndarray] = {}
    if cache.exists():
        z = np.load(cache)
        have = dict(zip(z["path"].tolist(), z["emb"], strict=True))
    todo = [u for u in utts if str(u.path) not in have]
    if todo:
        enc = ResemblyzerEncoder("cpu", 1)
        for a in range(0, len(todo), 64):
            part = todo[a : a + 64]
            for u, e in zip(part, enc([R.read(u.path, 16000)[0] for u in part]), strict=True):
                # no voice found (a few klettres syllables): NaN, left out
                have[str(u.path)] = e if isinstance(e, np.ndarray) else np.full(256, np.nan, np.float32)
        paths = sorted(have)
        np.savez(cache, path=np.array(paths), emb=np.stack([have[p] for p in paths]))
    x = np.stack([have[str(u.path)] for u in utts])
    ok = np.flatnonzero(np.isfinite(x).all(axis=1))
    return x[ok], ok


def voices(which: str, per_language: int) -> list[R.Utterance]:
    if which == "distinct":
        return R.distinct_voices(per_language)
    klettres = [u for lang in R.klettres_languages() for u in R.klettres_voices(lang)[:per_language]]
    return R.librivox() + R.cards() + R.alsa_voice() + klettres


def main() -> None:
    from dataclasses import replace

    from speechprep.curate.params import SpeakerParams
    from speechprep.curate.speakers import assign_speakers_by_file, purity
    from tests.support import params

    base = params(SpeakerParams)

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voices", choices=("distinct", "all"), default="distinct")
    ap.add_argument("--per-language", type=int, default=60, help="klettres clips per language (letters first)")
    ap.add_argument("--per-file", type=int, nargs="+", default=[3, 5, 10])
    ap.add_argument("--methods", nargs="+", default=["complete", "average", "weighted"])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[round(0.16 + 0.02 * k, 2) for k in range(10)])
    a = ap.parse_args()
    utts = voices(a.voices, a.per_language)
    x, ok = embed(utts)
    utts = [utts[i] for i in ok]
    truth = [u.speaker for u in utts]
    sizes = {s: truth.count(s) for s in sorted(set(truth))}
    print(f"{len(utts)} clips, {len(sizes)} voices: " + ", ".join(f"{s} {n}" for s, n in sizes.items()))
    print()
    print("| linkage | threshold | " + " | ".join(f"{n} per file" for n in a.per_file) + " |")
    print("|---|---|" + "---|" * len(a.per_file))
    for method in a.methods:
        for t in a.thresholds:
            cells = []
            for n in a.per_file:
                files = R.as_files(utts, n)
                q = replace(base, speaker_linkage=method, speaker_threshold=t)
                spk = assign_speakers_by_file(lambda i: x[i], files, x.shape[1], [None] * len(x), q)
                p, ip = purity(truth, spk.label.tolist())
                cells.append(f"{p:.3f} / {ip:.3f} / {len(spk.names)}")
            print(f"| {method} | {t:.2f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
