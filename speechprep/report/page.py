"""What the report pages share: a figure saved as PNG, a table as HTML."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ..io.jsonio import atomic_open


def save_png(fig, path: Path) -> None:
    """``fig`` written atomically to ``path`` (PNG, 90 dpi), then closed."""
    import matplotlib.pyplot as plt

    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def table_html(rows: list[dict], columns: list[str], cls: str) -> str:
    """``rows`` as an HTML table of ``columns`` (floats to 4 significant digits, None empty)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
