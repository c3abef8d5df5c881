"""What curation kept and dropped, for `snakemake --report` and for listening.

Read from the curation outputs only (``curate/<shard>.jsonl``, its rejects,
``curate/speakers.jsonl``) and the decide job's thresholds:

* ``curation.csv``: segments and hours per tier (kept) and per drop reason,
  with what each check costs: the hours failing it at all, and the hours
  failing only it (what turning that check off would give back);
* ``curation_metrics.png``: a histogram of every measure, kept and dropped
  stacked, with the thresholds (and the DNSMOS tier edges) drawn;
* ``speakers_by_hours.png``: kept hours per speaker;
* rows of kind ``diarize`` and ``diarization_turns.png`` where the diarization ran
  (:mod:`.diarization`): hours cut, dropped, flagged; the turns of the files it
  changed most;
* ``curation.html``: one self-contained page (no external file: images and
  audio are embedded) with the tables, the plots, the speakers, and for each
  tier and each drop reason a few segments as playable ``<audio>`` with their
  measures, picked evenly along the measure that decided them (worst to
  borderline). The audio is the segment as curation measured it: 16 kHz mono,
  FLAC.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ..io.jsonio import atomic_open, read_jsonl
from . import diarization, wer
from .page import fmt, save_png, table_html

EXAMPLES = 3  # segments played per tier and per drop reason
TIERS = ("premium", "standard", "basic")
# measure, title, thresholds drawn: (decide param, label)
METRICS = (
    (
        "dnsmos_ovrl",
        "DNSMOS OVRL",
        (("min_dnsmos_ovrl", "low_quality"), ("tier_standard", "standard"), ("tier_premium", "premium")),
    ),
    ("dnsmos_sig", "DNSMOS SIG", ()),
    ("dnsmos_bak", "DNSMOS BAK", ()),
    ("dnsmos_p808", "DNSMOS P.808", ()),
    ("snr_db", "SNR in the speech band (dB)", (("min_snr_db", "low_snr"),)),
    ("lufs", "Loudness (LUFS)", ()),
    ("peak_dbfs", "Peak (dBFS)", ()),
    ("clipping_ratio", "Clipping ratio", (("max_clipping_ratio", "clipped"),)),
    ("bandwidth_hz", "Effective bandwidth (Hz)", (("min_bandwidth_hz", "narrowband"),)),
    ("chars_per_s", "Characters per second", (("min_chars_per_s", "min"), ("max_chars_per_s", "max"))),
    ("text_unit_ratio", "Characters per S2S unit", (("min_text_unit_ratio", "min"), ("max_text_unit_ratio", "max"))),
    ("confidence", "ASR confidence", (("min_confidence", "low_confidence"),)),
    ("wer", "WER, given text against ASR", (("max_wer", "transcript_mismatch"),)),
    ("cer", "CER, given text against ASR", (("max_cer", "transcript_mismatch"),)),
    ("speaker_distance", "Distance to speaker centroid", (("max_speaker_distance", "speaker_outlier"),)),
    (
        "declared_language_prob",
        "Probability of the declared language",
        (("min_declared_language_prob", "wrong_language"),),
    ),
    ("repeated_ngram_share", "Repeated word 3-grams", (("max_repeated_ngram_share", "repetitive_text"),)),
)
# the measure that orders a group's examples; a reason not here is ordered by id hash
ORDER_BY = {
    "clipped": "clipping_ratio",
    "narrowband": "bandwidth_hz",
    "low_snr": "snr_db",
    "low_quality": "dnsmos_ovrl",
    "speaking_rate": "chars_per_s",
    "low_confidence": "confidence",
    "duplicate": "duplicate_similarity",
    "speaker_outlier": "speaker_distance",
    "transcript_mismatch": "wer",
    "wrong_language": "declared_language_prob",
    "repetitive_text": "repeated_ngram_share",
    **{t: "dnsmos_ovrl" for t in TIERS},
}
SHOWN = (
    "dnsmos_ovrl",
    "dnsmos_sig",
    "dnsmos_bak",
    "snr_db",
    "lufs",
    "clipping_ratio",
    "bandwidth_hz",
    "chars_per_s",
    "speaker",
    "speaker_distance",
    "confidence",
    "text_source",
    "asr_text",
    "wer",
    "cer",
    "align_score",
)


def load(res: Path) -> tuple[list[dict], list[dict], list[dict]]:
    """Kept lines, rejects lines and speakers of one dataset's curation."""
    cur = res / "curate"
    kept = [r for p in sorted(cur.glob("shard-*[0-9].jsonl")) for r in read_jsonl(p)]
    dropped = [r for p in sorted(cur.glob("shard-*[0-9].rejects.jsonl")) for r in read_jsonl(p)]
    speakers_file = cur / "speakers.jsonl"
    speakers = list(read_jsonl(speakers_file)) if speakers_file.exists() else []
    return kept, dropped, speakers


def _hours(rows: list[dict]) -> float:
    return sum(float(r.get("duration") or 0.0) for r in rows) / 3600


def table(kept: list[dict], dropped: list[dict]) -> list[dict[str, Any]]:
    """One row per tier and per drop reason (tiers first, then reasons by hours).

    ``hours_failing``: hours of every segment failing that check (a segment can fail
    several; it is dropped with the first); ``hours_only``: hours of the segments
    failing that check alone."""
    total = _hours(kept) + _hours(dropped)
    rows = []
    by_tier = defaultdict(list)
    for r in kept:
        by_tier[r.get("tier", "basic")].append(r)
    for t in TIERS:
        rows.append({"kind": "kept", "name": t, "segments": len(by_tier[t]), "hours": _hours(by_tier[t])})
    by_reason, failing, only = defaultdict(list), defaultdict(list), defaultdict(list)
    for r in dropped:
        by_reason[r["reason"]].append(r)
        failed = r.get("failed") or [r["reason"]]
        for f in failed:
            failing[f].append(r)
        if len(failed) == 1:
            only[failed[0]].append(r)
    for reason in sorted(by_reason, key=lambda k: (-_hours(by_reason[k]), k)):
        rows.append(
            {
                "kind": "dropped",
                "name": reason,
                "segments": len(by_reason[reason]),
                "hours": _hours(by_reason[reason]),
                "hours_failing": _hours(failing[reason]),
                "hours_only": _hours(only[reason]),
            }
        )
    for r in rows:
        r["share_of_hours"] = r["hours"] / total if total else 0.0
    return rows


def examples(rows: list[dict], key: str | None, n: int = EXAMPLES) -> list[dict]:
    """``n`` rows picked evenly along ``key`` (lowest to highest), or by id hash when
    the rows lack it."""
    with_key = [r for r in rows if key and isinstance(r.get(key), (int, float))]
    if len(with_key) == len(rows) and rows:
        ordered = sorted(rows, key=lambda r: (r[key], r["id"]))
    else:
        ordered = sorted(rows, key=lambda r: hashlib.sha1(r["id"].encode("utf-8")).hexdigest())
    if len(ordered) <= n:
        return ordered
    return [ordered[int(round(i))] for i in np.linspace(0, len(ordered) - 1, n)]


def flac_data_uri(seg: dict) -> str:
    """The segment as curation read it (16 kHz mono), as a FLAC ``data:`` URI."""
    import soundfile as sf

    from ..io.audio import SAMPLE_RATE, read_segment

    buf = io.BytesIO()
    sf.write(buf, read_segment(seg), SAMPLE_RATE, format="FLAC", subtype="PCM_16")
    return "data:audio/flac;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def plot_metrics(kept: list[dict], dropped: list[dict], thresholds: dict[str, Any], out: Path) -> list[str]:
    """The histograms; returns the measures drawn."""
    import matplotlib.pyplot as plt

    drawn = [m for m in METRICS if any(isinstance(r.get(m[0]), (int, float)) for r in kept + dropped)]
    cols = 3
    nrows = max(1, -(-len(drawn) // cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 2.8 * nrows), squeeze=False)
    for ax in axes.flat[len(drawn) :]:
        ax.axis("off")
    for ax, (key, title, lines) in zip(axes.flat, drawn):
        k = [float(r[key]) for r in kept if isinstance(r.get(key), (int, float))]
        d = [float(r[key]) for r in dropped if isinstance(r.get(key), (int, float))]
        lo, hi = min(k + d), max(k + d)
        bins = np.linspace(lo, hi if hi > lo else lo + 1.0, 31)
        ax.hist([k, d], bins=bins, stacked=True, color=["#4477aa", "#cc6677"], label=["kept", "dropped"])
        for i, (param, label) in enumerate(lines):
            v = thresholds.get(param)
            if v is None:
                continue
            ax.axvline(v, color=("#000000", "#228833", "#aa3377")[i % 3], ls="--", lw=1.2)
            ax.text(v, ax.get_ylim()[1] * 0.95, f" {label} {v:g}", fontsize=7, va="top")
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"Curation measures: {len(kept)} kept, {len(dropped)} dropped segments", fontsize=10)
    fig.tight_layout()
    save_png(fig, out)
    return [m[0] for m in drawn]


def plot_speakers(speakers: list[dict], out: Path, top: int = 30) -> None:
    import matplotlib.pyplot as plt

    ranked = sorted(speakers, key=lambda s: (-float(s.get("hours") or 0.0), s["speaker"]))
    shown = ranked[:top][::-1]
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.28 * max(1, len(shown))))
    ax.barh([s["speaker"] for s in shown] or ["(none)"], [float(s["hours"]) for s in shown] or [0], color="#228833")
    more = f", the {top} with most hours shown" if len(ranked) > top else ""
    ax.set_title(f"Kept hours per speaker ({len(ranked)} speakers{more})", fontsize=10)
    ax.set_xlabel("hours")
    ax.tick_params(labelsize=7)
    save_png(fig, out)


def audio_html(r: dict) -> str:
    """The segment as a playable ``<audio>`` (``data-duration``: its length in s), or why not."""
    from ..io.audio import AudioError

    try:
        return (
            f'<audio controls preload="metadata" data-duration="{float(r.get("duration") or 0):.3f}">'
            f'<source src="{flac_data_uri(r)}" type="audio/flac"></audio>'
        )
    except (AudioError, OSError) as e:  # the page is still written when a source file has moved
        return f'<p class="missing">audio unavailable: {html.escape(str(e))}</p>'


def _example_html(r: dict) -> str:
    audio = audio_html(r)
    src = Path(str(r.get("audio_filepath", ""))).name
    span = f"{float(r.get('offset') or 0):.2f} s + {float(r.get('duration') or 0):.2f} s"
    facts = [("id", r["id"]), ("source", f"{src} @ {span}"), ("text", r.get("text"))]
    if "reason" in r:
        facts += [("detail", r.get("detail")), ("failed", ", ".join(r.get("failed") or []))]
    if r.get("duplicate_of"):
        facts.append(("duplicate of", f"{r['duplicate_of']} ({r.get('duplicate_kind')})"))
    facts += [(k, r.get(k)) for k in SHOWN if r.get(k) is not None]
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(fmt(v))}</td></tr>" for k, v in facts)
    return f'<div class="example">{audio}<table class="measures">{rows}</table></div>'


STYLE = """
body{font-family:sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:left}
.example{display:inline-block;vertical-align:top;margin:0 1em 1em 0;max-width:30em}
.example audio{width:100%}
.missing{color:#a00}
img{max-width:100%}
"""


def page(
    ds: str,
    rows: list[dict],
    kept: list[dict],
    dropped: list[dict],
    speakers: list[dict],
    thresholds: dict[str, Any],
    images: dict[str, Path],
    extra: str = "",
) -> str:
    """The self-contained curation page (``extra``: a section after the summary table)."""
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Curation: {html.escape(ds)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Curation of {html.escape(ds)}</h1>",
        f"<p>{len(kept)} segments kept ({_hours(kept):.3f} h), {len(dropped)} dropped ({_hours(dropped):.3f} h).</p>",
        "<h2>Kept per tier, dropped per reason</h2>",
        "<p><i>hours_failing</i>: hours of all segments failing that check (a segment failing several is "
        "dropped with the first); <i>hours_only</i>: failing only that check, what turning it off gives back. "
        "Rows of kind <i>diarize</i>: VAD segments cut at speaker changes, dropped <i>multi_speaker</i>, "
        "flagged <i>overlap</i>, and slivers under vad.min_speech a cut left (share: of the diarized speech).</p>",
        table_html(
            rows,
            ["kind", "name", "segments", "hours", "share_of_hours", "hours_failing", "hours_only"],
            "summary",
        ),
        extra,
        "<h2>Thresholds</h2>",
        table_html(
            [{"setting": k, "value": v} for k, v in sorted(thresholds.items())],
            ["setting", "value"],
            "thresholds",
        ),
    ]
    for title, key in (("Measures", "metrics"), ("Speakers", "speakers"), ("Speaker turns (diarization)", "turns")):
        if key in images:
            parts.append(f"<h2>{title}</h2><img alt='{key}' src='{_png_data_uri(images[key])}'>")
    if speakers:
        ranked = sorted(speakers, key=lambda s: (-float(s.get("hours") or 0.0), s["speaker"]))
        parts.append(table_html(ranked[:50], ["speaker", "source", "n_segments", "hours"], "speakers"))
    parts.append("<h2>Listen</h2>")
    groups = [(t, [r for r in kept if r.get("tier") == t], "kept") for t in TIERS]
    reasons = sorted({r["reason"] for r in dropped})
    groups += [(reason, [r for r in dropped if r["reason"] == reason], "dropped") for reason in reasons]
    for name, members, kind in groups:
        if not members:
            continue
        order = ORDER_BY.get(name)
        parts.append(
            f"<h3 id='{kind}-{html.escape(name)}'>{kind}: {html.escape(name)} "
            f"({len(members)} segments{f', ordered by {order}' if order else ''})</h3>"
        )
        parts += [_example_html(r) for r in examples(members, order)]
    parts.append("</body></html>")
    return "\n".join(parts)


def make(res: str | Path, thresholds: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write curation.csv, curation_metrics.png, speakers_by_hours.png, diarization_turns.png and
    curation.html."""
    import matplotlib

    matplotlib.use("Agg")
    res, out = Path(res), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kept, dropped, speakers = load(res)
    rows = table(kept, dropped)
    diar = diarization.load(res)  # rows of kind `diarize`: hours cut, dropped, flagged
    rows += diarization.rows(diar) if diar else []
    by_wer = wer.kept_by_wer(kept, dropped, thresholds)
    csv_path = out / "curation.csv"
    fields = ["kind", "name", "segments", "hours", "share_of_hours", "hours_failing", "hours_only"]
    with atomic_open(csv_path) as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()} for r in rows + by_wer)
    images = {"metrics": out / "curation_metrics.png", "speakers": out / "speakers_by_hours.png"}
    images["turns"] = out / "diarization_turns.png"
    plot_metrics(kept, dropped, thresholds, images["metrics"])
    plot_speakers(speakers, images["speakers"])
    diarization.plot_turns(diar, images["turns"])
    page_path = out / "curation.html"
    with atomic_open(page_path) as f:
        f.write(page(res.name, rows, kept, dropped, speakers, thresholds, images, wer.section(by_wer, thresholds)))
    return [csv_path, *images.values(), page_path]
