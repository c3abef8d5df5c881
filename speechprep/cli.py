"""The one command line: ``python -m speechprep <stage> <job> [options]``.

Every rule runs one job through it. The CLI checks once that the job runs in
its stage's pinned environment, sets up logging (one format: stage, shard,
message), runs the job, and turns a typed error (:mod:`speechprep.errors`)
into its exit code and one clear line: 2 for a setting, input or model file
that cannot work, 3 for the wrong environment, 4 for a model that fails
systematically (124 comes from the watchdog). Flags are named after the
config keys they carry (``--threads`` is ``<stage>.threads``); ``--params``
is the stage's config section as JSON, as the rules pass it.
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import warnings
from typing import Any, Callable

from . import logs
from .envspec import require_stage_env
from .errors import SpeechprepError

log = logging.getLogger("speechprep.cli")

# (stage, job) -> (environment, help, argument spec, handler)
JOBS: dict[tuple[str, str], tuple[str, str, list[tuple[str, dict[str, Any]]], Callable]] = {}


def job(stage: str, name: str, env: str, help: str, *args: tuple[str, dict[str, Any]]):
    def register(fn: Callable) -> Callable:
        JOBS[(stage, name)] = (env, help, list(args), fn)
        return fn

    return register


def req(flag: str, help: str = "", **kw) -> tuple[str, dict[str, Any]]:
    return flag, {"required": True, "help": help, **kw}


def opt(flag: str, help: str = "", **kw) -> tuple[str, dict[str, Any]]:
    return flag, {"help": help, **kw}


PARAMS = req("--params", "the stage's config section (and the shared model_failure rule), as JSON", type=json.loads)
THREADS = opt("--threads", "<stage>.threads", type=int, default=1)
RESUME = req("--resume", "the job's resume file (per-item outcomes while it runs)")


def _torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))


# -- ingest ---------------------------------------------------------------------
@job("ingest", "run", "ingest", "list or read a dataset, probe headers, write the manifest and shards",
     req("--name"), req("--dataset", "the dataset's config, as JSON", type=json.loads), THREADS,
     req("--manifest"), req("--rejects"), req("--shards-dir"))
def _ingest(a):
    from . import ingest

    ingest.run(a.name, a.dataset, a.manifest, a.rejects, a.shards_dir, a.threads)


# -- vad --------------------------------------------------------------------------
@job("vad", "run", "vad", "TEN-VAD over one shard: segments, per-file statistics, rejects",
     req("--shard"), PARAMS, THREADS, RESUME, req("--segments"), req("--stats"), req("--rejects"))
def _vad(a):
    from . import vad

    vad.run_shard(a.shard, a.segments, a.stats, a.rejects, vad.VadParams.from_dict(a.params), a.threads, a.resume)


@job("vad", "merge", "vad", "every shard's statistics in stats.csv and summary.json",
     req("--stats", nargs="+"), req("--rejects", nargs="+"), req("--segments", nargs="+"),
     req("--csv"), req("--summary"))
def _vad_merge(a):
    from . import vad

    vad.merge(a.stats, a.rejects, a.segments, a.csv, a.summary)


# -- asr --------------------------------------------------------------------------
@job("asr", "run", "asr", "NeMo transcripts of one shard of segments",
     req("--segments"), PARAMS, THREADS, RESUME, req("--out"), req("--rejects"))
def _asr(a):
    from . import asr

    asr.run(a.segments, a.out, a.rejects, asr.AsrParams.from_dict(a.params), a.resume, a.threads)


@job("asr", "merge", "asr", "every shard's transcripts in one manifest, and a summary",
     req("--shards", nargs="+"), req("--rejects", nargs="+"), req("--manifest"), req("--summary"))
def _asr_merge(a):
    from . import asr

    asr.merge(a.shards, a.rejects, a.manifest, a.summary)


# -- s2s --------------------------------------------------------------------------
@job("s2s", "run", "s2s", "HuBERT units and unit HiFi-GAN resynthesis of one shard",
     req("--segments"), PARAMS, THREADS, RESUME, req("--units"), req("--wav-dir"), req("--rejects"))
def _s2s(a):
    from . import s2s

    _torch_threads(a.threads)
    s2s.run_shard(a.segments, a.units, a.wav_dir, a.rejects, s2s.S2sParams.from_dict(a.params), a.resume)


@job("s2s", "inspect", "s2s", "what is legacy about a fairseq checkpoint; --write-modern writes a copy "
     "plain fairseq loads", ("checkpoint", {}), opt("--write-modern", metavar="OUT"))
def _s2s_inspect(a):
    from . import fairseq_legacy as legacy

    rep = legacy.write_modern(a.checkpoint, a.write_modern) if a.write_modern \
        else legacy.inspect_checkpoint(a.checkpoint)
    print("\n".join(rep.lines()))
    print("legacy: " + ("yes" if rep.legacy else "no"))
    if a.write_modern:
        print(f"modern copy written to {a.write_modern}")


# -- tts --------------------------------------------------------------------------
@job("tts", "tokenizer", "tts", "train the SentencePiece tokenizer on every dataset's transcripts",
     req("--manifests", 'JSON {"<ds>": "<ds>/asr/manifest.jsonl"}', type=json.loads),
     opt("--languages", 'JSON {"<ds>": "<language>"}', type=json.loads, default={}),
     req("--params", "tts.vocab_size and tts.languages, as JSON", type=json.loads), req("--model"))
def _tts_tokenizer(a):
    from .tts import text

    text.train_corpus_tokenizer(a.manifests, a.languages, a.params["languages"], int(a.params["vocab_size"]),
                                a.model)


@job("tts", "features", "tts", "codes, condition and emotion vectors of one shard",
     req("--segments", "asr/<shard>.jsonl"), req("--units", "s2s/<shard>.units.jsonl"),
     req("--s2s-rejects", "s2s/<shard>.rejects.jsonl"), PARAMS, THREADS, RESUME, req("--index"),
     req("--rejects"), req("--out-dir", "tts/<shard>: gets codes/, condition/, emo_vec/"))
def _tts_features(a):
    from .tts import features

    _torch_threads(a.threads)
    features.run_features(a.segments, a.units, a.s2s_rejects, a.index, a.rejects, a.out_dir,
                          features.TtsParams.from_dict(a.params), a.resume, a.threads)


@job("tts", "text", "tts", "text ids of one shard's accepted segments",
     req("--index", "tts/<shard>.features.jsonl"), req("--tokenizer"), req("--out"), req("--ids-dir"))
def _tts_text(a):
    from .tts import text

    text.run_text(a.index, a.tokenizer, a.out, a.ids_dir)


@job("tts", "manifest", "tts", "a dataset's train/val manifests and stats.json",
     req("--dataset"), req("--val-ratio", "tts.val_ratio", type=float), req("--config-sha256"),
     req("--tokenizer"), req("--features", nargs="+"), req("--texts", nargs="+"), req("--rejects", nargs="+"),
     req("--asr", nargs="+", help="asr/<shard>.jsonl (the ASR model's identity)"),
     req("--units", nargs="+", help="s2s/<shard>.units.jsonl (the S2S models' identity)"),
     req("--encoders", 'tts.condition and tts.emotion, as JSON {"condition": ..., "emotion": ...}',
         type=json.loads), opt("--hash-cache", "directory of cached model digests"),
     req("--train"), req("--val"), req("--stats"))
def _tts_manifest(a):
    from .tts import manifests

    manifests.build_manifests(a.dataset, a.features, a.texts, a.rejects, a.asr, a.units, a.tokenizer,
                              a.encoders, a.hash_cache, a.val_ratio, a.config_sha256, a.train, a.val, a.stats)


@job("tts", "combined", "tts", "train/val manifests and stats across datasets",
     req("--stats-in", nargs="+"), req("--train-in", nargs="+"), req("--val-in", nargs="+"),
     req("--train"), req("--val"), req("--stats"))
def _tts_combined(a):
    from .tts import manifests

    manifests.combine(a.stats_in, a.train_in, a.val_in, a.train, a.val, a.stats)


# -- curate -----------------------------------------------------------------------
@job("curate", "measure", "curate", "DNSMOS, loudness, SNR, bandwidth, rates, speaker embedding, hashes of one shard",
     req("--segments", "asr/<shard>.jsonl"), req("--units", "s2s/<shard>.units.jsonl"), PARAMS, THREADS, RESUME,
     req("--out", "curate/<shard>.measures.jsonl"), req("--embeddings", "curate/<shard>.embeddings.npy"),
     req("--minhash", "curate/<shard>.minhash.npy"), req("--rejects", "curate/<shard>.measure_rejects.jsonl"))
def _curate_measure(a):
    from .curate import params, stage

    _torch_threads(a.threads)
    stage.run_measure(a.segments, a.units, a.out, a.embeddings, a.minhash, a.rejects,
                      params.MeasureParams.from_dict(a.params), a.resume, a.threads)


@job("curate", "speakers", "curate", "pseudo speakers of a dataset from every shard's embeddings",
     req("--measures", nargs="+"), req("--embeddings", nargs="+"),
     req("--assign", nargs="+", help="curate/<shard>.speakers.jsonl, one per --measures file"),
     req("--centroids-dir", "curate/speakers"), req("--clusters", "curate/speaker_clusters.json"), PARAMS)
def _curate_speakers(a):
    from .curate import params, stage

    stage.run_speakers(a.measures, a.embeddings, a.assign, a.centroids_dir, a.clusters,
                       params.SpeakerParams.from_dict(a.params))


@job("curate", "duplicates", "curate", "exact and near duplicates across every shard of a dataset",
     req("--measures", nargs="+"), req("--minhash", nargs="+"),
     req("--out", nargs="+", help="curate/<shard>.duplicates.jsonl, one per --measures file"), PARAMS)
def _curate_duplicates(a):
    from .curate import params, stage

    stage.run_duplicates(a.measures, a.minhash, a.out, params.DuplicateParams.from_dict(a.params))


@job("curate", "decide", "curate", "keep or reject each measured segment of one shard, with its tier",
     req("--measures"), req("--measure-rejects"), req("--speakers", "curate/<shard>.speakers.jsonl"),
     req("--duplicates", "curate/<shard>.duplicates.jsonl"), PARAMS, req("--out", "curate/<shard>.jsonl"),
     req("--rejects", "curate/<shard>.rejects.jsonl"))
def _curate_decide(a):
    from .curate import params, stage

    stage.run_decide(a.measures, a.measure_rejects, a.speakers, a.duplicates, a.out, a.rejects,
                     params.DecideParams.from_dict(a.params))


@job("curate", "summary", "curate", "a dataset's summary.json and speakers.jsonl",
     req("--kept", nargs="+"), req("--rejects", nargs="+"), req("--clusters", "curate/speaker_clusters.json"),
     req("--summary"), req("--speakers"))
def _curate_summary(a):
    from .curate import stage

    stage.run_summary(a.kept, a.rejects, a.clusters, a.summary, a.speakers)


# -- report and demo models ----------------------------------------------------------
@job("report", "plots", "report", "plots and the stage table of one dataset for snakemake --report",
     req("--results", "results/<ds>"), req("--stages", nargs="+"), req("--out-dir"))
def _report(a):
    from . import report

    report.make(a.results, a.stages, a.out_dir)


@job("demo", "asr-model", "asr", "train the demo ASR model (NOT a recognizer) on the demo corpus",
     req("--truth", "resources/demo/truth.json"), req("--out"), opt("--max-steps", type=int, default=1500))
def _demo_asr(a):
    from pathlib import Path

    from .demo import asr_model

    asr_model.build(Path(a.truth), Path(a.out), max_steps=a.max_steps)


@job("demo", "s2s-models", "s2s", "build the demo S2S models (random weights) from code",
     req("--truth", "resources/demo/truth.json"), req("--out-dir"))
def _demo_s2s(a):
    from pathlib import Path

    from .demo import s2s_models

    s2s_models.build_demo(Path(a.truth), Path(a.out_dir))


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m speechprep", description=__doc__.splitlines()[0])
    stages = ap.add_subparsers(dest="stage", required=True, metavar="stage")
    subs: dict[str, Any] = {}
    for (stage, name), (env, help, args, _) in JOBS.items():
        if stage not in subs:
            subs[stage] = stages.add_parser(stage).add_subparsers(dest="job", required=True, metavar="job")
        p = subs[stage].add_parser(name, help=help, description=f"{help} (environment: {env})")
        for flag, kw in args:
            p.add_argument(flag, **kw)
    return ap


def _shard_label(argv: list[str]) -> str:
    for x in argv:
        m = re.search(r"shard-\d{4}", x)
        if m:
            return m.group(0)
    return "-"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parser().parse_args(argv)
    env, _, _, handler = JOBS[(a.stage, a.job)]
    logs.setup(a.stage, _shard_label(argv))
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
    try:
        require_stage_env(env)
        handler(a)
    except SpeechprepError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    return 0
