"""Test support: demo-corpus segments written as a shard, and one shard run through the stage."""

from speechprep.asr import AsrParams, transcribe_shard
from speechprep.jsonio import read_jsonl, write_jsonl
from tests.support import DEMO, REPO, TRUTH, demo_segments  # noqa: F401 (the ASR tests import them from here)


def clean_segments(n=None):
    """The clean demo phrases as VAD would cut them (0.03 s of padding)."""
    return demo_segments(n, pad=0.03)


def params(**kw):
    """ASR parameters from config/config.yaml, with ``kw``."""
    return AsrParams.defaults(**{"model": "demo", **kw})


def shard(tmp_path, segs, name="shard-0000"):
    p = tmp_path / f"{name}.segments.jsonl"
    write_jsonl(p, segs)
    return p


def run(tmp_path, segs, loaded, budget=120.0, transcribe=None, p=None, tag="out"):
    """``transcribe_shard`` over ``segs``: (counts, transcripts, rejects)."""
    tx, sr, ident = loaded
    path = shard(tmp_path, segs)
    out, rej = tmp_path / f"{tag}.jsonl", tmp_path / f"{tag}.rejects.jsonl"
    counts = transcribe_shard(
        str(path),
        str(out),
        str(rej),
        p or params(),
        str(tmp_path / "scratch" / f"{tag}.jsonl"),
        transcribe or tx,
        sr,
        ident,
        budget,
    )
    return counts, list(read_jsonl(out)), list(read_jsonl(rej))
