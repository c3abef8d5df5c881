"""Curation's thresholds, chosen on a lab's labelled sample (``python -m speechprep curate
calibrate``; docs/stages/music.md, "Thresholds on your own sample").

Each manifest line names a clip (``audio_filepath``, optional ``offset``/``duration``) and
its ``label``: ``keep``, or the drop reason a person gave it: ``background_music``,
``low_snr`` (or ``noise``, the same drop), ``low_quality``; other labels count as "dropped"
in the figures but choose nothing. Every clip is measured as the run measures it: DNSMOS
(``dnsmos_ovrl``), ``snr_db`` against the non-speech its file's other lines leave, and the
music detector's ``music_prob`` (the ``music`` section's detector) with the same non-speech.

The sample is split in two by a hash of each line's ``source`` (or ``speaker``, or the file:
``--split``), never by clip. On the calibration part each threshold is the one that best
parts its label's clips from the ``keep`` clips (the most of the label's dropped less the
share of ``keep`` dropped; the middle of the best values): ``max_music_prob``,
``min_snr_db``, ``min_dnsmos_ovrl``; a reason with no labelled clip there keeps the
configured value, and the block says so. The tier edges are the ``keep`` clips'
DNSMOS OVRL thirds (``tier_standard`` the lower, ``tier_premium`` the upper). On the report
part, the chosen checks are run in curation's order (:data:`~.decide.ORDER`) and the
figures printed: each drop's precision (the share of what it drops that carries its label)
and recall (the share of its label's clips it drops), the share of ``keep`` kept, overall and
per source. The block (a ``curate:`` section) is written atomically to ``--out``, the
figures in its comments; a further ``--configfile`` reads it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.config import defaults, load_yaml, merge
from ..errors import UsageError
from ..io.audio import SAMPLE_RATE, AudioError, read_segment
from ..io.jsonio import read_jsonl
from . import measures as M
from .decide import ORDER, failures
from .nonspeech import NonSpeech
from .params import DecideParams

log = logging.getLogger("speechprep.curate")
REPO = Path(__file__).resolve().parents[2]
# label -> (the reason it is, the measure, the threshold key, "below" or "above" drops)
CHECKS = {
    "background_music": ("background_music", "music_prob", "max_music_prob", "above"),
    "low_snr": ("low_snr", "snr_db", "min_snr_db", "below"),
    "low_quality": ("low_quality", "dnsmos_ovrl", "min_dnsmos_ovrl", "below"),
}
ALIASES = {"noise": "low_snr"}  # what a person calls it -> the reason code that drops it
PLATEAU = 1e-9
ROUND = {"music_prob": 0.01, "snr_db": 0.5, "dnsmos_ovrl": 0.05}


def config_of(configfiles: list[str]) -> dict[str, Any]:
    cfg = defaults(REPO / "config" / "config.yaml")
    for path in configfiles:
        cfg = merge(cfg, load_yaml(path) or {})
    return cfg


def part_of(name: str) -> int:
    """0 (calibration) or 1 (report), from a hash of the name: the same name, the same part."""
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()[0] % 2


def reason_of(label: str) -> str:
    return ALIASES.get(label, label)


def read_sample(manifest: str, split: str) -> tuple[list[dict], str]:
    """The manifest's labelled lines, each with ``group`` (what the split hashes);
    ``split`` ``auto``: ``source`` when every line names one, else ``speaker`` when every
    line names one, else ``file``."""
    lines = [x for x in read_jsonl(manifest) if isinstance(x, dict)]
    bad = [i for i, x in enumerate(lines) if not x.get("audio_filepath") or not isinstance(x.get("label"), str)]
    if bad:
        raise UsageError(
            f"{manifest}: {len(bad)} of {len(lines)} lines lack audio_filepath or label (first: line {bad[0] + 1})"
        )
    if not lines:
        raise UsageError(f"{manifest}: no lines")
    if split == "auto":
        split = next((k for k in ("source", "speaker") if all(x.get(k) for x in lines)), "file")
    for x in lines:
        x["group"] = str(x["audio_filepath"] if split == "file" else x.get(split) or x["audio_filepath"])
    return lines, split


def measure(lines: list[dict], cfg: dict[str, Any], threads: int) -> tuple[list[dict], dict[str, int]]:
    """``dnsmos_ovrl``, ``snr_db`` and ``music_prob`` of every line that decodes; the rest
    counted by reason."""
    from ..encoders import music as detect
    from .dnsmos import Dnsmos

    c = cfg["curate"]
    detector = detect.load(cfg.get("music") or {})
    scorer = Dnsmos(c["dnsmos_personalized"], threads)
    # a line's non-speech: what the file's other labelled lines leave (none for whole files)
    spans = [{**x, "offset": x.get("offset") or 0.0} for x in lines if x.get("duration") is not None]
    non_speech = NonSpeech(spans, c["snr_noise_seconds"])
    out, skipped = [], {}
    for x in lines:
        try:
            audio = read_segment(x, SAMPLE_RATE, c["min_duration"], "curate.min_duration")
        except AudioError as e:
            skipped[e.reason] = skipped.get(e.reason, 0) + 1
            continue
        noise = non_speech.read({**x, "offset": x.get("offset") or 0.0}) if x.get("duration") is not None else []
        a = detector.assess(audio, SAMPLE_RATE, noise)
        out.append(
            {
                **x,
                "audio": audio,
                "snr_db": M.snr_db(audio, noise, SAMPLE_RATE, tuple(c["snr_band_hz"])),
                "music_prob": None if a is None else a.music_prob,
            }
        )
    if not out:
        raise UsageError(f"none of the sample's {len(lines)} clips could be read ({skipped})")
    for k in range(0, len(out), 32):
        for x, s in zip(out[k : k + 32], scorer([x["audio"] for x in out[k : k + 32]]), strict=True):
            x["dnsmos_ovrl"] = s["ovrl"]
    for x in out:
        del x["audio"]
    return out, skipped


def _drops(v: float | None, t: float, how: str) -> bool:
    return v is not None and (v > t if how == "above" else v < t)


def choose(rows: list[dict], label: str) -> tuple[float | None, dict[str, Any]]:
    """The threshold of ``label``'s check that best parts its clips from the ``keep`` clips
    of ``rows``: the most of them dropped less the share of ``keep`` dropped (the middle of
    the best), rounded; None without clips of both."""
    _, key, _, how = CHECKS[label]
    pos = [x[key] for x in rows if reason_of(x["label"]) == label and x.get(key) is not None]
    neg = [x[key] for x in rows if x["label"] == "keep" and x.get(key) is not None]
    if not pos or not neg:
        return None, {"clips": len(pos), "keep": len(neg)}
    values = np.unique(np.round(np.array(pos + neg, dtype=float) / ROUND[key]) * ROUND[key])
    grid = np.concatenate([values - ROUND[key] / 2, values + ROUND[key] / 2])
    grid = np.unique(np.round(grid / (ROUND[key] / 2)) * (ROUND[key] / 2))
    score = np.array(
        [np.mean([_drops(v, t, how) for v in pos]) - np.mean([_drops(v, t, how) for v in neg]) for t in grid]
    )
    best = grid[score >= score.max() - PLATEAU]
    t = float(best[len(best) // 2])
    return round(t, 3), {"clips": len(pos), "keep": len(neg), "separation": round(float(score.max()), 3)}


def tiers(rows: list[dict]) -> tuple[float, float] | None:
    """``(tier_standard, tier_premium)``: the thirds of the ``keep`` clips' DNSMOS OVRL."""
    ovrl = [x["dnsmos_ovrl"] for x in rows if x["label"] == "keep" and x.get("dnsmos_ovrl") is not None]
    if len(ovrl) < 3:
        return None
    lo, hi = np.quantile(ovrl, [1 / 3, 2 / 3])
    return round(float(lo), 2), round(float(hi), 2)


def predict(rows: list[dict], p: DecideParams) -> list[str]:
    """Each clip's first failing calibrated check in curation's order, or ``keep``."""
    out = []
    for x in rows:
        m = {k: x.get(k) for k in ("music_prob", "snr_db", "dnsmos_ovrl")}
        failed = [r for r, _ in failures(m, None, None, p) if r in {c[0] for c in CHECKS.values()}]
        out.append(failed[0] if failed else "keep")
    return out


def figures(rows: list[dict], got: list[str]) -> dict[str, Any]:
    """Precision and recall of each drop, the share of ``keep`` kept, and of the clips
    labelled as dropped the share dropped (by any reason)."""
    labels = [reason_of(x["label"]) for x in rows]
    out: dict[str, Any] = {"clips": len(rows)}
    keep = [g for lab, g in zip(labels, got, strict=True) if lab == "keep"]
    out["keep_kept"] = round(keep.count("keep") / len(keep), 3) if keep else None
    dropped = [g for lab, g in zip(labels, got, strict=True) if lab != "keep"]
    out["drop_dropped"] = round(sum(g != "keep" for g in dropped) / len(dropped), 3) if dropped else None
    for reason in (r for r in ORDER if r in {c[0] for c in CHECKS.values()}):
        said = [lab for lab, g in zip(labels, got, strict=True) if g == reason]
        truth = [g for lab, g in zip(labels, got, strict=True) if lab == reason]
        if not said and not truth:
            continue
        out[reason] = {
            "dropped": len(said),
            "labelled": len(truth),
            "precision": round(said.count(reason) / len(said), 3) if said else None,
            "recall": round(truth.count(reason) / len(truth), 3) if truth else None,
        }
    return out


def choose_all(part: list[dict], base: DecideParams) -> tuple[dict, dict, tuple | None]:
    """Each drop's threshold (the configured one where the part cannot choose it) and the tier
    edges, chosen on ``part``: ``(chosen, notes, edges)``."""
    chosen, notes = {}, {}
    for label, (_, _, key, _) in CHECKS.items():
        t, facts = choose(part, label)
        notes[key] = facts
        chosen[key] = t if t is not None else getattr(base, key)
        if t is None:
            notes[key]["kept_configured"] = True
    edges = tiers(part)
    if edges:
        chosen["tier_standard"], chosen["tier_premium"] = edges
    return chosen, notes, edges


def run(configfiles: list[str], manifest: str, out: str, split: str = "auto", threads: int = 1) -> dict[str, Any]:
    """Choose curation's thresholds on one part of ``manifest``, report them on the other,
    write the ``curate:`` block to ``out``."""
    import yaml

    cfg = config_of(configfiles)
    lines, split = read_sample(manifest, split)
    rows, skipped = measure(lines, cfg, threads)
    parts = [[x for x in rows if part_of(x["group"]) == k] for k in (0, 1)]
    for k, part in enumerate(parts):
        if not part or not any(x["label"] == "keep" for x in part):
            which = ("calibration", "report")[k]
            raise UsageError(f"the sample's {which} part (split by {split}) has no clip labelled keep: give more")
    base = DecideParams.from_config(cfg)
    chosen, notes, edges = choose_all(parts[0], base)
    p = replace(base, **chosen)
    configured = figures(parts[1], predict(parts[1], base))
    report = figures(parts[1], predict(parts[1], p))
    by_source = {}
    for g in sorted({x["group"] for x in parts[1]}):
        r = [x for x in parts[1] if x["group"] == g]
        by_source[g] = figures(r, predict(r, p))
    calibration = figures(parts[0], predict(parts[0], p))
    block = {"curate": {k: chosen[k] for k in (*[c[2] for c in CHECKS.values()], "tier_standard", "tier_premium")}}
    groups = [sorted({x["group"] for x in part}) for part in parts]
    header = [
        f"curate calibrate: {manifest}, split by {split} (a hash of the name), music detector "
        f"{(cfg.get('music') or {}).get('detector', 'signal')}",
        f"calibration part ({len(parts[0])} clips; {', '.join(groups[0])}): {json.dumps(calibration)}",
        f"chosen on it: {json.dumps(notes)}",
        f"report part, not chosen on ({len(parts[1])} clips; {', '.join(groups[1])}): {json.dumps(report)}",
        f"report part with the thresholds given before: {json.dumps(configured)}",
        *[f"report part, {g}: {json.dumps(f)}" for g, f in by_source.items()],
    ]
    if skipped:
        header.append(f"clips not read: {json.dumps(skipped)}")
    if not edges:
        header.append("tier edges: fewer than 3 keep clips in the calibration part, the configured ones kept")
    text = "".join(f"# {h}\n" for h in header) + yaml.safe_dump(block, sort_keys=False)
    tmp = f"{out}.{os.getpid()}.tmp"
    Path(tmp).write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    print("\n".join(header))
    return {
        "split": split,
        "chosen": chosen,
        "notes": notes,
        "calibration": calibration,
        "report": report,
        "configured": configured,
        "by_source": by_source,
        "groups": groups,
        "skipped": skipped,
    }
