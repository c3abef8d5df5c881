"""The pipeline's routing, from the config: which file each step reads and which targets a
run asks for, per dataset and shard. The rules call it through thin input functions; it is
plain Python, unit-tested without Snakemake (tests/core/test_plan.py).

The shards of a dataset are known once its ingest checkpoint has run: :class:`Plan` is given
a function that names them, and one that reads a shard's content (its lines' durations), so
that nothing here touches Snakemake. Standard library only: the Snakefile imports it.

The run-wide steps whose output a shard job reads (speakers, duplicates, the tokenizer, the
export's cut of the manifests) are checkpoints too, and a shard job names its own file of
theirs only once they have run (``after``): Snakemake compares that file with the checksum it
recorded when the job last ran, so a run-wide step that ran again on a grown corpus and wrote
a shard's file with the same bytes leaves that shard's job alone (issue: corpora that grow).
Snakemake settles checkpoints one level at a time and takes one whose inputs it has yet to
know for one with nothing to do: so every ingest is waited for before a run-wide step
(:meth:`wait`), and the run's targets wait for every run-wide step (:meth:`run_wide_steps`)
before they name the shard jobs that read them. They wait one level at a time: a job that
Snakemake builds while it settles one checkpoint, with another's output still pending, is not
built again once that one turns out to have nothing to do (its input stays the placeholder,
and the job runs with it), so no step is asked for before the steps whose files its jobs
read have run (a growth run killed while the speakers job ran resumed that way).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..diarize.params import runs_for as diarize_runs_for
from ..io.modelfiles import is_local_model

RESULTS = "results"
ALL = "_all"  # outputs that span every dataset (no dataset name starts with "_")


@dataclass(frozen=True)
class Plan:
    """``config``: the run's effective config; ``shards(ds)``: the dataset's shard names;
    ``content(ds, shard)``: the shard's :class:`~speechprep.workflow.resources.ShardContent`
    (only :meth:`needs_align` reads it, for transcribed datasets)."""

    config: dict[str, Any]
    shards: Callable[[str], list[str]]
    content: Callable[[str, str], Any] = lambda ds, shard: None
    results: str = RESULTS
    # waits for run-wide checkpoint ``step`` (its wildcards as keywords): raises Snakemake's
    # IncompleteCheckpointException while it has yet to run
    after: Callable[..., Any] = lambda step, **wildcards: None

    # -- what a dataset is -------------------------------------------------------------
    def stages(self) -> list[str]:
        return list(self.config["stages"])

    def runs(self, stage: str) -> bool:
        return stage in self.config["stages"]

    def text(self, ds: str) -> str:
        """asr, given or verify (``datasets.<ds>.text``, else ``ingest.text``)."""
        return self.config["datasets"][ds].get("text", self.config["ingest"]["text"])

    def diarized(self, ds: str) -> bool:
        """The diarization step runs for ``ds`` (speechprep.diarize.params.runs_for) and a
        stage after VAD reads it."""
        return diarize_runs_for(self.config, ds) and bool(set(self.config["stages"]) - {"vad"})

    def _at(self, ds: str, step: str, name: str) -> str:
        return f"{self.results}/{ds}/{step}/{name}"

    # -- what each step reads -------------------------------------------------------------
    def music_input(self, ds: str, shard: str) -> str:
        """What the music stage reads: the diarization's segments where it runs for ``ds``, else VAD's."""
        step = "diarize" if self.diarized(ds) else "vad"
        return self._at(ds, step, f"{shard}.segments.jsonl")

    def asr_segments(self, ds: str, shard: str) -> str:
        """The music stage's segments where it runs, else :meth:`music_input`."""
        if self.runs("music"):
            return self._at(ds, "music", f"{shard}.segments.jsonl")
        return self.music_input(ds, shard)

    def needs_align(self, ds: str, shard: str) -> bool:
        """A shard of a transcribed dataset that may hold a long recording with its text (a
        line longer than ``vad.max_segment``, or of unknown duration): its ASR job reads the
        utterances the align job cut."""
        if self.text(ds) == "asr":
            return False
        content = self.content(ds, shard)
        return content.undated > 0 or content.longest > self.config["vad"]["max_segment"]

    def asr_items(self, ds: str, shard: str) -> str:
        """The align job's utterances (:meth:`needs_align`), else :meth:`asr_segments`."""
        if self.needs_align(ds, shard):
            return self._at(ds, "asr", f"{shard}.utterances.jsonl")
        return self.asr_segments(ds, shard)

    def asr_align_rejects(self, ds: str, shard: str) -> list[str]:
        return [self._at(ds, "asr", f"{shard}.align_rejects.jsonl")] if self.needs_align(ds, shard) else []

    def asr_job(self, ds: str) -> str:
        """``given`` (no model: speechprep.jobs "asr given") or ``run`` (asr, verify)."""
        return "given" if self.text(ds) == "given" else "run"

    def s2s_segments(self, ds: str, shard: str) -> str:
        """The ASR lines with ``asr.trim`` or for a transcribed dataset (units cover the audio
        the other features do), else :meth:`asr_segments`."""
        if (self.config["asr"]["trim"] or self.text(ds) != "asr") and self.runs("asr"):
            return self._at(ds, "asr", f"{shard}.jsonl")
        return self.asr_segments(ds, shard)

    def tts_segments(self, ds: str, shard: str) -> str:
        """Every segment curation measured, or the ASR lines without curation."""
        if self.runs("curate"):
            return self._at(ds, "curate", f"{shard}.measures.jsonl")
        return self._at(ds, "asr", f"{shard}.jsonl")

    def curate_kept(self, ds: str) -> list[str]:
        """Curation's kept lines of every shard, if it runs."""
        return [self._at(ds, "curate", f"{s}.jsonl") for s in self.shards(ds)] if self.runs("curate") else []

    def curate_summary(self, ds: str) -> list[str]:
        """Curation's summary of the dataset (the annotations' bins), if it runs."""
        return [self._at(ds, "curate", "summary.json")] if self.runs("curate") else []

    def run_wide_steps(self) -> list[list[tuple[str, dict[str, str]]]]:
        """The run-wide checkpoints of the run whose files shard jobs read, with their
        wildcards, in levels: a level's steps read only what the levels before it wrote. The
        run's targets are a level's pending steps until it has none (module docstring)."""
        first: list[tuple[str, dict[str, str]]] = []
        if self.runs("curate"):
            first += [("curate_speakers", {})] + [("curate_duplicates", {"ds": ds}) for ds in self.config["datasets"]]
        if self.runs("tts") and not self.config["tts"].get("tokenizer"):
            first.append(("tts_tokenizer", {}))
        # the export's lines are cut from manifests that curation's and the tokenizer's files made
        then = [("export_lines", {"ds": ds}) for ds in self.config["datasets"]] if self.runs("export") else []
        return [level for level in (first, then) if level]

    def wait(self, step: str, datasets: list[str], **wildcards: str) -> None:
        """Wait for run-wide checkpoint ``step`` over ``datasets``: their ingest first."""
        for ds in datasets:
            self.after("ingest", ds=ds)
        self.after(step, **wildcards)

    def speaker_assignment(self, ds: str, shard: str) -> str:
        """The shard's file of the run-wide speakers checkpoint (its segments' speakers)."""
        self.wait("curate_speakers", list(self.config["datasets"]))
        return self._at(ds, "curate", f"speaker_assignments/{shard}.jsonl")

    def curate_decide_inputs(self, ds: str, shard: str) -> dict[str, str]:
        """The shard's files of the run-wide speakers and duplicates checkpoints."""
        self.wait("curate_duplicates", [ds], ds=ds)
        return {
            "speakers": self.speaker_assignment(ds, shard),
            "duplicates": self._at(ds, "curate", f"duplicates/{shard}.jsonl"),
        }

    def export_shard_inputs(self, ds: str, shard: str) -> dict[str, str]:
        """The shard's lines and the dataset's column types (the export lines checkpoint)."""
        self.wait("export_lines", [ds], ds=ds)
        return {
            "lines": self._at(ds, "export", f".lines/{shard}.jsonl"),
            "columns": self._at(ds, "export", ".lines/columns.json"),
        }

    def diarize_rttm_inputs(self, ds: str, shard: str) -> dict[str, str]:
        """The RTTM job's turns and local speakers, and with curation the run's speakers."""
        files = {k: self._at(ds, "diarize", f"{shard}.{k}.jsonl") for k in ("turns", "speakers")}
        if self.runs("curate"):
            files["measures"] = self._at(ds, "curate", f"{shard}.measures.jsonl")
            files["assign"] = self.speaker_assignment(ds, shard)
            files["centroids"] = self._at(ALL, "curate", "speaker_centroids.npy")
        return files

    def diarize_report_files(self, ds: str) -> list[str]:
        """Per shard, the diarization's stats, rejects and RTTM (the curation report)."""
        if not self.diarized(ds):
            return []
        names = ("stats.jsonl", "rejects.jsonl", "rttm")
        return [self._at(ds, "diarize", f"{s}.{n}") for s in self.shards(ds) for n in names]

    def report_inputs(self, ds: str) -> list[str]:
        """The stage table's inputs: ingest's rejects, VAD's stats, each step's rejects and
        benchmarks per shard."""
        names = self.shards(ds)
        files = [self._at(ds, "rejects", "ingest.jsonl")]
        files += [self._at(ds, "vad", f"{s}.stats.jsonl") for s in names]
        steps = ["vad", *(["diarize"] if self.diarized(ds) else []), *(s for s in self.stages() if s != "vad")]
        for step in steps:
            files += [self._at(ds, step, f"{s}.rejects.jsonl") for s in names]
            files += [self._at(ds, "benchmarks", f"{step}/{s}.tsv") for s in names]
        return files

    # -- models, grammars, tokenizer ---------------------------------------------------------
    def asr_model_files(self) -> list[str]:
        """The ASR model as an input file when it is local (a hub name is not a file)."""
        spec = self.config["asr"]["model"]
        return [spec] if is_local_model(spec) else []

    def asr_job_model(self, ds: str) -> list[str]:
        """The ASR model file, unless the dataset's text is given (no model is loaded)."""
        return [] if self.text(ds) == "given" else self.asr_model_files()

    @property
    def grammars(self) -> str:
        """Where the built text-normalisation grammars live, a directory per language."""
        return self.config["tts"]["normalize_grammars"].rstrip("/")

    def grammar_dirs(self) -> list[str]:
        """The built grammars of ``tts.normalize_languages`` (none when ``tts.normalize`` is off)."""
        if not self.config["tts"]["normalize"]:
            return []
        return [f"{self.grammars}/{lang}" for lang in self.config["tts"]["normalize_languages"]]

    def asr_job_grammars(self, ds: str) -> list[str]:
        """The grammars ``text: verify`` compares the given and the heard text with."""
        return self.grammar_dirs() if self.text(ds) == "verify" else []

    @property
    def s2s_export(self) -> str:
        """The HuBERT exported for ONNX Runtime: one per checkpoint file and layer."""
        s2s = self.config["s2s"]
        return self._at(ALL, "s2s", f"runtime/{Path(s2s['hubert']).stem}-layer{s2s['layer']}.onnx")

    def s2s_export_files(self) -> list[str]:
        """The ONNX export, when ``s2s.runtime`` may use it (auto uses it on CPU)."""
        return [self.s2s_export] if self.config["s2s"]["runtime"] != "torch" else []

    def _speaker_model_file(self) -> str | None:
        """``speakers.model``'s file (None: the built-in one, which lives in the env)."""
        model = self.config["speakers"]["model"]
        return None if model == "resemblyzer" else model

    def diarize_model_files(self, ds: str) -> list[str]:
        """The files of the dataset's diarization model (``diarize.model`` or its own
        ``diarize_model``) and of ``speakers.model``."""
        own = self.config["datasets"][ds].get("diarize_model", self.config["diarize"].get("model"))
        return [f for f in (own, self._speaker_model_file()) if f]

    def music_model_files(self) -> list[str]:
        """The music stage's model files: ``music.model`` (detector onnx) and ``separate.model``."""
        music, sep = self.config["music"], self.config.get("separate") or {}
        return [f for f in (music.get("model") if music.get("detector") != "signal" else None, sep.get("model")) if f]

    def curate_model_files(self) -> list[str]:
        """The files of the models curation's measure job loads besides its own:
        ``speakers.model`` and ``curate.language_model``."""
        return [f for f in (self._speaker_model_file(), self.config["curate"].get("language_model")) if f]

    def s2s_model_files(self) -> list[str]:
        return [self.config["s2s"][k] for k in ("hubert", "kmeans", "vocoder", "vocoder_config")]

    def tts_normalized_all(self) -> list[str]:
        """Every dataset's per-shard normalised text: what the tokenizer is trained on."""
        return [self._at(ds, "tts", f"{s}.normalized.jsonl") for ds in self.config["datasets"] for s in self.shards(ds)]

    def tts_tokenizer(self) -> str:
        """``tts.tokenizer``, or the one checkpoint tts_tokenizer trains on the transcripts."""
        if self.config["tts"].get("tokenizer"):
            return self.config["tts"]["tokenizer"]
        self.wait("tts_tokenizer", list(self.config["datasets"]))
        return self._at(ALL, "tts", "tokenizer.model")

    def tts_encoder_files(self) -> list[str]:
        """``torchscript:<path>`` encoders are inputs (the built-in ones live in the env)."""
        tts = self.config["tts"]
        return [tts[k][len("torchscript:") :] for k in ("condition", "emotion") if tts[k].startswith("torchscript:")]

    # -- shell arguments naming many files -------------------------------------------------------
    def per_shard_paths(self, ds: str, directory: str, suffix: str) -> list[str]:
        """``directory/<shard><suffix>`` for every shard of ``ds``."""
        return [f"{directory}/{s}{suffix}" for s in self.shards(ds)]

    def speaker_shard_counts(self) -> list[int]:
        """How many of the run-wide speakers job's shard files are each dataset's, in order."""
        return [len(self.shards(ds)) for ds in self.config["datasets"]]

    def speaker_assignment_files(self) -> list[str]:
        """The run-wide speakers job's assignment files: every dataset's shards' in turn
        (``<ds>/curate/speaker_assignments/<shard>.jsonl``)."""
        return [
            path
            for ds in self.config["datasets"]
            for path in self.per_shard_paths(ds, self._at(ds, "curate", "speaker_assignments"), ".jsonl")
        ]

    def diarize_rttm_flags(self, files: dict[str, str]) -> dict[str, str]:
        """The RTTM job's flags naming the run's speakers, by name (empty without curation)."""
        names = ("measures", "assign", "centroids")
        if "measures" not in files:
            return dict.fromkeys(names, "")
        return {k: f"--{k} {shlex.quote(files[k])}" for k in names}

    # -- what a run asks for ----------------------------------------------------------------
    def stage_targets(self, ds: str, stage: str) -> list[str]:
        """What ``rule all`` asks of ``stage`` for ``ds``."""
        if stage == "vad":
            segments = [self._at(ds, "vad", f"{s}.segments.jsonl") for s in self.shards(ds)]
            return [self._at(ds, "vad", "stats.csv"), self._at(ds, "vad", "summary.json"), *segments]
        if stage == "music":
            return [self._at(ds, "music", f"{s}.segments.jsonl") for s in self.shards(ds)]
        if stage == "asr":
            return [self._at(ds, "asr", "manifest.jsonl"), self._at(ds, "asr", "summary.json")]
        if stage == "s2s":
            return [self._at(ds, "s2s", f"{s}.units.jsonl") for s in self.shards(ds)]
        if stage == "curate":
            return [self._at(ds, "curate", "summary.json"), self._at(ds, "curate", "speakers.jsonl")]
        if stage == "tts":
            names = ("train_manifest.jsonl", "val_manifest.jsonl", "stats.json")
            return [self._at(d, "tts", n) for d in (ds, ALL) for n in names]
        if stage == "export":
            formats = self.config["export"]["formats"]
            return [self._at(ds, "export", f"{fmt}/{n}") for fmt in formats for n in ("index.jsonl", "stats.json")]
        raise ValueError(f"unknown stage {stage!r}")

    def parts(self, targets: list[str]) -> list[list[str]]:
        """Rule ``all``'s targets in parts of ``targets_per_part`` (one part where there are no
        more, or it is null): rule ``all`` takes a marker a part where there are several (rule
        ``all_part``, :meth:`part_marker`), so that no job has every shard's file as input:
        Snakemake's preparation of a job walks its dependencies once per input, the square of
        its inputs (docs/cluster_scale.md)."""
        k = self.config.get("targets_per_part")
        if not k or len(targets) <= k:
            return [targets]
        return [targets[i : i + k] for i in range(0, len(targets), k)]

    def part_marker(self, i: int) -> str:
        return f"{self.results}/{ALL}/all/part-{i:05d}.done"

    def all_targets(self) -> list[str]:
        """Every target of the run, each once (the cross-dataset TTS targets once)."""
        targets = []
        for ds in self.config["datasets"]:
            targets += [f"{self.results}/{ds}/manifest.jsonl", self._at(ds, "rejects", "ingest.jsonl")]
            for stage in self.stages():
                targets += self.stage_targets(ds, stage)
            if self.diarized(ds):
                targets += [self._at(ds, "diarize", f"{s}.rttm") for s in self.shards(ds)]
            targets.append(self._at(ds, "report", "stages.csv"))
            if self.runs("curate"):
                targets.append(self._at(ds, "report", "curation.html"))
            if self.runs("curate") and self.runs("tts"):
                targets.append(self._at(ds, "report", "annotations.html"))
        return list(dict.fromkeys(targets))
