#!/usr/bin/env python3
"""Speaker clustering on real voices: purity and inverse purity by linkage and threshold.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/speakers/calibration.py \\
        [--voices distinct|all|telephone|held-out] [--per-language 60] [--per-file 3 5 10] \\
        [--methods complete average weighted] [--thresholds 0.16 0.18 ...]

Real recordings from tests/real_speech.py (Debian's pocketsphinx-testdata,
klettres-data and alsa-utils): ``distinct``, the voices that are surely
different people (``real_speech.distinct_voices``); ``all``, every klettres
language besides (a language taken as one person, German as two), where some
languages may share one person; ``telephone``, the distinct voices' clips each through
one of ``real_speech.TELEPHONE_CODECS`` in turn (8 kHz); ``held-out``, 110 telephone
prompts (8 kHz, 1-4 s, a file each) of each of the five professional voices of
``real_speech.TELEPHONE_VOICES``, never used to choose a setting; at most ``--per-language`` clips of each klettres
language (letters first), so that no voice outweighs the others. Each clip is embedded once with speechprep's
Resemblyzer encoder (cached under ``$SPEECHPREP_REAL_SPEECH/speaker_calibration.npz``).
Klettres clips (one letter or syllable, about a second) are grouped ``--per-file``
at a time into source files of one speaker; the other voices' clips are a file
each. :func:`speechprep.curate.speakers.assign_speakers_by_file` (what the
speakers job runs with ``speaker_unit: file``) clusters them; each cell is
``purity / inverse purity / speakers found`` over segments (purity: share in
their cluster's majority voice; inverse purity: share in their voice's majority
cluster). Figures: docs/stages/speakers.md, "Speakers on real voices".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
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


def telephone_copies(utts: list[R.Utterance]) -> list[R.Utterance]:
    """Each clip through one of the telephone codecs in turn (8 kHz), cached under the real
    speech folder's ``telephone_copies/``."""
    out = []
    for k, u in enumerate(utts):
        codec = R.TELEPHONE_CODECS[k % len(R.TELEPHONE_CODECS)]
        path = R.root() / "telephone_copies" / codec / f"{u.speaker}__{u.path.stem}.wav"
        if not path.exists():
            R.through_codec(u.path, codec, path)
        out.append(R.Utterance(path, u.speaker))
    return out


def voices(which: str, per_language: int) -> list[R.Utterance]:
    if which == "distinct":
        return R.distinct_voices(per_language)
    if which == "telephone":
        return telephone_copies(R.distinct_voices(per_language))
    if which == "held-out":  # never calibrated on: five professional voices' telephone prompts
        return [u for v in R.TELEPHONE_VOICES for u in R.telephone_prompts(v, 110)]
    klettres = [u for lang in R.klettres_languages() for u in R.klettres_voices(lang)[:per_language]]
    return R.librivox() + R.cards() + R.alsa_voice() + klettres


def merged(x: np.ndarray, files: list[str], t1: float, t2: float, dissolve: int) -> np.ndarray:
    """A second pass tried on telephone voices (not the job's): files pooled and clustered
    by average linkage cut at ``t1``; then, while two clusters of 3 files or more have
    centroids under ``t2`` apart, the closest two merge; clusters under ``dissolve`` files go
    to the nearest of the rest. Each clip's cluster."""
    from scipy.cluster.hierarchy import fcluster, linkage

    from speechprep.curate.speakers import _normalise

    names, inv = np.unique(files, return_inverse=True)
    xn = _normalise(x)
    v = _normalise(np.stack([xn[inv == k].mean(axis=0) for k in range(len(names))]))
    lab = fcluster(linkage(v.astype(np.float64), method="average", metric="cosine"), t1, "distance")
    groups = [np.flatnonzero(lab == i) for i in np.unique(lab)]
    while True:
        big = [g for g in groups if len(g) >= 3]
        if len(big) < 2:
            break
        c = _normalise(np.stack([v[g].mean(axis=0) for g in big]))
        d = 1 - c @ c.T
        np.fill_diagonal(d, np.inf)
        a, b = np.unravel_index(np.argmin(d), d.shape)
        if d[a, b] >= t2:
            break
        groups = [g for g in groups if g is not big[a] and g is not big[b]] + [np.concatenate([big[a], big[b]])]
    keep = [g for g in groups if len(g) >= dissolve] or groups
    c = _normalise(np.stack([v[g].mean(axis=0) for g in keep]))
    return np.argmax(v @ c.T, axis=1)[inv]


def main() -> None:
    from dataclasses import replace

    from speechprep.curate.params import SpeakerParams
    from speechprep.curate.speakers import assign_speakers_by_file, purity
    from tests.support import params

    base = params(SpeakerParams)

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voices", choices=("distinct", "all", "telephone", "held-out"), default="distinct")
    ap.add_argument("--per-language", type=int, default=60, help="klettres clips per language (letters first)")
    ap.add_argument("--per-file", type=int, nargs="+", default=[3, 5, 10])
    ap.add_argument("--methods", nargs="+", default=["complete", "average", "weighted"])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[round(0.16 + 0.02 * k, 2) for k in range(10)])
    ap.add_argument("--merge", type=float, nargs="+", help="the second pass (merged()) at these centroid distances")
    ap.add_argument("--dissolve", type=int, default=2, help="with --merge: clusters under this many files dissolved")
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
    for method in [] if a.merge else a.methods:
        for t in a.thresholds:
            cells = []
            for n in a.per_file:
                files = R.as_files(utts, n)
                q = replace(base, speaker_linkage=method, speaker_threshold=t)
                spk = assign_speakers_by_file(lambda i: x[i], files, x.shape[1], [None] * len(x), q)
                p, ip = purity(truth, spk.label.tolist())
                cells.append(f"{p:.3f} / {ip:.3f} / {len(spk.names)}")
            print(f"| {method} | {t:.2f} | " + " | ".join(cells) + " |", flush=True)
    for t1 in a.thresholds if a.merge else []:
        for t2 in a.merge:
            cells = []
            for n in a.per_file:
                lab = merged(x, R.as_files(utts, n), t1, t2, a.dissolve)
                p, ip = purity(truth, lab.tolist())
                cells.append(f"{p:.3f} / {ip:.3f} / {len(set(lab.tolist()))}")
            print(f"| average {t1:.2f}, merge {t2:.2f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
