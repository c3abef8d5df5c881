"""Thresholds for the run's speaker model, chosen on a lab's labelled sample (``python -m
speechprep speakers calibrate``; docs/stages/speakers.md, "Speaker models").

The sample's voices (or sources) are split in two by a hash of their name, never by segment:
the calibration part chooses ``speakers.threshold`` (the cut of the configured linkage, files
pooled as ``speakers.unit`` says: the threshold of the best harmonic mean of purity and inverse
purity, the middle of its plateau) and ``speakers.max_distance`` (a segment's distance to its
speaker's centroid that 99.5 % of the calibration segments stay under); the report part says
what they give on voices they were not chosen on: purity, inverse purity, the share of a
voice's files under its one id, the share flagged ``speaker_outlier``. Diarization's distances
(``speakers.diarize``) are chosen on the sample's conversations, lines with reference ``turns``
(:mod:`.conversations`: DER, the changes and overlaps caught); without any they are scaled from
Resemblyzer's by the ratio of the thresholds, and the block says so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.config import defaults, load_yaml, merge, speaker_model_identity
from ..curate.params import SpeakerParams
from ..curate.speakers import assign_speakers_by_file, purity
from ..diarize.params import DiarizeParams
from ..encoders import make_encoder
from ..errors import UsageError
from ..io.audio import AudioError, read_segment
from ..io.jsonio import read_jsonl
from . import conversations
from .conversations import is_conversation

log = logging.getLogger("speechprep.speakers")
REPO = Path(__file__).resolve().parents[2]
THRESHOLDS = np.round(np.arange(0.02, 1.0001, 0.01), 2)  # the cuts tried
PLATEAU = 0.005  # cuts whose score is within this of the best form its plateau
OUTLIER_QUANTILE = 0.995  # max_distance: calibration segments under it
BATCH = 64  # clips embedded a call


@dataclass
class Sample:
    """The embedded lines of the sample: vector, speaker, file, part (0: calibrate, 1: report)."""

    x: np.ndarray
    speaker: list[str]
    file: list[str]
    part: np.ndarray
    skipped: dict[str, int]


def config_of(configfiles: list[str]) -> dict[str, Any]:
    cfg = defaults(REPO / "config" / "config.yaml")
    for path in configfiles:
        cfg = merge(cfg, load_yaml(path) or {})
    return cfg


def part_of(name: str) -> int:
    """0 or 1, from a hash of a voice's (or source's) name: the same name, the same part."""
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()[0] % 2


def read_sample(manifest: str, split: str) -> tuple[list[dict], list[dict], str]:
    """``(clips, conversations, split)``: the manifest's labelled clips (``speaker``) and
    conversations (``turns``); ``split`` ``auto`` is ``source`` when every line names one."""
    lines = [x for x in read_jsonl(manifest) if isinstance(x, dict)]
    unlabelled = sum(not x.get("audio_filepath") or not (x.get("speaker") or is_conversation(x)) for x in lines)
    if unlabelled:
        raise UsageError(f"{manifest}: {unlabelled} of {len(lines)} lines lack audio_filepath, or speaker or turns")
    if split == "auto":
        split = "source" if lines and all(x.get("source") for x in lines) else "speaker"
    clips = [x for x in lines if not is_conversation(x)]
    return clips, [x for x in lines if is_conversation(x)], split


def conversation_part(line: dict[str, Any], split: str) -> int:
    """A conversation's part: by its source, or by its voices (the same voices, the same part)."""
    voices = sorted({str(t[2]) for t in line["turns"] if len(t) == 3})
    return part_of(str(line.get("source")) if split == "source" else "+".join(voices))


def embed(lines: list[dict], spec: str, split: str, threads: int) -> Sample:
    """Every clip's vector by the model ``spec``; clips that cannot be read or embedded are
    counted in ``skipped`` by reason."""
    encoder = make_encoder(spec, "cpu", threads)
    vecs, keep, skipped = [], [], {}
    for a in range(0, len(lines), BATCH):
        clips, at = [], []
        for i in range(a, min(a + BATCH, len(lines))):
            try:
                clips.append(read_segment(lines[i]))
                at.append(i)
            except AudioError as e:
                skipped[e.reason] = skipped.get(e.reason, 0) + 1
        for i, v in zip(at, encoder(clips), strict=True):
            if isinstance(v, AudioError):
                skipped[v.reason] = skipped.get(v.reason, 0) + 1
            else:
                vecs.append(v)
                keep.append(lines[i])
    if not keep:
        raise UsageError(f"the speaker model embedded none of the sample's {len(lines)} clips ({skipped})")
    group = [str(x.get(split) or x["speaker"]) for x in keep]
    return Sample(
        np.stack(vecs).astype(np.float32),
        [str(x["speaker"]) for x in keep],
        [str(x.get("file_id") or x["audio_filepath"]) for x in keep],
        np.array([part_of(g) for g in group]),
        skipped,
    )


def cluster(s: Sample, idx: np.ndarray, p: SpeakerParams):
    files = [s.file[i] if p.speaker_unit == "file" else str(i) for i in idx]
    x = s.x[idx]
    return assign_speakers_by_file(lambda rows: x[rows], files, x.shape[1], [None] * len(idx), p)


def figures(s: Sample, idx: np.ndarray, p: SpeakerParams, max_distance: float | None = None) -> dict[str, Any]:
    """Purity, inverse purity, speakers found and true, the share of a voice's files under its
    majority id (a voice's mean), and the share beyond ``max_distance``, of the part ``idx``."""
    spk = cluster(s, idx, p)
    truth, got = [s.speaker[i] for i in idx], spk.label.tolist()
    pure, inverse = purity(truth, got)
    whole = []
    for voice in sorted(set(truth)):
        files = {s.file[i]: g for i, g, t in zip(idx, got, truth, strict=True) if t == voice}
        ids = list(files.values())
        whole.append(max(ids.count(g) for g in set(ids)) / len(ids))
    out = {
        "purity": round(pure, 3),
        "inverse_purity": round(inverse, 3),
        "voices": len(set(truth)),
        "speakers_found": len(spk.names),
        "voice_files_under_one_id": round(float(np.mean(whole)), 3),
        "segments": int(len(idx)),
    }
    if max_distance is not None:
        out["outliers"] = round(float(np.mean(spk.distance > max_distance)), 4)
    return out, spk


def choose(s: Sample, idx: np.ndarray, base: SpeakerParams) -> tuple[float, float, list]:
    """The threshold (middle of the best plateau of the harmonic mean of purity and inverse
    purity), the max_distance it gives, and the curve ``[(threshold, purity, inverse purity)]``."""
    curve = []
    for t in THRESHOLDS:
        pure, inverse = purity([s.speaker[i] for i in idx], cluster(s, idx, replace(base, speaker_threshold=t)).label)
        curve.append((float(t), pure, inverse))
    score = np.array([2 * a * b / max(a + b, 1e-9) for _, a, b in curve])
    plateau = [t for (t, _, _), f in zip(curve, score, strict=True) if f >= score.max() - PLATEAU]
    threshold = float(plateau[len(plateau) // 2])
    spk = cluster(s, idx, replace(base, speaker_threshold=threshold))
    max_distance = float(np.ceil(np.quantile(spk.distance, OUTLIER_QUANTILE) * 100) / 100)
    return threshold, max_distance, curve


def scaled_diarize(threshold: float) -> dict[str, float]:
    """Diarization's distances scaled from the shipped (Resemblyzer's) ones by the ratio of the
    thresholds: what the block holds when the sample has no conversations."""
    shipped = defaults(REPO / "config" / "config.yaml")["speakers"]
    ratio = threshold / shipped["threshold"]
    return {k: v if k == "overlap_db_weight" else round(v * ratio, 3) for k, v in shipped["diarize"].items()}


def block(cfg: dict[str, Any], identity: str, threshold: float, max_distance: float, diarize: dict) -> dict[str, Any]:
    """The ``speakers:`` block: the model, its identity, the chosen thresholds and distances."""
    speakers = {"model": cfg["speakers"]["model"], "calibrated_for": identity, "threshold": threshold}
    return {"speakers": {**speakers, "max_distance": max_distance, "diarize": diarize}}


def _clips(cfg: dict[str, Any], clips: list[dict], split: str, threads: int) -> dict[str, Any]:
    """``speakers.threshold`` and ``max_distance`` chosen on the clips' calibration part, the
    figures of both parts (the configured ones, figures None, without clips)."""
    sp = cfg["speakers"]
    if not clips:
        return {"threshold": sp["threshold"], "max_distance": sp["max_distance"], "calibration": None, "report": None}
    s = embed(clips, sp["model"], split, threads)
    parts = [np.flatnonzero(s.part == k) for k in (0, 1)]
    for k, idx in enumerate(parts):
        if len({s.speaker[i] for i in idx}) < 2:
            raise UsageError(f"the sample's {('calibration', 'report')[k]} part has fewer than 2 voices: give more")
    base = SpeakerParams.from_config(cfg)
    threshold, max_distance, curve = choose(s, parts[0], base)
    q = replace(base, speaker_threshold=threshold)
    out = {"threshold": threshold, "max_distance": max_distance, "curve": curve, "skipped": s.skipped}
    cal, rep = (figures(s, idx, q, max_distance)[0] for idx in parts)
    return out | {"calibration": cal, "report": rep}


def _conversations(cfg: dict[str, Any], lines: list[dict], split: str, threshold: float, threads: int):
    """``(speakers.diarize chosen on the conversations' calibration part, its figures, the
    report part's figures, each sweep's best)``; without conversations, the distances scaled."""
    from ..diarize.stage import load_model

    if not lines:
        return scaled_diarize(threshold), None, None, []
    p = replace(DiarizeParams.from_config(cfg, device="cpu"), speaker_threshold=threshold)
    model = load_model("cpu", threads, cfg["speakers"]["model"])
    convs = conversations.load(lines, lambda x: conversation_part(x, split), model, p, cfg["vad"]["min_silence"])
    parts = [[c for c in convs if c.part == k] for k in (0, 1)]
    if not all(parts):
        raise UsageError(f"the sample's conversations fall in one part only ({len(convs)} read): give more")
    chosen, sweeps = conversations.choose(parts[0], p)
    diarize = {k: float(getattr(chosen, k)) for k in scaled_diarize(threshold)}
    reported = conversations.figures(parts[1], chosen) | {"configured": conversations.figures(parts[1], p)}
    return diarize, conversations.figures(parts[0], chosen), reported, sweeps


def run(configfiles: list[str], manifest: str, out: str, split: str = "auto", threads: int = 1) -> dict[str, Any]:
    """Calibrate the configured speaker model on ``manifest``; write the block to ``out``."""
    import yaml

    cfg = config_of(configfiles)
    spec = cfg["speakers"]["model"]
    identity = speaker_model_identity(spec)
    clips, convs, split = read_sample(manifest, split)
    got = _clips(cfg, clips, split, threads)
    diarize, calibrated, reported, sweeps = _conversations(cfg, convs, split, got["threshold"], threads)
    result = {"model": spec, "calibrated_for": identity, **got, "diarize": diarize}
    result |= {"conversations": {"calibration": calibrated, "report": reported, "sweeps": sweeps}}
    header = [
        f"speakers calibrate: {spec} ({identity}), {manifest}",
        f"split by {split} (a hash of the name); linkage {cfg['speakers']['linkage']}",
        f"clips, calibration part: {json.dumps(got['calibration'])}",
        f"clips, report part (not chosen on): {json.dumps(got['report'])}",
    ]
    if calibrated is None:
        header += [
            "speakers.diarize: scaled from Resemblyzer's by the ratio of the thresholds (no conversations with",
            "reference turns in the sample): check them on your conversations (bench/diarize/accuracy.py)",
        ]
    else:
        header += [
            f"speakers.diarize chosen on conversations: {json.dumps(calibrated)}",
            f"conversations, report part (not chosen on; 'configured': the distances it started from): "
            f"{json.dumps(reported)}",
        ]
    text = "".join(f"# {h}\n" for h in header)
    text += yaml.safe_dump(block(cfg, identity, got["threshold"], got["max_distance"], diarize))
    tmp = f"{out}.{os.getpid()}.tmp"
    Path(tmp).write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    print("\n".join(header))
    return result
