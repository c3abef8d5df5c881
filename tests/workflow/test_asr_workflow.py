"""The demo pipeline through ASR (NeMo, the demo model the workflow trains)."""

import json

import pytest
from conftest import DEMO_SHARDS, REPO, TRUTH, jobs_run, read_jsonl

pytestmark = pytest.mark.slow  # real snakemake runs


def derive_id(rel):
    return rel.rsplit(".", 1)[0].replace("/", "__")


def words(text):
    return text.split()


def wer(ref, hyp):
    r, h = words(ref), words(hyp)
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
            prev, d[j] = d[j], cur
    return d[len(h)] / max(1, len(r))


def test_demo_model_built_by_the_workflow_and_used(demo):
    work, out = demo
    assert len(jobs_run(out, "demo_asr_model")) == 1
    assert (work / "resources" / "models" / "demo_asr.nemo").is_file()
    assert len(jobs_run(out, "asr")) == DEMO_SHARDS and len(jobs_run(out, "asr_merge")) == 1
    log = (work / "resources" / "models" / "logs" / "demo_asr.log").read_text(encoding="utf-8")
    assert f"stage 'asr' env ok: prefix={REPO / '.venvs' / 'asr'}" in log
    for p in (work / "results" / "demo" / "logs" / "asr").glob("*.log"):
        text = p.read_text(encoding="utf-8")
        assert f"stage 'asr' env ok: prefix={REPO / '.venvs' / 'asr'}" in text
        assert "EncDecCTCModel" in text


def test_clean_clips_transcribed_exactly(demo):
    """WER 0 with the demo model: the plumbing works end to end."""
    work, _ = demo
    lines = read_jsonl(work / "results" / "demo" / "asr" / "manifest.jsonl")
    by_file = {}
    for x in lines:
        by_file.setdefault(x["file_id"], []).append(x)
    errors, n = 0.0, 0
    for rel, info in TRUTH["files"].items():
        if not info.get("clean"):
            continue
        segs = sorted(by_file[derive_id(rel)], key=lambda x: x["offset"])
        assert len(segs) == len(info["speech"]), rel
        for seg, ref in zip(segs, info["speech"]):
            overlap = min(seg["offset"] + seg["duration"], ref["end"]) - max(seg["offset"], ref["start"])
            assert overlap > 0.8 * (ref["end"] - ref["start"])
            errors += wer(ref["text"], seg["text"])
            n += 1
            assert seg["text"] == ref["text"], (seg["id"], seg["text"], ref["text"])
    assert n == 32 and errors == 0


def test_asr_accounting_and_contract_fields(demo):
    work, _ = demo
    res = work / "results" / "demo"
    shards = sorted(p.stem for p in (res / "shards").glob("*.jsonl"))
    total = 0
    for s in shards:
        segs = read_jsonl(res / "vad" / f"{s}.segments.jsonl")
        out = read_jsonl(res / "asr" / f"{s}.jsonl")
        rej = read_jsonl(res / "asr" / f"{s}.rejects.jsonl")
        ids = [x["id"] for x in out] + [r["id"] for r in rej]
        assert sorted(ids) == sorted(x["id"] for x in segs)
        for seg, line in zip(segs, out):
            assert {k: line[k] for k in seg} == seg  # the segment's fields, then text and model
            assert isinstance(line["text"], str) and len(line["asr_model_sha256"]) == 64
        total += len(out)
    merged = read_jsonl(res / "asr" / "manifest.jsonl")
    assert len(merged) == total
    summary = json.loads((res / "asr" / "summary.json").read_text(encoding="utf-8"))
    assert summary["transcribed"] == total and summary["shards"] == DEMO_SHARDS
    assert summary["empty_text"] == sum(x["text"] == "" for x in merged)
