#!/usr/bin/env python3
"""Ingest one dataset: manifest.jsonl, rejects/ingest.jsonl, shards/shard-NNNN.jsonl."""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--name", required=True, help="dataset name")
    ap.add_argument("--dataset", required=True, help="the dataset's config, as JSON")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--rejects", required=True)
    ap.add_argument("--shards-dir", required=True)
    a = ap.parse_args()
    require_stage_env("ingest")
    from speechprep import ingest

    ingest.run(a.name, json.loads(a.dataset), a.manifest, a.rejects, a.shards_dir, a.threads)


if __name__ == "__main__":
    main()
