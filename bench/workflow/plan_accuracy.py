#!/usr/bin/env python3
"""Does the plan hold? A pilot on a share of a real corpus, then the whole run, compared.

    .venvs/workflow/bin/python bench/workflow/plan_accuracy.py --corpus prompts|music [--hours 1.0]
        [--sample 0.1] [--shard-hours 0.05] [--models demo|real-size] [--work DIR]

(``music`` mixes audio with soxr: build it first in the VAD env, ``.venvs/vad/bin/python
bench/workflow/plan_accuracy.py --corpus music --work DIR --build-only``, then run the line above with
``--work DIR``.)

The corpora (tests/real_speech.py, real recordings nobody here made):
``prompts``, telephone prompts of three professional voices (asterisk-core-sounds en, fr
and ru, 8 kHz wav, a file each: short files, mostly speech) up to ``--hours``;
``music``, recordings as an IVR makes them (``real_speech.with_music_between``: 20 prompts
of the two Italian voices a file, 3-10 s of real music, hyperrogue-music, after each:
long files, a third of them speech) up to ``--hours``. Every stage on, the demo models
(``make demo`` builds them), ``curate.min_bandwidth_hz`` off (telephone speech); for
``music``, ``curate.min_snr_db: 0`` (the music next to each prompt is the noise its SNR is
measured against: at the default 15 dB the pilot kept none of 50 segments, 47 ``low_snr``,
and a run that keeps nothing fails). Runs
``python -m speechprep plan --sample S`` in WORK, then the whole run (snakemake, the local
profile), then ``plan --compare``; prints per stage the plan's and the run's CPU seconds,
peak job memory and output bytes, the totals, and the run's wall time beside the plan's.

``--models real-size`` points the run at the real-size models with random weights
(``python -m speechprep models build-real-size``, cached in ~/.cache/speechprep/real_size;
built first if missing): ASR the parakeet-tdt-0.6b-sized TDT model; S2S HuBERT base, layer 6,
its 1000-unit k-means (``kmeans-1000``) and the unit HiFi-GAN of 1000 units; speakers (curation
and diarization) TitaNet-L, ``speakers.calibrated_for`` its sha256 and the default thresholds.
Random weights cost what trained ones cost (FLOPs, memory, the restore), so this measures the
plan's cost figures only: the speakers' thresholds are not this model's, and what the ASR
model emits is not speech's text: the curation checks that would reject every segment for it
are off (``REAL_SIZE_CURATE``, each with why), since a run that keeps nothing fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "workflow"))

from corpus_growth import config, duration, snakemake  # noqa: E402

from speechprep.models import real_size  # noqa: E402
from tests import real_speech  # noqa: E402


def prompts_corpus(dest: Path, hours: float) -> None:
    """Links to prompts of three voices, alternating, until ``hours`` of audio."""
    voices = [real_speech.telephone_prompts(v) for v in ("allison_en", "june_fr", "ivr_ru")]
    total = 0.0
    for k, u in enumerate(u for row in zip(*voices, strict=False) for u in row):
        if total >= hours * 3600:
            break
        (dest / f"{k:04d}_{u.speaker}_{u.path.name}").symlink_to(u.path)
        total += duration(u.path)


def music_corpus(dest: Path, hours: float) -> None:
    """Files of 20 prompts with real music between them, until ``hours`` of audio."""
    voices = [real_speech.telephone_prompts(v) for v in ("carlo_it", "menardi_it")]
    prompts = [u.path for row in zip(*voices, strict=False) for u in row]
    music = real_speech.music("hyperrogue")
    total, k = 0.0, 0
    while total < hours * 3600 and (k + 1) * 20 <= len(prompts):
        out = dest / f"ivr_{k:03d}.wav"
        real_speech.with_music_between(prompts[k * 20 : (k + 1) * 20], music, out, seed=k)
        total, k = total + duration(out), k + 1


# the real-size models the run's config points at (speechprep.models.real_size names)
REAL_SIZE = ("parakeet-tdt-0.6b", "hubert-base", "kmeans-1000", "hifigan-unit", "titanet-l")
# curation checks that would reject every segment on random-weight ASR output (the pilot keeps
# nothing, and a run that keeps nothing fails): off. The text checks stay on: on the prompts
# the random TDT model's text ("bench benchab bench ...") reads 10-25 characters/s (``--hours
# 0.03``), within speaking_rate's 3-30, and loops past max_repeated_ngram_share on some
# segments (repetitive_text: 39 of 208 at ``--hours 0.25``), as a real corpus's odd ones would.
REAL_SIZE_CURATE = {
    # its confidences are about 6e-28 (random logits over 1024 tokens): low_confidence on every
    # segment (corpus_growth.config turns it off for the demo model already)
    "min_confidence": None,
}


def real_size_models(cfg: dict) -> dict:
    """``cfg`` with the real-size models (module docstring), built first where missing."""
    import hashlib

    built = {n: real_size.default_dir() / real_size.MODELS[n][2] for n in REAL_SIZE}
    missing = [n for n, path in built.items() if not path.is_file()]
    if missing:
        real_size.build(real_size.default_dir(), missing)
    vocoder = built["hifigan-unit"]
    cfg["asr"]["model"] = str(built["parakeet-tdt-0.6b"])
    cfg["s2s"] = {"hubert": str(built["hubert-base"]), "layer": 6, "kmeans": str(built["kmeans-1000"])}
    cfg["s2s"] |= {"vocoder": str(vocoder), "vocoder_config": str(vocoder.with_suffix(".json"))}
    with open(built["titanet-l"], "rb") as f:  # random weights: the default thresholds, for cost only
        sha = hashlib.file_digest(f, "sha256").hexdigest()
    cfg["speakers"] = {"model": str(built["titanet-l"]), "calibrated_for": sha}
    cfg["curate"] |= REAL_SIZE_CURATE
    return cfg


def plan(work: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "speechprep", "plan", "--directory", str(work), "--configfile", "config.yaml"]
    p = subprocess.run([*cmd, *args], capture_output=True, text=True, encoding="utf-8", check=False)
    if p.returncode != 0:
        raise SystemExit(f"plan failed:\n{(p.stdout + p.stderr)[-3000:]}")


def report(work: Path, plan_s: float, run_s: float) -> None:
    p = json.loads((work / "plan.json").read_text(encoding="utf-8"))
    c = json.loads((work / "compare.json").read_text(encoding="utf-8"))
    print("| stage | CPU-s plan / run | peak MB plan / run | output MB plan / run | jobs plan / run |")
    print("|---|---|---|---|---|")
    for stage, r in c["stages"].items():
        cells = [
            f"{(r[k]['plan'] or 0) / d:.4g} / {(r[k]['run'] or 0) / d:.4g}"
            for k, d in (("cpu_s", 1), ("peak_rss_mb", 1), ("output_bytes", 1e6), ("jobs", 1))
        ]
        print(f"| {stage} | " + " | ".join(cells) + " |")
    t = c["total"]
    print(
        f"total CPU-s {t['cpu_s']['plan']:.0f} / {t['cpu_s']['run']:.0f} "
        f"(interval {p['total']['cpu_s_interval']}), output {t['output_bytes']['plan'] / 1e6:.1f} / "
        f"{t['output_bytes']['run'] / 1e6:.1f} MB, jobs {t['jobs']['plan']} / {t['jobs']['run']}"
    )
    print(
        f"wall: plan {p['wall_s']:.0f} s, run {run_s:.0f} s; the pilot took {plan_s:.0f} s; "
        f"hours {sum(d['hours'] for d in p['datasets'].values()):.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", choices=("prompts", "music"), required=True)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--sample", type=float, default=0.1)
    ap.add_argument("--shard-hours", type=float, default=0.05)
    ap.add_argument("--models", choices=("demo", "real-size"), default="demo", help="the demo or real-size models")
    ap.add_argument("--work", help="keep the run here (default: a temporary directory)")
    ap.add_argument("--build-only", action="store_true", help="build the corpus in WORK/corpus and stop")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.work or tmp)
        if not (work / "corpus").is_dir():  # built before (--build-only): kept
            (work / "corpus").mkdir(parents=True)
            (prompts_corpus if a.corpus == "prompts" else music_corpus)(work / "corpus", a.hours)
        if a.build_only:
            return
        config(work, a.shard_hours)
        cfg = json.loads((work / "config.yaml").read_text(encoding="utf-8"))
        if a.corpus == "music":  # the music around each prompt is the noise snr_db measures
            cfg["curate"]["min_snr_db"] = 0
        if a.models == "real-size":
            cfg = real_size_models(cfg)
        (work / "config.yaml").write_text(json.dumps(cfg), encoding="utf-8")
        t0 = time.time()
        plan(work, "--sample", str(a.sample), "--out", str(work / "plan.json"))
        t1 = time.time()
        snakemake(work, "--cores", "2")
        t2 = time.time()
        plan(work, "--compare", str(work / "plan.json"), "--out", str(work / "compare.json"))
        report(work, t1 - t0, t2 - t1)


if __name__ == "__main__":
    main()
