#!/usr/bin/env python3
"""Merge every shard's VAD statistics: vad/stats.csv and vad/summary.json."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out-csv", required=True)
    ap.add_argument("--out-summary", required=True)
    ap.add_argument("--stats", nargs="*", default=[])
    ap.add_argument("--rejects", nargs="*", default=[])
    ap.add_argument("--segments", nargs="*", default=[])
    a = ap.parse_args()
    require_stage_env("vad")
    from speechprep.vad import merge

    print(merge(a.stats, a.rejects, a.segments, a.out_csv, a.out_summary), file=sys.stderr)


if __name__ == "__main__":
    main()
