#!/usr/bin/env python3
"""Plots and the stage table of one dataset for `snakemake --report`."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", required=True, help="results/<ds>")
    ap.add_argument("--stages", nargs="+", required=True)
    ap.add_argument("--out-dir", required=True)
    a = ap.parse_args()
    require_stage_env("report")
    from speechprep.report import make

    for p in make(a.results, a.stages, a.out_dir):
        print(f"wrote {p}", file=sys.stderr)


if __name__ == "__main__":
    main()
