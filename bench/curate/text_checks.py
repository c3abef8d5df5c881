#!/usr/bin/env python3
"""The transcript checks on real text: how often each drops a language's own quotations,
and how often it catches them under another declared language.

    .venvs/curate/bin/python bench/curate/text_checks.py [--sample 1000]

Quotations from Debian's fortune packages (tests/real_speech.py: English, German and
Spanish for calibration, Italian and Russian held apart), lower-cased and without
punctuation as a transcript; ``--sample`` of each language (fixed seed) with at least
``curate.min_language_chars`` characters for the language columns, every quotation of at
least ``curate.min_repetition_words`` words for the repetition column; the thresholds of
config/config.yaml (docs/stages/curate.md, "Transcripts that lie").
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from speechprep.curate.params import DecideParams  # noqa: E402
from speechprep.curate.texts import LanguageId, repeated_ngram_share  # noqa: E402
from tests.real_speech import FORTUNES, HELD_OUT, fortunes  # noqa: E402
from tests.support import params  # noqa: E402


def dropped(probs: list[dict], declared: str, p: DecideParams) -> float:
    """The share of texts (their language probabilities) that ``declared`` makes ``wrong_language``."""
    return sum(x[declared] < p.min_declared_language_prob for x in probs) / len(probs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=1000)
    a = ap.parse_args()
    p, lid = params(DecideParams), LanguageId()
    print("language | dropped in its own | caught as another (worst) | its texts dropped repetitive_text")
    for lang, package in FORTUNES.items():
        texts = fortunes(lang)
        long = [t for t in texts if len(t) >= p.min_language_chars]
        probs = [lid.probabilities(t) for t in random.Random(0).sample(long, min(a.sample, len(long)))]
        caught = min(dropped(probs, other, p) for other in FORTUNES if other != lang)
        worded = [t for t in texts if len(t.split()) >= p.min_repetition_words]
        loops = sum(repeated_ngram_share(t) > p.max_repeated_ngram_share for t in worded)
        held = " (held apart)" if package in HELD_OUT else ""
        print(f"{lang}{held} | {dropped(probs, lang, p):.1%} of {len(probs)} | {caught:.1%} | {loops} of {len(worded)}")


if __name__ == "__main__":
    main()
