#!/usr/bin/env python3
"""Inspect a (legacy) fairseq checkpoint: what is legacy about it, what loading it converts.

    .venvs/s2s/bin/python scripts/fairseq_checkpoint.py CKPT [--write-modern OUT]

--write-modern writes a copy (config as plain data, ints as ints, pos_conv in
the installed layout, label dictionaries as files) that plain fairseq loads.
"""
import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--write-modern", metavar="OUT")
    a = ap.parse_args()
    require_stage_env("s2s")
    warnings.simplefilter("ignore")
    from speechprep import fairseq_legacy as legacy

    try:
        rep = legacy.write_modern(a.checkpoint, a.write_modern) if a.write_modern \
            else legacy.inspect_checkpoint(a.checkpoint)
    except legacy.LegacyCheckpointError as e:
        sys.exit(f"error: {e}")
    except Exception as e:  # noqa: BLE001 (fairseq failing to build it, an unwritable OUT: one line, no traceback)
        sys.exit(f"error: {a.checkpoint}: {type(e).__name__}: {legacy.first_line(e)}")
    print("\n".join(rep.lines()))
    print("legacy: " + ("yes" if rep.legacy else "no"))
    if a.write_modern:
        print(f"modern copy written to {a.write_modern}")


if __name__ == "__main__":
    main()
