"""The TTS feature stage: encoders, a shard's audio features and text ids, resume,
OOM back-off, rejects, splits, manifests and stats (real Resemblyzer, openSMILE,
SentencePiece and TorchScript; no Snakemake)."""
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from speechprep import tts
from speechprep.audio import read_segment
from speechprep.jsonio import read_jsonl, write_jsonl
from speechprep.tts_text import load_npy, load_tokenizer

warnings.simplefilter("ignore")
REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo"
TRUTH = json.loads((DEMO / "truth.json").read_text(encoding="utf-8"))
P = tts.TtsParams(device="cpu")


def demo_segments():
    """The clean demo clips' spoken phrases, as ASR lines (with their true text)."""
    segs = []
    for rel, info in sorted(TRUTH["files"].items()):
        if info.get("clean"):
            for k, sp in enumerate(info["speech"]):
                segs.append({"id": f"{rel.replace('/', '__').rsplit('.', 1)[0]}_{k:04d}",
                             "audio_filepath": str(DEMO / "audio" / rel), "offset": sp["start"],
                             "duration": round(sp["end"] - sp["start"], 3), "text": sp["text"],
                             "voice": info["voice"]})
    return segs


def fake_units(seg):
    return [(i * 7 + len(seg["id"])) % 50 for i in range(int(seg["duration"] * 50))]


def shard(tmp_path, segs, units=None, s2s_rejects=()):
    """Write a shard's ASR lines and S2S units; return the paths run_features takes."""
    asr = tmp_path / "asr" / "shard-0000.jsonl"
    write_jsonl(asr, segs)
    units = units if units is not None else {s["id"]: fake_units(s) for s in segs}
    u = tmp_path / "s2s" / "shard-0000.units.jsonl"
    write_jsonl(u, [{"id": k, "units": v, "frame_rate": 50.0} for k, v in units.items()])
    r = tmp_path / "s2s" / "shard-0000.rejects.jsonl"
    write_jsonl(r, list(s2s_rejects))
    return asr, u, r


def run(tmp_path, asr, units, s2s_rejects, p=P, **kw):
    out = tmp_path / "tts"
    counts = tts.run_features(str(asr), str(units), str(s2s_rejects), str(out / "shard-0000.features.jsonl"),
                              str(out / "shard-0000.rejects.jsonl"), str(out / "shard-0000"), p,
                              str(out / ".partial" / "shard-0000.jsonl"), log=io.StringIO(), **kw)
    return (counts, list(read_jsonl(out / "shard-0000.features.jsonl")),
            list(read_jsonl(out / "shard-0000.rejects.jsonl")))


@pytest.fixture(scope="module")
def encoders():
    return tts.Encoders(P, "cpu", threads=2, log=io.StringIO())


@pytest.fixture(scope="module")
def clips():
    return [read_segment(s) for s in demo_segments()[:6]]


def test_batched_resemblyzer_equals_embed_utterance(encoders, clips):
    from resemblyzer import preprocess_wav

    batched = encoders.condition(clips)
    for c, b in zip(clips, batched):
        single = encoders.condition.model.embed_utterance(preprocess_wav(c))
        assert b.shape == (256,) and b.dtype == np.float32
        np.testing.assert_allclose(b, single, atol=1e-5)


def test_egemaps_88_functionals_same_in_threads(encoders, clips):
    vecs = encoders.emotion(clips)
    serial = [tts.EgemapsEncoder(1)._one(c) for c in clips]
    for v, s in zip(vecs, serial):
        assert v.shape == (88,) and v.dtype == np.float32 and np.isfinite(v).all()
        np.testing.assert_array_equal(v, s)


def test_condition_vectors_separate_voices(encoders):
    segs = demo_segments()
    vecs = encoders.condition([read_segment(s) for s in segs])
    same, cross = [], []
    for i in range(len(segs)):
        for j in range(i + 1, len(segs)):
            (same if segs[i]["voice"] == segs[j]["voice"] else cross).append(float(vecs[i] @ vecs[j]))
    assert len({s["voice"] for s in segs}) >= 3
    assert np.mean(same) > np.mean(cross) + 0.05, (np.mean(same), np.mean(cross))


class Stats(torch.nn.Module):
    """A lab's own encoder, one clip at a time: mean, RMS and length of the audio."""

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        return torch.stack([wav.mean(), wav.pow(2).mean().sqrt(), torch.tensor(float(wav.shape[-1]))])


class BatchedStats(torch.nn.Module):
    """The same, batched: zero-padded (B, T) audio and the true lengths."""

    def forward(self, wav: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = (torch.arange(wav.shape[1])[None, :] < lengths[:, None]).float()
        n = lengths.float()
        mean = (wav * mask).sum(1) / n
        rms = ((wav * mask).pow(2).sum(1) / n).sqrt()
        return torch.stack([mean, rms, n], dim=1)


def test_torchscript_encoders_replace_both(tmp_path):
    one, batched = tmp_path / "stats.pt", tmp_path / "batched.pt"
    torch.jit.script(Stats()).save(str(one))
    torch.jit.script(BatchedStats()).save(str(batched))
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:5]]
    p = tts.TtsParams(device="cpu", condition=f"torchscript:{one}", emotion=f"torchscript:{batched}")
    counts, lines, rejects = run(tmp_path, *shard(tmp_path, segs), p=p)
    assert counts["ok"] == 5 and not rejects
    for s, line in zip(segs, lines):
        a = read_segment(s)
        want = np.array([a.mean(), np.sqrt((a ** 2).mean()), len(a)], dtype=np.float32)
        for kind in ("condition", "emo_vec"):
            v = load_npy(line[kind], np.float32, 1)
            np.testing.assert_allclose(v, want, rtol=1e-4, atol=1e-6)
            assert line[f"{kind}_dim" if kind == "emo_vec" else "condition_dim"] == 3
    ident = tts.encoder_identity(p.condition)
    assert ident["path"] == str(one.resolve()) and len(ident["sha256"]) == 64


def test_shard_features_rejects_and_accounting(tmp_path, encoders):
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:6]]
    bad = tmp_path / "corrupt.wav"
    bad.write_bytes(b"RIFF\x00\x00junk" * 10)
    silent = tmp_path / "silent.wav"
    sf.write(silent, np.zeros(16000 * 2, np.float32), 16000)
    extra = [
        {"id": "no_text", "audio_filepath": segs[0]["audio_filepath"], "offset": 0.5, "duration": 1.0, "text": " \u200b "},
        {"id": "no_units", "audio_filepath": segs[0]["audio_filepath"], "offset": 0.5, "duration": 1.0, "text": "hi"},
        {"id": "corrupt", "audio_filepath": str(bad), "offset": 0.0, "duration": 1.0, "text": "hi"},
        {"id": "tiny", "audio_filepath": segs[0]["audio_filepath"], "offset": 0.5, "duration": 0.05, "text": "hi"},
        {"id": "silent", "audio_filepath": str(silent), "offset": 0.0, "duration": 2.0, "text": "hi"},
    ]
    all_segs = segs + extra
    units = {s["id"]: fake_units(s) for s in all_segs if s["id"] != "no_units"}
    s2s_rej = [{"id": "no_units", "audio_filepath": "x", "stage": "s2s", "reason": "too_short", "detail": "d"}]
    counts, lines, rejects = run(tmp_path, *shard(tmp_path, all_segs, units, s2s_rej), encoders=encoders)
    reasons = {r["id"]: r["reason"] for r in rejects}
    assert reasons["no_text"] == "no_text" and reasons["no_units"] == "no_codes"
    assert reasons["corrupt"] == "unreadable" and reasons["tiny"] == "too_short"
    assert reasons.get("silent") == "no_speech"  # no speaker vector from digital silence
    assert "S2S rejected it (too_short: d)" in next(r["detail"] for r in rejects if r["id"] == "no_units")
    assert all(r["stage"] == "tts" and r["detail"] for r in rejects)
    # every input id in exactly one of the index or the rejects
    assert sorted([x["id"] for x in lines] + list(reasons)) == sorted(s["id"] for s in all_segs)
    assert counts == {"segments": len(all_segs), "ok": len(lines), "rejected": len(rejects)}
    for s, line in zip(segs, lines):
        assert line["text"] == s["text"] and line["offset"] == s["offset"]
        codes = load_npy(line["codes"], np.int32, 1)
        assert codes.tolist() == units[s["id"]] and line["codes_len"] == len(codes)
        assert load_npy(line["condition"], np.float32, 1).shape == (256,) == (line["condition_dim"],)
        assert load_npy(line["emo_vec"], np.float32, 1).shape == (88,) == (line["emo_vec_dim"],)
    assert not (tmp_path / "tts" / ".partial").exists() or not any((tmp_path / "tts" / ".partial").rglob("*.npy"))


class Flaky:
    """The real encoders, with an out-of-memory error injected for batches larger than
    ``max_batch`` and always for ``poison`` ids; counts the clips encoded."""

    def __init__(self, inner, max_batch, poison_len=None, stop_after=None):
        self.inner, self.max_batch, self.poison_len, self.stop_after = inner, max_batch, poison_len, stop_after
        self.calls, self.encoded = [], 0

    def __call__(self, clips):
        self.calls.append(len(clips))
        if len(clips) > self.max_batch or any(len(c) == self.poison_len for c in clips):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        if self.stop_after is not None and self.encoded >= self.stop_after:
            raise KeyboardInterrupt("killed (injected)")
        self.encoded += len(clips)
        return self.inner(clips)


def test_oom_halves_then_rejects_only_what_never_fits(tmp_path, encoders):
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:8]]
    poison = len(read_segment(segs[3]))
    flaky = Flaky(encoders, max_batch=2, poison_len=poison)
    counts, lines, rejects = run(tmp_path, *shard(tmp_path, segs), encoders=flaky)
    assert [r["id"] for r in rejects] == [segs[3]["id"]] and rejects[0]["reason"] == "oom"
    assert counts["ok"] == 7 and max(flaky.calls) == 8 and 1 in flaky.calls


def test_encoder_failure_on_one_clip_rejects_only_it(tmp_path, encoders):
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:4]]
    bad_len = len(read_segment(segs[1]))

    def picky(clips):
        if any(len(c) == bad_len for c in clips):
            raise ValueError("cannot encode this clip (injected)")
        return encoders(clips)

    counts, lines, rejects = run(tmp_path, *shard(tmp_path, segs), encoders=picky)
    assert [(r["id"], r["reason"]) for r in rejects] == [(segs[1]["id"], "encoder_error")]
    assert "cannot encode this clip" in rejects[0]["detail"] and counts["ok"] == 3


def test_killed_job_resumes_and_recomputes_a_truncated_array(tmp_path, encoders):
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:8]]
    paths = shard(tmp_path, segs)
    p = tts.TtsParams(device="cpu", cpu_batch_seconds=3.0)  # about two segments a batch
    first = Flaky(encoders, max_batch=99, stop_after=4)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, *paths, p=p, encoders=first)
    scratch = tmp_path / "tts" / ".partial" / "shard-0000"
    done = [r["id"] for r in list(read_jsonl(scratch.with_suffix(".jsonl")))[1:]]
    assert 4 <= len(done) < len(segs)
    victim = scratch / "condition" / f"{done[0]}.npy"
    victim.write_bytes(victim.read_bytes()[:100])  # cut short, as by a crash before the data reached disk
    assert load_npy(victim, np.float32, 1) is None

    again = Flaky(encoders, max_batch=99)
    counts, lines, rejects = run(tmp_path, *paths, p=p, encoders=again)
    assert again.encoded == len(segs) - len(done) + 1  # intact ones skipped, the truncated one redone
    assert counts["ok"] == len(segs) and not rejects
    fresh = encoders([read_segment(s) for s in segs])
    for line, (cond, emo) in zip(lines, fresh):
        np.testing.assert_allclose(load_npy(line["condition"], np.float32, 1), cond, atol=1e-5)
        np.testing.assert_allclose(load_npy(line["emo_vec"], np.float32, 1), emo, rtol=1e-5)
    assert not scratch.exists()


def test_text_ids_decode_to_the_normalised_text(tmp_path):
    segs = demo_segments()
    m = tmp_path / "asr.jsonl"
    write_jsonl(m, [{**s, "text": f"\u201c{s['text']}\u201d \u2014 ok !"} for s in segs])
    tts.train_corpus_tokenizer({"demo": str(m)}, {}, {}, 64, str(tmp_path / "tok.model"), log=io.StringIO())
    index = tmp_path / "features.jsonl"
    norm = tts.TextNormalizer()
    write_jsonl(index, [{"id": s["id"], "text": norm(f"\u201c{s['text']}\u201d \u2014 ok !")} for s in segs])
    n = tts.run_text(str(index), str(tmp_path / "tok.model"), str(tmp_path / "text.jsonl"),
                     str(tmp_path / "ids"), log=io.StringIO())
    sp = load_tokenizer(tmp_path / "tok.model")
    assert n == len(segs)
    for line, ref in zip(read_jsonl(tmp_path / "text.jsonl"), read_jsonl(index)):
        ids = load_npy(line["text_ids"], np.int32, 1)
        assert len(ids) == line["text_ids_len"] > 0
        assert sp.decode(ids.tolist()) == ref["text"]
    assert next(read_jsonl(index))["text"] == f'"{segs[0]["text"]}" - ok!'


def test_split_is_deterministic_and_stable_when_the_corpus_grows():
    ids = [f"utt{i:05d}" for i in range(20000)]
    val = {i for i in ids if tts.is_val(i, 0.1)}
    assert 0.09 < len(val) / len(ids) < 0.11
    more = ids + [f"new{i:05d}" for i in range(5000)]
    assert {i for i in more if tts.is_val(i, 0.1)} & set(ids) == val
    assert not any(tts.is_val(i, 0.0) for i in ids) and all(tts.is_val(i, 1.0) for i in ids)


def test_manifests_stats_and_combined_agree(tmp_path, encoders):
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:6]]
    segs.append({**segs[0], "id": "blank", "text": ""})
    counts, lines, rejects = run(tmp_path, *shard(tmp_path, segs), encoders=encoders)
    out = tmp_path / "tts"
    tts.train_corpus_tokenizer({"demo": str(tmp_path / "asr" / "shard-0000.jsonl")}, {}, {}, 48,
                               str(out / "tok.model"), log=io.StringIO())
    tts.run_text(str(out / "shard-0000.features.jsonl"), str(out / "tok.model"), str(out / "shard-0000.text.jsonl"),
                 str(out / "shard-0000" / "text_ids"), log=io.StringIO())
    cfg = {"asr": {"model": "stt_en_fastconformer_ctc_large"},
           "s2s": {k: str(out / "tok.model") for k in ("hubert", "kmeans", "vocoder", "vocoder_config")},
           "tts": {"val_ratio": 0.4, "condition": "resemblyzer", "emotion": "egemaps", "threads": 2}}
    stats = tts.build_manifests("demo", [str(out / "shard-0000.features.jsonl")], [str(out / "shard-0000.text.jsonl")],
                                [str(out / "shard-0000.rejects.jsonl")], str(out / "tok.model"), cfg,
                                str(out / "train.jsonl"), str(out / "val.jsonl"), str(out / "stats.json"))
    train, val = list(read_jsonl(out / "train.jsonl")), list(read_jsonl(out / "val.jsonl"))
    assert stats["counts"] == {"train": len(train), "val": len(val), "rejected": 1} and len(train) + len(val) == 6
    assert stats["rejects_by_reason"] == {"no_text": 1}
    assert all(tts.is_val(x["id"], 0.4) for x in val) and not any(tts.is_val(x["id"], 0.4) for x in train)
    for x in train + val:
        assert {"id", "text", "audio_filepath", "offset", "duration", "text_ids", "text_ids_len", "codes",
                "codes_len", "condition", "condition_dim", "emo_vec", "emo_vec_dim", "dataset"} <= set(x)
    assert abs(stats["hours"]["train"] + stats["hours"]["val"] - sum(s["duration"] for s in segs[:6]) / 3600) < 1e-5
    roles = {m["role"]: m for m in stats["models"]}
    assert roles["asr"]["sha256"] is None and len(roles["tts.condition"]["sha256"]) == 64
    assert stats["tokenizer"]["vocab_size"] == load_tokenizer(out / "tok.model").get_piece_size()
    assert stats["packages"]["tts"]["sentencepiece"] == "0.2.3"
    assert stats["packages"]["pinned"]["asr"]["nemo-toolkit"] == "3.0.0"
    # resource-only keys do not change the config digest; settings do
    assert stats["config_sha256"] == tts.config_digest({**cfg, "tts": {**cfg["tts"], "threads": 8}})
    assert stats["config_sha256"] != tts.config_digest({**cfg, "tts": {**cfg["tts"], "val_ratio": 0.5}})

    s2 = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    s2["dataset"] = "other"
    (out / "stats2.json").write_text(json.dumps(s2), encoding="utf-8")
    both = tts.combine([str(out / "stats.json"), str(out / "stats2.json")], [str(out / "train.jsonl")] * 2,
                       [str(out / "val.jsonl")] * 2, str(out / "all_train.jsonl"), str(out / "all_val.jsonl"),
                       str(out / "all_stats.json"))
    assert both["counts"]["train"] == 2 * len(train) == len(list(read_jsonl(out / "all_train.jsonl")))
    assert both["datasets"] == ["demo", "other"] and both["per_dataset"]["other"]["counts"] == stats["counts"]


def test_encoder_failing_on_everything_fails_the_job(tmp_path, encoders):
    from speechprep.failures import SystematicFailure

    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:12]]
    calls = []

    def broken(clips):
        calls.append(len(clips))
        raise RuntimeError("Expected all tensors to be on the same device (injected)")

    p = tts.TtsParams(device="cpu", model_failure={"first_errors": 5, "max_error_share": 0.5})
    with pytest.raises(SystematicFailure, match=r"resemblyzer \+ egemaps fails systematically: the first 5 "
                                                r"segments all failed.*same device"):
        run(tmp_path, *shard(tmp_path, segs), p=p, encoders=broken)
    assert not (tmp_path / "tts" / "shard-0000.features.jsonl").exists()
    assert (tmp_path / "tts" / ".partial" / "shard-0000.jsonl").exists()  # kept, as on any failure


def test_mostly_failing_encoder_fails_at_the_end_by_share(tmp_path, encoders):
    from speechprep.failures import SystematicFailure

    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:6]]
    good = len(read_segment(segs[0]))

    def mostly_broken(clips):
        if any(len(c) != good for c in clips):
            raise ValueError("bad input shape (injected)")
        return encoders(clips)

    with pytest.raises(SystematicFailure, match=r"5 of 6 segments failed"):
        run(tmp_path, *shard(tmp_path, segs), encoders=mostly_broken)


def test_ids_longer_than_a_file_name_get_a_safe_name(tmp_path, encoders):
    """A 300+ byte id (a long file name's segment) beside ordinary ones: all succeed, each
    array's name fits the file system, and the line keeps the full id."""
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:3]]
    long_id = "é" * 160 + "_Ω" * 20 + "_0000"
    assert len(long_id.encode("utf-8")) > 300
    segs[1] = {**segs[1], "id": long_id}
    counts, lines, rejects = run(tmp_path, *shard(tmp_path, segs), encoders=encoders)
    assert counts["ok"] == 3 and not rejects
    line = next(x for x in lines if x["id"] == long_id)
    for kind in ("codes", "condition", "emo_vec"):
        name = Path(line[kind]).name
        assert len(name.encode("utf-8")) <= 200 and name.startswith("é" * 10)
        assert load_npy(line[kind]) is not None
    tok = tmp_path / "tok.model"
    from speechprep.tts_text import train_tokenizer

    train_tokenizer([s["text"] for s in demo_segments()], tok, 64)
    tts.run_text(str(tmp_path / "tts" / "shard-0000.features.jsonl"), str(tok), str(tmp_path / "text.jsonl"),
                 str(tmp_path / "text_ids"), log=io.StringIO())
    ids = {x["id"]: x for x in read_jsonl(tmp_path / "text.jsonl")}
    assert len(Path(ids[long_id]["text_ids"]).name.encode("utf-8")) <= 200
