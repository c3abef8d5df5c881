"""The demo corpus: :func:`demo_audio` its clean clips; :func:`long_source_segments`
segments of them in one long file (benchmarks and tests); :func:`frame_counts` speech
intervals scored frame by frame against the truth."""

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


def frame_counts(pred, truth, duration: float, step: float = 0.01) -> tuple[int, int, int]:
    """(true positive, false positive, false negative) ``step``-second frames of the
    ``(start, end)`` intervals ``pred`` against those of ``truth`` over ``duration`` s."""
    n = int(np.ceil(duration / step))
    a, b = np.zeros(n, bool), np.zeros(n, bool)
    for s, e in pred:
        a[int(round(s / step)) : int(round(e / step))] = True
    for s, e in truth:
        b[int(round(s / step)) : int(round(e / step))] = True
    return int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum())


DEMO_TRUTH = Path(__file__).resolve().parents[2] / "resources" / "demo" / "truth.json"


def long_source_segments(root: Path, lengths: np.ndarray, text: str | None = None) -> list[dict]:
    """Segments of the given ``lengths`` (s), 0.5 s apart, in one long file of demo
    speech written to ``root/long.flac`` (the benchmarks' input)."""
    pool = np.concatenate(demo_audio(DEMO_TRUTH))
    sr = 16000
    source = np.tile(pool, int(np.ceil(float(np.sum(lengths)) * sr / len(pool))) + 1)
    src = root / "long.flac"
    sf.write(src, source, sr)
    segs, t = [], 0.0
    for i, d in enumerate(lengths):
        seg = {
            "id": f"seg{i:04d}",
            "file_id": "long",
            "audio_filepath": str(src),
            "offset": round(t, 3),
            "duration": round(float(d), 3),
        }
        if text is not None:
            seg["text"] = text
        segs.append(seg)
        t += float(d) + 0.5
    return segs
