#!/usr/bin/env python3
"""Train the demo ASR model (a tiny NeMo CTC model, NOT a recognizer) and save it as .nemo."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--truth", required=True, type=Path, help="resources/demo/truth.json")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seconds", type=float, default=None,
                    help="optional wall-time cap (default: none; a fixed step count gives the same model anywhere)")
    ap.add_argument("--max-steps", type=int, default=1500)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    require_stage_env("asr")
    import torch

    from speechprep.asr_demo_model import build

    torch.set_num_threads(a.threads)
    build(a.truth, a.out, a.seconds, a.max_steps)


if __name__ == "__main__":
    main()
