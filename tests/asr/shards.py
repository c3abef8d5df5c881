"""Test support: demo-corpus segments written as a shard, and one shard run through the stage."""

from dataclasses import replace

from speechprep.asr.params import AsrParams
from speechprep.asr.stage import AsrStage
from speechprep.core import modelstage
from speechprep.core.modelstage import ShardFiles
from speechprep.io.jsonio import read_jsonl, write_jsonl
from tests.support import DEMO, REPO, TRUTH, cpu_batch, demo_segments  # noqa: F401 (the ASR tests import them from here)
from tests.support import params as config_params


def clean_segments(n=None):
    """The clean demo phrases as VAD would cut them (0.03 s of padding)."""
    return demo_segments(n, pad=0.03)


def params(**kw):
    """ASR parameters from config/config.yaml, with ``kw``."""
    return config_params(AsrParams, **{"model": "demo", "device": "cpu", **kw})


def shard(tmp_path, segs, name="shard-0000"):
    p = tmp_path / f"{name}.segments.jsonl"
    write_jsonl(p, segs)
    return p


def run(tmp_path, segs, loaded, budget=120.0, transcribe=None, p=None, tag="out"):
    """The stage over ``segs`` with a loaded transcriber (``loaded``: transcriber, sample rate,
    model path), ``budget`` padded seconds a batch: (counts, transcripts, rejects)."""
    tx, sr, model = loaded
    path = shard(tmp_path, segs)
    out, rej = tmp_path / f"{tag}.jsonl", tmp_path / f"{tag}.rejects.jsonl"
    p = replace(p or params(model=str(model)), batch=cpu_batch(budget))
    files = ShardFiles(str(path), str(out), str(rej), str(tmp_path / "scratch" / f"{tag}.jsonl"))
    counts = modelstage.run(AsrStage(p, transcribe or tx, sr), files)
    return counts, list(read_jsonl(out)), list(read_jsonl(rej))
