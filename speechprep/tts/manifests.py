"""Train/val manifests and ``stats.json`` with provenance (rules ``tts_manifest``, ``tts_combined``).

Provenance is read from where it was recorded: the ASR model from the ASR
lines (``asr_model``, ``asr_model_sha256``), the S2S models from the units
lines, the encoders and the tokenizer from their files; nothing upstream is
hashed again. The config digest is computed when the workflow loads
(:func:`speechprep.core.config.digest`, which ignores ``threads``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.envspec import pinned_packages
from ..core.rejects import count_reasons
from ..encoders import encoder_identity
from ..errors import UsageError
from ..io.jsonio import read_jsonl, write_json, write_jsonl
from ..io.modelfiles import sha256_file
from . import captions as C
from .params import ManifestParams
from .text import load_tokenizer

log = logging.getLogger("speechprep.tts")
TEXT_REJECTS = ("no_text_ids", "no_phonemes")  # the text job's reasons: such a segment has features but no text line
S2S_MODELS = ("hubert", "kmeans", "vocoder", "vocoder_config")
PACKAGES = (
    "torch",
    "numpy",
    "sentencepiece",
    "nemo-text-processing",
    "pynini",
    "resemblyzer",
    "opensmile",
    "soundfile",
    "soxr",
)


def is_val(key: str, val_ratio: float) -> bool:
    """Deterministic split by a hash of ``key`` (the id, or the speaker): a key keeps
    its split when the corpus grows."""
    h = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    return h / 2**64 < val_ratio


def _first_line(paths: list[str]) -> dict:
    return next((line for p in paths for line in read_jsonl(p)), {})


def model_files(
    asr_paths: list[str], units_paths: list[str], tokenizer: str, encoders: dict[str, str], hash_cache: str | None
) -> list[dict[str, Any]]:
    """Every model file the chain read: ASR, S2S, tokenizer, the two encoders."""
    asr = _first_line(asr_paths)
    files = [{"role": "asr", "path": asr.get("asr_model"), "sha256": asr.get("asr_model_sha256")}]
    s2s = _first_line(units_paths)
    files += [{"role": f"s2s.{k}", "path": s2s.get(k), "sha256": s2s.get(f"{k}_sha256")} for k in S2S_MODELS]
    files.append({"role": "tts.tokenizer", "path": str(Path(tokenizer).resolve()), "sha256": sha256_file(tokenizer)})
    for role in ("condition", "emotion"):
        ident = encoder_identity(encoders[role], hash_cache)
        files.append({"role": f"tts.{role}", "path": ident["path"], "sha256": ident["sha256"]})
    return files


PINNED = {"vad": ("ten-vad",), "asr": ("nemo-toolkit", "torch"), "s2s": ("fairseq-fixed", "torch")}


def package_versions(env_files: list[str]) -> dict[str, Any]:
    """Versions in this (tts) environment, and the pins of the stages before it (their
    ``env_files``, ``envs/<stage>.yaml``: :data:`PINNED` names the packages recorded)."""
    here = {}
    for name in PACKAGES:
        try:
            here[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            here[name] = None
    pins = {}
    for path in env_files:
        stage = Path(path).stem
        pinned = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in pinned_packages(Path(path)).items()}
        pins[stage] = {n: pinned.get(n) for n in PINNED.get(stage, ())}
    return {"tts": here, "pinned": pins, "python": sys.version.split()[0]}


NORMALIZATION = ("spoken", "passed_through", "failed", "off")


def normalization_counts(lines: list[dict]) -> dict[str, Any]:
    """How the manifests' segments got their ``text_normalized`` (``tts.normalize``):
    ``spoken``, ``passed_through`` (a language without grammars; also per language),
    ``failed`` (the grammars raised: the text kept), ``off``."""
    how = Counter(x.get("text_normalization", "off") for x in lines)
    by_lang = Counter(x.get("language") or "default" for x in lines if x.get("text_normalization") == "passed_through")
    return {**{k: how.get(k, 0) for k in NORMALIZATION}, "passed_through_by_language": dict(sorted(by_lang.items()))}


def _add_counts(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    langs = Counter(a["passed_through_by_language"]) + Counter(b["passed_through_by_language"])
    return {**{k: a[k] + b[k] for k in NORMALIZATION}, "passed_through_by_language": dict(sorted(langs.items()))}


@dataclass(frozen=True)
class Inputs:
    """What a dataset's manifests are built from: per shard, the features index, the text-ids
    index, the TTS rejects (features and text ids), the ASR lines and the S2S units; the
    tokenizer; curation's kept lines (None without curation) and its ``summary.json`` (the
    annotations' bins); the env files whose pins ``stats.json`` records
    (``envs/<stage>.yaml`` of the stages before TTS)."""

    features: list[str]
    texts: list[str]
    rejects: list[str]
    asr: list[str]
    units: list[str]
    tokenizer: str
    kept: list[str] | None = None
    pins: list[str] = field(default_factory=list)
    summary: str | None = None
    caption_edges: str | None = None  # the captions' edges kept across runs (.captions.Captions.hold)


@dataclass(frozen=True)
class Outputs:
    train: str
    val: str
    stats: str


def split(p: ManifestParams, inputs: Inputs) -> tuple[dict[str, list[dict]], int]:
    """The train and val lines (sorted by id), and how many segments curation left out.
    With curation's ``kept`` lines, only those segments, with their ``speaker``,
    ``tier`` and annotations (:data:`.captions.CARRIED`; the features were computed for
    every measured segment, so a threshold change reruns this job, not the features).
    ``p.split_by_speaker``: the split hashes the speaker rather than the id, so no
    speaker is in both (a segment without one is split by its id)."""
    ids = {t["id"]: t for path in inputs.texts for t in read_jsonl(path)}
    no_ids = {r["id"] for path in inputs.rejects for r in read_jsonl(path) if r.get("reason") in TEXT_REJECTS}
    carried = ("speaker", "tier", *C.CARRIED)
    keep = {k["id"]: {c: k[c] for c in carried if c in k} for q in inputs.kept or () for k in read_jsonl(q)}
    out: dict[str, list[dict]] = {"train": [], "val": []}
    curated_out = 0
    for path in inputs.features:
        for f in read_jsonl(path):
            t = ids.pop(f["id"], None)
            if t is None and f["id"] in no_ids:
                continue  # the text-ids job rejected it (counted with the rejects)
            if t is None:
                raise UsageError(f"{f['id']} has audio features but no text ids: rerun tts_text for {path}")
            if inputs.kept is not None and f["id"] not in keep:
                curated_out += 1
                continue
            line = {"id": f["id"], "dataset": p.name, **{k: v for k, v in f.items() if k != "id"}, **t}
            line.update(keep.get(f["id"], {}))
            line["speaking_rate"] = C.speaking_rate(line)
            key = line["speaker"] if p.split_by_speaker and line.get("speaker") else f["id"]
            out["val" if is_val(key, p.val_ratio) else "train"].append(line)
    if ids:
        raise UsageError(f"text ids without audio features: {sorted(ids)[:5]}")
    for lines in out.values():
        lines.sort(key=lambda x: x["id"])
    return out, curated_out


def phoneme_map(p: ManifestParams, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """With ``tts.phonemes``: the backend, its voices, Piper's phoneme-id map (phoneme ->
    [id]), as a Piper training config's ``phoneme_id_map`` reads it, and how many ``lines``
    were kept without phonemes (``tts.no_phonemes: keep``)."""
    if not p.phonemes:
        return {}
    from piper_phonemize import get_espeak_map

    without = sum(x.get("phonemes") == "" for x in lines)
    phonemes = {"backend": p.phonemes, "voices": p.phoneme_voices, "kept_without": without}
    return {"phonemes": {**phonemes, "phoneme_id_map": get_espeak_map()}}


def describe(p: ManifestParams, summary: str | None, lines: list[dict], record: str | None = None) -> dict[str, Any]:
    """With ``tts.captions`` and curation's summary: each line's ``description``
    (:class:`.captions.Captions`, with the edges ``record`` kept from earlier runs); the
    bins, edges and counts for ``stats.json``."""
    if not p.captions or not summary:
        return {}
    annotations = json.loads(Path(summary).read_text(encoding="utf-8"))["annotations"]
    captions = C.Captions(p.captions, annotations["bins"], annotations["edges"], annotations.get("by_gender"))
    captions.fit_rate(lines)
    if record:
        captions.hold(record)
    for line in lines:
        line["description"] = captions(line)
    return {"captions": captions.stats()}


def build_manifests(p: ManifestParams, inputs: Inputs, outputs: Outputs) -> dict[str, Any]:
    """Train/val manifests of a dataset and its ``stats.json``."""
    lines, curated_out = split(p, inputs)
    described = describe(p, inputs.summary, lines["train"] + lines["val"], inputs.caption_edges)
    write_jsonl(outputs.train, lines["train"])
    write_jsonl(outputs.val, lines["val"])
    reasons = count_reasons(inputs.rejects)
    sp = load_tokenizer(inputs.tokenizer)
    encoders = {"condition": p.condition, "emotion": p.emotion}
    stats = {
        "dataset": p.name,
        "counts": {
            "train": len(lines["train"]),
            "val": len(lines["val"]),
            "rejected": sum(reasons.values()),
            "curated_out": curated_out,
        },
        "hours": {k: round(sum(x["duration"] for x in v) / 3600, 6) for k, v in lines.items()},
        "rejects_by_reason": reasons,
        "text_normalization": normalization_counts(lines["train"] + lines["val"]),
        "val_ratio": p.val_ratio,
        "split_by_speaker": p.split_by_speaker,
        "manifests": {k: str(Path(getattr(outputs, k)).resolve()) for k in ("train", "val")},
        "tokenizer": {
            "path": str(Path(inputs.tokenizer).resolve()),
            "sha256": sha256_file(inputs.tokenizer),
            "vocab_size": sp.get_piece_size(),
        },
        "models": model_files(inputs.asr, inputs.units, inputs.tokenizer, encoders, p.hash_cache),
        "packages": package_versions(inputs.pins),
        "config_sha256": p.config_sha256,
        "speaking_rate_unit": "phonemes/s" if p.phonemes else "characters/s",
        **described,
        **phoneme_map(p, lines["train"] + lines["val"]),
    }
    write_json(outputs.stats, stats, indent=2)
    log.info("%s: %s, hours %s", p.name, stats["counts"], stats["hours"])
    return stats


def _combined_phonemes(per: list[dict[str, Any]]) -> dict[str, Any]:
    """The first phonemised dataset's backend, voices and map; every dataset's count of lines
    kept without phonemes."""
    have = [s["phonemes"] for s in per if "phonemes" in s]
    if not have:
        return {}
    return {"phonemes": {**have[0], "kept_without": sum(s.get("kept_without", 0) for s in have)}}


def _combined_normalization(per: list[dict[str, Any]]) -> dict[str, Any]:
    total = normalization_counts([])
    for s in per:
        total = _add_counts(total, s.get("text_normalization") or normalization_counts([]))
    return total


def combine(
    stats_paths: list[str], train_paths: list[str], val_paths: list[str], train_out: str, val_out: str, stats_out: str
) -> dict[str, Any]:
    """One train/val pair across datasets (lines keep their ``dataset``)."""
    for paths, out in ((train_paths, train_out), (val_paths, val_out)):
        write_jsonl(out, (line for p in paths for line in read_jsonl(p)))
    per = [json.loads(Path(p).read_text(encoding="utf-8")) for p in stats_paths]
    reasons: dict[str, int] = {}
    for s in per:
        for k, v in s["rejects_by_reason"].items():
            reasons[k] = reasons.get(k, 0) + v
    first = per[0]
    stats = {
        "datasets": [s["dataset"] for s in per],
        "counts": {k: sum(s["counts"][k] for s in per) for k in ("train", "val", "rejected", "curated_out")},
        "hours": {k: round(sum(s["hours"][k] for s in per), 6) for k in ("train", "val")},
        "rejects_by_reason": dict(sorted(reasons.items())),
        "text_normalization": _combined_normalization(per),
        "val_ratio": first["val_ratio"],
        "manifests": {"train": str(Path(train_out).resolve()), "val": str(Path(val_out).resolve())},
        "tokenizer": first["tokenizer"],
        "models": first["models"],
        "packages": first["packages"],
        "config_sha256": first["config_sha256"],
        **_combined_phonemes(per),
        "per_dataset": {s["dataset"]: {"counts": s["counts"], "hours": s["hours"]} for s in per},
    }
    write_json(stats_out, stats, indent=2)
    log.info("all datasets: %s, hours %s", stats["counts"], stats["hours"])
    return stats
