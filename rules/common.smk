# Shared helpers: config merging, per-stage interpreters, env-modules set-up,
# and the shard lists that the ingest checkpoint produces.
import os
import shlex
import sys
from functools import cache
from types import SimpleNamespace
from pathlib import Path

from snakemake.exceptions import IncompleteCheckpointException


from speechprep.core.config import check as check_config
from speechprep.core.config import check_speaker_model
from speechprep.ingest.sources import source_files
from speechprep.core.config import demo_model_warnings
from speechprep.core.config import digest as config_digest
from speechprep.core.config import effective as effective_config
from speechprep.jobs import JOBS
from speechprep.jobs import job_params as select_job_params
from speechprep.workflow.envmodules import setup_env_modules
from speechprep.workflow.speaker_limits import narrowband_warnings
from speechprep.io.inventory import inventory_digest
from speechprep.ingest.plan import SHARD_PATTERN
from speechprep.workflow.resources import shard_content
from speechprep.workflow.slurm import use_status_shims
from speechprep.workflow.plan import Plan
from speechprep.core.jobs import probe_shell
from speechprep.workflow.rules import audio_minutes, flag_list, probe_memory, scaled, shard_memory

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
    """`python -m speechprep` in environment `env`; the job checks that it runs with the
    pins of envs/<env>.yaml.

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


# From a job's declaration (speechprep.<stage>.jobs), for the job's rule. Its `conda`
# env, its `envmodules` module, the command in its `params.cmd` and its shell line, whose
# flags read the rule's input, output and params keys of the same names.
def job_env(job):
    return str(REPO / "envs" / f"{JOBS[job].env}.yaml")


def job_module(job):
    return f"speechprep/{JOBS[job].env}"


def job_cmd(job):
    return speechprep(JOBS[job].env)


def job_shell(job, words=None):
    return JOBS[job].shell(words)


setup_env_modules(REPO / ".venvs", required="ENV_MODULES" in _active_sdms())
# a corpus other than the demo meeting a demo model: said before anything runs
for _line in demo_model_warnings(config, REPO):
    print(_line, file=sys.stderr)
# telephone-band audio meeting the built-in speaker model: what to expect, before the run
for _line in narrowband_warnings(config):
    print(_line, file=sys.stderr)


@cache
def inventory(ds):
    """Digest of an audio_dir's files (names, sizes, mtimes): ingest reruns when it changes."""
    d = config["datasets"][ds]
    extensions = d.get("extensions", config["ingest"]["extensions"])
    return inventory_digest(d["audio_dir"], extensions) if d.get("audio_dir") else ""


# Model sha256 digests, computed once per file version (speechprep.models.sha256_cached).
HASH_CACHE = f"{RESULTS}/.cache/sha256"
# a speaker model given without thresholds of its own stops the run here, before any job
SPEAKER_MODEL_SHA256 = check_speaker_model(config, HASH_CACHE)


def job_params(job):
    """A rule's `params` function: its job's parameters (JSON) selected from the config for
    the rule's dataset (speechprep.jobs): a config change reruns exactly the jobs it changes."""

    def f(wildcards):
        ds = getattr(wildcards, "ds", None)
        given = {"hash_cache": HASH_CACHE, "name": ds, "config_sha256": config_sha256()}
        given["speaker_model_sha256"] = SPEAKER_MODEL_SHA256
        return select_job_params(job, config, ds, **given)

    return f


def shards(ds):
    """Shard names of dataset `ds` (known once the ingest checkpoint has run), in their
    numbers' order (shard-9999 before shard-10000)."""
    d = Path(checkpoints.ingest.get(ds=ds).output.shards)
    return sorted((p.stem for p in d.glob("shard-*.jsonl")), key=lambda s: (len(s), s))


def shard_file(wildcards):
    checkpoints.ingest.get(ds=wildcards.ds)
    return f"{RESULTS}/{wildcards.ds}/shards/{wildcards.shard}.jsonl"


# The pipeline's routing (speechprep.workflow.plan): which file each step reads and what
# a run asks for. The rules call it from their input functions with their wildcards.
PLAN = Plan(
    config,
    shards,
    lambda ds, s: shard_content(shard_file(SimpleNamespace(ds=ds, shard=s))),
    RESULTS,
    lambda step, **wildcards: getattr(checkpoints, step).get(**wildcards),
)
GRAMMARS = PLAN.grammars  # built text-normalisation grammars, a directory per language
S2S_EXPORT = (
    PLAN.s2s_export
)  # HuBERT for ONNX Runtime (its sidecar records the checkpoint's sha256)


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


def dataset_manifest(wildcards):
    """The dataset's file manifest (ingest): VAD sizes its decode blocks by its widest file."""
    return f"{RESULTS}/{wildcards.ds}/manifest.jsonl"


@cache
def config_sha256():
    """The config's digest (threads and the export section ignored): what tts/stats.json records."""
    return config_digest(config)


def all_targets(wildcards):
    """Every ingest, then the run-wide checkpoints a level at a time, then the run's targets:
    a level's steps still to run, all at once, are the targets until they have
    (speechprep/workflow/plan.py)."""
    for ds in config["datasets"]:
        checkpoints.ingest.get(ds=ds)
    for level in PLAN.run_wide_steps():
        waiting = []
        for step, wc in level:
            try:
                getattr(checkpoints, step).get(**wc)
            except IncompleteCheckpointException as e:
                waiting.append(e.targetfile)
        if waiting:
            return waiting
    ALL_PARTS[:] = PLAN.parts(PLAN.all_targets())
    if len(ALL_PARTS) == 1:
        return ALL_PARTS[0]
    return [PLAN.part_marker(i) for i in range(len(ALL_PARTS))]


ALL_PARTS = (
    []
)  # rule all's targets in parts, as all_targets last made them (rule all_part's inputs)


def all_part(wildcards):
    """A part of rule all's targets (``Plan.parts``)."""
    if not ALL_PARTS:  # the marker asked for on its own
        ALL_PARTS[:] = PLAN.parts(PLAN.all_targets())
    return ALL_PARTS[int(wildcards.part)]


def report_plot(name):
    return report(
        f"{RESULTS}/{{ds}}/report/{name}",
        caption="../report/plot.rst",
        category="{ds}",
    )


wildcard_constraints:
    ds="[A-Za-z0-9][A-Za-z0-9_.-]*",
    shard=SHARD_PATTERN,
