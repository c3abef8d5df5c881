"""Phonemes of a segment's text, for phoneme-based TTS recipes (``tts.phonemes``).

Piper, VITS, StyleTTS 2 and Matcha read espeak-ng's IPA phonemes; Piper reads them as ids
of its own map. :class:`Phonemizer` gives both from piper-phonemize, whose wheel carries
espeak-ng and its voice data (nothing is downloaded, no system espeak-ng is needed), as
Piper's own preprocessing does: the phonemes of every sentence of the text, one after
another, and :func:`piper_phonemize.phoneme_ids_espeak` of them (``^`` first, ``$`` last,
a pad between phonemes).

A segment's voice is that of its language (the segment's, its dataset's, else
``asr.language``; :mod:`speechprep.core.language`): ``tts.phoneme_voices`` names the
espeak-ng voice of a language (``en``: ``en-us``), any other language its own code. A
language espeak-ng has no voice for stops the job with the setting to change (it would
give every segment of that language no phonemes); a text that gives no phonemes is
rejected ``no_phonemes``.
"""

from __future__ import annotations

import numpy as np

from ..core.language import base_language
from ..errors import UsageError

SENTENCE_GAP = " "  # between two sentences' phonemes, as in Piper's preprocessing


class Phonemizer:
    """espeak-ng phonemes in the voice of each language."""

    def __init__(self, voices: dict[str, str]):
        self.voices = voices

    def voice(self, language: str) -> str:
        """The espeak-ng voice of ``language`` (``en-US`` and ``en`` alike: the base code)."""
        base = base_language(language)
        return self.voices.get(language) or self.voices.get(base) or base

    def phonemes(self, text: str, language: str) -> list[str]:
        """The phonemes (IPA characters, stress marks and spaces) of ``text``."""
        from piper_phonemize import phonemize_espeak

        voice = self.voice(language)
        try:
            sentences = phonemize_espeak(text, voice)
        except RuntimeError as e:
            raise UsageError(
                f"espeak-ng has no voice {voice!r} for language {language!r} ({e}): name one in "
                f"tts.phoneme_voices, or set tts.phonemes: null"
            ) from e
        out: list[str] = []
        for s in sentences:
            if out and s:
                out.append(SENTENCE_GAP)
            out += s
        return out

    def ids(self, phonemes: list[str]) -> np.ndarray:
        """Piper's phoneme ids (int32)."""
        from piper_phonemize import phoneme_ids_espeak

        return np.asarray(phoneme_ids_espeak(phonemes), dtype=np.int32)
