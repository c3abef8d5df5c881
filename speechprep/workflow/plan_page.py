"""The plan as a page a person reads: ``plan.html`` beside ``plan.json`` (its stages, datasets,
totals, wall time, cost and alternatives), and ``compare.html`` beside a comparison (the plan
and the run, stage by stage). Standard library only (the workflow env writes them)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ..io.jsonio import atomic_open
from ..report.page import table_html

STYLE = (
    "body{font-family:sans-serif;margin:1.5em;max-width:70em}table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #bbb;padding:.2em .6em;text-align:right}th:first-child,td:first-child{text-align:left}"
)


def _hours(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 3600


def _gb(n: float | None) -> float | None:
    return None if n is None else n / 1e9


def stage_rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "stage": name,
            "jobs": s["jobs"],
            "CPU-h": _hours(s["cpu_s"]),
            "GPU-h": _hours(s["gpu_s"]),
            "peak job MB": s.get("peak_rss_mb"),
            "output GB": _gb(s["output_bytes"]),
            "CPU-s per audio hour": s.get("cpu_s_per_audio_hour"),
        }
        for name, s in plan["stages"].items()
    ]


def alternative_rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for spec, alt in plan.get("alternatives", {}).items():
        t, r = alt["total"], alt["ratio"]
        rows.append(
            {
                "setting": spec,
                "jobs": t["jobs"],
                "CPU-h": _hours(t["cpu_s"]),
                "GPU-h": _hours(t["gpu_s"]),
                "wall h": _hours(alt["wall_s"]),
                "output GB": _gb(t["output_bytes"]),
                "CPU x plan": r.get("cpu_s"),
                "wall x plan": r.get("wall_s"),
                "cost": alt.get("cost", {}).get("total"),
                "bottleneck": alt["bottleneck"],
            }
        )
    return rows


def probe_rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Each memory probe (speechprep.workflow.probe): the job, its two sizes' peaks and the
    memory read at the corpus's size, beside what the pilot alone measured."""
    rows = []
    for rule, r in plan.get("rules", {}).items():
        for name, fit in r.get("fits", {}).items():
            if name.endswith(".rss_mb.probe"):
                (n1, mb1), (n2, mb2) = fit["points"]
                pilot = r["fits"].get(name.removesuffix(".probe"), {})
                rows.append(
                    {
                        "rule": rule,
                        "dataset": name.split(".")[0],
                        "probes": f"{n1:,.0f}: {mb1:,.0f} MB; {n2:,.0f}: {mb2:,.0f} MB",
                        "items": fit["items"],
                        "MB at the corpus's size": fit["fixed"] + fit["per_item"] * fit["items"],
                        "pilot's MB": pilot.get("fixed"),
                    }
                )
    return rows


def sizing_rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The recommended shard size and ``--jobs`` beside the config's, with Snakemake's own
    cost at each (plan.json's ``recommended``, ``snakemake``, ``snakemake_configured``)."""
    rec = plan.get("recommended") or {}
    rows = []
    for name, size, sm in (
        ("recommended", rec.get("shard_hours"), plan.get("snakemake")),
        ("configured", None, plan.get("snakemake_configured")),
    ):
        if sm:
            rows.append(
                {
                    "size": name,
                    "shard hours": size,
                    "DAG jobs": sm["dag_jobs"],
                    "DAG CPU-s": sm["dag_s"],
                    "DAG MB": sm["dag_mb"],
                    "scheduler CPU-s": sm["scheduler_cpu_s"],
                    "submissions h": _hours(sm["submit_s"]),
                }
            )
    return rows


def plan_html(plan: dict[str, Any]) -> str:
    """The page of a ``plan.json``."""
    t, sample = plan["total"], plan.get("sample", {})
    low_high = t.get("cpu_s_interval") or [None, None]
    facts = [
        f"Sample: {sample.get('fraction', 0):.3g} of the audio (seed {sample.get('seed')}), files "
        + ", ".join(f"{d} {a} of {b}" for d, (a, b) in sample.get("files", {}).items()),
        f"Cluster: {plan['cluster']}",
        f"Wall: {_hours(plan['wall_s']):.3g} h (longest path {_hours(plan['wall_s_critical_path']):.3g} h, "
        f"work over the cluster {_hours(plan['wall_s_capacity']):.3g} h); bottleneck {plan['bottleneck']}",
    ]
    if "cost" in plan:
        c = plan["cost"]
        facts.append(f"Cost: {c['total']:.4g} ({c['core_hours']:.4g} core-hours, {c['gpu_hours']:.4g} GPU-hours)")
    total = {
        "jobs": t["jobs"],
        "CPU-h": _hours(t["cpu_s"]),
        "CPU-h low": _hours(low_high[0]),
        "CPU-h high": _hours(low_high[1]),
        "GPU-h": _hours(t["gpu_s"]),
        "core-h": _hours(t.get("core_s")),
        "output GB": _gb(t["output_bytes"]),
    }
    datasets = [{"dataset": d, **{k.replace("_", " "): v for k, v in x.items()}} for d, x in plan["datasets"].items()]
    parts = [
        "<h1>The plan</h1>",
        "".join(f"<p>{html.escape(x)}</p>" for x in facts),
        "<h2>Stages</h2>",
        table_html(stage_rows(plan), list(stage_rows(plan)[0]) if plan["stages"] else [], "stages"),
        "<h2>Total</h2>",
        table_html([total], list(total), "total"),
        "<h2>Datasets</h2>",
        table_html(datasets, list(datasets[0]) if datasets else [], "datasets"),
    ]
    if sizing := sizing_rows(plan):
        rec = plan["recommended"]
        notes = [
            f"shard_hours {rec['shard_hours']:g}, --jobs {rec['jobs']}; the fixed part of a job: "
            + ", ".join(f"{r} {x:.1%}" for r, x in rec["fixed_share"].items()),
            *rec["notes"],
        ]
        parts += ["<h2>Sizing for the cluster</h2>", "".join(f"<p>{html.escape(x)}</p>" for x in notes)]
        parts.append(table_html(sizing, list(sizing[0]), "sizing"))
    if probes := probe_rows(plan):
        parts += ["<h2>Memory probes</h2>", table_html(probes, list(probes[0]), "probes")]
    if alternatives := alternative_rows(plan):
        parts += ["<h2>Alternatives</h2>", table_html(alternatives, list(alternatives[0]), "alternatives")]
    return _page("The plan", parts)


def compare_html(comparison: dict[str, Any]) -> str:
    """The page of ``plan --compare``: per stage and in total, the plan's figure, the run's and
    their ratio."""
    keys = ("cpu_s", "gpu_s", "peak_rss_mb", "output_bytes", "jobs")
    rows = []
    for stage, figures in comparison["stages"].items():
        row: dict[str, Any] = {"stage": stage}
        for k in keys:
            f = figures.get(k, {})
            row.update({f"{k} plan": f.get("plan"), f"{k} run": f.get("run"), f"{k} plan/run": f.get("ratio")})
        rows.append(row)
    total = [{"figure": k, "plan": v["plan"], "run": v["run"]} for k, v in comparison["total"].items()]
    parts = [
        "<h1>The plan against the run</h1>",
        "<h2>Stages</h2>",
        table_html(rows, list(rows[0]) if rows else [], "compare"),
        "<h2>Total</h2>",
        table_html(total, ["figure", "plan", "run"], "total"),
    ]
    return _page("The plan against the run", parts)


def _page(title: str, parts: list[str]) -> str:
    head = f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
    return f"{head}<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n"


def write_page(path: str | Path, text: str) -> Path:
    """``text`` written atomically to ``path`` (UTF-8)."""
    with atomic_open(path) as f:
        f.write(text)
    return Path(path)
