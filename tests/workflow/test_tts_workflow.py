"""The demo pipeline through TTS features (VAD -> ASR -> S2S -> TTS), as a user runs it."""

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    DEMO,
    NOT_DIARIZED,
    REPO,
    TRUTH,
    demo_models,
    jobs_run,
    kill_when_checkpointed,
    read_jsonl,
    snakemake,
    start_snakemake,
    write_config,
)

from speechprep.io.npyio import load_ref
from speechprep.text.normalize import TextNormalizer

pytestmark = pytest.mark.slow  # real snakemake runs

KINDS = {
    "text_ids": (np.int32, "text_ids_len"),
    "codes": (np.int32, "codes_len"),
    "condition": (np.float32, "condition_dim"),
    "emo_vec": (np.float32, "emo_vec_dim"),
}


def shard_names(res):
    return sorted(p.stem for p in (res / "shards").glob("shard-*.jsonl"))


def manifests(res):
    return {k: read_jsonl(res / "tts" / f"{k}_manifest.jsonl") for k in ("train", "val")}


def decoder(tokenizer_vocab):
    """SentencePiece decoding from the .vocab file (piece per id): the ids' pieces
    joined, U+2581 back to spaces."""
    pieces = [line.split("\t")[0] for line in tokenizer_vocab.read_text(encoding="utf-8").splitlines()]
    return lambda ids: "".join(pieces[i] for i in ids).replace("\u2581", " ").strip()


def test_tts_jobs_ran_per_shard_in_their_env(demo):
    work, out = demo
    n = len(shard_names(work / "results" / "demo"))
    assert len(jobs_run(out, "tts_features")) == n == len(jobs_run(out, "tts_text"))
    assert len(jobs_run(out, "tts_tokenizer")) == len(jobs_run(out, "tts_manifest")) == 1
    assert len(jobs_run(out, "tts_normalize")) == n and jobs_run(out, "tts_grammars") == ["lang=en"]
    log = (work / "results" / "demo" / "logs" / "tts" / "shard-0000.log").read_text(encoding="utf-8")
    assert f"stage 'tts' env ok: prefix={REPO / '.venvs' / 'tts'}" in log


def test_every_accepted_segment_has_four_artifacts(demo):
    work, _ = demo
    res = work / "results" / "demo"
    lines = [x for v in manifests(res).values() for x in v]
    assert len(lines) > 20
    for x in lines:
        for kind, (dtype, length) in KINDS.items():
            a = np.load(x[kind], allow_pickle=False)
            assert a.dtype == dtype and a.ndim == 1 and len(a) == x[length] > 0, (x["id"], kind)
            assert "/tts/shard-" in x[kind] and x[kind].endswith(f"/{kind}/{x['id']}.npy")
        assert x["condition_dim"] == 256 and x["emo_vec_dim"] == 88
        assert np.isfinite(np.load(x["emo_vec"])).all()
        assert abs(np.linalg.norm(np.load(x["condition"])) - 1) < 1e-4  # Resemblyzer: L2-normalised


def test_text_ids_decode_to_the_normalised_transcript(demo):
    work, _ = demo
    res = work / "results" / "demo"
    decode = decoder(work / "results" / "_all" / "tts" / "tokenizer.vocab")
    normalise = TextNormalizer({})  # the demo config's tts.languages
    # the transcript as the model wrote it (on the edge-case clips, which it was not
    # trained on, anything), normalised: never the model's exact output itself
    asr = {s["id"]: normalise(s["text"]) for s in read_jsonl(res / "asr" / "manifest.jsonl")}
    for x in (x for v in manifests(res).values() for x in v):
        assert x["text"] == asr[x["id"]]  # the transcript stays; the ids are of its spoken form
        assert decode(np.load(x["text_ids"]).tolist()) == x["text_normalized"]
        assert x["text_normalization"] == "spoken"  # the demo is English (asr.language)


def test_codes_equal_the_s2s_units(demo):
    work, _ = demo
    res = work / "results" / "demo"
    units = {u["id"]: u["units"] for s in shard_names(res) for u in read_jsonl(res / "s2s" / f"{s}.units.jsonl")}
    for x in (x for v in manifests(res).values() for x in v):
        assert np.load(x["codes"]).tolist() == units[x["id"]]


def test_accounting_across_the_chain_and_stats_agree(demo):
    work, _ = demo
    res = work / "results" / "demo"
    inputs = [e["id"] for e in read_jsonl(res / "manifest.jsonl")]
    in_shards = []
    tts_ids = []
    for s in shard_names(res):
        files = {e["id"] for e in read_jsonl(res / "shards" / f"{s}.jsonl")}
        in_shards += files
        vad_out = [x["id"] for x in read_jsonl(res / "vad" / f"{s}.stats.jsonl")]
        vad_rej = [x["id"] for x in read_jsonl(res / "vad" / f"{s}.rejects.jsonl")]
        assert sorted(vad_out + vad_rej) == sorted(files)
        segs = [x["id"] for x in read_jsonl(res / "vad" / f"{s}.segments.jsonl")]
        asr_out = [x["id"] for x in read_jsonl(res / "asr" / f"{s}.jsonl")]
        asr_rej = [x["id"] for x in read_jsonl(res / "asr" / f"{s}.rejects.jsonl")]
        assert sorted(asr_out + asr_rej) == sorted(segs)
        s2s_out = [x["id"] for x in read_jsonl(res / "s2s" / f"{s}.units.jsonl")]
        s2s_rej = [x["id"] for x in read_jsonl(res / "s2s" / f"{s}.rejects.jsonl")]
        assert sorted(s2s_out + s2s_rej) == sorted(segs)
        kept = [x["id"] for x in read_jsonl(res / "curate" / f"{s}.jsonl")]
        dropped = [x["id"] for x in read_jsonl(res / "curate" / f"{s}.rejects.jsonl")]
        assert sorted(kept + dropped) == sorted(asr_out)  # curation reads the ASR lines
        measured = [x["id"] for x in read_jsonl(res / "curate" / f"{s}.measures.jsonl")]
        feats = [x["id"] for x in read_jsonl(res / "tts" / f"{s}.features.jsonl")]
        tts_rej = read_jsonl(res / "tts" / f"{s}.rejects.jsonl")
        assert sorted(feats + [r["id"] for r in tts_rej]) == sorted(measured)  # TTS features: all it measured
        assert [x["id"] for x in read_jsonl(res / "tts" / f"{s}.text.jsonl")] == feats
        for kind in KINDS:
            assert sorted(p.stem for p in (res / "tts" / s / kind).glob("*.npy")) == sorted(feats)
        tts_ids += [f for f in feats if f in kept]
    left = sorted(p.name for p in (res / "tts" / ".partial").iterdir())  # no resume file, no scratch: the stores
    assert left == [f"{s}.reuse" for s in shard_names(res)], left
    assert sorted(in_shards) == sorted(inputs)  # every accepted input file in exactly one shard

    m = manifests(res)
    assert sorted(x["id"] for v in m.values() for x in v) == sorted(tts_ids)
    stats = json.loads((res / "tts" / "stats.json").read_text(encoding="utf-8"))
    assert stats["counts"]["train"] == len(m["train"]) and stats["counts"]["val"] == len(m["val"])
    assert len(m["val"]) >= 1 and len(m["train"]) > len(m["val"])
    for k in ("train", "val"):
        assert abs(stats["hours"][k] - sum(x["duration"] for x in m[k]) / 3600) < 1e-5
    tok = work / "results" / "_all" / "tts" / "tokenizer.model"
    assert stats["tokenizer"]["sha256"] == hashlib.sha256(tok.read_bytes()).hexdigest()
    assert stats["tokenizer"]["vocab_size"] == len((tok.with_suffix(".vocab")).read_text(encoding="utf-8").splitlines())
    roles = {f["role"]: f for f in stats["models"]}
    assert set(roles) == {
        "asr",
        "s2s.hubert",
        "s2s.kmeans",
        "s2s.vocoder",
        "s2s.vocoder_config",
        "tts.tokenizer",
        "tts.condition",
        "tts.emotion",
    }
    model = work / "resources" / "models" / "demo_asr.nemo"
    assert roles["asr"]["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert roles["tts.condition"]["path"].endswith("resemblyzer/pretrained.pt")
    assert len(stats["config_sha256"]) == 64 and stats["packages"]["tts"]["resemblyzer"] == "0.1.4"
    combined = json.loads((work / "results" / "_all" / "tts" / "stats.json").read_text(encoding="utf-8"))
    assert combined["counts"] == stats["counts"] and combined["datasets"] == ["demo"]
    assert read_jsonl(work / "results" / "_all" / "tts" / "train_manifest.jsonl") == m["train"]


def test_condition_vectors_separate_voices(demo, demo_copy):
    work, _ = demo
    by_voice = {}
    for x in (x for v in manifests(work / "results" / "demo").values() for x in v):
        rel = x["audio_filepath"][len(str(demo_copy)) + 1 :]
        if TRUTH["files"][rel].get("clean"):
            by_voice.setdefault(TRUTH["files"][rel]["voice"], []).append(np.load(x["condition"]))
    assert len(by_voice) >= 3
    same, cross = [], []
    items = [(v, e) for v, es in by_voice.items() for e in es]
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            (same if items[i][0] == items[j][0] else cross).append(float(items[i][1] @ items[j][1]))
    assert np.mean(same) > np.mean(cross), (np.mean(same), np.mean(cross))


# ---------------------------------------------------------------------------
# two datasets (one voice each, one shard each) that use the demo's models
# ---------------------------------------------------------------------------
LONG_NAME = "é" * 121 + ".wav"  # 246 bytes: a legal file name whose ids make longer names


@pytest.fixture(scope="module")
def small(tmp_path_factory, demo):
    work = tmp_path_factory.mktemp("tts_small")
    for rel, info in TRUTH["files"].items():
        if info.get("clean") and info["voice"] in ("us_male", "scottish"):
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(DEMO / "audio" / rel, work / rel)
    shutil.copy(DEMO / "audio" / "us_male" / "clip01.wav", work / "us_male" / LONG_NAME)
    base = {**demo_models(demo[0]), **NOT_DIARIZED}

    def configure(**tts):
        write_config(
            work,
            {
                "a": {"audio_dir": str(work / "us_male"), "shards": 1, "language": "en"},
                "b": {"audio_dir": str(work / "scottish"), "shards": 1},
            },
            **base,
            **({"tts": tts} if tts else {}),
        )

    configure()
    snakemake(work)
    return work, configure


def test_two_datasets_one_tokenizer_and_a_combined_split(small):
    work, _ = small
    res = work / "results"
    per = {ds: json.loads((res / ds / "tts" / "stats.json").read_text(encoding="utf-8")) for ds in ("a", "b")}
    both = json.loads((res / "_all" / "tts" / "stats.json").read_text(encoding="utf-8"))
    assert both["datasets"] == ["a", "b"] and per["a"]["tokenizer"] == per["b"]["tokenizer"] == both["tokenizer"]
    for k in ("train", "val", "rejected"):
        assert both["counts"][k] == per["a"]["counts"][k] + per["b"]["counts"][k]
    for split in ("train", "val"):
        combined = read_jsonl(res / "_all" / "tts" / f"{split}_manifest.jsonl")
        assert combined == read_jsonl(res / "a" / "tts" / f"{split}_manifest.jsonl") + read_jsonl(
            res / "b" / "tts" / f"{split}_manifest.jsonl"
        )
        assert {x["dataset"] for x in combined} <= {"a", "b"}
    lines = [x for ds in ("a", "b") for v in manifests(res / ds).values() for x in v]
    assert {x["dataset"] for x in lines} == {"a", "b"}
    assert all(x.get("language") == "en" for x in lines if x["dataset"] == "a")
    assert all("language" not in x for x in lines if x["dataset"] == "b")


def test_tokenizer_change_reruns_only_text_ids_and_manifests(small):
    work, configure = small
    configure()
    snakemake(work)  # up to date with the base config, whatever ran before
    configure(vocab_size=48)
    _, out = snakemake(work)
    ran = {
        rule: jobs_run(out, rule)
        for rule in (
            "tts_tokenizer",
            "tts_features",
            "tts_text",
            "tts_manifest",
            "tts_combined",
            "asr",
            "s2s",
            "vad",
            "report_plots",
        )
    }
    assert len(ran["tts_text"]) == 2 and len(ran["tts_tokenizer"]) == 1, out[-3000:]  # a shard per dataset
    assert len(ran["tts_manifest"]) == 2 and len(ran["tts_combined"]) == 1
    assert not ran["tts_features"] and not ran["asr"] and not ran["s2s"] and not ran["vad"]
    assert not ran["report_plots"]
    stats = json.loads((work / "results" / "a" / "tts" / "stats.json").read_text(encoding="utf-8"))
    assert stats["tokenizer"]["vocab_size"] <= 48
    decode = decoder(work / "results" / "_all" / "tts" / "tokenizer.vocab")
    for x in read_jsonl(work / "results" / "_all" / "tts" / "train_manifest.jsonl"):
        ids = np.load(x["text_ids"])
        assert len(ids) == x["text_ids_len"] and decode(ids.tolist()) == x["text"]
    _, out = snakemake(work, "--dry-run")
    assert "Nothing to be done" in out


def test_a_file_name_near_the_limit_goes_through_every_stage(small):
    """Its 242-byte id makes segment ids whose .wav/.npy names would not fit in 255
    bytes: they get a readable prefix + hash, and the lines keep the full ids."""
    work, _ = small
    res = work / "results" / "a"
    file_id = LONG_NAME[:-4]
    segs = [x for x in read_jsonl(res / "vad" / "shard-0000.segments.jsonl") if x["file_id"] == file_id]
    assert len(segs) == 2 and all(len(x["id"].encode("utf-8")) > 245 for x in segs)
    ids = {x["id"] for x in segs}
    assert ids <= {x["id"] for x in read_jsonl(res / "asr" / "shard-0000.jsonl")}
    units = [u for u in read_jsonl(res / "s2s" / "shard-0000.units.jsonl") if u["id"] in ids]
    assert len(units) == 2
    for u in units:
        name = u["wav"].rsplit("/", 1)[1]
        assert len(name.encode("utf-8")) <= 200 and name.startswith("é" * 20) and Path(u["wav"]).is_file()
    # a copy of clip01: curation drops it as a duplicate, naming both by their full ids
    dropped = {r["id"]: r for r in read_jsonl(res / "curate" / "shard-0000.rejects.jsonl") if r["id"] in ids}
    assert {r["duplicate_of"] for r in dropped.values()} == {"clip01_0000", "clip01_0001"}
    features = [x for x in read_jsonl(res / "tts" / "shard-0000.features.jsonl") if x["id"] in ids]
    texts = {x["id"]: x for x in read_jsonl(res / "tts" / "shard-0000.text.jsonl") if x["id"] in ids}
    assert len(features) == len(texts) == 2  # the features cover every measured segment
    for x in features:
        for kind in KINDS:
            path = texts[x["id"]][kind] if kind == "text_ids" else x[kind]
            assert len(path.rsplit("/", 1)[1].encode("utf-8")) <= 200 and np.load(path).size


def test_normalize_change_reruns_only_the_text_side(small):
    work, configure = small
    configure()
    snakemake(work)  # up to date with the base config, whatever ran before
    configure(normalize=False)
    _, out = snakemake(work)
    ran = {
        rule: jobs_run(out, rule)
        for rule in ("tts_grammars", "tts_normalize", "tts_tokenizer", "tts_features", "tts_text", "tts_manifest")
    }
    assert len(ran["tts_normalize"]) == 2 and len(ran["tts_text"]) == 2 and len(ran["tts_tokenizer"]) == 1, out[-3000:]
    assert len(ran["tts_manifest"]) == 2 and not ran["tts_features"] and not ran["tts_grammars"]
    stats = json.loads((work / "results" / "_all" / "tts" / "stats.json").read_text(encoding="utf-8"))
    assert stats["text_normalization"]["off"] == stats["counts"]["train"] + stats["counts"]["val"] > 0
    configure()
    _, out = snakemake(work)
    assert not jobs_run(out, "tts_features") and not jobs_run(out, "tts_grammars")  # the cache is still there


def test_phonemes_on_rerun_only_the_text_jobs_and_reach_the_manifests(small):
    """`tts.phonemes: espeak` (the default) after a run without: the text jobs and the
    manifests run again, never the audio features; every manifest line carries its
    phonemes and Piper's phoneme ids (of dataset a, declared English; b in asr.language's
    voice)."""
    work, configure = small
    configure(phonemes=None)
    snakemake(work)
    configure()
    _, out = snakemake(work)
    assert len(jobs_run(out, "tts_text")) == 2 and len(jobs_run(out, "tts_manifest")) == 2, out[-3000:]
    assert not jobs_run(out, "tts_features") and not jobs_run(out, "tts_normalize")
    for ds in ("a", "b"):
        lines = read_jsonl(work / "results" / ds / "tts" / "train_manifest.jsonl")
        assert lines and all(x["phonemes"].strip() for x in lines)
        for x in lines:
            ids = load_ref(x["phoneme_ids"], np.int32, 1)
            assert len(ids) == x["phoneme_ids_len"] and ids[0] == 1 and ids[-1] == 2  # Piper's ^ and $
    stats = json.loads((work / "results" / "_all" / "tts" / "stats.json").read_text(encoding="utf-8"))
    id_map = stats["phonemes"]["phoneme_id_map"]  # written once, as a Piper config reads it
    assert id_map["^"] == [1] and id_map["$"] == [2] and stats["phonemes"]["backend"] == "espeak"


SLOW_ENCODER = """
import sys, torch

class Slow(torch.nn.Module):
    # a lab's own condition encoder, slow on purpose (about 0.3 s a clip)
    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        m = torch.full((192, 192), 0.5)
        for _ in range(3000):
            m = torch.tanh(m @ m / 192.0)
        return torch.cat([wav.mean().reshape(1), wav.std().reshape(1), m[0, :30]])

torch.jit.script(Slow()).save(sys.argv[1])
"""


def test_killed_features_job_resumes_and_recomputes_a_truncated_array(small):
    """SIGKILL mid-shard, a truncated array planted among the finished ones (as a crash
    before the data reached the disk leaves it), rerun: it is detected and recomputed.
    The module's last test: it leaves the slow encoder in the config."""
    work, configure = small
    slow = work / "slow_encoder.pt"
    (work / "slow_encoder.py").write_text(SLOW_ENCODER, encoding="utf-8")  # TorchScript reads the source
    subprocess.run(
        [str(REPO / ".venvs" / "tts" / "bin" / "python"), str(work / "slow_encoder.py"), str(slow)], check=True
    )
    configure(condition=f"torchscript:{slow}", batch={"cpu_seconds": 1.0})  # one segment a batch
    res = work / "results" / "a" / "tts"
    proc = start_snakemake(work, "results/a/tts/shard-0000.features.jsonl")
    checkpoint = res / ".partial" / "shard-0000.jsonl"
    kill_when_checkpointed(proc, checkpoint, 2)
    done = [json.loads(x)["id"] for x in checkpoint.read_text(encoding="utf-8").splitlines()[1:] if x.endswith("}")]
    victim = res / ".partial" / "shard-0000" / "condition" / f"{done[0]}.npy"
    victim.write_bytes(victim.read_bytes()[:90])

    snakemake(work, "--unlock")
    _, out = snakemake(work, "results/a/tts/shard-0000.features.jsonl")
    assert jobs_run(out, "tts_features") == ["ds=a, shard=shard-0000"], out[-3000:]
    log = (work / "results" / "a" / "logs" / "tts" / "shard-0000.log").read_text(encoding="utf-8")
    n = len(read_jsonl(work / "results" / "a" / "asr" / "shard-0000.jsonl"))
    assert f"{n} segments, {len(done) - 1} already done or screened out" in log, log
    lines = {x["id"]: x for x in read_jsonl(res / "shard-0000.features.jsonl")}
    assert set(done) <= set(lines) and len(lines) == n
    for x in lines.values():
        v = np.load(x["condition"])
        assert v.dtype == np.float32 and v.shape == (32,) == (x["condition_dim"],)
    ref = np.load(lines[done[1]]["condition"])
    assert np.array_equal(np.load(lines[done[0]]["condition"])[2:], ref[2:])  # the module's constant part
    assert not checkpoint.exists() and not (res / ".partial" / "shard-0000").exists()
