#!/usr/bin/env python3
"""Decoding a shorten-compressed NIST SPHERE file into FLAC, as the Kaldi reader does
(``speechprep.ingest.sources.kaldi.decode_shorten``: ffmpeg's shorten decoder where sph2pipe is
not installed, the FLAC written by libsndfile).

    .venvs/ingest/bin/python bench/ingest/shorten_decode.py [--copies 8] [--repeats 5]

The file: the two-channel 16 kHz recording of tests/ingest/source_layouts.py (LibriVox
sentences on one channel, the cards speaker on the other), ``--copies`` times over, written by
the tests' shorten encoder (tests/ingest/shorten.py). Prints its seconds and sizes, the median
wall of ``--repeats`` decodes (each into a fresh directory) and that as times real time; the
FLAC is checked to hold the original samples.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    import numpy as np
    import soundfile as sf

    from speechprep.ingest.sources.kaldi import decode_shorten
    from tests.ingest import shorten
    from tests.ingest.source_layouts import kaldi_dir

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        truth = kaldi_dir(work / "kaldi")
        x = np.tile(next(v for k, v in truth.samples.items() if k.endswith("read2ch.sph")), (args.copies, 1))
        sph = work / "long.sph"
        sph.write_bytes(shorten.sphere(x, 16000))
        walls = []
        for i in range(args.repeats):
            t0 = time.perf_counter()
            flac = decode_shorten(str(sph), str(work / f"audio{i}"), "long")
            walls.append(time.perf_counter() - t0)
        y, _ = sf.read(flac, dtype="int16", always_2d=True)
        assert np.array_equal(y, x), "the FLAC is not the original samples"
        size = sph.stat().st_size
    seconds, wall = len(x) / 16000, statistics.median(walls)
    print(f"{seconds:.1f} s of 2-channel 16 kHz audio: {size} bytes shorten SPHERE, {x.nbytes} bytes as PCM")
    print(f"decode to FLAC: median {wall:.3f} s of {args.repeats} ({seconds / wall:.0f}x real time)")


if __name__ == "__main__":
    main()
