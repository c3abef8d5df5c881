"""Text ids, the train/val split, manifests, stats.json with provenance, the combined set."""

import json

import numpy as np
import pytest
from conftest import demo_segments, run, shard, text_ids

from speechprep.core.config import digest
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.io.npyio import load_ref
from speechprep.text.normalize import TextNormalizer
from speechprep.tts import manifests, normalize, text
from speechprep.tts.params import ManifestParams, TextParams
from speechprep.tts.text import load_tokenizer
from tests.support import REPO, params

OUTPUTS = ("train.jsonl", "val.jsonl", "stats.json")


def manifest_params(**kw):
    return params(ManifestParams, **{"hash_cache": None, **kw})


@pytest.mark.parametrize("layout", ["files", "packed"])
def test_text_ids_decode_to_the_normalised_text(tmp_path, layout):
    segs = demo_segments()
    m = tmp_path / "asr.jsonl"
    write_jsonl(m, [{**s, "text": f"\u201c{s['text']}\u201d \u2014 ok !"} for s in segs])
    normalized = str(tmp_path / "normalized.jsonl")
    normalize.run_normalize(str(m), normalized, params(TextParams, normalize=False))
    text.train_normalized_tokenizer([normalized], 64, str(tmp_path / "tok.model"))
    index = tmp_path / "features.jsonl"
    norm = TextNormalizer()
    write_jsonl(index, [{"id": s["id"], "text": norm(f"\u201c{s['text']}\u201d \u2014 ok !")} for s in segs])
    n = text_ids(index, tmp_path / "tok.model", tmp_path / "text.jsonl", tmp_path / "ids", [normalized], layout)["ok"]
    sp = load_tokenizer(tmp_path / "tok.model")
    assert n == len(segs)
    for line, ref in zip(read_jsonl(tmp_path / "text.jsonl"), read_jsonl(index)):
        ids = load_ref(line["text_ids"], np.int32, 1)
        assert len(ids) == line["text_ids_len"] > 0
        assert sp.decode(ids.tolist()) == ref["text"]
    files = sorted(p.name for p in (tmp_path / "ids").iterdir())
    assert files == (["packed.npy"] if layout == "packed" else sorted(f"{s['id']}.npy" for s in segs))
    assert next(read_jsonl(index))["text"] == f'"{segs[0]["text"]}" - ok!'


def test_split_is_deterministic_and_stable_when_the_corpus_grows():
    ids = [f"utt{i:05d}" for i in range(20000)]
    val = {i for i in ids if manifests.is_val(i, 0.1)}
    assert 0.09 < len(val) / len(ids) < 0.11
    more = ids + [f"new{i:05d}" for i in range(5000)]
    assert {i for i in more if manifests.is_val(i, 0.1)} & set(ids) == val
    assert not any(manifests.is_val(i, 0.0) for i in ids) and all(manifests.is_val(i, 1.0) for i in ids)


def test_manifests_stats_and_combined_agree(tmp_path, encoders):
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:6]]
    segs.append({**segs[0], "id": "blank", "text": ""})
    counts, lines, rejects = run(tmp_path, *shard(tmp_path, segs), encoders=encoders)
    out = tmp_path / "tts"
    normalized = str(out / "shard-0000.normalized.jsonl")
    normalize.run_normalize(str(tmp_path / "asr" / "shard-0000.jsonl"), normalized, params(TextParams, normalize=False))
    text.train_normalized_tokenizer([normalized], 48, str(out / "tok.model"))
    text_ids(
        out / "shard-0000.features.jsonl",
        out / "tok.model",
        out / "shard-0000.text.jsonl",
        out / "shard-0000" / "text_ids",
        [normalized],
    )
    # upstream lines as ASR and S2S wrote them: the models' identity is read from there
    asr_lines, units_lines = tmp_path / "asr.jsonl", tmp_path / "units.jsonl"
    write_jsonl(asr_lines, [{**segs[0], "asr_model": "stt_en_fastconformer_ctc_large"}])
    s2s_ident = {k: f"/models/{k}.bin" for k in manifests.S2S_MODELS}
    s2s_ident.update({f"{k}_sha256": f"{i:064d}" for i, k in enumerate(manifests.S2S_MODELS)})
    write_jsonl(units_lines, [{"id": segs[0]["id"], "units": [1, 2], **s2s_ident}])
    cfg = {"tts": {"val_ratio": 0.4, "condition": "resemblyzer", "emotion": "egemaps", "threads": 2}}
    inputs = manifests.Inputs(
        [str(out / "shard-0000.features.jsonl")],
        [str(out / "shard-0000.text.jsonl")],
        [str(out / "shard-0000.rejects.jsonl"), str(out / "shard-0000.text.rejects.jsonl")],
        [str(asr_lines)],
        [str(units_lines)],
        str(out / "tok.model"),
        pins=[str(REPO / "envs" / f"{e}.yaml") for e in ("vad", "asr", "s2s")],
    )
    p = manifest_params(name="demo", val_ratio=0.4, config_sha256=digest(cfg))
    stats = manifests.build_manifests(p, inputs, manifests.Outputs(*(str(out / n) for n in OUTPUTS)))
    train, val = list(read_jsonl(out / "train.jsonl")), list(read_jsonl(out / "val.jsonl"))
    assert stats["counts"] == {"train": len(train), "val": len(val), "rejected": 1, "curated_out": 0}
    assert len(train) + len(val) == 6
    assert stats["rejects_by_reason"] == {"no_text": 1}
    assert all(manifests.is_val(x["id"], 0.4) for x in val) and not any(manifests.is_val(x["id"], 0.4) for x in train)
    for x in train + val:
        assert {
            "id",
            "text",
            "text_normalized",
            "audio_filepath",
            "offset",
            "duration",
            "text_ids",
            "text_ids_len",
            "codes",
            "codes_len",
            "condition",
            "condition_dim",
            "emo_vec",
            "emo_vec_dim",
            "dataset",
        } <= set(x)
    assert abs(stats["hours"]["train"] + stats["hours"]["val"] - sum(s["duration"] for s in segs[:6]) / 3600) < 1e-5
    roles = {m["role"]: m for m in stats["models"]}
    assert roles["asr"] == {"role": "asr", "path": "stt_en_fastconformer_ctc_large", "sha256": None}
    assert roles["s2s.kmeans"] == {"role": "s2s.kmeans", "path": "/models/kmeans.bin", "sha256": f"{1:064d}"}
    assert len(roles["tts.condition"]["sha256"]) == 64
    assert stats["tokenizer"]["vocab_size"] == load_tokenizer(out / "tok.model").get_piece_size()
    assert stats["packages"]["tts"]["sentencepiece"] == "0.2.3"
    assert stats["packages"]["tts"]["nemo-text-processing"] == "1.2.0"
    assert stats["text_normalization"]["off"] == 6 and stats["text_normalization"]["spoken"] == 0
    assert stats["packages"]["pinned"]["asr"]["nemo-toolkit"] == "3.0.0"
    # resource-only keys do not change the config digest; settings do
    assert stats["config_sha256"] == digest({**cfg, "tts": {**cfg["tts"], "threads": 8}})
    assert stats["config_sha256"] != digest({**cfg, "tts": {**cfg["tts"], "val_ratio": 0.5}})
    assert stats["config_sha256"] == digest({**cfg, "export": {"lufs": -23.0}})  # after TTS

    s2 = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    s2["dataset"] = "other"
    (out / "stats2.json").write_text(json.dumps(s2), encoding="utf-8")
    both = manifests.combine(
        [str(out / "stats.json"), str(out / "stats2.json")],
        [str(out / "train.jsonl")] * 2,
        [str(out / "val.jsonl")] * 2,
        str(out / "all_train.jsonl"),
        str(out / "all_val.jsonl"),
        str(out / "all_stats.json"),
    )
    assert both["counts"]["train"] == 2 * len(train) == len(list(read_jsonl(out / "all_train.jsonl")))
    assert both["text_normalization"]["off"] == 12
    assert both["datasets"] == ["demo", "other"] and both["per_dataset"]["other"]["counts"] == stats["counts"]


def test_split_by_speaker_puts_no_speaker_in_both(tmp_path):
    feats, texts = tmp_path / "f.jsonl", tmp_path / "t.jsonl"
    speakers = [f"spk{i}" for i in range(20)]
    lines = [
        {
            "id": f"u{i:03d}",
            "audio_filepath": "/a.wav",
            "offset": 0.0,
            "duration": 1.0,
            "text": "hi",
            "speaker": speakers[i % 20],
        }
        for i in range(200)
    ]
    write_jsonl(feats, lines)
    write_jsonl(texts, [{"id": x["id"], "text_ids": "/x.npy", "text_ids_len": 1} for x in lines])
    text.train_tokenizer(["hi there"] * 10, tmp_path / "tok.model", 16)
    for by_speaker in (False, True):
        out = tmp_path / str(by_speaker)
        inputs = manifests.Inputs([str(feats)], [str(texts)], [], [], [], str(tmp_path / "tok.model"))
        p = manifest_params(name="d", val_ratio=0.3, config_sha256="x", split_by_speaker=by_speaker)
        manifests.build_manifests(p, inputs, manifests.Outputs(*(str(out / n) for n in OUTPUTS)))
        train = {x["speaker"] for x in read_jsonl(out / "train.jsonl")}
        val = {x["speaker"] for x in read_jsonl(out / "val.jsonl")}
        assert val and train
        assert (not train & val) == by_speaker  # by id, 200 segments of 20 speakers land on both sides
