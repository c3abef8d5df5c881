"""The diarization jobs: files in, files out (docs/outputs.md, "Diarization").

:func:`run` (rule ``diarize``, per shard, between VAD and ASR): the shard's VAD
segments grouped by file, each file diarized (:func:`~.core.diarize_file`, its
audio read around its segments only: :class:`~.audio.SpanAudio`), resumable per
file on :class:`~speechprep.core.shardjob.ShardJob`. Writes, under ``diarize/``:

* ``<s>.segments.jsonl``: the ASR view, what ASR and S2S read: a segment of one
  speaker as VAD wrote it, the pieces of a cut one (``<id>_<k>``,
  ``diarize_source``), overlap pieces flagged ``overlap: true``; in a file of two
  or more speakers every line with its local speaker ``diarize_speaker`` (a file
  of one speaker: its lines as VAD wrote them);
* ``<s>.rejects.jsonl``: segments dropped ``multi_speaker``;
* ``<s>.turns.jsonl``, ``<s>.speakers.jsonl`` (each local speaker's centroid),
  ``<s>.stats.jsonl`` (per file: speakers, segments and seconds cut, dropped,
  flagged; ``status``).

Every VAD segment id ends in the segments (itself or its pieces) or the rejects.
A file whose diarization fails passes its segments through unchanged (``status:
failed`` with the error, logged); model errors count for the systematic-failure
rule (``model_failure``), and a resumed job retries such files.

The RTTM job (rule ``diarize_rttm``, after curation's speakers) is
:func:`.speakermap.write_rttm_shard`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ..core import logs
from ..core.failures import FailureRule
from ..core.shardjob import Accepted, ShardJob
from ..errors import describe
from ..io.audio import SAMPLE_RATE, AudioError
from ..io.jsonio import read_jsonl
from . import sortformer
from .audio import SpanAudio
from .core import diarize_file
from .lines import STAGE, counts, segment_lines, speaker_lines, turn_lines
from .params import DiarizeJobParams, DiarizeParams

log = logging.getLogger("speechprep.diarize")
VERSION = "2"  # 2: cuts on the 10 ms grid


@dataclass(frozen=True)
class DiarizeFiles:
    """The diarize job's files: its input (the shard's VAD segments), its outputs, its resume file."""

    segments: str
    out: str
    rejects: str
    turns: str
    speakers: str
    stats: str
    resume: str | None = None


def file_items(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The shard's segment lines grouped by file (in the order files first appear), each file's
    segments in time order: ``{id: file id, audio_filepath, duration: speech s, segments}``, and
    ``channel`` where the source names one of a multi-channel file (ingest's entry: its
    ``file_id``; two channels of one file are two entries, diarized apart)."""
    files: dict[str, list[dict]] = {}
    for line in lines:
        key = str(line.get("file_id") or line["audio_filepath"])
        if not line.get("file_id") and line.get("channel") is not None:
            key += f"#channel{line['channel']}"
        files.setdefault(key, []).append(line)
    out = []
    for fid, segs in files.items():
        segs = sorted(segs, key=lambda s: float(s["offset"]))
        speech = sum(float(s["duration"]) for s in segs)
        item = {"id": fid, "audio_filepath": segs[0]["audio_filepath"], "duration": speech, "segments": segs}
        if segs[0].get("channel") is not None:
            item["channel"] = segs[0]["channel"]
        out.append(item)
    return out


def diarize_item(model, item: dict[str, Any], p: DiarizeParams) -> dict[str, Any]:
    """One file's outcome: its lines (ASR view), rejects, turns, local speakers and counts."""
    segs = item["segments"]
    spans = [(float(s["offset"]), float(s["offset"]) + float(s["duration"])) for s in segs]
    audio = SpanAudio(item["audio_filepath"], spans, channel=item.get("channel"))
    result = (sortformer.diarize_file if isinstance(model, sortformer.SortformerModels) else diarize_file)(
        model, audio, spans, p
    )
    kept, rejected = segment_lines(segs, result, tts=False)
    ended = {x.get("diarize_source", x["id"]) for x in kept + rejected}
    if ended != {s["id"] for s in segs}:  # never expected: then the file passes through
        raise RuntimeError(f"diarization accounted for {len(ended)} of the file's {len(segs)} segments")
    stats = {"id": item["id"], "audio_filepath": item["audio_filepath"], **counts(result), **result.extra}
    stats["status"] = "ok"
    stats["band"] = "narrow" if result.narrow else "wide"
    if result.bandwidth_hz is not None:
        stats["bandwidth_hz"] = round(result.bandwidth_hz, 1)
    if audio.truncated_at is not None:
        stats["truncated_at"] = round(audio.truncated_at, 4)
    return {
        "lines": kept,
        "rejects": rejected,
        "turns": turn_lines(item["id"], segs, result),
        "speakers": speaker_lines(item["id"], result),
        "stats": {**stats, "decoded_s": round(audio.decoded / SAMPLE_RATE, 3)},
    }


def passthrough(item: dict[str, Any], error: str) -> dict[str, Any]:
    """A file diarization failed on: its segments as VAD wrote them, the error in its stats."""
    segs = item["segments"]
    stats = {"id": item["id"], "audio_filepath": item["audio_filepath"], "segments": len(segs)}
    stats |= {"speech_s": round(item["duration"], 3), "status": "failed", "error": error}
    return {"lines": segs, "rejects": [], "turns": [], "speakers": [], "stats": stats}


def load_model(device: str, threads: int, spec: str = "resemblyzer", diarizer: str | None = None):
    """The windows' speaker model on ``device`` (``auto``: CUDA when there is one): Resemblyzer's
    ``VoiceEncoder`` (its mel partials batched: :func:`.embed.window_embeddings`), or the model
    ``spec`` names (``speakers.model``) behind :class:`.embed.EncoderWindows`; with a Sortformer
    ``.nemo`` ``diarizer`` (``diarize.model``), both (:class:`.sortformer.SortformerModels`)."""
    import torch

    from ..core.batching import resolve_device
    from ..encoders import ResemblyzerEncoder, make_encoder
    from .embed import EncoderWindows

    torch.set_num_threads(max(1, threads))
    device = resolve_device(device)
    if spec == "resemblyzer":
        model = ResemblyzerEncoder(device, threads).model
    else:
        model = EncoderWindows(make_encoder(spec, device, threads), device)
    if diarizer is None:
        return model
    from ..encoders.nemo_speaker import NemoSortformer

    return sortformer.SortformerModels(NemoSortformer(diarizer, device, threads), model)


def _outcome(job: ShardJob, model, item: dict[str, Any], p: DiarizeParams) -> Accepted:
    try:
        return Accepted(diarize_item(model, item, p))
    except AudioError as e:  # the file's fault, not the model's: ASR will say what it is
        error = f"{e.reason}: {e.detail}"
    except Exception as e:  # noqa: BLE001 (any failure on one file: its segments pass through)
        error = describe(e)
        job.model_error(item, error)
    log.warning("%s: diarization failed, its %d segments pass through: %s", item["id"], len(item["segments"]), error)
    return Accepted(passthrough(item, error))


def job_identity(p: DiarizeJobParams) -> dict[str, Any]:
    """What the job's resume fingerprint holds: the parameters, and the built-in speaker model's
    package version (its weights ship in it) or the diarization model's sha256 (a lab's speaker
    model's is in the parameters)."""
    import importlib.metadata

    out = p.identity()
    if p.speaker_model == "resemblyzer":
        out["resemblyzer"] = importlib.metadata.version("resemblyzer")
    if p.model is not None:
        from ..io.modelfiles import sha256_cached

        out["diarize_model_sha256"] = sha256_cached(p.model, p.hash_cache)
    return out


def models_name(p: DiarizeJobParams) -> str:
    """The job's models, as its log and a failing shard's message name them."""
    name = "Resemblyzer" if p.speaker_model == "resemblyzer" else p.speaker_model
    return name if p.model is None else f"{p.model} linked by {name}"


def run(files: DiarizeFiles, p: DiarizeJobParams, threads: int = 1, model=None) -> dict[str, Any]:
    """Diarize every file of a shard (resumable per file); ``model``: a loaded encoder (tests)."""
    items = file_items(list(read_jsonl(files.segments)))
    rule = FailureRule.from_dict(p.model_failure)
    name = models_name(p)
    job = ShardJob(
        STAGE, files.segments, files.resume, job_identity(p), VERSION, "files", rule, name, items, reuse=True
    )
    todo = job.todo(keep=lambda item, saved: "error" not in saved.data["stats"])
    with job.running(todo):
        if todo and model is None:
            model = load_model(p.device, threads, p.speaker_model, p.model)
            log.info("diarizing %d files with %s", len(todo), name)
        costs = []
        for item in todo:
            started = time.process_time()  # the process's CPU: every torch thread's
            job.emit(item, _outcome(job, model, item, p), audio_seconds=item["duration"])
            costs.append((item["duration"], time.process_time() - started))
        if costs:
            logs.file_costs(costs)
    data = [d for _, d in job.accepted()]
    every = lambda key: [x for d in data for x in (d[key] if isinstance(d[key], list) else [d[key]])]
    outputs = {files.out: every("lines"), files.turns: every("turns"), files.speakers: every("speakers")}
    outputs[files.stats] = every("stats")
    stats = outputs[files.stats]
    totals = {
        "segments": sum(len(i["segments"]) for i in items),
        "cut": sum(s.get("cut", 0) for s in stats),
        "multi_speaker": sum(s.get("multi_speaker", 0) for s in stats),
        "failed_files": sum(s["status"] == "failed" for s in stats),
    }
    return job.commit(outputs, files.rejects, passed=every("rejects"), **totals)
