"""Transcribed corpora (issue #24): text a corpus brings, checked and aligned.

* :mod:`.compare`: a given transcript against the ASR model's, both normalised
  the same way (spoken form, case, punctuation): WER, CER and the characters
  inserted or deleted at each edge (``text: verify``).
* :mod:`.align`: a long recording aligned to its text through a CTC model's
  log-probabilities (ctc-segmentation), cut into utterances at sentence ends,
  each with its ``align_score``; text the audio lacks and audio the text lacks
  end as rejects.

Both run in the ASR stage's environment (``.venvs/asr``: NeMo, the TTS
normaliser's nemo-text-processing + pynini, ctc-segmentation).
"""
