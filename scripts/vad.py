#!/usr/bin/env python3
"""TEN-VAD over one shard: segments, per-file stats and rejects (resumable)."""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shard", required=True, help="shards/shard-NNNN.jsonl")
    ap.add_argument("--params", default="{}", help="VAD parameters, as JSON")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--scratch", required=True, help="per-file checkpoint of this shard")
    ap.add_argument("--segments", required=True)
    ap.add_argument("--stats", required=True)
    ap.add_argument("--rejects", required=True)
    a = ap.parse_args()
    require_stage_env("vad")
    from speechprep.vad import VadParams, run_shard

    run_shard(a.shard, a.segments, a.stats, a.rejects, VadParams.from_dict(json.loads(a.params)),
              a.workers, a.scratch)


if __name__ == "__main__":
    main()
