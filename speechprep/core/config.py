"""The workflow config: its defaults, the checks the schema cannot word, stage parameters.

* ``config/config.yaml`` holds every default, once (:func:`defaults`);
  ``config/schema.yaml`` holds types, ranges and ``additionalProperties: false``.
* :func:`check` words what the schema would report as "not valid under any of
  the given schemas" (the Snakefile calls it before validating).
* :class:`StageParams`: each stage's parameters, a dataclass without defaults
  built strictly from its config section; :class:`ModelParams` the keys every
  model stage shares, :class:`BatchBudget` its ``batch`` block.

Importable without PyYAML (the Snakefile's driver env has it; :func:`defaults`
imports it when called).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Self

from ..errors import UsageError

# A dataset's input: exactly one of these keys (the source formats: speechprep.ingest.sources).
DATASET_INPUTS = ("audio_dir", "manifest", "kaldi", "common_voice", "lhotse", "lhotse_recipe", "hf")


class ConfigError(UsageError):
    pass


# keys of a stage's section that are resources (the rules pass them as flags), not parameters
RESOURCE_KEYS = ("threads",)


def _caption_problems(config: dict[str, Any]) -> list[str]:
    """Each ``tts.captions.words`` list of another length than ``curate.annotation_bins``."""
    words = ((config.get("tts") or {}).get("captions") or {}).get("words") or {}
    bins = (config.get("curate") or {}).get("annotation_bins")
    return [
        f"tts.captions.words.{name} has {len(w)} words for curate.annotation_bins {bins}: give one word per bin"
        for name, w in words.items()
        if isinstance(w, list) and isinstance(bins, int) and len(w) != bins
    ]


# keys that moved: (section, old key) -> the new dotted key. A speaker model's thresholds
# belong to it, so they moved with it into `speakers:`.
MOVED = {
    **{("curate", f"speaker_{k}"): f"speakers.{k}" for k in (
        "unit", "sample", "linkage", "threshold", "min_size", "seed", "chunk", "recluster"
    )},
    ("curate", "max_speaker_distance"): "speakers.max_distance",
    **{("diarize", k): f"speakers.diarize.{k}" for k in (
        "change_threshold", "threshold", "narrowband_threshold", "narrowband_merge", "switch_penalty",
        "overlap_db_weight", "overlap_floor", "overlap_peak",
    )},
}  # fmt: skip


def _moved_keys(config: dict[str, Any]) -> list[str]:
    """Each key of :data:`MOVED` the config still sets, with its new name."""
    return [
        f"{section}.{key} is now {new} (a speaker model's thresholds are in `speakers:`)"
        for (section, key), new in MOVED.items()
        if isinstance(config.get(section), dict) and key in config[section]
    ]


def _diarize_model_problems(config: dict[str, Any]) -> list[str]:
    """Each diarization model (``diarize.model``, ``datasets.<ds>.diarize_model``) that is not
    a file, before any job would meet it."""
    named = [("diarize.model", (config.get("diarize") or {}).get("model"))]
    named += [(f"datasets.{n}.diarize_model", d.get("diarize_model")) for n, d in _datasets(config).items()]
    return [
        f"{key}: {path} is not a file (a NeMo Sortformer .nemo, SortformerEncLabelModel)"
        for key, path in named
        if path is not None and not Path(str(path)).expanduser().is_file()
    ]


def _datasets(config: dict[str, Any]) -> dict[str, dict]:
    datasets = config.get("datasets")
    return {n: d for n, d in datasets.items() if isinstance(d, dict)} if isinstance(datasets, dict) else {}


def check(config: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` naming every dataset that lacks its input, or has two, every
    caption word list that does not match the annotations' bins, every key that moved
    (:data:`MOVED`) by its new name, and every diarization model that is not a file."""
    problems = _moved_keys(config) + _caption_problems(config) + _diarize_model_problems(config)
    datasets = config.get("datasets")
    if isinstance(datasets, dict):
        for name, ds in datasets.items():
            if not isinstance(ds, dict):
                continue  # the schema says what is wrong
            given = [k for k in DATASET_INPUTS if ds.get(k)]
            if not given:
                problems.append(
                    f"dataset {name!r} has neither `audio_dir` (a directory of audio files) "
                    "nor `manifest` (a JSONL file with audio_filepath per line) nor a corpus in its own "
                    f"layout ({', '.join(f'`{k}`' for k in DATASET_INPUTS[2:])}; docs/sources.md): give one"
                )
            elif len(given) >= 2:
                both = " and ".join(f"`{k}`" for k in given)
                problems.append(f"dataset {name!r} has {'both ' if len(given) == 2 else ''}{both}: give one")
            elif ds.get("pilot_ids") and given[0] in ("audio_dir", "manifest"):
                problems.append(
                    f"dataset {name!r} has `pilot_ids` (the plan's pilot's selection of a source's ids) "
                    f"and `{given[0]}`, whose inputs have no source ids: give a corpus in its own layout or drop it"
                )
            elif given == ["audio_dir"] and ds.get("text") in ("given", "verify"):
                problems.append(
                    f"dataset {name!r} says `text: {ds['text']}` but an audio_dir has no text: give a `manifest` "
                    "whose lines carry `text` or `text_filepath`"
                )
    if problems:
        raise ConfigError("invalid config: " + "; ".join(problems))


# The demo models the workflow builds (rules/models.smk): per model, the stage that runs it, the
# text modes (`datasets.<ds>.text`) of the datasets it meets, and what it does to a corpus it was
# not made for.
DEMO_MODELS = {
    ("asr", "model"): (
        "asr",
        ("asr", "verify"),
        "the demo ASR model knows only the demo corpus's phrases: its transcripts of other speech are wrong, "
        "and curation drops nearly every segment `low_confidence` (`transcript_mismatch` with text: verify; "
        "set asr.model to a real .nemo)",
    ),
    ("asr", "model", "given"): (
        "asr",
        ("given",),
        "their text is kept without the ASR model, but their recordings longer than vad.max_segment are aligned "
        "with its CTC output, and the demo model aligns nothing but the demo phrases: those end `misaligned` "
        "(set asr.model to a real CTC or hybrid .nemo)",
    ),
    ("s2s", "hubert"): (
        "s2s",
        ("asr", "given", "verify"),
        "the demo HuBERT and vocoder have random weights: units and resynthesised audio mean nothing, and "
        "near duplicates by units are noise (set s2s.hubert, s2s.kmeans, s2s.vocoder to real checkpoints)",
    ),
}
DEMO_AUDIO = "resources/demo/audio"
# the demo's own transcribed dataset (real speech with its real transcripts, text: given)
DEMO_MANIFESTS = ("resources/demo/read/manifest.jsonl",)


def demo_model_warnings(config: dict[str, Any], repo: Path) -> list[str]:
    """One line per demo model (config/config.yaml's defaults) that a run points at datasets other
    than the demo's own (its audio_dir, its transcribed manifest), naming the model, the datasets
    and what its checks will do."""

    def resolved(path: Any) -> Path | None:
        return (repo / str(path)).resolve() if path else None

    own = {(repo / DEMO_AUDIO).resolve(), *((repo / m).resolve() for m in DEMO_MANIFESTS)}
    default_text = (config.get("ingest") or {}).get("text", "asr")
    others = {
        name: ds.get("text", default_text)
        for name, ds in (config.get("datasets") or {}).items()
        if isinstance(ds, dict) and resolved(ds.get("audio_dir") or ds.get("manifest")) not in own
    }
    if not others:
        return []
    base, stages = defaults(repo / "config" / "config.yaml"), config.get("stages") or []
    lines = []
    for (section, key, *_), (stage, modes, effect) in DEMO_MODELS.items():
        model = (config.get(section) or {}).get(key)
        names = sorted(n for n, text in others.items() if text in modes)
        if names and stage in stages and model and resolved(model) == resolved(base[section][key]):
            lines.append(
                f"WARNING: dataset(s) {', '.join(names)} meet the demo model {section}.{key}: {model}: {effect}"
            )
    return lines


BUILTIN_SPEAKER_MODEL = "resemblyzer"
SPEAKER_MODEL_SUFFIXES = (".nemo", ".onnx")


def speaker_model_identity(model: str, hash_cache: str | None = None) -> str:
    """``resemblyzer`` for the built-in speaker model, else the sha256 of its file (a
    :class:`ConfigError` when it is not a .nemo or .onnx file that exists)."""
    from ..io.modelfiles import sha256_cached

    if model == BUILTIN_SPEAKER_MODEL:
        return model
    path = Path(model).expanduser()
    if path.suffix.lower() not in SPEAKER_MODEL_SUFFIXES or not path.is_file():
        raise ConfigError(
            f"speakers.model: {model} is neither {BUILTIN_SPEAKER_MODEL} nor an existing .nemo (NeMo "
            "EncDecSpeakerLabelModel: TitaNet, ECAPA) or .onnx (WeSpeaker, 3D-Speaker) speaker model file"
        )
    return sha256_cached(path, hash_cache)


def check_speaker_model(config: dict[str, Any], hash_cache: str | None = None) -> str:
    """The sha256 of ``speakers.model`` (``resemblyzer`` for the built-in one), after checking
    that it is a model file of a kind the jobs take and that ``speakers.calibrated_for`` names
    it: every threshold of ``speakers:`` is a distance on one model's scale, so a model given
    without thresholds of its own stops the run before any job (:class:`ConfigError`)."""
    sp = config.get("speakers") or {}
    model, calibrated = str(sp.get("model")), str(sp.get("calibrated_for"))
    identity = speaker_model_identity(model, hash_cache)
    if calibrated != identity:
        raise ConfigError(
            f"speakers.model {model} has no thresholds of its own: speakers.calibrated_for is {calibrated}, "
            f"not {identity}. Every threshold in `speakers:` is a distance on one model's scale: choose them "
            f"for this model on a labelled sample of your own data and give them in `speakers:` with "
            f'calibrated_for: {identity} (docs/stages/speakers.md, "Speaker models")'
        )
    condition = str((config.get("tts") or {}).get("condition", ""))
    lab = Path(condition).suffix.lower() in SPEAKER_MODEL_SUFFIXES
    if "tts" in config.get("stages", ()) and lab and condition != model:
        raise ConfigError(
            f"tts.condition {condition}: the TTS features run no NeMo or ONNX speaker model of their own. "
            f"To condition on a lab's speaker model, make it speakers.model (now {model}) and give "
            "tts.condition the same path: curation's vectors of it are reused"
        )
    return identity


def _without_resources(cfg: Any) -> Any:
    if isinstance(cfg, dict):
        return {k: _without_resources(v) for k, v in cfg.items() if k not in RESOURCE_KEYS}
    return cfg


# keys that shape nothing the TTS stage writes (its stats.json records the digest): a change
# to them must not rerun tts_manifest (the stages after TTS; how rule all reads its targets)
AFTER_TTS = ("export", "targets_per_part")


def digest(cfg: dict[str, Any]) -> str:
    """sha256 of the config (as JSON, keys sorted), without the resource-only ``threads`` keys
    and the keys that shape nothing TTS writes (:data:`AFTER_TTS`)."""
    cfg = {k: v for k, v in cfg.items() if k not in AFTER_TTS}
    return hashlib.sha256(json.dumps(_without_resources(cfg), sort_keys=True).encode("utf-8")).hexdigest()


def load_yaml(path: str | os.PathLike) -> Any:
    """A YAML file (UTF-8), with libyaml's parser where PyYAML has it: every Snakemake start
    reads the defaults file twice, 41 ms a read with the pure-Python parser, 3 ms with libyaml's."""
    import yaml

    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def defaults(path: str | os.PathLike) -> dict[str, Any]:
    """The defaults file, ``config/config.yaml`` of the checkout: the one place every default is
    written (the Snakefile and the tests give its path; jobs get their parameters from the rules)."""
    return load_yaml(path)


def merge(base: dict, over: dict) -> dict:
    """``over`` over ``base``, section by section (a mapping in both is merged, anything else replaced)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def effective(cfg: dict[str, Any], command_line_files: list[str], defaults_file: str | os.PathLike) -> dict[str, Any]:
    """The config a run uses: ``cfg`` (what Snakemake loaded: config/config.yaml,
    ``--configfile`` files, ``--config`` values) over the defaults, except that a
    ``--configfile`` file that lists ``datasets`` runs those datasets alone."""
    out = merge(defaults(defaults_file), cfg)
    listed = None
    for path in command_line_files:
        c = load_yaml(path) or {}
        if "datasets" in c:
            listed = {**(listed or {}), **c["datasets"]}
    if listed is not None:
        out["datasets"] = listed
    return out


def from_config(key: str | None, run_only: bool = False) -> Any:
    """A parameter taken from config key ``key`` (dotted: ``tts.layout``, ``model_failure``)
    rather than from its class's section; ``None``: given by the rule (:meth:`StageParams.select`).
    ``run_only``: see :func:`run_only`."""
    return field(metadata={"key": key, "run_only": run_only})


def run_only() -> Any:
    """A parameter of the class's section that changes how a job runs, not what it writes
    (a watchdog's limit): left out of its resume fingerprint (:meth:`StageParams.identity`)."""
    return field(metadata={"run_only": True})


def from_dataset(key: str, fallback: str | None = None) -> Any:
    """A parameter taken from the dataset's own ``key`` when it sets one, else from config key
    ``fallback`` (dotted), else None."""
    return field(metadata={"dataset": key, "key": fallback})


def nested(cls: type) -> Any:
    """A parameter that is a block of its own (a dataclass ``cls`` built from its mapping)."""
    return field(metadata={"nested": cls})


@dataclass(frozen=True)
class BatchBudget:
    """A model stage's batch in padded audio seconds (its ``batch`` block in config/config.yaml,
    the same four keys for every model stage): ``cpu_seconds`` on CPU; on a GPU, free memory
    less ``gpu_reserve_gib`` times ``seconds_per_gib`` (a per-model factor); never over
    ``max_seconds`` (:func:`speechprep.core.batching.seconds_budget`)."""

    cpu_seconds: float
    seconds_per_gib: float
    gpu_reserve_gib: float
    max_seconds: float


def _lookup(config: dict[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"the config has no {key!r}")
        node = node[part]
    return node


@dataclass(frozen=True)
class StageParams:
    """Base of each job's parameters: a dataclass without defaults. A job selects its own
    parameters from the run's config (:meth:`select`): each field from its class's config
    section (``SECTION``), unless the field says otherwise (:func:`from_config`,
    :func:`from_dataset`). :meth:`from_dict` refuses unknown and missing keys."""

    SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in fields(self):  # a block given as its mapping (a config, a --params file)
            cls, value = f.metadata.get("nested"), getattr(self, f.name)
            if cls is not None and isinstance(value, dict):
                names = {g.name for g in fields(cls)}
                if set(value) != names:
                    raise ConfigError(f"{self.SECTION}.{f.name}: keys {sorted(value)}, not {sorted(names)}")
                object.__setattr__(self, f.name, cls(**value))

    def identity(self) -> dict[str, Any]:
        """What a job's resume fingerprint holds of its parameters: every field but those
        marked run-only (:func:`run_only`; the failure rule, the digest cache), so a setting
        that changes what the job writes restarts it, one that does not keeps its progress."""
        return {k: v for k, v in asdict(self).items() if not self.__dataclass_fields__[k].metadata.get("run_only")}

    @classmethod
    def select(cls, config: dict[str, Any], dataset: str | None = None, **given: Any) -> dict[str, Any]:
        """This job's parameters from ``config`` (the run's, every default in it) for
        ``dataset``: what a rule passes as ``--params``. ``given``: fields the rule decides
        (say, a directory of the run)."""
        out = {}
        for f in fields(cls):
            meta = f.metadata
            if f.name in given:
                out[f.name] = given[f.name]
            elif "dataset" in meta and dataset is not None and meta["dataset"] in config["datasets"][dataset]:
                out[f.name] = config["datasets"][dataset][meta["dataset"]]
            elif "key" in meta:
                out[f.name] = None if meta["key"] is None else _lookup(config, meta["key"])
            else:
                out[f.name] = _lookup(config, f"{cls.SECTION}.{f.name}")
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Self:
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(names) - set(RESOURCE_KEYS))
        missing = [n for n in names if n not in d]
        if unknown or missing:
            raise ConfigError(
                f"{cls.SECTION or cls.__name__} settings: "
                + "; ".join(
                    ([f"unknown {', '.join(unknown)}"] if unknown else [])
                    + ([f"missing {', '.join(missing)}"] if missing else [])
                )
            )
        return cls(**{n: d[n] for n in names})

    @classmethod
    def from_config(cls, config: dict[str, Any], dataset: str | None = None, **overrides: Any) -> Self:
        """The parameters :meth:`select` picks from ``config``, with ``overrides`` (tests, benchmarks)."""
        given = {f.name: None for f in fields(cls) if f.metadata.get("key", "") is None and "dataset" not in f.metadata}
        return cls.from_dict({**cls.select(config, dataset, **given), **overrides})


@dataclass(frozen=True)
class ModelParams(StageParams):
    """What every stage that runs a model over segments reads (ASR, S2S, curation's
    measurements, TTS features): where it runs, its batch, its shortest segment, and the
    shared failure rule and model-digest cache (both run-only)."""

    device: str
    batch: BatchBudget = nested(BatchBudget)
    min_duration: float
    model_failure: dict = from_config("model_failure", run_only=True)
    hash_cache: str | None = from_config(None, run_only=True)
