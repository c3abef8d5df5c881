"""Models built from code (no download), for tests and benchmarks: NOT real models, never a
default. Random weights in each architecture a lab brings its own file of.

* :mod:`.speaker_nemo`: tiny TitaNet-, ECAPA- and Sortformer-shaped ``.nemo`` files that
  NeMo's own classes restore;
* :mod:`.speaker_onnx`: tiny speaker models exported to ONNX in WeSpeaker's and
  3D-Speaker's conventions.

``python -m speechprep models build-tiny --out DIR`` writes them all (:mod:`.jobs`).

* :mod:`.real_size` (:mod:`.real_size_nemo`, :mod:`.real_size_fairseq`): every stage's model
  at its real architecture and size, random weights, for ``bench/workflow/real_size.py``:
  ``python -m speechprep models build-real-size [--out DIR] [--only NAME ...]``.

Nothing is imported here: the Snakefile reads the jobs' declarations.
"""
