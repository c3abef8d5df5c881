#!/usr/bin/env python3
"""Merge every shard's transcripts: asr/manifest.jsonl and asr/summary.json."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--shards", nargs="*", default=[])
    ap.add_argument("--rejects", nargs="*", default=[])
    a = ap.parse_args()
    require_stage_env("asr")
    from speechprep.asr import merge

    print(merge(a.shards, a.rejects, a.manifest, a.summary), file=sys.stderr)


if __name__ == "__main__":
    main()
