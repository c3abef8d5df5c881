#!/usr/bin/env python3
"""NeMo ASR over one shard of VAD segments: asr/<shard>.jsonl and rejects (resumable)."""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--segments", required=True, help="vad/<shard>.segments.jsonl")
    ap.add_argument("--params", required=True, help="ASR parameters (the config's asr section), as JSON")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--scratch", required=True, help="per-segment checkpoint of this shard")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rejects", required=True)
    a = ap.parse_args()
    require_stage_env("asr")
    from speechprep.asr import AsrParams, ModelFileError, run
    from speechprep.failures import EXIT_CODE, SystematicFailure

    try:
        run(a.segments, a.out, a.rejects, AsrParams.from_dict(json.loads(a.params)), a.scratch, a.threads)
    except ModelFileError as e:
        print(e, file=sys.stderr, flush=True)
        sys.exit(ModelFileError.EXIT_CODE)
    except SystematicFailure as e:
        print(e, file=sys.stderr, flush=True)
        sys.exit(EXIT_CODE)


if __name__ == "__main__":
    main()
