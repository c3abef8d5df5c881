"""Demo material built from code (no download): NOT real models.

* :mod:`.asr_model`: a tiny character CTC model trained on the demo corpus;
* :mod:`.s2s_models`: a small random HuBERT saved as a 2021-style legacy
  checkpoint, a k-means fitted on its features, a random unit HiFi-GAN;
* :func:`demo_audio`: the demo corpus' clean clips (benchmarks and tests).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import soundfile as sf


def demo_audio(truth_path: str | os.PathLike) -> list[np.ndarray]:
    """The demo corpus' clean clips (``truth.json`` beside ``audio/``), 16 kHz mono float32."""
    truth_path = Path(truth_path)
    truth = json.loads(truth_path.read_text(encoding="utf-8"))
    return [
        sf.read(truth_path.parent / "audio" / rel, dtype="float32")[0]
        for rel, info in sorted(truth["files"].items())
        if info.get("clean")
    ]
