"""What the TTS manifests carry besides audio and text, to look at and to listen to.

Read from a dataset's TTS manifests (``tts/train_manifest.jsonl``, ``val``), their
``tts/stats.json`` (the captions' bins and counts) and ``curate/summary.json`` (the
annotations' bin edges):

* ``annotations.png``: a histogram of each annotation (pitch, its spread, monotony,
  reverberation, SNR, speaking rate) with the dataset's bin edges drawn;
* ``annotations.html``: one self-contained page with the plot, the caption counts,
  the most frequent captions, and for the lowest and the highest bin of pitch,
  speaking rate and reverberation a few segments as playable ``<audio>`` next to
  their caption, phonemes and annotations.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..io.jsonio import atomic_open, read_jsonl
from .curation import STYLE, _png_data_uri, audio_html
from .page import fmt, save_png, table_html

# annotation, title, where its bin edges are (summary.json's `annotations.edges`, or stats.json's `captions.edges`)
PLOTTED = (
    ("pitch_mean", "Pitch mean (Hz)", "summary", "pitch_mean"),
    ("pitch_std", "Pitch spread (Hz)", "summary", "pitch_std"),
    ("monotony", "Monotony (semitones about the trend)", "summary", "monotony"),
    ("reverb", "Reverberation (decay s)", "summary", "reverb"),
    ("snr_db", "SNR (dB)", "summary", "snr_db"),
    ("speaking_rate", "Speaking rate", "captions", "speaking_rate"),
)
# the annotations whose extremes the page plays, and the caption word their bins pick
LISTENED = (("pitch_mean", "pitch"), ("speaking_rate", "speaking_rate"), ("reverb", "reverb"))
SHOWN = ("pitch_mean", "pitch_std", "monotony", "reverb", "snr_db", "speaking_rate", "speaker", "gender")
EXAMPLES = 2  # segments played per extreme


def load(res: Path) -> tuple[list[dict], dict[str, Any], dict[str, Any]]:
    """The manifests' lines, ``stats.json`` and ``curate/summary.json`` of one dataset."""
    lines = [x for k in ("train", "val") for x in read_jsonl(res / "tts" / f"{k}_manifest.jsonl")]
    stats = json.loads((res / "tts" / "stats.json").read_text(encoding="utf-8"))
    summary = json.loads((res / "curate" / "summary.json").read_text(encoding="utf-8"))
    return lines, stats, summary


def edges_of(source: str, key: str, stats: dict[str, Any], summary: dict[str, Any]) -> list[float]:
    if source == "summary":
        return (summary.get("annotations") or {}).get("edges", {}).get(key) or []
    return (stats.get("captions") or {}).get("edges", {}).get(key) or []


def plot(lines: list[dict], stats: dict[str, Any], summary: dict[str, Any], out: Path) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(12.6, 5.6), squeeze=False)
    unit = stats.get("speaking_rate_unit", "")
    for ax, (key, title, source, edge_key) in zip(axes.flat, PLOTTED, strict=True):
        v = [float(x[key]) for x in lines if isinstance(x.get(key), (int, float))]
        ax.set_title(f"{title} {unit}" if key == "speaking_rate" else title, fontsize=9)
        ax.tick_params(labelsize=7)
        if not v:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
            continue
        ax.hist(v, bins=30, color="#4477aa")
        for e in edges_of(source, edge_key, stats, summary):
            ax.axvline(e, color="#cc6677", ls="--", lw=1)
    fig.suptitle(f"Annotations of {len(lines)} segments, with the captions' bin edges", fontsize=10)
    fig.tight_layout()
    save_png(fig, out)


def _example_html(x: dict) -> str:
    facts = [("id", x["id"]), ("caption", x.get("description")), ("text", x.get("text"))]
    facts += [("phonemes", x.get("phonemes")), *((k, x.get(k)) for k in SHOWN)]
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(fmt(v))}</td></tr>" for k, v in facts if v)
    return f'<div class="example">{audio_html(x)}<table class="measures">{rows}</table></div>'


def listen(lines: list[dict]) -> list[str]:
    """For each of :data:`LISTENED`, the lowest and the highest segments' examples."""
    parts = []
    for key, word in LISTENED:
        measured = sorted((x for x in lines if isinstance(x.get(key), (int, float))), key=lambda x: (x[key], x["id"]))
        if not measured:
            continue
        for end, members in (("lowest", measured[:EXAMPLES]), ("highest", measured[-EXAMPLES:][::-1])):
            parts.append(f"<h3 id='{key}-{end}'>{html.escape(word)}: the {end} {html.escape(key)}</h3>")
            parts += [_example_html(x) for x in members]
    return parts


def page(ds: str, lines: list[dict], stats: dict[str, Any], image: Path) -> str:
    captions = stats.get("captions") or {}
    counts = [{"count": k, "segments": v} for k, v in (captions.get("counts") or {}).items()]
    common = Counter(x["description"] for x in lines if x.get("description")).most_common(10)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Annotations: {html.escape(ds)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Annotations and captions of {html.escape(ds)}</h1>",
        f"<p>{len(lines)} segments in the TTS manifests; speaking rate in "
        f"{html.escape(stats.get('speaking_rate_unit', ''))}; {captions.get('bins', 0)} bins per measure.</p>",
        "<h2>Captions</h2>",
        table_html(counts, ["count", "segments"], "captions"),
        table_html([{"caption": c, "segments": n} for c, n in common], ["caption", "segments"], "common"),
        f"<h2>Distributions</h2><img alt='annotations' src='{_png_data_uri(image)}'>",
        "<h2>Listen</h2>",
        *listen(lines),
        "</body></html>",
    ]
    return "\n".join(parts)


def make(res: str | Path, out_dir: str | Path) -> list[Path]:
    """Write annotations.png and annotations.html of one dataset."""
    import matplotlib

    matplotlib.use("Agg")
    res, out = Path(res), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines, stats, summary = load(res)
    image = out / "annotations.png"
    plot(lines, stats, summary, image)
    page_path = out / "annotations.html"
    with atomic_open(page_path) as f:
        f.write(page(res.name, lines, stats, image))
    return [image, page_path]
