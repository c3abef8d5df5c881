"""What a segment's transcript says about itself: its language, and whether it repeats itself.

A transcript can lie. ASR models write text in another language than the dataset's (a
quote, a song, a mislabelled file) and, at times, loop on a phrase they made up
("thank you thank you thank you"); a given text can belong to another file. Both reach a
TTS manifest unless they are caught, and the audio measures do not see them.

* :class:`LanguageId`: py3langid (langid.py's 97 languages; its model is a NumPy archive,
  loaded without pickle) with normalised probabilities. A text of at least
  ``min_language_chars`` characters to which the language the input declares for it (the
  segment's ``language``, else its dataset's; none declared, or one langid does not know:
  no check) is less likely than ``min_declared_language_prob`` is ``wrong_language``. The
  declared language's own probability, not the winner's: a Spanish text spreads its
  probability over Spanish, Galician and Portuguese, but English gets none of it (on real
  quotations written as a transcript, tests/curate/test_texts.py and docs/stages/curate.md,
  "Transcripts that lie").
* :func:`repeated_ngram_share`: the share of a text's word 3-grams that repeat an earlier
  one. A loop repeats most of them; real sentences almost none. A text of at least
  ``min_repetition_words`` words over ``max_repeated_ngram_share`` is ``repetitive_text``.
"""

from __future__ import annotations

from ..core.language import base_language

NGRAM = 3


def repeated_ngram_share(text: str, n: int = NGRAM) -> float:
    """The share of the word ``n``-grams of ``text`` that repeat an earlier one (0 for
    a text of at most ``n`` words)."""
    words = text.split()
    if len(words) <= n:
        return 0.0
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams)


class LanguageId:
    """py3langid's identifier, loaded at the first text (a shard with no text loads nothing)."""

    def __init__(self) -> None:
        self._ident = None

    def probabilities(self, text: str) -> dict[str, float]:
        """Each language's probability (ISO 639-1 code: normalised over the 97 languages)."""
        if self._ident is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            self._ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return {lang: float(prob) for lang, prob in self._ident.rank(text)}


TOP_LANGUAGES = 5  # a segment's most likely spoken languages kept with their probabilities


def spoken_facts(probs: dict[str, float]) -> dict:
    """A segment's spoken language from the audio (``curate.language_model``): the most likely,
    its probability, and the ``TOP_LANGUAGES`` most likely with theirs."""
    top = sorted(probs.items(), key=lambda kv: -kv[1])[:TOP_LANGUAGES]
    return {
        "spoken_language": top[0][0],
        "spoken_language_prob": round(top[0][1], 6),
        "spoken_language_top": {k: round(v, 6) for k, v in top},
    }


def audio_language_facts(seg: dict, expected: str | None) -> dict:
    """Where the audio's language was measured (:func:`spoken_facts`) and the input declares one,
    the declared language's probability from the audio, whatever the text's length: its own
    where it is among the most likely, else the least of theirs (an upper bound)."""
    top = seg.get("spoken_language_top")
    if not top or not expected:
        return {}
    declared = base_language(expected)
    prob = top.get(declared, min(top.values()))
    return {"declared_language_prob": round(float(prob), 6), "language_judged_on": "audio"}


def text_facts(text: str | None, expected: str | None, lid: LanguageId, min_chars: int) -> dict:
    """A transcript's measured facts: ``repeated_ngram_share``; and where the input declares
    the segment's language (``expected``: the segment's or its dataset's, never the run's
    default), langid knows it and the text has at least ``min_chars`` characters,
    ``text_language`` (the most likely) and ``declared_language_prob``."""
    if not text or not text.strip():
        return {}
    facts = {"repeated_ngram_share": round(repeated_ngram_share(text), 4)}
    if expected and len(text.strip()) >= min_chars:
        probs = lid.probabilities(text)
        declared = base_language(expected)
        if declared in probs:
            facts.update(text_language=max(probs, key=probs.get), declared_language_prob=round(probs[declared], 6))
    return facts
