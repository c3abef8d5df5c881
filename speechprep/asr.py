"""ASR stage: NeMo transcripts of VAD segments, batched to fit the device.

Per shard: every segment is read straight from its source file
(``offset``/``duration``), mixed to mono and resampled to the model's rate,
validated (readable, non-empty, finite, not too short or too long) before it
reaches the model, and transcribed in duration-sorted batches of one language
each, filled up to a padded-seconds budget (:mod:`speechprep.batching`: from
free GPU memory on CUDA, from config on CPU; out-of-memory batches are halved
and retried). A multitask (Canary) model gets the prompt for the batch's
language. A model exception on a batch falls back to one segment at a time so
only the guilty segment is rejected; a model that fails on (nearly) every
segment fails the job (:mod:`speechprep.failures`). Finished segments are
checkpointed, so a killed job restarts after its last finished batch (model
errors are retried). A watchdog fails the job, with every thread's stack in
the log, when a batch makes no progress.
"""
from __future__ import annotations

import json
import os
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .audio import AudioError, read_segment
from .batching import BatchRunner, is_oom, resolve_device, seconds_budget
from .checkpoint import Checkpoint, fingerprint
from .failures import FailureRule, ModelFailures
from .jsonio import atomic_open, read_jsonl, reject, write_jsonl
from .models import is_local_model, sha256_cached
from .progress import Progress
from .watchdog import Watchdog

STAGE = "asr"
ALGORITHM_VERSION = "1"

# ``(audios, language) -> texts``, one text per audio
Transcriber = Callable[[list[np.ndarray], str], list[str]]


@dataclass(frozen=True)
class AsrParams:
    model: str
    device: str = "auto"              # auto | cpu | cuda | cuda:N
    cpu_batch_seconds: float = 120.0  # padded audio seconds per batch on CPU
    seconds_per_gib: float = 60.0     # per-model factor: padded seconds per GiB of free GPU memory
    gpu_reserve_gib: float = 1.0      # GPU memory left free
    max_batch_seconds: float = 3600.0
    min_duration: float = 0.1         # shorter segments: too_short
    max_duration: float = 40.0        # longer segments: too_long (VAD should have cut them)
    batch_timeout: float = 600.0      # watchdog: seconds without progress on one batch
    language: str = "en"              # multitask prompts: a segment's language, else the dataset's, else this
    dataset_language: str | None = None
    model_failure: FailureRule = FailureRule(first_errors=10, max_error_share=0.5)
    hash_cache: str | None = None     # directory of cached model digests

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AsrParams":
        p = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        if isinstance(p.get("model_failure"), dict):
            p["model_failure"] = FailureRule.from_dict(p["model_failure"])
        return cls(**p)


def describe(e: BaseException, limit: int = 400) -> str:
    """``Type: message`` on one line, at most ``limit`` characters (for logs, rejects and failures)."""
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------
class ModelFileError(Exception):
    """``asr.model`` is a local file that is missing or not a usable .nemo: the job fails at once."""

    EXIT_CODE = 2


def model_identity(spec: str, hash_cache: str | None = None) -> dict[str, str]:
    """What each output line records about the model: path + sha256 (cached in ``hash_cache``), or the name."""
    if is_local_model(spec):
        path = os.path.abspath(spec)
        return {"asr_model": path, "asr_model_sha256": sha256_cached(path, hash_cache)}
    return {"asr_model": spec}


def check_nemo_file(path: str) -> None:
    """Cheap checks before NeMo's restore: a complete tar archive with a ``model_config.yaml``."""
    def invalid(reason: str) -> ModelFileError:
        return ModelFileError(f"asr.model: {path} is not a valid .nemo file ({reason})")

    if not os.path.isfile(path):
        raise ModelFileError(f"asr.model: no such file {path!r}")
    size = os.path.getsize(path)
    if size == 0:
        raise invalid("empty file, 0 bytes")
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError, EOFError):
        raise invalid(f"not a tar archive, {size} bytes") from None
    try:
        with tar:
            names = [os.path.normpath(m.name) for m in tar.getmembers()]
    except (tarfile.TarError, OSError, EOFError) as e:
        raise invalid(f"the archive is truncated or damaged, {size} bytes: {describe(e)}") from None
    if "model_config.yaml" not in names:
        names = [n for n in names if n != "."]
        listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise invalid(f"no model_config.yaml in the archive, which holds: {listed or 'nothing'}")


def load_model(spec: str, device: str):
    """Any NeMo ASR model class (CTC, RNNT/TDT, hybrid, multitask AED) from a local .nemo or a
    pretrained name. A local file that is missing or broken raises :class:`ModelFileError`."""
    local = is_local_model(spec)
    if local:
        path = os.path.abspath(spec)
        check_nemo_file(path)
    import torch
    from nemo.collections.asr.models import ASRModel

    if local:
        try:
            model = ASRModel.restore_from(path, map_location=torch.device(device))
        except Exception as e:  # noqa: BLE001 (whatever NeMo raises on a broken archive)
            if is_oom(e):
                raise
            raise ModelFileError(f"asr.model: {path} is not a valid .nemo file "
                                 f"(NeMo could not restore it: {describe(e)})") from None
    else:
        try:
            model = ASRModel.from_pretrained(spec, map_location=torch.device(device))
        except Exception as e:
            raise SystemExit(
                f"asr.model {spec!r} is not a local file, so it was taken for a pretrained model name, "
                f"and fetching it failed ({type(e).__name__}: {e}).\n  Pretrained names need network "
                "access to the model hub. Offline: download the .nemo file on a machine with access and "
                "set asr.model to its path.") from None
    model.eval()
    return model


def model_sample_rate(model) -> int:
    cfg = model.cfg
    for getter in (lambda: cfg.preprocessor.sample_rate, lambda: cfg.sample_rate):
        try:
            return int(getter())
        except Exception:  # noqa: BLE001 (configs differ between model classes)
            continue
    return 16000


def multitask_prompt(model) -> Callable[[str], dict[str, str]] | None:
    """``language -> prompt`` for a multitask (AED, Canary) model's ``transcribe()``; None for
    other models, which take no prompt.

    The prompt asks for transcription (task asr, source = target language) with
    punctuation, in the slots the model's prompt format has: canary-1 has all
    four, canary-2 has no task slot (its other slots come from the model's
    prompt defaults). A language the model has no token for raises ValueError.
    """
    from nemo.collections.asr.models import EncDecMultiTaskModel
    from nemo.collections.common.tokenizers.canary_tokenizer import CANARY_SPECIAL_TOKENIZER

    if not isinstance(model, EncDecMultiTaskModel):
        return None
    slots = model.prompt.get_slots("user")
    special = getattr(model.tokenizer, "special_tokens", None)
    languages = [x for x in getattr(model.tokenizer, "langs", []) if x != CANARY_SPECIAL_TOKENIZER]

    def prompt(language: str) -> dict[str, str]:
        if special is not None and f"<|{language}|>" not in special:
            raise ValueError(f"language {language!r} is not one of the model's languages ({', '.join(languages)}); "
                             "set the segment's language, the dataset's language or asr.language")
        values = {"task": "asr", "source_lang": language, "target_lang": language, "pnc": "yes"}
        return {k: v for k, v in values.items() if k in slots}

    return prompt


def nemo_transcriber(model) -> Transcriber:
    """``(audios, language) -> texts`` with NeMo's own ``transcribe()`` (every model class has it);
    a multitask model gets the prompt for ``language``, the others ignore it."""
    import torch

    prompt = multitask_prompt(model)

    def run(audios: list[np.ndarray], language: str) -> list[str]:
        kwargs = prompt(language) if prompt else {}
        with torch.inference_mode():
            out = model.transcribe(audios, batch_size=len(audios), verbose=False, num_workers=0, **kwargs)
        if isinstance(out, tuple):  # some RNNT versions return (best, all)
            out = out[0]
        return [h.text if hasattr(h, "text") else str(h) for h in out]

    return run


# --------------------------------------------------------------------------
# segments
# --------------------------------------------------------------------------
def load_segment(seg: dict[str, Any], sample_rate: int, p: AsrParams) -> np.ndarray:
    """The segment's samples, mono at ``sample_rate``; AudioError when unusable."""
    return read_segment(seg, sample_rate, p.min_duration, "asr.min_duration")


def segment_language(seg: dict[str, Any], p: AsrParams) -> str:
    """The segment's language, else the dataset's, else ``asr.language``."""
    return seg.get("language") or p.dataset_language or p.language


def is_model_error(result: dict) -> bool:
    return result.get("reject", {}).get("reason") == "model_error"


def model_error_detail(e: Exception) -> str:
    return f"the model raised on this segment alone: {describe(e)}"


def screen(seg: dict[str, Any], p: AsrParams) -> dict | None:
    """Reject from the manifest alone, before any audio is read."""
    d = seg.get("duration")
    if d is not None and d > p.max_duration:
        return reject(seg["id"], seg["audio_filepath"], STAGE, "too_long",
                      f"{d:.2f} s exceeds asr.max_duration ({p.max_duration} s); VAD's max_segment should cut it")
    if d is not None and d < p.min_duration:
        return reject(seg["id"], seg["audio_filepath"], STAGE, "too_short",
                      f"{d:.3f} s is below asr.min_duration ({p.min_duration} s)")
    return None


class SegmentBatcher:
    """``infer`` for :class:`BatchRunner`: validate, transcribe, isolate model errors.

    A batch holds segments of one language (``BatchRunner`` groups them). Each
    segment's model outcome is counted in ``failures`` as soon as it is known,
    so a model that fails on everything stops the job after the first few
    segments, not after retrying a whole batch one at a time.
    """

    def __init__(self, transcribe: Transcriber, sample_rate: int, params: AsrParams,
                 failures: ModelFailures, log=sys.stderr):
        self.transcribe, self.sample_rate, self.p, self.log = transcribe, sample_rate, params, log
        self.failures = failures
        self.counted: set[str] = set()  # a batch redone after an OOM is not counted twice

    def __call__(self, batch: list[dict]) -> list[dict]:
        results: list[dict | None] = [None] * len(batch)
        good: list[int] = []
        audios: list[np.ndarray] = []
        for i, seg in enumerate(batch):
            try:
                audios.append(load_segment(seg, self.sample_rate, self.p))
                good.append(i)
            except AudioError as e:
                results[i] = {"reject": reject(seg["id"], seg["audio_filepath"], STAGE, e.reason, e.detail)}
        if audios:
            language = segment_language(batch[0], self.p)
            for i, out in zip(good, self._transcribe_isolating(batch, good, audios, language)):
                seg = batch[i]
                results[i] = {"text": out} if not isinstance(out, Exception) else {"reject": reject(
                    seg["id"], seg["audio_filepath"], STAGE, "model_error", model_error_detail(out))}
        return results

    def _transcribe_isolating(self, batch, good, audios, language) -> list[str | Exception]:
        """Texts for ``audios``; the exception for a segment the model raises on by itself."""
        try:
            texts = self.transcribe(audios, language)
            if len(texts) != len(audios):
                raise RuntimeError(f"model returned {len(texts)} texts for {len(audios)} segments")
            for i in good:
                self._outcome(batch[i])
            return texts
        except Exception as e:  # noqa: BLE001
            if is_oom(e):
                raise  # BatchRunner halves the batch
            if len(audios) == 1:
                self._outcome(batch[good[0]], e)
                return [e]
            print(f"asr: model error on a batch of {len(audios)} ({describe(e)}); "
                  "retrying one segment at a time", file=self.log, flush=True)
        texts: list[str | Exception] = []
        for i, a in zip(good, audios):
            try:
                texts.append(self.transcribe([a], language)[0])
                self._outcome(batch[i])
            except Exception as e:  # noqa: BLE001
                if is_oom(e):
                    raise
                texts.append(e)
                self._outcome(batch[i], e)
        return texts

    def _outcome(self, seg, error: Exception | None = None) -> None:
        """Count (once) and log a segment's model outcome; raises SystematicFailure per the rule."""
        if seg["id"] in self.counted:
            return
        self.counted.add(seg["id"])
        if error is None:
            self.failures.success()
        else:
            print(f"asr: {seg['id']}: model error: {describe(error)}", file=self.log, flush=True)
            self.failures.error(seg["id"], model_error_detail(error))


# --------------------------------------------------------------------------
# a shard
# --------------------------------------------------------------------------
def transcribe_shard(segments_path: str, out_path: str, rejects_path: str, params: AsrParams,
                     scratch: str, transcribe: Transcriber, sample_rate: int, identity: dict[str, str],
                     budget: float, log=sys.stderr) -> dict[str, Any]:
    """Transcribe every segment of a shard; each ends in ``out_path`` or ``rejects_path``.

    Raises :class:`~speechprep.failures.SystematicFailure` (checkpoint kept, no
    outputs) when the model fails on too many segments (``params.model_failure``).
    """
    segments = list(read_jsonl(segments_path))
    name = Path(segments_path).name.split(".")[0]
    fp_params = {**asdict(params), **identity, "sample_rate": sample_rate}
    for key in ("batch_timeout", "model_failure", "hash_cache"):  # they do not change any output
        fp_params.pop(key)
    ck = Checkpoint(scratch, fingerprint(segments_path, fp_params, ALGORITHM_VERSION))
    done = ck.load()
    for key in [k for k, r in done.items() if is_model_error(r)]:
        del done[key]  # retried: a resumed job gets no model error for free
    failures = ModelFailures(STAGE, params.model, params.model_failure)
    failures.success(sum("text" in r for r in done.values()))
    todo = []
    for seg in segments:
        if seg["id"] in done:
            continue
        r = screen(seg, params)
        if r is not None:
            done[seg["id"]] = {"id": seg["id"], "reject": r}
        else:
            todo.append(seg)
    print(f"asr[{name}]: {len(segments)} segments, {len(segments) - len(todo)} already done or screened "
          f"out (checkpoint {scratch}), {len(todo)} to transcribe; batch budget {budget:.1f} padded s",
          file=log, flush=True)
    progress = Progress(f"asr[{name}]", len(todo), log=log, unit="segments")
    batcher = SegmentBatcher(transcribe, sample_rate, params, failures, log)
    t0 = time.monotonic()
    ck.start()
    try:
        with Watchdog(params.batch_timeout, log=log) as wd:
            def start(batch):
                ids = ", ".join(s["id"] for s in batch[:20]) + (" ..." if len(batch) > 20 else "")
                wd.batch(f"of {len(batch)} segments ({sum(s['duration'] for s in batch):.1f} s): {ids}")

            runner = BatchRunner(budget=budget, duration=lambda s: float(s["duration"]), infer=batcher,
                                 logger=lambda m: print(f"asr[{name}]: {m}", file=log, flush=True),
                                 on_batch_start=start, group=lambda s: segment_language(s, params))
            for o in runner.run(todo):
                seg = o.item
                if o.oom:
                    r = {"reject": reject(seg["id"], seg["audio_filepath"], STAGE, "oom",
                                          f"does not fit in device memory even alone ({seg['duration']:.1f} s)")}
                else:
                    r = o.result
                ck.append({"id": seg["id"], **r})
                progress.update(audio_seconds=float(seg["duration"]))
            failures.finish()
            wd.done()
    except BaseException:
        ck.close(remove=False)
        raise
    progress.finish()
    wall = time.monotonic() - t0

    lines, rejects, empty = [], [], 0
    for seg in segments:
        r = done[seg["id"]]
        if "reject" in r:
            rejects.append(r["reject"])
        else:
            lines.append({**seg, "text": r["text"], **identity})
            empty += r["text"] == ""
    write_jsonl(out_path, lines)
    write_jsonl(rejects_path, rejects)
    ck.close(remove=True)
    audio = sum(float(s["duration"]) for s in todo)
    counts = {"segments": len(segments), "transcribed": len(lines), "empty_text": empty,
              "rejected": len(rejects), "ooms": runner.ooms if todo else 0,
              "audio_seconds": round(audio, 2), "wall_seconds": round(wall, 2),
              "audio_seconds_per_second": round(audio / wall, 1) if wall > 0 and audio else None}
    print(f"asr[{name}]: done {counts}", file=log, flush=True)
    return counts


def run(segments_path: str, out_path: str, rejects_path: str, params: AsrParams, scratch: str,
        threads: int = 1, log=sys.stderr) -> dict[str, Any]:
    """The stage entry: load the model once, size the batches, transcribe the shard."""
    import logging

    import torch

    torch.set_num_threads(max(1, threads))
    device = resolve_device(params.device)
    t = time.monotonic()
    from nemo.utils import logging as nemo_logging

    nemo_logging.setLevel(logging.ERROR)
    model = load_model(params.model, device)
    sr = model_sample_rate(model)
    identity = model_identity(params.model, params.hash_cache)
    budget = seconds_budget(device, params.cpu_batch_seconds, params.seconds_per_gib,
                            params.gpu_reserve_gib, params.max_batch_seconds)
    print(f"asr: {type(model).__name__} from {params.model} on {device}, {sr} Hz, "
          f"loaded in {time.monotonic() - t:.1f} s", file=log, flush=True)
    return transcribe_shard(segments_path, out_path, rejects_path, params, scratch,
                            nemo_transcriber(model), sr, identity, budget, log)


def merge(shard_files: Sequence[str], rejects_files: Sequence[str], manifest_out: str,
          summary_out: str) -> dict[str, Any]:
    """``asr/manifest.jsonl`` (every shard, in shard order) and ``asr/summary.json``."""
    n = empty = 0
    audio = 0.0
    models: set[str] = set()
    with atomic_open(manifest_out) as f:
        for path in shard_files:
            for r in read_jsonl(path):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
                n += 1
                empty += r["text"] == ""
                audio += float(r["duration"])
                models.add(r["asr_model"])
    reasons: dict[str, int] = {}
    for path in rejects_files:
        for r in read_jsonl(path):
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    summary = {"stage": STAGE, "shards": len(shard_files), "transcribed": n, "empty_text": empty,
               "rejected": sum(reasons.values()), "rejects_by_reason": dict(sorted(reasons.items())),
               "audio_hours": round(audio / 3600, 4), "models": sorted(models)}
    with atomic_open(summary_out) as f:
        f.write(json.dumps(summary, indent=1) + "\n")
    return summary
