# Shared helpers: config merging, per-stage interpreters, env-modules set-up,
# and the shard lists that the ingest checkpoint produces.
import json
import os
import shlex
import sys
from functools import cache
from pathlib import Path


from speechprep.core.config import check as check_config
from speechprep.core.config import demo_model_warnings
from speechprep.core.config import digest as config_digest
from speechprep.core.config import effective as effective_config
from speechprep.jobs import job_params as select_job_params
from speechprep.core.envmodules import setup_env_modules
from speechprep.core.inventory import inventory_digest
from speechprep.core.modelfiles import is_local_model
from speechprep.core.resources import memory_mb, shard_content
from speechprep.core.slurm import use_status_shims
from speechprep.diarize.params import runs_for as diarize_runs_for

REPO = Path(workflow.basedir)
# what the conda env files' last pip line installs: this checkout, editable
os.environ.setdefault("SPEECHPREP_REPO", str(REPO))
# squeue/sacct for the SLURM executor's status checks: a job that ended
# PREEMPTED (not requeued) reads FAILED, so it is retried instead of waited for
# forever (scripts/slurm/squeue; docs/cluster.md).
use_status_shims(REPO)

RESULTS = "results"
# Outputs that span every dataset (the TTS tokenizer, combined manifests):
# results/_all/ (no dataset name can start with "_").
ALL = "_all"
# The demo corpus ships with the workflow: found from any working directory.
DEMO_TRUTH = str(REPO / "resources" / "demo" / "truth.json")


# Every default from config/config.yaml, the user's files and values over it
# (a --configfile that lists `datasets` runs those alone).
_effective = effective_config(
    config, [str(f) for f in workflow.overwrite_configfiles], REPO / "config" / "config.yaml"
)
config.clear()
config.update(_effective)


def _active_sdms():
    methods = workflow.deployment_settings.deployment_method or ()
    return {getattr(m, "name", str(m)).upper() for m in methods}


def speechprep(env):
    """`python -m speechprep` in environment `env`, for a rule's `params`; the job checks
    that it runs with the pins of envs/<env>.yaml.

    Under --sdm env-modules or conda, Snakemake supplies the environment and
    `python` is the stage's own. In a plain run (`snakemake --cores N`), the
    venv built by scripts/setup.sh is used directly.
    """
    python = "python"
    if not _active_sdms() & {"ENV_MODULES", "CONDA"}:
        venv_python = REPO / ".venvs" / env / "bin" / "python"
        if venv_python.exists():
            python = str(venv_python)
    env_file = REPO / "envs" / f"{env}.yaml"
    return f"{shlex.quote(python)} -m speechprep --env-file {shlex.quote(str(env_file))}"


setup_env_modules(REPO / ".venvs", required="ENV_MODULES" in _active_sdms())
# a corpus other than the demo meeting a demo model: said before anything runs
for _line in demo_model_warnings(config, REPO):
    print(_line, file=sys.stderr)


@cache
def inventory(ds):
    """Digest of an audio_dir's files (names, sizes, mtimes): ingest reruns when it changes."""
    d = config["datasets"][ds]
    extensions = d.get("extensions", config["ingest"]["extensions"])
    return inventory_digest(d["audio_dir"], extensions) if d.get("audio_dir") else ""


# Model sha256 digests, computed once per file version (speechprep.models.sha256_cached).
HASH_CACHE = f"{RESULTS}/.cache/sha256"


def job_params(job):
    """A rule's `params` function: its job's parameters (JSON) selected from the config for
    the rule's dataset (speechprep.jobs): a config change reruns exactly the jobs it changes."""

    def f(wildcards):
        ds = getattr(wildcards, "ds", None)
        given = {"hash_cache": HASH_CACHE, "name": ds, "config_sha256": config_sha256()}
        return select_job_params(job, config, ds, **given)

    return f


def shards(ds):
    """Shard names of dataset `ds` (known once the ingest checkpoint has run)."""
    d = Path(checkpoints.ingest.get(ds=ds).output.shards)
    return sorted(p.stem for p in d.glob("shard-*.jsonl"))


def shard_file(wildcards):
    checkpoints.ingest.get(ds=wildcards.ds)
    return f"{RESULTS}/{wildcards.ds}/shards/{wildcards.shard}.jsonl"


def per_shard(pattern):
    """Input function: `pattern` expanded over every shard of the dataset."""

    def f(wildcards):
        return expand(pattern, ds=wildcards.ds, shard=shards(wildcards.ds))

    return f


def every_shard(pattern):
    """Input function: `pattern` expanded over every shard of every dataset of the run."""

    def f(wildcards):
        return [p for ds in config["datasets"] for p in expand(pattern, ds=ds, shard=shards(ds))]

    return f


def scaled(base, per_mb=0.0, of=None, cap=None):
    """A resource that grows with the size of input `of` (MB) and with each retry.

    A retried job (cancelled, out of memory, out of time) is resubmitted with
    `attempt` times the resources.
    """

    def f(wildcards, input, attempt):
        mb = 0.0
        if of is not None:
            try:
                mb = Path(input[of]).stat().st_size / 1e6
            except (OSError, KeyError, IndexError):
                pass
        value = (base + per_mb * mb) * attempt
        return int(min(value, cap) if cap else value)

    return f


def shard_memory(stage, of, models=(), **settings):
    """`mem_mb` of a shard rule: what its job will hold (its shard's lines, longest
    segment and audio, its models, its batch; speechprep.core.resources), x the attempt.
    `of`: the input that lists the shard, or a function of the wildcards giving a file."""

    def f(wildcards, input, threads, attempt):
        listing = of(wildcards) if callable(of) else input[of]
        need = memory_mb(stage, shard_content(listing), models, threads=threads, **settings)
        return need * attempt

    return f


def dataset_manifest(wildcards):
    """The dataset's file manifest (ingest): VAD sizes its decode blocks by its widest file."""
    return f"{RESULTS}/{wildcards.ds}/manifest.jsonl"


@cache
def config_sha256():
    """The config's digest (threads and the export section ignored): what tts/stats.json records."""
    return config_digest(config)


def asr_model_file(wildcards):
    """The ASR model as an input file when it is local (a hub name is not a file)."""
    spec = config["asr"]["model"]
    return [spec] if is_local_model(spec) else []


# The HuBERT exported for ONNX Runtime: one per checkpoint file and layer (the
# sidecar records the checkpoint's sha256; a job refuses an export of another).
S2S_EXPORT = f"{RESULTS}/{ALL}/s2s/runtime/{Path(config['s2s']['hubert']).stem}-layer{config['s2s']['layer']}.onnx"


def s2s_export_file(wildcards):
    """The ONNX export, when s2s.runtime may use it (auto uses it on CPU)."""
    return [S2S_EXPORT] if config["s2s"]["runtime"] != "torch" else []


def s2s_model_files(wildcards):
    """The S2S model files (the demo ones are built by rule demo_s2s_models)."""
    return [config["s2s"][k] for k in ("hubert", "kmeans", "vocoder", "vocoder_config")]


# Built text-normalisation grammars, a directory per language (rule tts_grammars).
GRAMMARS = config["tts"]["normalize_grammars"].rstrip("/")


def tts_grammar_dirs(wildcards):
    """The built grammars of `tts.normalize_languages` (none when `tts.normalize` is off)."""
    if not config["tts"]["normalize"]:
        return []
    return [f"{GRAMMARS}/{lang}" for lang in config["tts"]["normalize_languages"]]


def tts_normalized_all(wildcards):
    """Every dataset's per-shard normalised text: what the tokenizer is trained on."""
    return [
        f"{RESULTS}/{ds}/tts/{shard}.normalized.jsonl"
        for ds in config["datasets"]
        for shard in shards(ds)
    ]


def tts_tokenizer_file(wildcards):
    """`tts.tokenizer`, or the one rule tts_tokenizer trains on the transcripts."""
    return config["tts"].get("tokenizer") or f"{RESULTS}/{ALL}/tts/tokenizer.model"


def tts_encoder_files(wildcards):
    """`torchscript:<path>` encoders are inputs (the built-in ones live in the env)."""
    return [
        config["tts"][k][len("torchscript:") :]
        for k in ("condition", "emotion")
        if config["tts"][k].startswith("torchscript:")
    ]


def per_shard_paths(ds, directory, suffix):
    """`directory/<shard><suffix>` for every shard of `ds`, quoted for a shell line."""
    return " ".join(shlex.quote(f"{directory}/{s}{suffix}") for s in shards(ds))


def speaker_job_args(wildcards):
    """The run-wide speakers job's dataset arguments: every dataset's name, its number of
    shards and its shards' assignment files (in `<ds>/curate/speaker_assignments/`)."""
    names = list(config["datasets"])
    return " ".join(
        [
            "--datasets " + " ".join(shlex.quote(ds) for ds in names),
            "--shard-counts " + " ".join(str(len(shards(ds))) for ds in names),
            "--assign "
            + " ".join(
                per_shard_paths(ds, f"{RESULTS}/{ds}/curate/speaker_assignments", ".jsonl")
                for ds in names
            ),
        ]
    )


def diarized(ds):
    """Whether the diarization step runs for dataset `ds` (diarize.enabled, the dataset's
    single_speaker: speechprep.diarize.params.runs_for) and a stage after VAD reads it."""
    return diarize_runs_for(config, ds) and bool(set(config["stages"]) - {"vad"})


def asr_segments(wildcards):
    """What ASR reads: the diarization's segments (cut at speaker changes) where it runs
    for the dataset, else VAD's."""
    if diarized(wildcards.ds):
        return f"{RESULTS}/{wildcards.ds}/diarize/{wildcards.shard}.segments.jsonl"
    return f"{RESULTS}/{wildcards.ds}/vad/{wildcards.shard}.segments.jsonl"


def dataset_text(ds):
    """What dataset `ds`'s text is: asr, given or verify (`datasets.<ds>.text`, else `ingest.text`)."""
    return config["datasets"][ds].get("text", config["ingest"]["text"])


def needs_align(wildcards):
    """Whether a shard of a transcribed dataset may hold a long recording with its text (a line
    longer than vad.max_segment, or of unknown duration): its ASR job then reads the utterances
    the align job cut (rule asr_align). Known once the ingest checkpoint has run."""
    if dataset_text(wildcards.ds) == "asr":
        return False
    content = shard_content(shard_file(wildcards))
    return content.undated > 0 or content.longest > config["vad"]["max_segment"]


def asr_items(wildcards):
    """What the ASR job reads: the align job's utterances (`needs_align`), else the segments
    of `asr_segments` (a transcribed dataset is never diarized)."""
    if needs_align(wildcards):
        return f"{RESULTS}/{wildcards.ds}/asr/{wildcards.shard}.utterances.jsonl"
    return asr_segments(wildcards)


def asr_align_rejects(wildcards):
    """The align job's rejects, written into the ASR job's (`needs_align`)."""
    if needs_align(wildcards):
        return [f"{RESULTS}/{wildcards.ds}/asr/{wildcards.shard}.align_rejects.jsonl"]
    return []


def asr_job(wildcards):
    """The shard's ASR job: `given` (a `text: given` dataset: no model, speechprep.jobs
    "asr given", whose parameters no model setting changes) or `run` (asr, verify)."""
    return "given" if dataset_text(wildcards.ds) == "given" else "run"


def asr_job_params(wildcards):
    """The parameters of the shard's ASR job (`asr_job`), selected as `job_params` does."""
    return job_params(f"asr {asr_job(wildcards)}")(wildcards)


def asr_job_model(wildcards):
    """The ASR model file, unless the dataset's text is given (no model is loaded)."""
    return [] if dataset_text(wildcards.ds) == "given" else asr_model_file(wildcards)


def asr_job_grammars(wildcards):
    """The built grammars `text: verify` compares the given and the heard text with."""
    return tts_grammar_dirs(wildcards) if dataset_text(wildcards.ds) == "verify" else []


def flag_list(flag, paths):
    """`--flag path ...` for a shell line, or nothing for no paths."""
    return f"--{flag} " + " ".join(shlex.quote(str(x)) for x in paths) if paths else ""


def audio_minutes(base, per_audio_hour, of):
    """A `runtime` (minutes) that grows with the audio hours input `of` lists, and each retry."""

    def f(wildcards, input, attempt):
        return int((base + per_audio_hour * shard_content(input[of]).seconds / 3600) * attempt)

    return f


def s2s_segments(wildcards):
    """What S2S reads: the segments of `asr_segments`, or the ASR lines with `asr.trim`
    (trimmed to their words) or for a transcribed dataset (its utterances, long recordings
    cut by the align job), so that units and the other features cover the same audio."""
    if (config["asr"]["trim"] or dataset_text(wildcards.ds) != "asr") and "asr" in config["stages"]:
        return f"{RESULTS}/{wildcards.ds}/asr/{wildcards.shard}.jsonl"
    return asr_segments(wildcards)


def diarize_rttm_inputs(wildcards):
    """The RTTM job's inputs: the shard's turns and local speakers, and with curation the
    run's speakers (the shard's measurements and assignments, the run's centroids)."""
    d = f"{RESULTS}/{wildcards.ds}"
    files = {
        "turns": f"{d}/diarize/{wildcards.shard}.turns.jsonl",
        "speakers": f"{d}/diarize/{wildcards.shard}.speakers.jsonl",
    }
    if "curate" in config["stages"]:
        files["measures"] = f"{d}/curate/{wildcards.shard}.measures.jsonl"
        files["assign"] = f"{d}/curate/speaker_assignments"
        files["clusters"] = f"{RESULTS}/{ALL}/curate/speaker_clusters.json"
    return files


def diarize_rttm_flags(wildcards, input):
    """The RTTM job's flags naming the run's speakers (none without curation)."""
    if "measures" not in input.keys():
        return ""
    assign = f"{input.assign}/{wildcards.shard}.jsonl"
    return f"--measures {shlex.quote(input.measures)} --assign {shlex.quote(assign)} --clusters {shlex.quote(input.clusters)}"


def diarize_report_files(wildcards):
    """What the curation report reads of the diarization (per shard: stats, rejects, RTTM)."""
    if not diarized(wildcards.ds):
        return []
    names = ("stats.jsonl", "rejects.jsonl", "rttm")
    return [
        f"{RESULTS}/{wildcards.ds}/diarize/{s}.{n}" for s in shards(wildcards.ds) for n in names
    ]


def tts_segments(wildcards):
    """What the TTS features read: every segment curation measured (with its stored
    speaker vector; the manifests keep what it kept), or the ASR lines without curation."""
    if "curate" in config["stages"]:
        return f"{RESULTS}/{wildcards.ds}/curate/{wildcards.shard}.measures.jsonl"
    return f"{RESULTS}/{wildcards.ds}/asr/{wildcards.shard}.jsonl"


def curate_kept(wildcards):
    """The curation's kept lines of every shard (the manifests keep only those), if it runs."""
    if "curate" not in config["stages"]:
        return []
    return expand(f"{RESULTS}/{wildcards.ds}/curate/{{shard}}.jsonl", shard=shards(wildcards.ds))


def stage_targets(ds, stage):
    """What `rule all` asks of `stage` for dataset `ds`."""
    if stage == "vad":
        return [
            f"{RESULTS}/{ds}/vad/stats.csv",
            f"{RESULTS}/{ds}/vad/summary.json",
        ] + expand(f"{RESULTS}/{ds}/vad/{{shard}}.segments.jsonl", shard=shards(ds))
    if stage == "asr":
        return [f"{RESULTS}/{ds}/asr/manifest.jsonl", f"{RESULTS}/{ds}/asr/summary.json"]
    if stage == "s2s":
        return expand(f"{RESULTS}/{ds}/s2s/{{shard}}.units.jsonl", shard=shards(ds))
    if stage == "curate":
        return [f"{RESULTS}/{ds}/curate/summary.json", f"{RESULTS}/{ds}/curate/speakers.jsonl"]
    if stage == "tts":
        return [
            f"{RESULTS}/{d}/tts/{name}"
            for d in (ds, ALL)
            for name in ("train_manifest.jsonl", "val_manifest.jsonl", "stats.json")
        ]
    if stage == "export":
        return [
            f"{RESULTS}/{ds}/export/{fmt}/{name}"
            for fmt in config["export"]["formats"]
            for name in ("index.jsonl", "stats.json")
        ]
    raise ValueError(f"unknown stage {stage!r}")


def all_targets(wildcards):
    targets = []
    for ds in config["datasets"]:
        targets += [
            f"{RESULTS}/{ds}/manifest.jsonl",
            f"{RESULTS}/{ds}/rejects/ingest.jsonl",
        ]
        for stage in config["stages"]:
            targets += stage_targets(ds, stage)
        if diarized(ds):
            targets += expand(f"{RESULTS}/{ds}/diarize/{{shard}}.rttm", shard=shards(ds))
        targets.append(f"{RESULTS}/{ds}/report/stages.csv")
        if "curate" in config["stages"]:
            targets.append(f"{RESULTS}/{ds}/report/curation.html")
    return list(dict.fromkeys(targets))  # the cross-dataset TTS targets once


def report_inputs(wildcards):
    ds, names = wildcards.ds, shards(wildcards.ds)
    files = [f"{RESULTS}/{ds}/rejects/ingest.jsonl"]
    files += expand(f"{RESULTS}/{ds}/vad/{{shard}}.stats.jsonl", shard=names)
    steps = (
        ["vad"]
        + (["diarize"] if diarized(ds) else [])
        + [s for s in config["stages"] if s != "vad"]
    )
    for stage in steps:
        files += expand(f"{RESULTS}/{ds}/{stage}/{{shard}}.rejects.jsonl", shard=names)
        files += expand(f"{RESULTS}/{ds}/benchmarks/{stage}/{{shard}}.tsv", shard=names)
    return files


def report_plot(name):
    return report(
        f"{RESULTS}/{{ds}}/report/{name}",
        caption="../report/plot.rst",
        category="{ds}",
    )


wildcard_constraints:
    ds="[A-Za-z0-9][A-Za-z0-9_.-]*",
    shard=r"shard-\d{4}",
