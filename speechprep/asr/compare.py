"""A given transcript against the ASR model's (``text: verify``): WER, CER, edge characters.

Both texts are normalised the same way before they are compared
(:class:`CompareNormalizer`):

1. the written form becomes the spoken one with the TTS normaliser
   (:class:`speechprep.tts.spoken.SpokenNormalizer`, nemo-text-processing's
   grammars) where the language has grammars: "10" and "ten", "Mr." and
   "mister" compare equal. A text holding nothing the grammars rewrite (no
   digit, symbol, abbreviation-like token or capitalised acronym: most
   transcripts) skips them, as the grammars would give it back unchanged
   (tests/asr/test_transcripts_compare.py checks that on real transcripts);
   identical texts are normalised once (the ASR text often equals the given one);
2. Unicode NFKC and ASCII punctuation (``TextNormalizer.clean``), case folded,
   punctuation and hyphens become spaces (an apostrophe inside a word stays:
   ``don't``), whitespace collapsed.

Then (:func:`compare`):

* ``wer``: word edit distance / words of the given text; ``cer``: character
  edit distance (spaces count) / its characters. Both are 0..1 and more (a
  transcript with insertions can exceed 1); an empty given text gives the
  count of the other's words (characters), so 0 only when both are empty.
  Distances by ``editdistance`` (C++ Levenshtein).
* the characters inserted (in the ASR text only) and deleted (in the given text
  only) at each edge: an optimal character alignment (Levenshtein, a numpy DP)
  is walked from that edge until the first matching character; the
  insertions and deletions met on the way are counted (substitutions are
  not: a misheard first word is no missing text). Among optimal alignments
  the one with the longest edge run is taken, so ``the cat`` against
  ``the cat sat`` is 4 characters inserted at the end, not ``at s`` inserted
  in the middle. A given text padded with words nobody said shows as
  deletions at its edge; a truncated one as insertions.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..core.language import base_language
from ..text.normalize import TextNormalizer
from ..text.spoken import SpokenNormalizer

# what the TTS grammars rewrite: digits, symbols, a short word with a period inside the text
# ("Mr.", "a.m.", "St."; a sentence's final period is not one), capitalised acronyms and
# Roman numerals ("BBC", "XIV")
_GRAMMAR_WORK = re.compile(r"\d|[^\w\s.,;:!?'\"()\[\]-]|\b\w{1,4}\.(?!\s*$)|\b[A-Z]{2,}\b")
_NOT_WORD = re.compile(r"[^\w\s']|_", re.UNICODE)
_LOOSE_APOSTROPHE = re.compile(r"(?<!\w)'|'(?!\w)")


def needs_grammars(text: str) -> bool:
    """Whether ``text`` holds anything the spoken-form grammars would rewrite."""
    if any(unicodedata.category(c)[0] == "S" for c in text):
        return True
    return bool(_GRAMMAR_WORK.search(text))


def plain(text: str) -> str:
    """Step 2 alone: NFKC, case folded, punctuation and hyphens to spaces, whitespace collapsed."""
    t = TextNormalizer.clean(text).casefold()
    t = _NOT_WORD.sub(" ", t)
    t = _LOOSE_APOSTROPHE.sub(" ", t)
    return " ".join(t.split())


class CompareNormalizer:
    """Both sides of a comparison through the same normalisation (module docstring).

    ``spoken``: a :class:`SpokenNormalizer` (its ``grammars`` decide the languages
    put in spoken form) or None for the plain fallback everywhere. ``how`` of the
    last call says which was used: ``spoken``, ``plain`` (no grammar work in the
    text), ``passed_through`` (a language without grammars) or ``failed``."""

    def __init__(self, spoken: SpokenNormalizer | None, cache_size: int = 4096):
        self.spoken = spoken
        self._cache: dict[tuple[str, str], tuple[str, str]] = {}
        self._cache_size = cache_size

    def __call__(self, text: str, language: str | None) -> tuple[str, str]:
        """``(normalised text, how)``."""
        lang = base_language(language)
        key = (text, lang)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if self.spoken is None or lang not in self.spoken.grammars:
            out = (plain(text), "passed_through" if self.spoken is not None else "plain")
        elif not needs_grammars(text):
            out = (plain(text), "plain")
        else:
            said, how = self.spoken(TextNormalizer.clean(text), lang)
            out = (plain(said), how)
        if len(self._cache) >= self._cache_size:
            self._cache.clear()
        self._cache[key] = out
        return out


@dataclass(frozen=True)
class Comparison:
    """The figures of one given text (``ref``) against the ASR text (``hyp``), both normalised."""

    wer: float
    cer: float
    word_errors: int
    ref_words: int
    char_errors: int
    ref_chars: int
    edge_start_inserted: int
    edge_start_deleted: int
    edge_end_inserted: int
    edge_end_deleted: int
    ref: str
    hyp: str

    def fields(self) -> dict[str, Any]:
        """What an ASR line of a ``verify`` dataset carries (besides ``asr_text``)."""
        d = asdict(self)
        for k in ("ref", "hyp", "ref_chars"):
            d.pop(k)
        d["wer"], d["cer"] = round(self.wer, 4), round(self.cer, 4)
        return d


def _edit_distance(a, b) -> int:
    import editdistance

    return int(editdistance.eval(a, b))


def _codes(s: str) -> np.ndarray:
    return np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32)


def levenshtein_table(ref: str, hyp: str) -> np.ndarray:
    """``D[i, j]``: the edit distance of ``ref[:i]`` and ``hyp[:j]`` (int32, (len+1) x (len+1)).

    Row by row in numpy: a row's insertions are a running minimum
    (``D[i, j] = j + min_k<=j (A[k] - k)``), so no Python loop over columns."""
    r, h = _codes(ref), _codes(hyp)
    n, m = len(r), len(h)
    d = np.empty((n + 1, m + 1), dtype=np.int32)
    cols = np.arange(m + 1, dtype=np.int32)
    d[0] = cols
    for i in range(1, n + 1):
        prev = d[i - 1]
        a = np.empty(m + 1, dtype=np.int32)
        a[0] = i
        a[1:] = np.minimum(prev[1:] + 1, prev[:-1] + (h != r[i - 1]))
        d[i] = cols + np.minimum.accumulate(a - cols)
    return d


def trailing_edits(ref: str, hyp: str) -> tuple[int, int]:
    """``(inserted, deleted)`` characters at the end of an optimal alignment, before its last match.

    Walks back from the end; where an insertion or a deletion is as good as the
    diagonal step, it is taken (the longest edge run among optimal alignments)."""
    d = levenshtein_table(ref, hyp)
    i, j = len(ref), len(hyp)
    inserted = deleted = 0
    while i > 0 or j > 0:
        here = d[i, j]
        if j > 0 and d[i, j - 1] + 1 == here:
            inserted, j = inserted + 1, j - 1
        elif i > 0 and d[i - 1, j] + 1 == here:
            deleted, i = deleted + 1, i - 1
        elif ref[i - 1] == hyp[j - 1]:
            break  # the last match: the edge ends here
        else:
            i, j = i - 1, j - 1  # a substitution: not missing text, the walk goes on
    return inserted, deleted


def compare(given: str, asr: str) -> Comparison:
    """WER, CER and edge characters of two texts already normalised (:class:`CompareNormalizer`)."""
    ref_w, hyp_w = given.split(), asr.split()
    word_errors = _edit_distance(ref_w, hyp_w)
    char_errors = _edit_distance(given, asr)
    end_ins, end_del = trailing_edits(given, asr)
    start_ins, start_del = trailing_edits(given[::-1], asr[::-1])
    return Comparison(
        wer=word_errors / len(ref_w) if ref_w else float(len(hyp_w)),
        cer=char_errors / len(given) if given else float(len(asr)),
        word_errors=word_errors,
        ref_words=len(ref_w),
        char_errors=char_errors,
        ref_chars=len(given),
        edge_start_inserted=start_ins,
        edge_start_deleted=start_del,
        edge_end_inserted=end_ins,
        edge_end_deleted=end_del,
        ref=given,
        hyp=asr,
    )


def verify_fields(normalize: CompareNormalizer, given: str, asr_text: str, language: str | None) -> dict[str, Any]:
    """The fields a ``verify`` line gains: ``asr_text``, ``wer``, ``cer``, the edge counts and
    ``text_compare`` (how the given text was normalised)."""
    ref, how = normalize(given, language)
    hyp, _ = normalize(asr_text, language)
    return {"asr_text": asr_text, **compare(ref, hyp).fields(), "text_compare": how}
