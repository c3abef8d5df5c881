"""The audio-feature job of a shard (rule ``tts_features``).

For every ASR segment with text: its S2S units as int32 ``codes``, a
``condition`` vector and an ``emo_vec`` (float32), from the encoders of
:mod:`.encoders`. Segments run in batches from
:class:`~speechprep.batching.BatchRunner` (seconds budget from free GPU
memory, OOM halves and retries, then rejects ``oom``); an encoder exception
reruns the batch clip by clip and rejects only the guilty clip
(``encoder_error``). Arrays wait in the job's scratch directory until the
shard is done (Snakemake empties a directory output before rerunning its
job); a segment counts as done only when its resume line exists and its
three arrays load.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..audio import SAMPLE_RATE, AudioError, read_segment
from ..batching import BatchRunner, isolate, resolve_device, seconds_budget
from ..config import StageParams
from ..failures import FailureRule
from ..jsonio import read_jsonl
from ..modelfiles import sha256_file
from ..names import file_stem
from ..npyio import PACKED, check_layout, load_npy, pack_npy, save_npy
from ..shardjob import Accepted, Outcome, Rejected, ShardJob, model_rejected
from .encoders import Encoders, encoder_identity
from .text import TextNormalizer

log = logging.getLogger("speechprep.tts")
STAGE = "tts"
ALGORITHM_VERSION = "1"
FEATURES = ("codes", "condition", "emo_vec")
LENGTHS = ("codes_len", "condition_dim", "emo_vec_dim")
DTYPES = {"text_ids": np.int32, "codes": np.int32, "condition": np.float32, "emo_vec": np.float32}


@dataclass(frozen=True)
class TtsParams(StageParams):
    """The audio-side settings of ``tts`` in config/config.yaml (rules pass only these,
    so a tokenizer or split change does not rerun the features)."""

    SECTION = "tts"
    condition: str
    emotion: str
    device: str
    cpu_batch_seconds: float
    seconds_per_gib: float
    gpu_reserve_gib: float
    max_batch_seconds: float
    min_duration: float
    languages: dict
    dataset_language: str | None
    model_failure: dict
    hash_cache: str | None


def artifact(root: Path, kind: str, seg_id: str) -> Path:
    return root / kind / f"{file_stem(seg_id)}.npy"


def place_arrays(lines: list[dict], scratch: Path, out: Path, layout: str, kinds=FEATURES) -> None:
    """Move each line's arrays from ``scratch/<kind>/<id>.npy`` into ``out/<kind>/``: one file
    per segment (``files``) or one ``packed.npy`` per kind (``packed``); the lines' ``<kind>``
    fields name where each array now is (a path, or ``<file>#<offset>:<length>``)."""
    check_layout(layout)
    for kind in kinds:
        (out / kind).mkdir(parents=True, exist_ok=True)
        if layout == "files":
            for line in lines:
                line[kind] = str(artifact(out, kind, line["id"]))
                os.replace(artifact(scratch, kind, line["id"]), line[kind])
            continue
        arrays = [np.load(artifact(scratch, kind, line["id"]), allow_pickle=False) for line in lines]
        for line, where in zip(lines, pack_npy(out / kind / f"{PACKED}.npy", arrays, DTYPES[kind])):
            line[kind] = where


def artifacts_ok(root: Path, seg_id: str, n_codes: int) -> bool:
    """All three feature arrays load with their dtype and shape (a truncated file does not)."""
    codes = load_npy(artifact(root, "codes", seg_id), np.int32, 1)
    if codes is None or len(codes) != n_codes:
        return False
    return all(load_npy(artifact(root, k, seg_id), np.float32, 1) is not None for k in ("condition", "emo_vec"))


def _finish(s: dict, result: Any, oom: bool, units: list[int], root: Path) -> Outcome:
    """Check one segment's vectors and write its three arrays to scratch."""
    sid = s["id"]
    if oom:
        return Rejected("oom", "out of memory even as a single segment")
    if isinstance(result, AudioError):
        return Rejected(result.reason, result.detail)
    if isinstance(result, Exception):  # the encoders raised on this clip alone
        return model_rejected(result, "encoder_error")
    cond, emo = result
    for what, v in (("condition", cond), ("emotion", emo)):
        if isinstance(v, AudioError):
            return Rejected(v.reason, f"{what} encoder: {v.detail}")
        if v.size == 0 or not np.isfinite(v).all():
            return Rejected(
                "non_finite", f"the {what} vector is not finite (silent or degenerate audio?)", model_error=True
            )
    save_npy(artifact(root, "codes", sid), np.asarray(units, dtype=np.int32))
    save_npy(artifact(root, "condition", sid), cond.astype(np.float32))
    save_npy(artifact(root, "emo_vec", sid), emo.astype(np.float32))
    return Accepted({"codes_len": len(units), "condition_dim": int(cond.size), "emo_vec_dim": int(emo.size)})


def run_features(
    asr_path: str,
    units_path: str,
    s2s_rejects_path: str,
    index_out: str,
    rejects_out: str,
    out_dir: str,
    p: TtsParams,
    resume: str,
    threads: int = 1,
    encoders: Callable | None = None,
    layout: str = "files",
) -> dict[str, Any]:
    """Codes, condition and emotion vectors for every segment of a shard (resumable).

    Writes ``out_dir/{codes,condition,emo_vec}/<id>.npy`` (``layout`` ``files``) or
    ``out_dir/<kind>/packed.npy`` (``packed``), the index ``index_out``
    (one line per accepted segment: its fields, the normalised text, feature paths
    and lengths) and ``rejects_out``.
    """
    units = {u["id"]: u["units"] for u in read_jsonl(units_path)}
    s2s_rejects = {r["id"]: r for r in read_jsonl(s2s_rejects_path)}
    norm = TextNormalizer(p.languages)
    ident = {
        "condition": encoder_identity(p.condition, p.hash_cache),
        "emotion": encoder_identity(p.emotion, p.hash_cache),
    }
    root = Path(resume).with_suffix("")  # arrays wait here until the shard is done
    fp = {k: v for k, v in asdict(p).items() if k not in ("model_failure", "hash_cache", "dataset_language")}
    fp["language"] = p.dataset_language
    job = ShardJob(
        STAGE,
        asr_path,
        resume,
        {**fp, **ident, "units": sha256_file(units_path)},
        ALGORITHM_VERSION,
        failure_rule=FailureRule.from_dict(p.model_failure),
        model=f"{p.condition} + {p.emotion}",
    )
    texts = {s["id"]: norm(s.get("text") or "", s.get("language") or p.dataset_language) for s in job.items}

    def screen(s: dict) -> Rejected | None:
        if not texts[s["id"]]:
            return Rejected("no_text", f"no text after normalisation (transcript: {s.get('text')!r})")
        if s["id"] not in units:
            why = s2s_rejects.get(s["id"])
            return Rejected(
                "no_codes",
                f"S2S rejected it ({why['reason']}: {why['detail']})" if why else "no S2S units for this segment",
            )
        return None

    def keep(s: dict, saved: Outcome) -> bool:
        return isinstance(saved, Rejected) or artifacts_ok(root, s["id"], len(units[s["id"]]))

    embeddings: dict[str, np.ndarray] = {}

    def stored(s: dict) -> np.ndarray | None:
        """The curation stage's Resemblyzer vector of ``s``, when it has one: not recomputed."""
        if p.condition != "resemblyzer" or "embedding_file" not in s:
            return None
        if s["embedding_file"] not in embeddings:
            embeddings[s["embedding_file"]] = np.load(s["embedding_file"], mmap_mode="r")
        return np.array(embeddings[s["embedding_file"]][s["embedding_row"]], dtype=np.float32)

    todo = job.todo(screen, keep)
    with job.running(todo):
        if todo:
            device = resolve_device(p.device)
            encoders = encoders or Encoders(p.condition, p.emotion, device, threads)
            budget = seconds_budget(
                device, p.cpu_batch_seconds, p.seconds_per_gib, p.gpu_reserve_gib, p.max_batch_seconds
            )

            def infer(batch: list[tuple[dict, Any]]) -> list:
                ok = [i for i, (_, a) in enumerate(batch) if not isinstance(a, AudioError)]
                items = [(batch[i][1], stored(batch[i][0])) for i in ok]
                failed = lambda k, e: job.model_error(batch[ok[k]][0], e)
                vecs = isolate(encode, items, "tts encoder", failed) if ok else []
                out: list[Any] = [a for _, a in batch]
                for i, v in zip(ok, vecs):
                    out[i] = v
                return out

            def encode(items: list[tuple[np.ndarray, np.ndarray | None]]) -> list:
                clips, given = [c for c, _ in items], [v for _, v in items]
                if any(v is None for v in given):
                    return encoders(clips)
                return encoders(clips, condition=given)

            def load(s: dict) -> np.ndarray | AudioError:
                try:
                    return read_segment(s, SAMPLE_RATE, p.min_duration, "tts.min_duration")
                except AudioError as e:
                    return e

            runner = BatchRunner(budget=budget, duration=lambda it: float(it[0]["duration"]), infer=infer)
            for plan in runner.plan([(s, None) for s in todo]):
                for o in runner.run([(s, load(s)) for s, _ in plan]):
                    s = o.item[0]
                    job.emit(s, _finish(s, o.result, o.oom, units[s["id"]], root))

    out = Path(out_dir).resolve()
    lines = []
    for s, data in job.accepted():
        seg = {**s, "text": texts[s["id"]]}
        line = {k: seg[k] for k in ("id", "text", "audio_filepath", "offset", "duration") if k in seg}
        for k in ("speaker", "language"):
            if s.get(k) is not None:
                line[k] = s[k]
        if "language" not in line and p.dataset_language:
            line["language"] = p.dataset_language
        for kind, length in zip(FEATURES, LENGTHS):
            line[kind] = None  # placed below
            line[length] = data[length]
        lines.append(line)
    place_arrays(lines, root, out, layout)
    counts = job.commit({index_out: lines}, rejects_out)
    shutil.rmtree(root, ignore_errors=True)
    return counts
