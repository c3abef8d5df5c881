#!/usr/bin/env python3
"""Build the demo S2S models (random weights, NOT real models): a 2021-style legacy
HuBERT checkpoint, a k-means fitted on its demo features, a tiny unit HiFi-GAN."""
import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--truth", required=True, type=Path, help="resources/demo/truth.json")
    ap.add_argument("--out-dir", required=True, type=Path)
    ap.add_argument("--units", type=int, default=50)
    ap.add_argument("--layer", type=int, default=2)
    a = ap.parse_args()
    require_stage_env("s2s")
    warnings.filterwarnings("ignore", category=FutureWarning)
    from speechprep.s2s_demo_models import build_demo

    build_demo(a.truth, a.out_dir, a.units, a.layer, log=sys.stderr)


if __name__ == "__main__":
    main()
