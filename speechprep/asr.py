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

With ``asr.timestamps`` each line also gets NeMo's word timestamps and
entropy-based word confidences (``words``, on the source file's clock) and a
segment ``confidence`` (the mean of its words'); a model class that gives none
(multitask AED models without a separate timestamp model) gets ``null`` for
both, said once in the log. With ``asr.trim`` the line's ``offset``/``duration``
are cut to its words (plus ``asr.trim_pad``), the VAD bounds kept as
``vad_offset``/``vad_duration``.
"""

from __future__ import annotations

import logging
import os
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .audio import AudioError, read_segment
from .batching import BatchRunner, is_oom, isolate, resolve_device, seconds_budget
from .config import StageParams
from .errors import ModelFileError, UsageError, describe
from .failures import FailureRule
from .jsonio import atomic_open, read_jsonl, write_json
from .modelfiles import is_local_model, sha256_cached
from .rejects import count_reasons
from .shardjob import Accepted, Outcome, Rejected, ShardJob, model_rejected
from .watchdog import Watchdog

log = logging.getLogger("speechprep.asr")
STAGE = "asr"
ALGORITHM_VERSION = "1"

# ``(audios, language) -> results``, one per audio: its text, or a dict with
# ``text`` and, with timestamps, ``words`` (seconds from the audio's start) and ``confidence``
Transcriber = Callable[[list[np.ndarray], str], list[Any]]

# NeMo's confidence settings for word confidences: per-frame Tsallis entropy
# (alpha 0.5, exponential normalisation, the setting NeMo's confidence tutorial
# found best calibrated), blank frames excluded, a word's confidence the
# minimum over its tokens.
CONFIDENCE_CFG = {
    "preserve_word_confidence": True,
    "preserve_token_confidence": True,
    "exclude_blank": True,
    "aggregation": "min",
    "method_cfg": {"name": "entropy", "entropy_type": "tsallis", "alpha": 0.5, "entropy_norm": "exp"},
}


@dataclass(frozen=True)
class AsrParams(StageParams):
    """``asr`` in config/config.yaml (what each means is written there), with the
    dataset's default language, the shared ``model_failure`` rule and the
    model-digest cache."""

    SECTION = "asr"
    model: str
    device: str
    language: str
    cpu_batch_seconds: float
    seconds_per_gib: float
    gpu_reserve_gib: float
    max_batch_seconds: float
    min_duration: float
    max_duration: float
    batch_timeout: float
    timestamps: bool
    trim: bool
    trim_pad: float
    dataset_language: str | None
    model_failure: dict
    hash_cache: str | None


# --------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------
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
        tar = tarfile.open(path, "r:*")  # noqa: SIM115 (closed by the with below, once open worked)
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
        except Exception as e:
            if is_oom(e):
                raise
            raise ModelFileError(
                f"asr.model: {path} is not a valid .nemo file (NeMo could not restore it: {describe(e)})"
            ) from None
    else:
        try:
            model = ASRModel.from_pretrained(spec, map_location=torch.device(device))
        except Exception as e:  # noqa: BLE001 (whatever the hub client raises offline)
            raise UsageError(
                f"asr.model {spec!r} is not a local file, so it was taken for a pretrained model name, "
                f"and fetching it failed ({describe(e)}). Pretrained names need network access to the "
                "model hub; offline, download the .nemo file where you have access and set asr.model "
                "to its path."
            ) from None
    model.eval()
    repair_char_tdt_decoding(model)
    return model


def repair_char_tdt_decoding(model) -> bool:
    """Make a character-vocabulary TDT model's decoding keep its whole vocabulary.

    NeMo 3.0's character RNNT decoding turns ids into characters keeping only ids
    below ``blank_id - num_extra_outputs`` (``RNNTDecoding.decode_ids_to_tokens``).
    That is right for multi-blank RNNT, whose extra blanks sit between the
    vocabulary and the blank, but a TDT model's blank id already is the
    vocabulary's length and its extra outputs are durations: the last
    ``len(durations)`` characters of the vocabulary (``v w x y z '`` in NeMo's
    English character set) vanish from every transcript, and word timestamps
    fail with an IndexError on any segment holding one of them. The decoding
    object is corrected (its filter subtracts nothing); True if it was."""
    decoding = getattr(model, "decoding", None)
    if not (
        type(decoding).__name__ == "RNNTDecoding"
        and getattr(decoding, "_is_tdt", False)
        and getattr(decoding, "num_extra_outputs", 0)
        and getattr(decoding, "blank_id", None) == len(getattr(decoding, "labels_map", ()))
    ):
        return False
    decoding.num_extra_outputs = 0
    return True


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
            raise ValueError(
                f"language {language!r} is not one of the model's languages ({', '.join(languages)}); "
                "set the segment's language, the dataset's language or asr.language"
            )
        values = {"task": "asr", "source_lang": language, "target_lang": language, "pnc": "yes"}
        return {k: v for k, v in values.items() if k in slots}

    return prompt


def enable_word_timestamps(model) -> bool:
    """Turn on word timestamps and word confidences in the model's decoding; False (and one
    log line saying why) for a model class that cannot give them."""
    from omegaconf import ListConfig, OmegaConf, open_dict

    name = type(model).__name__
    if multitask_prompt(model) is not None:
        log.info("%s gives no word timestamps here (an AED model needs its own timestamp model): words: null", name)
        return False
    confidence = dict(CONFIDENCE_CFG)
    if "BPE" not in type(getattr(model, "decoding", None)).__name__:
        # character models: NeMo 3.0's CTCDecoding fails aggregating word confidences (it joins
        # token ids as strings); token confidences are aggregated here instead (hypothesis_words)
        confidence["preserve_word_confidence"] = False
    try:
        with open_dict(model.cfg.decoding):
            model.cfg.decoding.compute_timestamps = True
            model.cfg.decoding.confidence_cfg = OmegaConf.create(confidence)
        model.change_decoding_strategy(model.cfg.decoding, verbose=False)
    except Exception as e:  # noqa: BLE001 (whatever a model class's decoding set-up raises)
        log.info("%s cannot give word timestamps and confidences (%s): words: null", name, describe(e))
        return False
    repair_char_tdt_decoding(model)
    for decoding in (getattr(model, "decoding", None), getattr(model, "ctc_decoding", None)):
        # OmegaConf lists, which NeMo's word offsets test membership in once per character
        for attr, plain in (("supported_punctuation", set), ("segment_seperators", list)):
            if isinstance(getattr(decoding, attr, None), ListConfig):
                setattr(decoding, attr, plain(getattr(decoding, attr)))
    return True


def chars_to_words(text: str, token_confidence) -> list[float] | None:
    """Word confidences of a character model: the minimum over each word's characters (one
    token each, spaces included), as NeMo aggregates them; None where tokens and characters
    do not line up."""
    if token_confidence is None or len(token_confidence) != len(text):
        return None
    words: list[float] = []
    current: list[float] = []
    for ch, c in zip(text + " ", [*token_confidence, 1.0]):
        if ch == " ":
            if current:
                words.append(min(current))
            current = []
        else:
            current.append(float(c))
    return words


def hypothesis_words(h) -> dict[str, Any]:
    """``text``, ``words`` (``{word, start, end, confidence}``, seconds from the audio's start)
    and ``confidence`` (mean word confidence; None without words) of a NeMo hypothesis."""
    stamps = getattr(h, "timestamp", None)
    words = stamps.get("word") if isinstance(stamps, dict) else None
    if words is None:
        return {"text": h.text, "words": None, "confidence": None}
    confs = getattr(h, "word_confidence", None) or chars_to_words(h.text, getattr(h, "token_confidence", None))
    if confs is None or len(confs) != len(words):
        confs = [None] * len(words)
    out = [
        {
            "word": str(w["word"]),
            "start": float(w["start"]),
            "end": float(w["end"]),
            "confidence": None if c is None else min(1.0, max(0.0, float(c))),
        }
        for w, c in zip(words, confs)
    ]
    known = [x["confidence"] for x in out if x["confidence"] is not None]
    return {"text": h.text, "words": out, "confidence": sum(known) / len(known) if known else None}


def disable_word_timestamps(model) -> None:
    """The model's decoding without timestamps (as loaded, the character TDT repair kept)."""
    from omegaconf import open_dict

    with open_dict(model.cfg.decoding):
        model.cfg.decoding.compute_timestamps = False
    model.change_decoding_strategy(model.cfg.decoding, verbose=False)
    repair_char_tdt_decoding(model)


def nemo_transcriber(model, timestamps: bool = False) -> Transcriber:
    """``(audios, language) -> results`` with NeMo's own ``transcribe()`` (every model class has
    it); a multitask model gets the prompt for ``language``, the others ignore it. With
    ``timestamps``, each result is a :func:`hypothesis_words` dict (``words`` None where the
    model class gives none).

    Whether the model gives words is decided once per model: where NeMo's timestamp
    computation fails on a batch that transcribes without it, words are off from then on
    (``null``, said once in the log); a batch that fails either way is the model's error."""
    import torch
    from nemo.collections.asr.parts.utils.timestamp_utils import process_timestamp_outputs

    prompt = multitask_prompt(model)
    state = {"words": timestamps and enable_word_timestamps(model), "tried_without": False}

    def transcribe(audios: list[np.ndarray], language: str, words: bool) -> list[Any]:
        kwargs = prompt(language) if prompt else {}
        if words:
            # not ``timestamps=True``: with it every call rebuilds the decoding (NeMo's
            # change_decoding_strategy, a quarter of the demo model's time); the decoding set up
            # once by enable_word_timestamps is kept and its frame offsets turned into seconds here
            kwargs["return_hypotheses"] = True
        with torch.inference_mode():
            out = model.transcribe(audios, batch_size=len(audios), verbose=False, num_workers=0, **kwargs)
        if isinstance(out, tuple):  # some RNNT versions return (best, all)
            out = out[0]
        if words:
            stride = model.cfg.preprocessor.window_stride
            out = process_timestamp_outputs(out, model.encoder.subsampling_factor, stride)
        return out

    def without_timestamps(audios: list[np.ndarray], language: str, error: Exception) -> list[Any]:
        """The batch again without timestamps; words stay off if that works, else ``error``."""
        state["tried_without"] = True
        disable_word_timestamps(model)
        try:
            out = transcribe(audios, language, False)
        except Exception:  # noqa: BLE001 (the model fails either way: its first error is the one to report)
            enable_word_timestamps(model)
            raise error from None
        state["words"] = False
        log.warning(
            "%s: NeMo cannot compute word timestamps for this model (%s), which transcribes without them: "
            "words: null from here on",
            type(model).__name__,
            describe(error),
        )
        return out

    def run(audios: list[np.ndarray], language: str) -> list[Any]:
        words = state["words"]
        try:
            out = transcribe(audios, language, words)
        except Exception as e:
            if not words or is_oom(e) or state["tried_without"]:
                raise
            out = without_timestamps(audios, language, e)
        texts = [h.text if hasattr(h, "text") else str(h) for h in out]
        if not timestamps:
            return texts
        if not state["words"]:
            return [{"text": t, "words": None, "confidence": None} for t in texts]
        return [hypothesis_words(h) for h in out]

    return run


def on_source_clock(result: dict[str, Any], seg: dict[str, Any]) -> dict[str, Any]:
    """``result``'s word times moved onto the source file's clock (the segment's offset added),
    clipped to the segment, rounded to ms, made monotonic."""
    if not result.get("words"):
        return result
    offset, duration = float(seg.get("offset") or 0.0), float(seg["duration"])
    words, last = [], offset
    for w in result["words"]:
        start = max(last, round(offset + min(max(w["start"], 0.0), duration), 3))
        end = max(start, round(offset + min(max(w["end"], 0.0), duration), 3))
        words.append({**w, "start": start, "end": end})
        last = start
    return {**result, "words": words}


def trimmed(line: dict[str, Any], pad: float) -> dict[str, Any]:
    """``line`` cut to ``[first word start - pad, last word end + pad]`` within its VAD bounds,
    which are kept as ``vad_offset``/``vad_duration``; a line without words keeps its bounds."""
    offset, duration = float(line.get("offset") or 0.0), float(line["duration"])
    out = {**line, "vad_offset": offset, "vad_duration": duration}
    if line.get("words"):
        start = max(offset, line["words"][0]["start"] - pad)
        end = min(offset + duration, line["words"][-1]["end"] + pad)
        if end > start:
            out["offset"], out["duration"] = round(start, 3), round(end - start, 3)
    return out


# --------------------------------------------------------------------------
# segments
# --------------------------------------------------------------------------
def segment_language(seg: dict[str, Any], p: AsrParams) -> str:
    """The segment's language, else the dataset's, else ``asr.language``."""
    return seg.get("language") or p.dataset_language or p.language


def screen(seg: dict[str, Any], p: AsrParams) -> Rejected | None:
    """Reject from the manifest alone, before any audio is read."""
    d = seg.get("duration")
    if d is not None and d > p.max_duration:
        return Rejected(
            "too_long", f"{d:.2f} s exceeds asr.max_duration ({p.max_duration} s); VAD's max_segment should cut it"
        )
    if d is not None and d < p.min_duration:
        return Rejected("too_short", f"{d:.3f} s is below asr.min_duration ({p.min_duration} s)")
    return None


class SegmentBatcher:
    """``infer`` for :class:`BatchRunner`: validate, transcribe, isolate model errors.
    A batch holds segments of one language (``BatchRunner`` groups them). One
    result per segment: an ``AudioError``, the model's exception, or the text."""

    def __init__(
        self,
        transcribe: Transcriber,
        sample_rate: int,
        params: AsrParams,
        on_failure: Callable[[dict, Exception], None] | None = None,
    ):
        self.transcribe, self.sample_rate, self.p = transcribe, sample_rate, params
        self.on_failure = on_failure or (lambda seg, e: None)

    def __call__(self, batch: list[dict]) -> list:
        results: list[Any] = []
        for seg in batch:
            try:
                results.append(read_segment(seg, self.sample_rate, self.p.min_duration, "asr.min_duration"))
            except AudioError as e:
                results.append(e)
        good = [i for i, r in enumerate(results) if not isinstance(r, AudioError)]
        if good:
            language = segment_language(batch[0], self.p)
            texts = isolate(
                lambda audios: self.transcribe(audios, language),
                [results[i] for i in good],
                "asr model",
                lambda k, e: self.on_failure(batch[good[k]], e),
            )
            for i, t in zip(good, texts):
                results[i] = t
        return results


def _outcome(seg: dict, result: Any, oom: bool) -> Outcome:
    if oom:
        return Rejected("oom", f"does not fit in device memory even alone ({seg['duration']:.1f} s)")
    if isinstance(result, AudioError):
        return Rejected(result.reason, result.detail)
    if isinstance(result, Exception):
        return model_rejected(result)
    return Accepted(on_source_clock(result, seg) if isinstance(result, dict) else {"text": result})


# --------------------------------------------------------------------------
# a shard
# --------------------------------------------------------------------------
def transcribe_shard(
    segments_path: str,
    out_path: str,
    rejects_path: str,
    params: AsrParams,
    resume: str,
    transcribe: Transcriber,
    sample_rate: int,
    identity: dict[str, str],
    budget: float,
) -> dict[str, Any]:
    """Transcribe every segment of a shard; each ends in ``out_path`` or ``rejects_path``.

    Raises :class:`~speechprep.failures.SystematicFailure` (resume file kept, no
    outputs) when the model fails on too many segments (``params.model_failure``).
    """
    fp = {k: v for k, v in asdict(params).items() if k not in ("batch_timeout", "model_failure", "hash_cache")}
    job = ShardJob(
        STAGE,
        segments_path,
        resume,
        {**fp, **identity, "sample_rate": sample_rate},
        ALGORITHM_VERSION,
        failure_rule=FailureRule.from_dict(params.model_failure),
        model=params.model,
    )
    todo = job.todo(lambda seg: screen(seg, params))
    log.info("batch budget %.1f padded s", budget)
    runner = BatchRunner(
        budget=budget,
        duration=lambda s: float(s["duration"]),
        infer=SegmentBatcher(transcribe, sample_rate, params, lambda seg, e: job.model_error(seg, e)),
        group=lambda s: segment_language(s, params),
    )
    t0 = time.monotonic()
    with job.running(todo), Watchdog(params.batch_timeout) as wd:
        runner.on_batch_start = lambda batch: wd.batch(
            f"of {len(batch)} segments ({sum(s['duration'] for s in batch):.1f} s): "
            + ", ".join(s["id"] for s in batch[:20])
            + (" ..." if len(batch) > 20 else "")
        )
        for o in runner.run(todo):
            job.emit(o.item, _outcome(o.item, o.result, o.oom))
        wd.done()
    wall = time.monotonic() - t0
    lines = [{**seg, **r, **identity} for seg, r in job.accepted()]
    if params.trim:
        lines = [trimmed(x, params.trim_pad) for x in lines]
    audio = sum(float(s["duration"]) for s in todo)
    return job.commit(
        {out_path: lines},
        rejects_path,
        empty_text=sum(x["text"] == "" for x in lines),
        ooms=runner.ooms,
        audio_seconds=round(audio, 2),
        wall_seconds=round(wall, 2),
        audio_seconds_per_second=round(audio / wall, 1) if wall > 0 and audio else None,
    )


def run(
    segments_path: str, out_path: str, rejects_path: str, params: AsrParams, resume: str, threads: int = 1
) -> dict[str, Any]:
    """The stage entry: load the model once, size the batches, transcribe the shard."""
    import torch
    from nemo.utils import logging as nemo_logging

    torch.set_num_threads(max(1, threads))
    device = resolve_device(params.device)
    t = time.monotonic()
    nemo_logging.setLevel(logging.ERROR)
    model = load_model(params.model, device)
    sr = model_sample_rate(model)
    identity = model_identity(params.model, params.hash_cache)
    budget = seconds_budget(
        device, params.cpu_batch_seconds, params.seconds_per_gib, params.gpu_reserve_gib, params.max_batch_seconds
    )
    log.info(
        "%s from %s on %s, %d Hz, loaded in %.1f s",
        type(model).__name__,
        params.model,
        device,
        sr,
        time.monotonic() - t,
    )
    return transcribe_shard(
        segments_path,
        out_path,
        rejects_path,
        params,
        resume,
        nemo_transcriber(model, params.timestamps),
        sr,
        identity,
        budget,
    )


def merge(
    shard_files: Sequence[str], rejects_files: Sequence[str], manifest_out: str, summary_out: str
) -> dict[str, Any]:
    """``asr/manifest.jsonl`` (every shard, in shard order) and ``asr/summary.json``."""
    import json

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
    reasons = count_reasons(rejects_files)
    summary = {
        "stage": STAGE,
        "shards": len(shard_files),
        "transcribed": n,
        "empty_text": empty,
        "rejected": sum(reasons.values()),
        "rejects_by_reason": reasons,
        "audio_hours": round(audio / 3600, 4),
        "models": sorted(models),
    }
    write_json(summary_out, summary)
    return summary
