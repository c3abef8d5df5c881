"""Test support: demo-corpus segments written as a shard, and one shard run through the stage."""
import io
import json
from pathlib import Path

from speechprep.asr import AsrParams, transcribe_shard
from speechprep.jsonio import read_jsonl, write_jsonl

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo"
TRUTH = json.loads((DEMO / "truth.json").read_text(encoding="utf-8"))


def clean_segments(n=None):
    segs = []
    for rel, info in sorted(TRUTH["files"].items()):
        if info.get("clean"):
            for k, sp in enumerate(info["speech"]):
                fid = rel.replace("/", "__").rsplit(".", 1)[0]
                segs.append({"id": f"{fid}_{k:04d}", "file_id": fid,
                             "audio_filepath": str(DEMO / "audio" / rel),
                             "offset": round(sp["start"] - 0.03, 3), "duration": round(sp["end"] - sp["start"] + 0.06, 3)})
    return segs[:n] if n else segs


def shard(tmp_path, segs, name="shard-0000"):
    p = tmp_path / f"{name}.segments.jsonl"
    write_jsonl(p, segs)
    return p


def run(tmp_path, segs, loaded, budget=120.0, transcribe=None, params=None, tag="out"):
    """``transcribe_shard`` over ``segs``: (counts, transcripts, rejects, log)."""
    tx, sr, ident = loaded
    p = shard(tmp_path, segs)
    out, rej, log = tmp_path / f"{tag}.jsonl", tmp_path / f"{tag}.rejects.jsonl", io.StringIO()
    counts = transcribe_shard(str(p), str(out), str(rej), params or AsrParams(model="demo"),
                              str(tmp_path / "scratch" / f"{tag}.jsonl"), transcribe or tx, sr, ident,
                              budget, log=log)
    return counts, list(read_jsonl(out)), list(read_jsonl(rej)), log.getvalue()
