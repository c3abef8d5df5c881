"""The one command line: ``python -m speechprep <stage> <job> [options]``.

Every rule runs one job through it. The CLI checks once that the job runs in
its stage's pinned environment (``--env-file``, the rule's ``envs/<stage>.yaml``),
sets up logging (one format: stage, shard, message), builds the job's
parameters object from ``--params`` (what the rule selected from the config:
:mod:`speechprep.jobs`), runs the job, and turns a typed error
(:mod:`speechprep.core.errors`) into its exit code and one clear line: 2 for a
setting, input or model file that cannot work, 3 for the wrong environment, 4
for a model that fails systematically (124 comes from the watchdog). The other
flags name the job's files (and ``--threads``, the rule's threads).
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

from .core import logs
from .core.envspec import require_stage_env
from .core.errors import ModelFileError, SpeechprepError, describe
from .jobs import JOBS

# Flags with more than a plain string: name -> argparse keywords. A job's flags are written as
# one string: "name" is required, "name?" optional, "name+" one or more, "name*" optional list.
FLAGS: dict[str, dict[str, Any]] = {
    "threads": {"type": int, "default": 1, "help": "the rule's threads"},
    "shard-counts": {"type": int, "help": "how many of the shard files are each dataset's, in order"},
    "max-steps": {"type": int, "default": 1500},
    "write-modern": {"metavar": "OUT", "help": "write a copy plain fairseq loads"},
    "format": {"help": "an export format (export.formats)"},
}
# job name -> (flags, handler(args, params)); the handler's docstring is the job's help
HANDLERS: dict[str, tuple[str, Callable]] = {}


def job(name: str, flags: str):
    """Register the handler of job ``name`` (``"<stage> <job>"``, one of :data:`speechprep.jobs.JOBS`)."""

    def register(fn: Callable) -> Callable:
        HANDLERS[name] = (flags, fn)
        return fn

    return register


def _torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))


def _files(a, arrays: dict[str, str] | None = None, layout: str = "files"):
    from .core.modelstage import ShardFiles

    return ShardFiles(a.segments, a.out, a.rejects, a.resume, arrays or {}, layout)


@job("ingest run", "threads? manifest rejects shards-dir")
def _ingest(a, p):
    """List or read a dataset, probe headers, write the manifest and shards."""
    from .ingest import stage

    stage.run(p, a.manifest, a.rejects, a.shards_dir, a.threads)


@job("vad run", "shard threads? resume segments stats rejects")
def _vad(a, p):
    """TEN-VAD over one shard: segments, per-file statistics, rejects."""
    from .vad import stage

    stage.run_shard(a.shard, a.segments, a.stats, a.rejects, p, a.threads, a.resume)


@job("vad merge", "stats+ rejects+ segments+ csv summary")
def _vad_merge(a, p):
    """Every shard's statistics in stats.csv and summary.json."""
    from .vad import stage

    stage.merge(a.stats, a.rejects, a.segments, a.csv, a.summary)


@job("diarize run", "segments threads? resume out rejects turns speakers stats")
def _diarize(a, p):
    """Speaker turns inside each file of one shard; its VAD segments cut at changes, overlaps flagged."""
    from .diarize import stage

    files = stage.DiarizeFiles(a.segments, a.out, a.rejects, a.turns, a.speakers, a.stats, a.resume)
    stage.run(files, p, a.threads)


@job("diarize rttm", "turns speakers out measures? assign? clusters?")
def _diarize_rttm(a, p):
    """A shard's turns as RTTM, each file's speakers named by the run's speaker ids (when curated)."""
    from .diarize import speakermap

    speakermap.write_rttm_shard(a.turns, a.speakers, a.out, p, a.measures, a.assign, a.clusters)


def _grammar_dirs(dirs) -> dict[str, str]:
    """Built text-normalisation grammars by language (each directory is named after its language)."""
    return {Path(d).name: d for d in dirs or ()}


@job("asr run", "segments threads? resume out rejects grammars* align-rejects?")
def _asr(a, p):
    """NeMo transcripts of one shard of segments (text: asr), or checked against the given text (verify)."""
    from .asr import verify
    from .core.modelstage import ShardFiles

    files = ShardFiles(a.segments, a.out, a.rejects, a.resume, passed=a.align_rejects)
    verify.run(files, p, a.threads, _grammar_dirs(a.grammars))


@job("asr given", "segments threads? resume out rejects grammars* align-rejects?")
def _asr_given(a, p):
    """A text: given shard: each utterance keeps its given text; no model is loaded (torch is not imported)."""
    from .asr import given
    from .core.modelstage import ShardFiles

    given.run(ShardFiles(a.segments, a.out, a.rejects, a.resume, passed=a.align_rejects), p)


@job("asr align", "segments grammars* threads? resume out rejects")
def _asr_align(a, p):
    """Long recordings with their text aligned and cut into utterances (the shard's other lines pass)."""
    from .asr import longform

    longform.run(a.segments, a.out, a.rejects, a.resume, p, _grammar_dirs(a.grammars), a.threads)


@job("asr merge", "shards+ rejects+ manifest summary")
def _asr_merge(a, p):
    """Every shard's transcripts in one manifest, and a summary."""
    from .asr import stage

    stage.merge(a.shards, a.rejects, a.manifest, a.summary)


@job("s2s run", "segments threads? resume out wav-dir rejects export?")
def _s2s(a, p):
    """HuBERT units and unit HiFi-GAN resynthesis of one shard."""
    from .s2s import stage

    _torch_threads(a.threads)
    stage.run(_files(a, {"wav": a.wav_dir}, p.layout), p, a.threads, export=a.export)


@job("s2s export", "checkpoint out threads?")
def _s2s_export(a, p):
    """Export a HuBERT up to a layer for ONNX Runtime, checked against PyTorch (s2s.runtime)."""
    from .s2s import runtime

    _torch_threads(a.threads)
    runtime.build_export(a.checkpoint, p.layer, a.out, threads=a.threads)


@job("s2s inspect", "checkpoint= write-modern?")
def _s2s_inspect(a, p):
    """What is legacy about a fairseq checkpoint (--write-modern: a copy plain fairseq loads)."""
    from .s2s import fairseq_legacy as legacy

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
def _tts_grammars(a, p):
    """Build a language's text-normalisation grammars once (nemo-text-processing cache)."""
    from .text import spoken

    spoken.build_grammars(a.language, a.out_dir)


@job("tts normalize", "segments grammars* out")
def _tts_normalize(a, p):
    """Spoken-form text (text_normalized) of one shard's transcripts."""
    from .tts import normalize

    normalize.run_normalize(a.segments, a.out, p, a.grammars or ())


@job("tts tokenizer", "normalized+ model")
def _tts_tokenizer(a, p):
    """Train the SentencePiece tokenizer on every dataset's normalised transcripts."""
    from .tts import text

    text.train_normalized_tokenizer(a.normalized, p.vocab_size, a.model)


@job("tts features", "segments units s2s-rejects threads? resume out rejects out-dir")
def _tts_features(a, p):
    """Codes, condition and emotion vectors of one shard."""
    from .tts import features

    _torch_threads(a.threads)
    arrays = {k: str(Path(a.out_dir) / k) for k in features.FEATURES}
    features.run(_files(a, arrays, p.layout), p, a.units, a.s2s_rejects, a.threads)


@job("tts text", "index normalized+ tokenizer out rejects ids-dir")
def _tts_text(a, p):
    """Text ids of one shard's accepted segments (of their normalised text)."""
    from .tts import text

    text.run_text(a.index, a.tokenizer, a.out, a.rejects, a.ids_dir, p, a.normalized)


@job("tts manifest", "tokenizer features+ texts+ rejects+ asr+ units+ train val stats kept* pins*")
def _tts_manifest(a, p):
    """A dataset's train/val manifests and stats.json."""
    from .tts import manifests

    inputs = manifests.Inputs(a.features, a.texts, a.rejects, a.asr, a.units, a.tokenizer, a.kept, a.pins or [])
    manifests.build_manifests(p, inputs, manifests.Outputs(a.train, a.val, a.stats))


@job("tts combined", "stats-in+ train-in+ val-in+ train val stats")
def _tts_combined(a, p):
    """Train/val manifests and stats across datasets."""
    from .tts import manifests

    manifests.combine(a.stats_in, a.train_in, a.val_in, a.train, a.val, a.stats)


@job("curate measure", "segments units threads? resume out embeddings minhash fingerprint rejects")
def _curate_measure(a, p):
    """DNSMOS, loudness, SNR, bandwidth, rates, speaker embedding and hashes of one shard."""
    from .curate import measure

    _torch_threads(a.threads)
    measure.run(_files(a), p, a.units, a.embeddings, a.minhash, a.fingerprint, a.threads)


@job(
    "curate speakers", "datasets+ shard-counts+ measures+ embeddings+ assign+ dataset-clusters+ centroids-dir clusters"
)
def _curate_speakers(a, p):
    """Pseudo speakers of every dataset of a run, one id space (--shard-counts: how many of the
    --measures, --embeddings and --assign files are each of --datasets's; --dataset-clusters: one each)."""
    from .curate import stage

    files = stage.SpeakerFiles(a.datasets, a.shard_counts, a.measures, a.embeddings, a.assign, a.dataset_clusters)
    stage.run_speakers(files, a.centroids_dir, a.clusters, p)


@job("curate duplicates", "measures+ minhash+ fingerprint+ out+")
def _curate_duplicates(a, p):
    """Exact, acoustic and near duplicates across every shard of a dataset (--out: one per --measures)."""
    from .curate import stage

    stage.run_duplicates(a.measures, a.minhash, a.out, p, fingerprint=a.fingerprint)


@job("curate decide", "measures measure-rejects speakers duplicates out rejects")
def _curate_decide(a, p):
    """Keep or reject each measured segment of one shard, with its tier."""
    from .curate import stage

    stage.run_decide(a.measures, a.measure_rejects, a.speakers, a.duplicates, a.out, a.rejects, p)


@job("curate summary", "kept+ rejects+ clusters summary speakers")
def _curate_summary(a, p):
    """A dataset's curate/summary.json and speakers.jsonl."""
    from .curate import stage

    stage.run_summary(a.kept, a.rejects, a.clusters, a.summary, a.speakers)


@job("export shard", "manifests+ features resume out-dir rejects")
def _export_shard(a, p):
    """One shard's kept segments in every format of export.formats."""
    from .export import stage

    stage.run_shard(a.manifests, a.features, a.out_dir, a.rejects, p, a.resume)


@job("export summary", "indexes+ index stats format?")
def _export_summary(a, p):
    """A format's index.jsonl and stats.json (segments, hours, duration-bucket edges),
    and what the format's loader reads for the whole dataset (--format)."""
    from .export import stage

    stage.run_summary(a.indexes, a.index, a.stats, p, a.format)


@job("report plots", "results out-dir")
def _report(a, p):
    """Plots and the stage table of one dataset for snakemake --report."""
    from .report import stages

    stages.make(a.results, p.stages, a.out_dir)


@job("report curation", "results out-dir")
def _report_curation(a, p):
    """Curation tables, histograms with thresholds, speakers and the listening page."""
    from dataclasses import asdict

    from .report import curation

    curation.make(a.results, asdict(p), a.out_dir)


@job("demo asr-model", "truth out max-steps?")
def _demo_asr(a, p):
    """Train the demo ASR model (NOT a recognizer) on the demo corpus."""
    from .demo import asr_model

    asr_model.build(Path(a.truth), Path(a.out), max_steps=a.max_steps)


@job("demo s2s-models", "truth out-dir")
def _demo_s2s(a, p):
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
        kw.setdefault("required", kind not in ("?", "*"))
        p.add_argument(f"--{name}", **kw)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m speechprep", description="Run one job of the speechprep workflow (each rule runs one)."
    )
    ap.add_argument("--env-file", help="the stage's envs/<stage>.yaml: its pins are checked before the job runs")
    stages = ap.add_subparsers(dest="stage", required=True, metavar="stage")
    subs: dict[str, Any] = {}
    for name, (flags, fn) in HANDLERS.items():
        stage, job_name = name.split()
        spec = JOBS[name]
        help = fn.__doc__.strip().rstrip(".")
        if stage not in subs:
            jobs = ", ".join(n.split()[1] for n in HANDLERS if n.split()[0] == stage)
            subs[stage] = stages.add_parser(stage, help=f"jobs: {jobs}").add_subparsers(
                dest="job", required=True, metavar="job"
            )
        sub = subs[stage].add_parser(job_name, help=help, description=f"{help} (environment: {spec.env})")
        if spec.params is not None:
            sub.add_argument("--params", type=json.loads, required=True, help="the job's parameters, as JSON")
        _add(sub, flags)
    return ap


def _shard_label(argv: list[str]) -> str:
    m = next((re.search(r"shard-\d{4}", x) for x in argv if re.search(r"shard-\d{4}", x)), None)
    return m.group(0) if m else "-"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parser().parse_args(argv)
    name = f"{a.stage} {a.job}"
    spec, (_, handler) = JOBS[name], HANDLERS[name]
    logs.setup(a.stage, _shard_label(argv))
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
    try:
        if a.env_file:
            require_stage_env(spec.env, a.env_file)
        handler(a, spec.params.from_dict(a.params) if spec.params else None)
    except SpeechprepError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    return 0
