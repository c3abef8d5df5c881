#!/usr/bin/env python3
"""VAD accuracy on the demo's clean clips by ``vad.pad``: frame-level F1 and recall of
the written segments against resources/demo/truth.json (10 ms frames).

    make demo   # once: the demo's shards under results/demo/shards/
    .venvs/vad/bin/python bench/vad/accuracy.py [--pads 0 0.03 0.05 0.1]

Each pad runs the real ``speechprep vad run`` on every demo shard, with the config's
other VAD settings, into a temporary directory. Figures: docs/stages/vad.md, "VAD".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    import yaml

    from speechprep.demo.corpus import frame_counts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pads", type=float, nargs="+", default=[0.0, 0.03, 0.05, 0.1])
    ap.add_argument("--shards", default=str(REPO / "results" / "demo" / "shards"))
    a = ap.parse_args()
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))["vad"]
    truth = json.loads((REPO / "resources" / "demo" / "truth.json").read_text(encoding="utf-8"))
    shards = sorted(Path(a.shards).glob("shard-*.jsonl"))
    if not shards:
        sys.exit(f"no shards in {a.shards}: run the demo first (make demo)")
    clean = {
        rel.replace("/", "__").rsplit(".", 1)[0]: info for rel, info in truth["files"].items() if info.get("clean")
    }
    print(f"VAD on the demo's {len(clean)} clean clips, frame-level (10 ms) against truth.json")
    for pad in a.pads:
        p = {k: v for k, v in cfg.items() if k != "threads"} | {"pad": pad}
        segs: dict[str, list] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for sh in shards:
                out = Path(tmp) / sh.stem
                cmd = [sys.executable, "-m", "speechprep", "vad", "run", "--shard", str(sh), "--params", json.dumps(p)]
                cmd += ["--threads", str(cfg["threads"]), "--resume", f"{out}.partial", "--segments", f"{out}.segments"]
                cmd += ["--stats", f"{out}.stats", "--rejects", f"{out}.rejects"]
                subprocess.run(cmd, check=True, capture_output=True)
                for line in Path(f"{out}.segments").read_text(encoding="utf-8").splitlines():
                    s = json.loads(line)
                    segs.setdefault(s["file_id"], []).append((s["offset"], s["offset"] + s["duration"]))
        tp = fp = fn = 0
        for fid, info in clean.items():
            t = frame_counts(segs.get(fid, []), [(x["start"], x["end"]) for x in info["speech"]], info["duration"])
            tp, fp, fn = tp + t[0], fp + t[1], fn + t[2]
        print(f"pad {pad:g} s: F1 {2 * tp / (2 * tp + fp + fn):.3f}, recall {tp / (tp + fn):.4f}")


if __name__ == "__main__":
    main()
