"""A segment's language, decided in one place: its own ``language``, else its dataset's
(``datasets.<name>.language``), else the run's default (``asr.language``)."""

from __future__ import annotations

from typing import Any


def declared_language(seg: dict[str, Any], dataset_language: str | None) -> str | None:
    """The language the input says: the segment's, else its dataset's (None when neither does)."""
    return seg.get("language") or dataset_language


def segment_language(seg: dict[str, Any], dataset_language: str | None, default_language: str) -> str:
    """The language a model or grammar works in: the declared one, else ``default_language``."""
    return declared_language(seg, dataset_language) or default_language


def base_language(language: str | None) -> str:
    """``en`` of ``en-US`` or ``en_GB`` ("" for none)."""
    return (language or "").split("-")[0].split("_")[0].lower()
