"""The music job: files in, files out (docs/outputs.md, "Music").

:func:`run` (rule ``music``, per shard, after VAD and diarization, before ASR): the shard's
segments grouped by file, resumable per file on :class:`~speechprep.core.shardjob.ShardJob`.
Each segment is read at 16 kHz and judged by the detector (:mod:`.detect`), with the file's
pauses either side of it (:func:`pause_spans`: up to a second each, never into other speech):

* music with no speech (``music_only_prob`` at least ``music.drop_prob``: what VAD took
  for speech) is dropped ``background_music`` here, before any model stage runs on it;
* every other segment goes on with ``music_prob`` (null where it is too short to judge);
* with ``separate.model``, a file any of whose kept segments has ``music_prob`` over
  ``separate.min_music_prob`` has each of its kept segments separated (:mod:`.separate`),
  the file as a whole, so that no file is read partly from its own audio and partly from
  the vocals (curation reads a file's pauses next to each of its segments). A separated
  segment's vocals are judged again: its line records ``separated: true``,
  ``music_prob_before`` (the mix's figure) and ``music_prob`` (the vocals'), and points at
  the vocals (``audio_filepath``, ``offset``, ``duration`` in ``<shard>.vocals/<shard>.flac``),
  its own audio kept as ``unseparated_audio_filepath``, ``unseparated_offset``,
  ``unseparated_duration``.

Writes, under ``music/``: ``<s>.segments.jsonl`` (what ASR and the stages after it read),
``<s>.rejects.jsonl`` (``background_music``), ``<s>.vocals/<s>.flac`` (every separated segment's
vocals end to end, 16-bit, at the highest rate among them: each segment's own rate, at most
the model's; written atomically; no file when nothing was separated).

A segment whose audio cannot be read passes through unjudged (``music_prob: null``): ASR
rejects it for its reason, as it does without this stage. A file the detector or the
separator fails on passes its segments through (unseparated where separation failed), the
error logged; model errors count for the systematic-failure rule (``model_failure``), and a
resumed job retries such files.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core import logs
from ..core.failures import FailureRule
from ..core.names import file_stem
from ..core.rejects import reject
from ..core.shardjob import Accepted, ShardJob
from ..encoders import music as detect
from ..errors import describe
from ..io.audio import SAMPLE_RATE, AudioError, probe, read_segment
from ..io.jsonio import atomic_open, read_jsonl
from ..io.npyio import load_npy, save_npy
from .params import MusicParams

log = logging.getLogger("speechprep.music")
STAGE = "music"
VERSION = "1"
DIGITS = 4  # music_prob's rounding
CONTEXT_S = 1.0  # s of the file's pauses either side of a segment the detector reads
MIN_PAUSE_S = 0.1  # a shorter pause is no context


@dataclass(frozen=True)
class MusicFiles:
    """The music job's files: its input (the shard's VAD or diarization segments), its outputs, its resume file."""

    segments: str
    out: str
    rejects: str
    vocals: str
    resume: str


def by_file(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The shard's lines as one item per source file, in the order files first appear:
    ``{id, audio_filepath, duration: speech s, segments}`` (each file's lines in input order)."""
    files: dict[str, list[dict]] = {}
    for line in lines:
        files.setdefault(str(line.get("file_id") or line["audio_filepath"]), []).append(line)
    return [
        {
            "id": k,
            "audio_filepath": v[0]["audio_filepath"],
            "duration": sum(float(s["duration"]) for s in v),
            "segments": v,
        }
        for k, v in files.items()
    ]


class Models:
    """The detector, and the separator where ``separate.model`` is set (loaded when first needed)."""

    def __init__(self, p: MusicParams, threads: int, detector=None, separator=None):
        self.p, self.threads = p, threads
        self.detector = detector if detector is not None else detect.load(p)
        self._separator = separator

    @property
    def separator(self):
        if self._separator is None and self.p.separate.model:
            from ..core.batching import resolve_device
            from . import separate

            t = time.monotonic()
            self._separator = separate.load(self.p.separate, resolve_device(self.p.device), self.threads)
            log.info("separator %s loaded in %.1f s", self.p.separate.model, time.monotonic() - t)
        return self._separator


def pause_spans(segs: list[dict], seconds: float = CONTEXT_S) -> dict[str, list[tuple[float, float]]]:
    """Per segment of one file, the file's non-speech either side of the speech stretch that
    holds it (its segments' spans merged), ``seconds`` at most each, never into other speech:
    what the detector reads as the segment's context (a file's pauses that hold music)."""
    spans = sorted((float(s.get("offset") or 0.0), float(s.get("offset") or 0.0) + float(s["duration"])) for s in segs)
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out = {}
    for s in segs:
        a = float(s.get("offset") or 0.0)
        k = max(i for i, (x, _) in enumerate(merged) if x <= a + 1e-9)
        start, end = merged[k]
        before = (max(merged[k - 1][1] if k else 0.0, start - seconds), start)
        after = (end, min(merged[k + 1][0] if k + 1 < len(merged) else end + seconds, end + seconds))
        out[s["id"]] = [(x, y) for x, y in (before, after) if y - x >= MIN_PAUSE_S]
    return out


def _pauses(path: str, spans: list[tuple[float, float]], channel: int | None = None) -> list[np.ndarray]:
    """The pauses' audio at 16 kHz, each on its own (on the segment's ``channel`` where the source
    names one); one that does not decode is left out."""
    out = []
    for a, b in spans:
        seg = {"audio_filepath": path, "offset": a, "duration": round(b - a, 4), "channel": channel}
        try:
            out.append(read_segment(seg, SAMPLE_RATE))
        except AudioError:
            continue
    return out


def _fit(x: np.ndarray, n: int) -> np.ndarray:
    """``x`` cut or zero-padded to ``n`` samples."""
    return x[:n] if len(x) >= n else np.pad(x, (0, n - len(x)))


def vocals_path(resume: str, item_id: str) -> Path:
    """Where a separated segment's vocals wait until the shard is written (beside the resume file)."""
    return Path(resume).with_suffix("") / "vocals" / f"{file_stem(item_id)}.npy"


class FileJob:
    """One file's segments through the detector and, where it flags music, the separator."""

    def __init__(self, job: ShardJob, models: Models, p: MusicParams, resume: str):
        self.job, self.models, self.p, self.resume = job, models, p, resume

    def judge(self, segs: list[dict]) -> tuple[list[dict], list[dict]]:
        """``(lines, rejects)``: each readable segment's ``music_prob``; music with no speech dropped."""
        audio: dict[str, np.ndarray] = {}
        for s in segs:
            try:
                audio[s["id"]] = read_segment(s, SAMPLE_RATE)
            except AudioError as e:  # ASR rejects it for its reason, as without this stage
                log.info("%s: not judged (%s: %s)", s["id"], e.reason, e.detail)
        read = [s for s in segs if s["id"] in audio]
        spans = pause_spans(segs)
        noises = [_pauses(s["audio_filepath"], spans[s["id"]], s.get("channel")) for s in read]
        found = self.models.detector.assess_batch([(audio[s["id"]], SAMPLE_RATE) for s in read], noises)
        judged = dict(zip([s["id"] for s in read], found, strict=True))
        lines, rejects = [], []
        for s in segs:
            a = judged.get(s["id"])
            if a is not None and self.p.drop_prob is not None and a.music_only_prob >= self.p.drop_prob:
                detail = (
                    f"music with no speech: music_prob {a.music_prob:.3f} x (1 - speech_prob {a.speech_prob:.3f}) "
                    f"= {a.music_only_prob:.3f} is at least music.drop_prob ({self.p.drop_prob})"
                )
                figures = {"music_prob": round(a.music_prob, DIGITS), "speech_prob": round(a.speech_prob, DIGITS)}
                rejects.append(reject(s["id"], s.get("audio_filepath"), STAGE, "background_music", detail, **figures))
                continue
            lines.append({**s, "music_prob": None if a is None else round(a.music_prob, DIGITS)})
        return lines, rejects

    def flagged(self, lines: list[dict]) -> bool:
        """The file has a segment whose music separation is for (``separate.min_music_prob``)."""
        s = self.p.separate
        return bool(s.model) and any((x["music_prob"] or 0.0) > s.min_music_prob for x in lines)

    def separate(self, line: dict) -> dict:
        """One segment's vocals into scratch; its line's separation fields (``vocals``: where they wait)."""
        sep = self.models.separator
        rate = min(int(sep.rate), probe(line["audio_filepath"]).sample_rate)
        mix = read_segment(line, sep.rate)
        voc = sep.vocals(mix)
        if rate != sep.rate:
            import soxr

            voc = soxr.resample(voc, sep.rate, rate).astype(np.float32)
        voc = _fit(voc, int(round(float(line["duration"]) * rate)))
        after = self.models.detector.assess(_to_rate(voc, rate, SAMPLE_RATE), SAMPLE_RATE)
        save_npy(vocals_path(self.resume, line["id"]), voc)
        return {
            **line,
            "separated": True,
            "music_prob_before": line["music_prob"],
            "music_prob": None if after is None else round(after.music_prob, DIGITS),
            "vocals_rate": rate,
        }

    def __call__(self, item: dict) -> Accepted:
        segs = item["segments"]
        try:
            lines, rejects = self.judge(segs)
        except Exception as e:  # noqa: BLE001 (the detector failing on one file: its segments pass through)
            self.job.model_error(item, describe(e))
            log.warning("%s: the music detector failed, its %d segments pass through: %s", item["id"], len(segs), e)
            return Accepted({"lines": [{**s, "music_prob": None} for s in segs], "rejects": [], "error": describe(e)})
        error = None
        if self.flagged(lines):
            out = []
            for line in lines:
                try:
                    out.append(self.separate(line))
                except AudioError as e:  # read at 16 kHz but not at the model's rate: passes unseparated
                    log.warning("%s: not separated (%s: %s)", line["id"], e.reason, e.detail)
                    out.append(line)
                except Exception as e:  # noqa: BLE001 (the separator failing: the segment passes unseparated)
                    error = describe(e)
                    self.job.model_error(item, error)
                    log.warning("%s: separation failed, it passes unseparated: %s", line["id"], error)
                    out.append(line)
            lines = out
        data: dict[str, Any] = {"lines": lines, "rejects": rejects}
        if error is not None:
            data["error"] = error
        return Accepted(data)


def _to_rate(x: np.ndarray, sr: int, rate: int) -> np.ndarray:
    if sr == rate:
        return x
    import soxr

    return soxr.resample(x, sr, rate).astype(np.float32)


def write_vocals(directory: str, lines: list[dict], resume: str) -> int:
    """The separated lines' vocals end to end in one FLAC in ``directory`` (``<shard>.flac``,
    written atomically; none when nothing was separated), each line pointed at its part;
    returns the file's rate (0: none)."""
    import soundfile as sf

    Path(directory).mkdir(parents=True, exist_ok=True)
    separated = [x for x in lines if x.get("separated")]
    if not separated:
        return 0
    rate = max(int(x["vocals_rate"]) for x in separated)
    path = Path(directory).resolve() / f"{Path(resume).stem}.flac"
    where = str(path)
    start = 0
    with atomic_open(path, "wb") as f, sf.SoundFile(f, "w", rate, 1, "PCM_16", format="FLAC") as w:
        for x in separated:
            voc = load_npy(vocals_path(resume, x["id"]), "float32")
            voc = _fit(_to_rate(voc, int(x["vocals_rate"]), rate), int(round(float(x["duration"]) * rate)))
            w.write(np.clip(voc, -1.0, 1.0))
            x["unseparated_audio_filepath"] = x["audio_filepath"]
            x["unseparated_offset"] = x.get("offset")
            x["unseparated_duration"] = x["duration"]
            if x.get("channel") is not None:  # the vocals are one channel: the source's is the mix's
                x["unseparated_channel"] = x.pop("channel")
            x.update(audio_filepath=where, offset=round(start / rate, 4), duration=round(len(voc) / rate, 4))
            del x["vocals_rate"]
            start += len(voc)
    return rate


def job_identity(p: MusicParams) -> dict[str, Any]:
    """The resume fingerprint: the parameters, and the sha256 of each model file they name."""
    from ..io.modelfiles import sha256_cached

    out = p.identity()
    for key, path in (
        ("music_model_sha256", p.model if p.detector != "signal" else None),
        ("separate_model_sha256", p.separate.model),
    ):
        if path:
            out[key] = sha256_cached(str(Path(path).expanduser()), p.hash_cache)
    return out


def models_name(p: MusicParams) -> str:
    name = p.detector if p.detector == "signal" else f"{p.detector} {p.model}"
    return name if not p.separate.model else f"{name} + separation {p.separate.model}"


def run(files: MusicFiles, p: MusicParams, threads: int = 1, models: Models | None = None) -> dict[str, Any]:
    """Every segment of a shard judged, music alone dropped, flagged files separated (resumable per file)."""
    lines_in = list(read_jsonl(files.segments))
    items = by_file(lines_in)
    name = models_name(p)
    job = ShardJob(
        STAGE, files.segments, files.resume, job_identity(p), VERSION, "files", FailureRule.from_dict(p.model_failure),
        name, items,
    )  # fmt: skip
    todo = job.todo(
        keep=lambda item, saved: "error" not in saved.data
        and all(load_npy(vocals_path(files.resume, x["id"]), "float32") is not None
                for x in saved.data["lines"] if x.get("separated"))
    )  # fmt: skip
    with job.running(todo):
        if todo and models is None:
            models = Models(p, threads)
            log.info("judging %d files with %s", len(todo), name)
        costs = []
        for item in todo:
            started = time.process_time()
            job.emit(item, FileJob(job, models, p, files.resume)(item), audio_seconds=item["duration"])
            costs.append((item["duration"], time.process_time() - started))
        if costs:
            logs.file_costs(costs)
    data = [d for _, d in job.accepted()]
    order = {x["id"]: k for k, x in enumerate(lines_in)}
    lines = sorted((x for d in data for x in d["lines"]), key=lambda x: order[x["id"]])
    rejects = sorted((r for d in data for r in d["rejects"]), key=lambda r: order[r["id"]])
    rate = write_vocals(files.vocals, lines, files.resume)
    totals = {
        "background_music": len(rejects),
        "separated": sum(bool(x.get("separated")) for x in lines),
        "separated_files": sum(any(x.get("separated") for x in d["lines"]) for d in data),
        "vocals_rate": rate,
        "failed_files": sum("error" in d for d in data),
    }
    summary = job.commit({files.out: lines}, files.rejects, passed=rejects, **totals)
    import shutil

    shutil.rmtree(Path(files.resume).with_suffix(""), ignore_errors=True)
    return summary
