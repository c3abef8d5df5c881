"""The demo pipeline through S2S (legacy demo HuBERT, k-means, unit HiFi-GAN)."""

import pytest
import soundfile as sf
from conftest import DEMO_SHARDS, REPO, jobs_run, read_jsonl

pytestmark = pytest.mark.slow  # real snakemake runs


def test_demo_s2s_models_built_and_used(demo):
    work, out = demo
    assert len(jobs_run(out, "demo_s2s_models")) == 1 and len(jobs_run(out, "s2s")) == DEMO_SHARDS
    for p in (work / "results" / "demo" / "logs" / "s2s").glob("*.log"):
        text = p.read_text(encoding="utf-8")
        assert f"stage 's2s' env ok: prefix={REPO / '.venvs' / 's2s'}" in text
        assert "config style: args" in text and "legacy g over dim 0 -> legacy g over dim 2" in text


def test_units_and_a_wav_for_every_segment(demo):
    work, _ = demo
    res = work / "results" / "demo"
    n = 0
    for shard in sorted(p.stem for p in (res / "shards").glob("*.jsonl")):
        segs = read_jsonl(res / "vad" / f"{shard}.segments.jsonl")
        units = read_jsonl(res / "s2s" / f"{shard}.units.jsonl")
        rejects = read_jsonl(res / "s2s" / f"{shard}.rejects.jsonl")
        assert sorted([u["id"] for u in units] + [r["id"] for r in rejects]) == sorted(s["id"] for s in segs)
        wavs = sorted(p.stem for p in (res / "s2s" / shard).glob("*.wav"))
        assert wavs == sorted(u["id"] for u in units)
        for u in units:
            assert u["frame_rate"] == 50.0 and u["units"] and all(isinstance(x, int) for x in u["units"])
            info = sf.info(res / "s2s" / shard / f"{u['id']}.wav")
            assert (info.samplerate, info.channels) == (16000, 1)
            assert info.frames == len(u["units"]) * 320  # units x hop
            n += 1
    assert n == len(read_jsonl(res / "asr" / "manifest.jsonl"))  # every segment, as in ASR
