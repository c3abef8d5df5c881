"""TTS features: one module per job.

* :mod:`.encoders`: condition and emotion encoders behind one protocol and one factory;
* :mod:`.features`: the audio-feature job of a shard (codes, condition, emotion vectors);
* :mod:`.text`: normalisation, the SentencePiece tokenizer, the text-id job of a shard;
* :mod:`.manifests`: train/val manifests and ``stats.json`` with provenance.
"""
