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
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import logs
from .envspec import require_stage_env
from .errors import ModelFileError, SpeechprepError, describe

# Flags shared by jobs: name -> argparse keywords. A job's flags are written as
# one string: "name" is required, "name?" optional, "name+" one or more.
FLAGS: dict[str, dict[str, Any]] = {
    "params": {"type": json.loads, "help": "the stage's config section (+ model_failure), as JSON"},
    "threads": {"type": int, "default": 1, "help": "<stage>.threads"},
    "resume": {"help": "the job's resume file (per-item outcomes while it runs)"},
    "dataset": {"type": json.loads, "help": "the dataset's config, as JSON"},
    "language": {"help": "a language code (the default of segments without one)"},
    "default-language": {"help": "asr.language: the language of segments without one, nor their dataset's"},
    "normalized": {"help": "a shard's normalised text (rule tts_normalize)"},
    "grammars": {"help": "built text-normalisation grammars, one directory per language"},
    "encoders": {"type": json.loads, "help": "tts.condition and tts.emotion, as JSON"},
    "shard-counts": {"type": int, "help": "how many of the shard files are each dataset's, in order"},
    "val-ratio": {"type": float, "help": "tts.val_ratio"},
    "split-by-speaker": {"action": "store_true", "help": "tts.split_by_speaker"},
    "max-steps": {"type": int, "default": 1500},
    "layer": {"type": int, "help": "s2s.layer"},
    "export": {"help": "the checked ONNX export of the HuBERT (s2s.runtime onnxruntime)"},
    "layout": {
        "choices": ("files", "packed"),
        "default": "files",
        "help": "tts.layout: one array/WAV file per segment, or one per shard and kind",
    },
    "write-modern": {"metavar": "OUT", "help": "write a copy plain fairseq loads"},
    "format": {"help": "an export format (export.formats)"},
}
# (stage, job) -> (environment, flags, handler); the handler's docstring is the job's help
JOBS: dict[tuple[str, str], tuple[str, str, Callable]] = {}


def job(stage_job: str, flags: str, env: str | None = None):
    """Register a job: ``"<stage> <job>"``, its flags, its environment (default: the stage's)."""
    stage, name = stage_job.split()

    def register(fn: Callable) -> Callable:
        JOBS[(stage, name)] = (env or stage, flags, fn)
        return fn

    return register


def _torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))


@job("ingest run", "name dataset threads? manifest rejects shards-dir")
def _ingest(a):
    """List or read a dataset, probe headers, write the manifest and shards."""
    from . import ingest

    ingest.run(a.name, a.dataset, a.manifest, a.rejects, a.shards_dir, a.threads)


@job("vad run", "shard params threads? resume segments stats rejects")
def _vad(a):
    """TEN-VAD over one shard: segments, per-file statistics, rejects."""
    from . import vad

    vad.run_shard(a.shard, a.segments, a.stats, a.rejects, vad.VadParams.from_dict(a.params), a.threads, a.resume)


@job("vad merge", "stats+ rejects+ segments+ csv summary")
def _vad_merge(a):
    """Every shard's statistics in stats.csv and summary.json."""
    from . import vad

    vad.merge(a.stats, a.rejects, a.segments, a.csv, a.summary)


@job("asr run", "segments params threads? resume out rejects")
def _asr(a):
    """NeMo transcripts of one shard of segments."""
    from . import asr

    asr.run(a.segments, a.out, a.rejects, asr.AsrParams.from_dict(a.params), a.resume, a.threads)


@job("asr merge", "shards+ rejects+ manifest summary")
def _asr_merge(a):
    """Every shard's transcripts in one manifest, and a summary."""
    from . import asr

    asr.merge(a.shards, a.rejects, a.manifest, a.summary)


@job("s2s run", "segments params threads? resume units wav-dir rejects export? layout?")
def _s2s(a):
    """HuBERT units and unit HiFi-GAN resynthesis of one shard."""
    from . import s2s

    _torch_threads(a.threads)
    p = s2s.S2sParams.from_dict(a.params)
    s2s.run_shard(
        a.segments, a.units, a.wav_dir, a.rejects, p, a.resume, export=a.export, threads=a.threads, layout=a.layout
    )


@job("s2s export", "checkpoint layer out threads?")
def _s2s_export(a):
    """Export a HuBERT up to a layer for ONNX Runtime, checked against PyTorch (s2s.runtime)."""
    from . import s2s_runtime

    _torch_threads(a.threads)
    s2s_runtime.build_export(a.checkpoint, a.layer, a.out, threads=a.threads)


@job("s2s inspect", "checkpoint= write-modern?")
def _s2s_inspect(a):
    """What is legacy about a fairseq checkpoint (--write-modern: a copy plain fairseq loads)."""
    from . import fairseq_legacy as legacy

    try:
        rep = (
            legacy.write_modern(a.checkpoint, a.write_modern)
            if a.write_modern
            else legacy.inspect_checkpoint(a.checkpoint)
        )
    except SpeechprepError:
        raise
    except Exception as e:  # noqa: BLE001 (fairseq failing to build it, an unwritable OUT: one line)
        raise ModelFileError(f"{a.checkpoint}: {describe(e)}") from None
    print("\n".join(rep.lines()))
    print("legacy: " + ("yes" if rep.legacy else "no"))
    if a.write_modern:
        print(f"modern copy written to {a.write_modern}")


@job("tts grammars", "language out-dir")
def _tts_grammars(a):
    """Build a language's text-normalisation grammars once (nemo-text-processing cache)."""
    from .tts import spoken

    spoken.build_grammars(a.language, a.out_dir)


@job("tts normalize", "segments params grammars* language? default-language out")
def _tts_normalize(a):
    """Spoken-form text (text_normalized) of one shard's transcripts."""
    from .tts import spoken

    p = spoken.TextParams.from_dict(a.params)
    spoken.run_normalize(a.segments, a.out, p, a.grammars or (), a.language, a.default_language)


@job("tts tokenizer", "normalized+ params model")
def _tts_tokenizer(a):
    """Train the SentencePiece tokenizer on every dataset's normalised transcripts."""
    from .tts import text

    text.train_normalized_tokenizer(a.normalized, int(a.params["vocab_size"]), a.model)


@job("tts features", "segments units s2s-rejects params threads? resume index rejects out-dir layout?")
def _tts_features(a):
    """Codes, condition and emotion vectors of one shard."""
    from .tts import features

    _torch_threads(a.threads)
    features.run_features(
        a.segments,
        a.units,
        a.s2s_rejects,
        a.index,
        a.rejects,
        a.out_dir,
        features.TtsParams.from_dict(a.params),
        a.resume,
        a.threads,
        layout=a.layout,
    )


@job("tts text", "index normalized+ tokenizer out ids-dir layout?")
def _tts_text(a):
    """Text ids of one shard's accepted segments (of their normalised text)."""
    from .tts import text

    text.run_text(a.index, a.tokenizer, a.out, a.ids_dir, a.normalized, a.layout)


@job(
    "tts manifest",
    "dataset-name val-ratio config-sha256 tokenizer features+ texts+ rejects+ asr+ units+ "
    "encoders hash-cache? train val stats kept* split-by-speaker?",
)
def _tts_manifest(a):
    """A dataset's train/val manifests and stats.json."""
    from .tts import manifests

    manifests.build_manifests(
        a.dataset_name,
        a.features,
        a.texts,
        a.rejects,
        a.asr,
        a.units,
        a.tokenizer,
        a.encoders,
        a.hash_cache,
        a.val_ratio,
        a.config_sha256,
        a.train,
        a.val,
        a.stats,
        a.kept,
        a.split_by_speaker,
    )


@job("tts combined", "stats-in+ train-in+ val-in+ train val stats")
def _tts_combined(a):
    """Train/val manifests and stats across datasets."""
    from .tts import manifests

    manifests.combine(a.stats_in, a.train_in, a.val_in, a.train, a.val, a.stats)


@job("curate measure", "segments units params threads? resume out embeddings minhash rejects")
def _curate_measure(a):
    """DNSMOS, loudness, SNR, bandwidth, rates, speaker embedding and hashes of one shard."""
    from .curate import params, stage

    _torch_threads(a.threads)
    stage.run_measure(
        a.segments,
        a.units,
        a.out,
        a.embeddings,
        a.minhash,
        a.rejects,
        params.MeasureParams.from_dict(a.params),
        a.resume,
        a.threads,
    )


@job(
    "curate speakers",
    "datasets+ shard-counts+ measures+ embeddings+ assign+ dataset-clusters+ centroids-dir clusters params",
)
def _curate_speakers(a):
    """Pseudo speakers of every dataset of a run, one id space (--shard-counts: how many of the
    --measures, --embeddings and --assign files are each of --datasets's; --dataset-clusters: one each)."""
    from .curate import params, stage

    stage.run_speakers(
        a.datasets,
        a.shard_counts,
        a.measures,
        a.embeddings,
        a.assign,
        a.dataset_clusters,
        a.centroids_dir,
        a.clusters,
        params.SpeakerParams.from_dict(a.params),
    )


@job("curate duplicates", "measures+ minhash+ out+ params")
def _curate_duplicates(a):
    """Exact and near duplicates across every shard of a dataset (--out: one per --measures)."""
    from .curate import params, stage

    stage.run_duplicates(a.measures, a.minhash, a.out, params.DuplicateParams.from_dict(a.params))


@job("curate decide", "measures measure-rejects speakers duplicates params out rejects")
def _curate_decide(a):
    """Keep or reject each measured segment of one shard, with its tier."""
    from .curate import params, stage

    stage.run_decide(
        a.measures,
        a.measure_rejects,
        a.speakers,
        a.duplicates,
        a.out,
        a.rejects,
        params.DecideParams.from_dict(a.params),
    )


@job("curate summary", "kept+ rejects+ clusters summary speakers")
def _curate_summary(a):
    """A dataset's curate/summary.json and speakers.jsonl."""
    from .curate import stage

    stage.run_summary(a.kept, a.rejects, a.clusters, a.summary, a.speakers)


@job("export shard", "manifests+ features params resume out-dir rejects")
def _export_shard(a):
    """One shard's kept segments in every format of export.formats."""
    from . import export

    export.run_shard(a.manifests, a.features, a.out_dir, a.rejects, export.ExportParams.from_dict(a.params), a.resume)


@job("export summary", "indexes+ index stats params format?")
def _export_summary(a):
    """A format's index.jsonl and stats.json (segments, hours, duration-bucket edges),
    and what the format's loader reads for the whole dataset (--format)."""
    from . import export

    export.run_summary(a.indexes, a.index, a.stats, a.params["bucket_edges"], a.params["buckets"], a.format)


@job("report plots", "results stages+ out-dir")
def _report(a):
    """Plots and the stage table of one dataset for snakemake --report."""
    from . import report

    report.make(a.results, a.stages, a.out_dir)


@job("report curation", "results params out-dir")
def _report_curation(a):
    """Curation tables, histograms with thresholds, speakers and the listening page."""
    from dataclasses import asdict

    from . import curation_report
    from .curate.params import DecideParams

    curation_report.make(a.results, asdict(DecideParams.from_dict(a.params)), a.out_dir)


@job("demo asr-model", "truth out max-steps?", env="asr")
def _demo_asr(a):
    """Train the demo ASR model (NOT a recognizer) on the demo corpus."""
    from .demo import asr_model

    asr_model.build(Path(a.truth), Path(a.out), max_steps=a.max_steps)


@job("demo s2s-models", "truth out-dir", env="s2s")
def _demo_s2s(a):
    """Build the demo S2S models (random weights) from code."""
    from .demo import s2s_models

    s2s_models.build_demo(Path(a.truth), Path(a.out_dir))


def _add(p: argparse.ArgumentParser, spec: str) -> None:
    """``name`` required, ``name?`` optional, ``name+`` one or more, ``name*`` optional list,
    ``name=`` positional."""
    for token in spec.split():
        name, kind = (token[:-1], token[-1]) if token[-1] in "?+*=" else (token, "")
        kw = dict(FLAGS.get(name, {}))
        if kind == "=":
            p.add_argument(name, **kw)
            continue
        if kind in ("+", "*"):
            kw["nargs"] = "+"
        kw.setdefault("required", kind not in ("?", "*") and kw.get("action") != "store_true")
        p.add_argument(f"--{name}", **kw)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m speechprep", description="Run one job of the speechprep workflow (each rule runs one)."
    )
    stages = ap.add_subparsers(dest="stage", required=True, metavar="stage")
    subs: dict[str, Any] = {}
    for (stage, name), (env, flags, fn) in JOBS.items():
        help = fn.__doc__.strip().rstrip(".")
        if stage not in subs:
            jobs = ", ".join(n for s, n in JOBS if s == stage)
            subs[stage] = stages.add_parser(stage, help=f"jobs: {jobs}").add_subparsers(
                dest="job", required=True, metavar="job"
            )
        _add(subs[stage].add_parser(name, help=help, description=f"{help} (environment: {env})"), flags)
    return ap


def _shard_label(argv: list[str]) -> str:
    m = next((re.search(r"shard-\d{4}", x) for x in argv if re.search(r"shard-\d{4}", x)), None)
    return m.group(0) if m else "-"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parser().parse_args(argv)
    env, _, handler = JOBS[(a.stage, a.job)]
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
