"""Hours kept as a function of the WER threshold, for a dataset whose text was verified.

``text: verify`` lines carry ``wer`` (the given text against the ASR model's,
:mod:`speechprep.asr.compare`); curation drops ``transcript_mismatch`` above
``curate.max_wer`` (and ``max_cer``, ``max_edge_chars``). What a stricter or a
looser ``max_wer`` would keep is read from curation's own outputs: a segment
counts at threshold ``t`` when it fails no other check (its ``failed`` list
without ``transcript_mismatch`` is empty), its CER and edge characters are
within their thresholds, and its WER is at most ``t``. Segments without
``wer`` (not verified) that were kept count at every threshold.
"""

from __future__ import annotations

from typing import Any

from .page import table_html

GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0)
EDGES = ("edge_start_inserted", "edge_start_deleted", "edge_end_inserted", "edge_end_deleted")
KIND = "kept_at_max_wer"


def _hours(r: dict) -> float:
    return float(r.get("duration") or 0.0) / 3600


def _within(v: float | None, limit: float | None) -> bool:
    return v is None or limit is None or v <= limit


def _candidate(r: dict, thresholds: dict[str, Any]) -> bool:
    """Whether a verified segment would be kept at some WER threshold: it fails no other check."""
    others = set(r.get("failed") or ([r["reason"]] if "reason" in r else [])) - {"transcript_mismatch"}
    edge = max((r.get(k) or 0 for k in EDGES), default=0)
    return (
        not others
        and _within(r.get("cer"), thresholds.get("max_cer"))
        and _within(edge, thresholds.get("max_edge_chars"))
    )


def kept_by_wer(kept: list[dict], dropped: list[dict], thresholds: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per threshold of :data:`GRID` and ``off`` (no WER check): the segments and hours
    kept; empty when no segment was verified."""
    verified = [r for r in kept + dropped if isinstance(r.get("wer"), (int, float))]
    if not verified:
        return []
    base = [r for r in kept if not isinstance(r.get("wer"), (int, float))]
    pool = [r for r in verified if _candidate(r, thresholds)]
    total = sum(_hours(r) for r in kept + dropped)
    rows = []
    for t in (*GRID, None):
        n = [r for r in pool if t is None or r["wer"] <= t]
        hours = sum(_hours(r) for r in base + n)
        rows.append({
            "kind": KIND,
            "name": "off" if t is None else f"{t:g}",
            "segments": len(base) + len(n),
            "hours": hours,
            "share_of_hours": hours / total if total else 0.0,
        })  # fmt: skip
    return rows


def plot_kept_by_wer(rows: list[dict], max_wer: float | None) -> bytes:
    """Hours kept against the WER threshold, the configured one marked: a PNG."""
    import io

    import matplotlib.pyplot as plt

    grid = [r for r in rows if r["name"] != "off"]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([float(r["name"]) for r in grid], [r["hours"] for r in grid], marker="o", color="#4477aa")
    off = next((r for r in rows if r["name"] == "off"), None)
    if off is not None:
        ax.axhline(off["hours"], color="#999999", ls=":", lw=1, label="no WER check")
    if max_wer is not None:
        ax.axvline(max_wer, color="#cc6677", ls="--", lw=1.2, label=f"curate.max_wer {max_wer:g}")
    ax.set_xlabel("max_wer (given text against the ASR model's)")
    ax.set_ylabel("hours kept")
    ax.set_title("Hours kept by WER threshold (the other checks as configured)", fontsize=10)
    ax.legend(fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def section(rows: list[dict], thresholds: dict[str, Any]) -> str:
    """The curation page's section on the WER threshold ("" when nothing was verified)."""
    import base64
    import html

    if not rows:
        return ""
    png = base64.b64encode(plot_kept_by_wer(rows, thresholds.get("max_wer"))).decode("ascii")
    return "\n".join([
        "<h2>Hours kept by WER threshold</h2>",
        "<p>Verified segments (<i>text: verify</i>): what each <i>curate.max_wer</i> would keep, every other "
        f"check as configured (max_cer {html.escape(str(thresholds.get('max_cer')))}, max_edge_chars "
        f"{html.escape(str(thresholds.get('max_edge_chars')))}).</p>",
        f"<img alt='kept by WER' src='data:image/png;base64,{png}'>",
        table_html(rows, ["name", "segments", "hours", "share_of_hours"], "wer"),
    ])  # fmt: skip
