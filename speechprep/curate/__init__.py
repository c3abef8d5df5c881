"""Curation stage (``curate/``): measure every segment, find speakers and duplicates,
then keep or drop each segment by thresholds and give the kept ones a tier.

The work is split so that a threshold change reruns only the cheap parts:

* :mod:`.measures` (pure signal and text measures) and :mod:`.dnsmos` (batched
  DNSMOS) feed the per-shard **measure** job of :mod:`.stage` (the expensive
  one: audio, models; resumable per segment); :mod:`.annotate`, beside it, the
  per-shard **annotate** job (pitch, monotony, reverberation for the captions);
* :mod:`.speakers` (dataset level: pseudo speakers from the Resemblyzer
  embeddings) and :mod:`.duplicates` (dataset level: exact PCM hashes and
  MinHash over S2S units) read every shard's measurements;
* :mod:`.decide` (per shard: thresholds, reasons, tiers; a pure function of
  the measurements and :class:`.params.DecideParams`) and the dataset
  **summary**.

:mod:`.params` holds each job's parameters (importable without numpy, for the
Snakefile).
"""
