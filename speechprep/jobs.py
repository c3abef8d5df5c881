"""Every job of the workflow: the environment it runs in and its parameters class.

A rule selects its job's parameters from the run's config with :func:`job_params`
(each parameters class says where each of its fields comes from:
:meth:`speechprep.core.config.StageParams.select`), so a config change reruns
exactly the jobs whose parameters it changes. Standard library only: the Snakefile
imports this.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from .asr.params import AlignJobParams, AsrParams, GivenParams
from .core.config import StageParams
from .curate.params import DecideParams, DuplicateParams, MeasureParams, SpeakerParams
from .diarize.params import DiarizeJobParams, RttmParams
from .export.params import BucketParams, ExportParams
from .ingest.params import IngestParams
from .report.params import PlotParams
from .s2s.params import S2sExportParams, S2sParams
from .tts.params import ManifestParams, TextIdsParams, TextParams, TokenizerParams, TtsParams
from .vad.params import VadParams


@dataclass(frozen=True)
class Job:
    env: str  # the stage environment it runs in (envs/<env>.yaml)
    params: type[StageParams] | None = None


JOBS: dict[str, Job] = {
    "ingest run": Job("ingest", IngestParams),
    "vad run": Job("vad", VadParams),
    "vad merge": Job("vad"),
    "diarize run": Job("curate", DiarizeJobParams),  # Resemblyzer lives in the curate env
    "diarize rttm": Job("curate", RttmParams),
    "asr run": Job("asr", AsrParams),
    "asr given": Job("asr", GivenParams),
    "asr align": Job("asr", AlignJobParams),
    "asr merge": Job("asr"),
    "s2s run": Job("s2s", S2sParams),
    "s2s export": Job("s2s", S2sExportParams),
    "s2s inspect": Job("s2s"),
    "tts grammars": Job("tts"),
    "tts normalize": Job("tts", TextParams),
    "tts tokenizer": Job("tts", TokenizerParams),
    "tts features": Job("tts", TtsParams),
    "tts text": Job("tts", TextIdsParams),
    "tts manifest": Job("tts", ManifestParams),
    "tts combined": Job("tts"),
    "curate measure": Job("curate", MeasureParams),
    "curate speakers": Job("curate", SpeakerParams),
    "curate duplicates": Job("curate", DuplicateParams),
    "curate decide": Job("curate", DecideParams),
    "curate summary": Job("curate"),
    "export shard": Job("export", ExportParams),
    "export summary": Job("export", BucketParams),
    "report plots": Job("report", PlotParams),
    "report curation": Job("report", DecideParams),
    "demo asr-model": Job("asr"),
    "demo s2s-models": Job("s2s"),
}


def job_params(job: str, config: dict[str, Any], dataset: str | None = None, **given: Any) -> str:
    """What a rule passes as ``--params`` to ``job``: its parameters from ``config`` for
    ``dataset`` (JSON, keys sorted). ``given``: values the rule decides (a run directory,
    the dataset's name), used by the classes that have such a field."""
    cls = JOBS[job].params
    if cls is None:
        raise KeyError(f"job {job!r} takes no parameters")
    names = {f.name for f in fields(cls)}
    own = {k: v for k, v in given.items() if k in names}
    return json.dumps(cls.select(config, dataset, **own), sort_keys=True)
