#!/usr/bin/env python3
"""Acoustic duplicates on real speech: recall over real codec copies, false pairs among
different utterances of one speaker.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/curate/duplicates_calibration.py \\
        [--per-language 15] [--cache DIR] [--units]

Real recordings from tests/real_speech.py (Debian's pocketsphinx-testdata,
klettres-data, alsa-utils). **Copies**: the LibriVox sentences, the cards
speaker, the ALSA voice, the AN4 utterances and the first ``--per-language``
clips of each of ``KLETTRES_DISTINCT``'s speakers, each through every real codec
of ``real_speech.CODECS`` (sox GSM 06.10 and MP3, ffmpeg G.722 and Opus 16 kb/s, a
resample to 8 kHz) with a gain of +-3 or +-6 dB and 0.1-0.5 s of silence before
it (``real_speech.codec_copies``, cached in ``--cache``), decoded back at 16 kHz
as the stage decodes; and **trims**: each source cut 0.1-0.5 s later (the copy's
segment starting inside the original's). **Different utterances of one speaker**:
every pair of recordings of each voice (the LibriVox reader, the cards speaker, the
ALSA voice, every klettres language's clips, German's two speakers apart); pairs
whose decoded PCM is identical (two klettres files of one recording) are exact
duplicates, counted apart.

Prints, with the config's parameters: the fingerprint's speed; per codec the
score (:func:`speechprep.curate.fingerprint.compare`) of each copy against its
source (min / 5th percentile / median) and the share the LSH makes a candidate;
the same-speaker pairs' scores; recall and false pairs by score threshold; and
the end-to-end search (:func:`speechprep.curate.duplicates.find_duplicates`, the
duplicates job's search) over every recording and copy together. With ``--units``,
the same copies and pairs by the unit MinHash of the measure job, on HuBERT units
of the demo S2S models (tests/curate/s2s_units.py in .venvs/s2s). Figures:
docs/stages/curate.md, "Duplicates on real speech".
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests import real_speech as R  # noqa: E402


def sources(per_language: int) -> list[R.Utterance]:
    """The recordings that get copies."""
    out = R.librivox() + R.cards() + R.alsa_voice()
    out += [R.Utterance(p, f"an4_{p.stem}") for p in R.raw_utterances()]
    for lang in R.KLETTRES_DISTINCT:
        out += R.klettres_voices(lang)[:per_language]
    return out


def voices() -> dict[str, list[R.Utterance]]:
    """Every recording of each voice (the same-speaker pairs)."""
    out = defaultdict(list)
    for u in R.librivox() + R.cards() + R.alsa_voice():
        out[u.speaker].append(u)
    for lang in R.klettres_languages():
        for u in R.klettres_voices(lang):
            out[u.speaker].append(u)
    return dict(out)


def lsh_candidates(pairs: list[tuple[np.ndarray | None, np.ndarray | None]], p) -> np.ndarray:
    """Whether the duplicates job's LSH makes each pair of fingerprint rows a candidate (a band
    key shared by two anchors whose sketches are close: ``fingerprint.lsh_candidates``)."""
    from speechprep.curate import fingerprint as FP

    out = np.zeros(len(pairs), bool)
    both = [k for k, (a, b) in enumerate(pairs) if a is not None and b is not None]
    for s in range(0, len(both), 20_000):
        k = both[s : s + 20_000]
        a, b = np.stack([pairs[i][0] for i in k]), np.stack([pairs[i][1] for i in k])
        out[k] = FP.lsh_candidates(a, b, p.fingerprint_band_bits, p.fingerprint_bands, p.fingerprint_sketch_max_diff)
    return out


def unit_signatures(audio: dict[str, np.ndarray], work: Path) -> dict[str, np.ndarray | None]:
    """MinHash signatures (the measure job's) of each clip's HuBERT units from the demo S2S
    models (tests/curate/s2s_units.py, run in .venvs/s2s, which has fairseq)."""
    import json
    import os
    import subprocess

    from speechprep.curate.duplicates import minhash_signature
    from tests.support import config

    keys = {k: f"c{i}" for i, k in enumerate(sorted(audio))}
    work.mkdir(parents=True, exist_ok=True)
    np.savez(work / "clips.npz", **{keys[k]: x for k, x in audio.items()})
    cmd = [str(REPO / ".venvs" / "s2s" / "bin" / "python"), str(REPO / "tests" / "curate" / "s2s_units.py")]
    cmd += [str(REPO / "resources" / "demo" / "truth.json"), str(work / "clips.npz"), str(work / "units.json")]
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    units = json.loads((work / "units.json").read_text(encoding="utf-8"))
    c = config()["curate"]
    return {k: minhash_signature(units[keys[k]], c["minhash_ngram"], c["minhash_perm"]) for k in audio}


def unit_report(audio, copies, pairs, threshold: float, work: Path) -> None:
    from speechprep.curate.duplicates import jaccard

    sig = unit_signatures(audio, work)
    j = lambda a, b: jaccard(sig[a], sig[b]) if sig[a] is not None and sig[b] is not None else 0.0
    by_codec = defaultdict(list)
    for c in copies:
        by_codec[c.codec].append(j(str(c.source.path), str(c.path)))
    allc = np.concatenate(list(by_codec.values()))
    neg = np.array([j(a, b) for a, b in pairs])
    print(
        "\nunit MinHash (demo HuBERT units): copies' Jaccard to their source, median "
        + ", ".join(f"{k} {np.median(v):.3f}" for k, v in by_codec.items())
        + f"; {int((allc >= threshold).sum())} of {len(allc)} reach near_duplicate_jaccard {threshold}; "
        f"same-speaker pairs: median {np.median(neg):.3f}, 99th percentile {np.percentile(neg, 99):.3f}, "
        f"max {neg.max():.3f}, {int((neg >= threshold).sum())} reach it"
    )


def summary(v: list[float]) -> str:
    return f"{np.min(v):.3f} / {np.percentile(v, 5):.3f} / {np.median(v):.3f}"


def read_audio(srcs: list[R.Utterance], copies: list) -> dict[str, np.ndarray]:
    """Every recording (sources and voices) and copy, decoded at 16 kHz, by path."""
    audio: dict[str, np.ndarray] = {}
    for path in {str(u.path) for u in srcs} | {str(u.path) for vs in voices().values() for u in vs}:
        audio[path] = R.read(Path(path), 16000)[0]
    for c in copies:
        audio[str(c.path)] = R.read(c.path, 16000)[0]
    return audio


def fingerprints(audio: dict[str, np.ndarray]) -> dict:
    """The acoustic fingerprint of every clip, by path, and a line on their speed."""
    from speechprep.curate import fingerprint as FP

    t = time.perf_counter()
    fps = {k: FP.fingerprint(x) for k, x in audio.items()}
    secs = sum(len(x) for x in audio.values()) / 16000
    print(
        f"fingerprints: {len(fps)} recordings, {secs:.0f} s of audio, {secs / (time.perf_counter() - t):.0f}x real time"
    )
    return fps


def copy_scores(srcs: list[R.Utterance], copies: list, audio: dict, fps: dict, p) -> tuple[dict, dict, dict]:
    """Per codec and for trims, each copy against its source: (scores, LSH candidates, under 1 s of speech)."""
    from speechprep.curate import fingerprint as FP

    score = lambda f0, f1: FP.compare(f0, f1) if f0 is not None and f1 is not None else 0.0
    scores, cand, short = defaultdict(list), defaultdict(list), defaultdict(list)
    for c in copies:
        f0 = fps[str(c.source.path)]
        scores[c.codec].append(score(f0, fps[str(c.path)]))
        short[c.codec].append(f0 is None or int(f0["n_active"]) < 100)  # under 1 s of speech
    for codec in {c.codec for c in copies}:
        mine = [c for c in copies if c.codec == codec]
        cand[codec] = lsh_candidates([(fps[str(c.source.path)], fps[str(c.path)]) for c in mine], p)
    rng = np.random.default_rng(0)
    trims = []
    for u in srcs:
        x = audio[str(u.path)]
        f0, f1 = fps[str(u.path)], FP.fingerprint(x[int(rng.uniform(0.1, 0.5) * 16000) :])
        scores["trim"].append(score(f0, f1))
        trims.append((f0, f1))
        short["trim"].append(f0 is None or int(f0["n_active"]) < 100)
    cand["trim"] = lsh_candidates(trims, p)
    return scores, cand, short


def same_speaker(audio: dict, fps: dict, p) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Print how different utterances of one speaker score: (their scores, their pairs of paths)."""
    from speechprep.curate import fingerprint as FP

    neg, twins, pairs = [], [], []
    t = time.perf_counter()
    for spk, utts in voices().items():
        for u, w in itertools.combinations(utts, 2):
            xa, xb = audio[str(u.path)], audio[str(w.path)]
            if len(xa) == len(xb) and np.array_equal(xa, xb):
                twins.append((u.path.name, w.path.name, spk))
                continue
            fa, fb = fps[str(u.path)], fps[str(w.path)]
            if fa is None or fb is None:
                continue
            neg.append((FP.compare(fa, fb), spk, u.path.name, w.path.name))
            pairs.append((str(u.path), str(w.path)))
    neg_cand = int(lsh_candidates([(fps[a], fps[b]) for a, b in pairs], p).sum())
    loose = dataclasses.replace(p, fingerprint_sketch_max_diff=64)
    neg_cand_loose = int(lsh_candidates([(fps[a], fps[b]) for a, b in pairs], loose).sum())
    per_pair = (time.perf_counter() - t) / max(len(neg), 1) * 1e6
    nv = np.array([n[0] for n in neg])
    print(
        f"\ndifferent utterances of one speaker: {len(neg)} pairs of {len(voices())} voices "
        f"({per_pair:.0f} us a pair, compare + LSH check); score max {nv.max():.3f}, "
        f"99.9th percentile {np.percentile(nv, 99.9):.3f}, median {np.median(nv):.3f}; LSH candidates {neg_cand} "
        f"({neg_cand_loose} without the sketch check)"
    )
    for s, spk, x, y in sorted(neg, reverse=True)[:5]:
        print(f"  {s:.3f} {spk}: {x} / {y}")
    print(f"identical PCM in two files (exact duplicates): {twins}")
    return nv, pairs


def print_thresholds(scores: dict, short: dict, nv: np.ndarray) -> None:
    """Recall of codec copies and trims, and false same-speaker pairs, by score threshold."""
    allc = np.concatenate([v for k, v in scores.items() if k != "trim"])
    short_c = np.concatenate([v for k, v in short.items() if k != "trim"])
    print(
        "\nthreshold: codec-copy recall by score alone (all; copies of recordings with under / over 1 s of speech), "
        "trims' recall, false pairs among the same-speaker pairs"
    )
    for thr in np.arange(0.26, 0.70, 0.04):
        print(
            f"  {thr:.2f}: recall {np.mean(allc >= thr):.3f} ({np.mean(allc[short_c] >= thr):.3f} / "
            f"{np.mean(allc[~short_c] >= thr):.3f}), trims {np.mean(np.array(scores['trim']) >= thr):.3f}, "
            f"false pairs {int((nv >= thr).sum())}"
        )


def search_report(audio: dict, fps: dict, copies: list, p) -> None:
    """The duplicates job's search over every recording and copy: copies found, originals merged."""
    from speechprep.curate.duplicates import Candidate
    from speechprep.curate.dupsearch import find_duplicates
    from speechprep.curate.measures import pcm_sha256

    ids, cands = {}, []
    for path, x in audio.items():
        ids[path] = f"{len(cands):05d}"
        cands.append(Candidate(ids[path], pcm_sha256(x), 3.0, None, fingerprint=fps[path]))
    t = time.perf_counter()
    keep = {d.id: d.duplicate_of for d in find_duplicates(cands, p)}
    took = time.perf_counter() - t
    group = lambda path: keep.get(ids[path], ids[path])
    by_codec = defaultdict(list)
    for c in copies:
        by_codec[c.codec].append(group(str(c.path)) == group(str(c.source.path)))
    found = sum(sum(v) for v in by_codec.values())
    copy_paths = {str(c.path) for c in copies}
    members = defaultdict(set)  # group -> PCM hashes of the original recordings in it
    for path in audio:
        if path not in copy_paths:
            members[group(path)].add(cands[int(ids[path])].pcm_sha256)
    false = sum(len(v) - 1 for v in members.values())
    print(
        f"\nsearch over {len(cands)} recordings and copies ({took:.1f} s): {found} of {len(copies)} copies found "
        f"(recall {found / len(copies):.3f}: "
        + ", ".join(f"{k} {np.mean(v):.3f}" for k, v in by_codec.items())
        + f"); {false} original recordings of other PCM put in one group with another"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-language", type=int, default=15)
    ap.add_argument("--cache", type=Path, default=R.root() / "duplicates_calibration")
    ap.add_argument("--units", action="store_true", help="also the unit MinHash with the demo HuBERT (.venvs/s2s)")
    a = ap.parse_args()
    from speechprep.curate.params import DuplicateParams
    from tests.support import params

    p = params(DuplicateParams)
    print(f"duplicates job params: {p}")
    srcs = sources(a.per_language)
    t = time.perf_counter()
    copies = R.codec_copies(srcs, a.cache)
    print(f"{len(copies)} copies of {len(srcs)} recordings ({time.perf_counter() - t:.0f} s to make or find)")
    audio = read_audio(srcs, copies)
    fps = fingerprints(audio)

    scores, cand, short = copy_scores(srcs, copies, audio, fps, p)
    print("\ncopies: score against the source (min / p5 / median), share made an LSH candidate")
    for k, v in scores.items():
        print(f"  {k:>10} ({len(v)}): {summary(v)}; candidates {np.mean(cand[k]):.3f}")

    nv, pairs = same_speaker(audio, fps, p)
    print_thresholds(scores, short, nv)
    search_report(audio, fps, copies, p)
    if a.units:
        unit_report(audio, copies, pairs, p.near_duplicate_jaccard, a.cache / "units")


if __name__ == "__main__":
    main()
