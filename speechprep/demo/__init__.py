"""Demo material built from code (no download): NOT real models.

* :mod:`.asr_model`: a tiny character CTC model trained on the demo corpus;
* :mod:`.s2s_models`: a small random HuBERT saved as a 2021-style legacy
  checkpoint, a k-means fitted on its features, a random unit HiFi-GAN;
* :mod:`.corpus`: the demo corpus' clean clips, segments of them in one long file
  (benchmarks and tests), speech intervals scored frame by frame against the truth.

Nothing is imported here: the Snakefile reads the demo jobs' declarations (:mod:`.jobs`).
"""
