"""What the diarization did to a dataset, for the curation report.

Read from the diarization's outputs only (``diarize/<shard>.stats.jsonl``,
``.rejects.jsonl``, ``.rttm``):

* rows for ``curation.csv`` and the page: the hours of VAD segments cut at
  speaker changes, dropped ``multi_speaker``, flagged ``overlap`` (curation drops
  them for TTS) and the slivers under ``vad.min_speech`` a cut left;
* ``diarization_turns.png``: for the files the step changed most, each file's
  turns on a timeline, one row per speaker (the run's ids, as in the RTTM),
  overlaps hatched (two voices over the same stretch), ``multi_speaker``
  segments grey.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..io.jsonio import read_jsonl
from .page import save_png

FILES_SHOWN = 4  # files on the timeline figure: those with the most seconds cut, dropped or flagged
COLORS = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb", "#000000")
ROWS = (  # (name, stats count, stats seconds, what it is)
    ("cut", "cut", "cut_s", "VAD segments cut at speaker changes (their whole length)"),
    ("multi_speaker", "multi_speaker", "multi_speaker_s", "dropped: a change that could not be cut cleanly"),
    ("overlap", "overlap", "overlap_s", "flagged: two voices at once (ASR keeps them, curation drops them)"),
    ("trimmed", None, "trimmed_s", "dropped: pieces of a cut segment under vad.min_speech"),
)


def read_rttm(path: Path) -> list[tuple[str, float, float, str]]:
    """``(file id, start, end, speaker)`` of an RTTM file's ``SPEAKER`` lines (fields percent-decoded)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            x = line.split()
            if len(x) >= 8 and x[0] == "SPEAKER":
                s = float(x[3])
                out.append((unquote(x[1]), s, s + float(x[4]), unquote(x[7])))
    return out


def load(res: Path) -> dict[str, Any] | None:
    """The dataset's diarization (per-file stats, rejects, turns), or None when it did not run."""
    d = res / "diarize"
    stats = [r for p in sorted(d.glob("shard-*[0-9].stats.jsonl")) for r in read_jsonl(p)]
    if not stats:
        return None
    rejects = [r for p in sorted(d.glob("shard-*[0-9].rejects.jsonl")) for r in read_jsonl(p)]
    turns = [t for p in sorted(d.glob("shard-*[0-9].rttm")) for t in read_rttm(p)]
    return {"stats": stats, "rejects": rejects, "turns": turns}


def rows(diar: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per thing the step did, ``kind`` ``diarize``: segments, hours, and the share of the
    diarized speech's hours."""
    stats = diar["stats"]
    speech = sum(float(s.get("speech_s") or 0.0) for s in stats)
    out = []
    for name, count, seconds, _ in ROWS:
        secs = sum(float(s.get(seconds) or 0.0) for s in stats)
        n = sum(int(s.get(count) or 0) for s in stats) if count else None
        out.append(
            {
                "kind": "diarize",
                "name": name,
                "segments": n,
                "hours": secs / 3600,
                "share_of_hours": secs / speech if speech else 0.0,
            }
        )
    return out


def most_changed(stats: list[dict], n: int = FILES_SHOWN) -> list[str]:
    """The ``n`` files with the most seconds cut, dropped or flagged (ties: by id)."""
    score = lambda s: sum(float(s.get(k) or 0.0) for k in ("cut_s", "multi_speaker_s", "overlap_s"))
    changed = [s for s in stats if score(s) > 0]
    return [s["id"] for s in sorted(changed, key=lambda s: (-score(s), s["id"]))[:n]]


def _draw_file(ax, fid: str, turns: list[tuple], grey: list[tuple[float, float]]) -> None:
    """One file's timeline: a row per speaker, turn bars, overlaps hatched, multi_speaker grey."""
    from matplotlib.patches import Patch

    speakers = sorted({t[3] for t in turns})
    row = {spk: k for k, spk in enumerate(speakers)}
    stretches = defaultdict(set)  # a stretch two speakers share is an overlap
    for _, s, e, spk in turns:
        stretches[(round(s, 3), round(e, 3))].add(spk)
    for _, s, e, spk in turns:
        both = len(stretches[(round(s, 3), round(e, 3))]) > 1
        ax.broken_barh(
            [(s, e - s)],
            (row[spk] - 0.4, 0.8),
            facecolor=COLORS[row[spk] % len(COLORS)],
            edgecolor="black" if both else "none",
            hatch="////" if both else None,
            lw=0.5,
        )
    for s, e in grey:
        ax.axvspan(s, e, color="#999999", alpha=0.5, lw=0)
    ax.set_yticks(range(len(speakers)), speakers, fontsize=7)
    ax.set_ylim(-0.6, max(len(speakers), 1) - 0.4)
    ax.set_title(fid, fontsize=8, loc="left")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(
        handles=[
            Patch(facecolor="white", edgecolor="black", hatch="////", label="overlap"),
            Patch(facecolor="#999999", alpha=0.5, label="multi_speaker"),
        ],
        fontsize=6,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )


def plot_turns(diar: dict[str, Any] | None, out: Path) -> list[str]:
    """The timeline figure of the most changed files; returns them (a note when there is none)."""
    import matplotlib.pyplot as plt

    shown = most_changed(diar["stats"]) if diar else []
    if not shown:
        fig, ax = plt.subplots(figsize=(7, 1.2))
        ax.axis("off")
        what = "diarization did not run for this dataset" if diar is None else "no file was cut, dropped or flagged"
        ax.text(0.5, 0.5, f"Speaker turns: {what}", ha="center", va="center", fontsize=9)
        save_png(fig, out)
        return []
    by_file, grey = defaultdict(list), defaultdict(list)
    for t in diar["turns"]:
        by_file[t[0]].append(t)
    for r in diar["rejects"]:
        if r.get("reason") == "multi_speaker" and r.get("offset") is not None:
            grey[r.get("file_id") or r["id"].rsplit("_", 1)[0]].append(
                (float(r["offset"]), float(r["offset"]) + float(r["duration"]))
            )
    heights = [0.9 + 0.3 * max(1, len({t[3] for t in by_file[f]})) for f in shown]
    fig, axes = plt.subplots(
        len(shown), 1, figsize=(10, sum(heights) + 0.6), squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    for ax, fid in zip(axes[:, 0], shown, strict=True):
        _draw_file(ax, fid, by_file[fid], grey[fid])
    axes[-1, 0].set_xlabel("seconds", fontsize=8)
    which = "the file" if len(shown) == 1 else f"the {len(shown)} files"
    fig.suptitle(f"Speaker turns of {which} the diarization changed most (cut, dropped, flagged)", fontsize=10)
    fig.tight_layout()
    save_png(fig, out)
    return shown
