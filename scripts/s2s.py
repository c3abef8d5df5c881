#!/usr/bin/env python3
"""HuBERT units and unit HiFi-GAN resynthesis for one shard of VAD segments (resumable)."""
import argparse
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--segments", required=True, help="vad/<shard>.segments.jsonl")
    ap.add_argument("--params", required=True, help="the config's s2s section, as JSON")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--scratch", required=True, help="per-segment checkpoint of this shard")
    ap.add_argument("--units", required=True)
    ap.add_argument("--wav-dir", required=True)
    ap.add_argument("--rejects", required=True)
    a = ap.parse_args()
    require_stage_env("s2s")
    warnings.filterwarnings("ignore", category=FutureWarning)
    import torch

    from speechprep.failures import EXIT_CODE, SystematicFailure
    from speechprep.fairseq_legacy import LegacyCheckpointError
    from speechprep.s2s import KmeansError, S2sParams, run_shard

    torch.set_num_threads(max(1, a.threads))
    try:
        run_shard(a.segments, a.units, a.wav_dir, a.rejects, S2sParams.from_dict(json.loads(a.params)), a.scratch)
    except SystematicFailure as e:
        print(e, file=sys.stderr, flush=True)
        sys.exit(EXIT_CODE)
    except (LegacyCheckpointError, KmeansError) as e:  # a model file that cannot or must not be loaded
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
