"""Light text clean-up of transcripts (:class:`TextNormalizer`): Unicode NFKC,
typographic punctuation mapped to ASCII, whitespace collapsed, then per-language
options (config ``tts.languages``): ``lowercase``, ``space_before_punct`` (French
typography keeps a space before ``; : ! ?``), ``strip_punct``. The spoken form
(numbers, units, ...) is :mod:`.spoken`'s."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from ..core.language import base_language

PUNCT_MAP = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u2032": "'",
        "\u00b4": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u2026": "...",
        "\u00a0": " ",
        "\u202f": " ",
        "\u2009": " ",
        "\u200b": "",
    }
)
_SPACE_BEFORE = re.compile(r"\s+([,.!?;:])")
_REPEAT = re.compile(r"([,!?;:])\1+")
_PUNCT = re.compile(r"[^\w\s']", re.UNICODE)

# Defaults per language (base code); anything else gets DEFAULT.
DEFAULT = {"lowercase": False, "space_before_punct": False, "strip_punct": False}
LANGUAGE_DEFAULTS = {"fr": {"space_before_punct": True}}


@dataclass
class TextNormalizer:
    languages: dict[str, dict[str, Any]] = field(default_factory=dict)  # config tts.languages

    def options(self, language: str | None) -> dict[str, Any]:
        lang = base_language(language)
        return {**DEFAULT, **LANGUAGE_DEFAULTS.get(lang, {}), **self.languages.get(lang, {})}

    @staticmethod
    def clean(text: str) -> str:
        """The language-independent part: NFKC, ASCII punctuation, whitespace."""
        t = unicodedata.normalize("NFKC", text).translate(PUNCT_MAP)
        t = "".join(c for c in t if unicodedata.category(c)[0] != "C" or c in "\t\n")
        t = re.sub(r"\s+", " ", t).strip()
        return _REPEAT.sub(r"\1", t)

    def __call__(self, text: str, language: str | None = None) -> str:
        o = self.options(language)
        t = self.clean(text)
        if o["strip_punct"]:
            t = re.sub(r"\s+", " ", _PUNCT.sub(" ", t)).strip()
        elif not o["space_before_punct"]:
            t = _SPACE_BEFORE.sub(r"\1", t)
        if o["lowercase"]:
            t = t.lower()
        return t
