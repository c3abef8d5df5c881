"""The audio-feature job of a shard: rejects and accounting, OOM back-off, encoder errors, resume, long ids."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from conftest import P, demo_segments, fake_units, run, shard, text_ids

from speechprep.encoders import Encoders
from speechprep.io.audio import read_segment
from speechprep.io.jsonio import read_jsonl
from speechprep.io.npyio import load_npy, load_ref
from speechprep.tts import features, text
from tests.support import cpu_batch, params


def test_shard_features_rejects_and_accounting(tmp_path, encoders):
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:6]]
    bad = tmp_path / "corrupt.wav"
    bad.write_bytes(b"RIFF\x00\x00junk" * 10)
    silent = tmp_path / "silent.wav"
    sf.write(silent, np.zeros(16000 * 2, np.float32), 16000)
    extra = [
        {
            "id": "no_text",
            "audio_filepath": segs[0]["audio_filepath"],
            "offset": 0.5,
            "duration": 1.0,
            "text": " \u200b ",
        },
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
    assert (counts["segments"], counts["ok"], counts["rejected"]) == (len(all_segs), len(lines), len(rejects))
    for s, line in zip(segs, lines):
        assert line["text"] == s["text"] and line["offset"] == s["offset"]
        codes = load_npy(line["codes"], np.int32, 1)
        assert codes.tolist() == units[s["id"]] and line["codes_len"] == len(codes)
        assert load_npy(line["condition"], np.float32, 1).shape == (256,) == (line["condition_dim"],)
        assert load_npy(line["emo_vec"], np.float32, 1).shape == (88,) == (line["emo_vec_dim"],)
    assert not any((tmp_path / "tts" / ".partial" / "shard-0000").rglob("*.npy"))  # scratch emptied
    store = tmp_path / "tts" / ".partial" / "shard-0000.reuse"
    for line in lines:  # the reuse store holds each placed array as a link, not a copy
        assert Path(line["codes"]).samefile(store / "codes" / Path(line["codes"]).name)


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
    p = params(features.TtsParams, device="cpu", batch=cpu_batch(3.0))  # about two segments a batch
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


def test_encoder_failing_on_everything_fails_the_job(tmp_path, encoders):
    from speechprep.core.failures import SystematicFailure

    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:12]]
    calls = []

    def broken(clips):
        calls.append(len(clips))
        raise RuntimeError("Expected all tensors to be on the same device (injected)")

    p = params(features.TtsParams, device="cpu", model_failure={"first_errors": 5, "max_error_share": 0.5})
    with pytest.raises(
        SystematicFailure,
        match=r"resemblyzer \+ egemaps fails systematically: the first 5 "
        r"segments all failed.*same device",
    ):
        run(tmp_path, *shard(tmp_path, segs), p=p, encoders=broken)
    assert not (tmp_path / "tts" / "shard-0000.features.jsonl").exists()
    assert (tmp_path / "tts" / ".partial" / "shard-0000.jsonl").exists()  # kept, as on any failure


def test_mostly_failing_encoder_fails_at_the_end_by_share(tmp_path, encoders):
    from speechprep.core.failures import SystematicFailure

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
    text.train_tokenizer([s["text"] for s in demo_segments()], tok, 64)
    text_ids(tmp_path / "tts" / "shard-0000.features.jsonl", tok, tmp_path / "text.jsonl", tmp_path / "text_ids")
    ids = {x["id"]: x for x in read_jsonl(tmp_path / "text.jsonl")}
    assert len(Path(ids[long_id]["text_ids"]).name.encode("utf-8")) <= 200


@pytest.mark.parametrize("model", ["resemblyzer", "lab_speaker.onnx"])
def test_stored_speaker_embeddings_are_read_not_recomputed(tmp_path, model):
    """Lines from the curation stage carry their ``speakers.model`` vector (a packed per-shard
    array and a row): where ``tts.condition`` is that model (Resemblyzer, or the lab's,
    named the same) the features job takes it and never loads the condition encoder; with
    another condition it computes its own."""
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:4]]
    stored = np.random.default_rng(0).standard_normal((len(segs), 256)).astype(np.float32)
    np.save(tmp_path / "emb.npy", stored)
    lines = [{**s, "embedding_file": str(tmp_path / "emb.npy"), "embedding_row": i} for i, s in enumerate(segs)]
    if model != "resemblyzer":  # never loaded: its bytes are only hashed into the job's identity
        model = str(tmp_path / model)
        Path(model).write_bytes(b"a lab's ONNX speaker model")
    p = replace(P, condition=model, speaker_model=model)
    enc = Encoders(model, "egemaps", "cpu", threads=1)
    counts, out, rejects = run(tmp_path, *shard(tmp_path, lines), p=p, encoders=enc)
    assert counts["ok"] == 4 and not rejects and enc._condition is None
    for i, line in enumerate(out):
        np.testing.assert_array_equal(load_npy(line["condition"], np.float32, 1), stored[i])
        assert load_npy(line["emo_vec"], np.float32, 1).shape == (88,)
    if model == "resemblyzer":  # curation's vectors are another model's: the condition's own
        other = tmp_path / "other"
        p = replace(P, condition="resemblyzer", speaker_model=str(tmp_path / "lab.onnx"))
        enc = Encoders("resemblyzer", "egemaps", "cpu", threads=1)
        counts, out, _ = run(other, *shard(other, lines), p=p, encoders=enc)
        assert counts["ok"] == 4 and enc._condition is not None
        assert not np.array_equal(load_npy(out[0]["condition"], np.float32, 1), stored[0])


def test_packed_layout_holds_the_same_arrays_in_one_file_per_kind(tmp_path, encoders):
    segs = demo_segments()[:5]
    a, b = tmp_path / "files", tmp_path / "packed"
    _, files, _ = run(a, *shard(a, segs), encoders=encoders)
    _, packed, _ = run(b, *shard(b, segs), encoders=encoders, layout="packed")
    assert [x["id"] for x in packed] == [x["id"] for x in files] and len(files) == 5
    for kind in features.FEATURES:
        dtype = features.DTYPES[kind]
        assert sorted(p.name for p in (b / "tts" / "shard-0000" / kind).iterdir()) == ["packed.npy"]
        for f, p in zip(files, packed):
            assert p[kind].startswith(str(b / "tts" / "shard-0000" / kind / "packed.npy#"))
            assert np.array_equal(load_ref(p[kind], dtype, 1), load_npy(f[kind], dtype, 1))
    strip = lambda line: {k: v for k, v in line.items() if k not in features.FEATURES}
    assert [strip(x) for x in packed] == [strip(x) for x in files]
    assert not any((b / "tts" / ".partial" / "shard-0000").rglob("*.npy"))
    store = b / "tts" / ".partial" / "shard-0000.reuse" / "codes"  # the packed file, linked
    assert [p.name for p in store.iterdir()] == ["packed.npy"]
    assert (store / "packed.npy").samefile(b / "tts" / "shard-0000" / "codes" / "packed.npy")


@pytest.mark.parametrize("layout", ["files", "packed"])
def test_a_shard_run_again_reuses_unchanged_segments_and_loads_no_encoder_for_them(tmp_path, encoders, caplog, layout):
    """The shard lost a segment, and one segment's units changed: only that one runs; a
    shard that only lost a segment runs nothing and loads no encoder."""
    segs = demo_segments()[:5]
    units = {s["id"]: fake_units(s) for s in segs}
    _, first, _ = run(tmp_path, *shard(tmp_path, segs, units), encoders=encoders, layout=layout)
    arrays = lambda lines: {
        x["id"]: (load_ref(x["codes"], np.int32, 1), load_ref(x["condition"], np.float32, 1)) for x in lines
    }
    before = arrays(first)
    caplog.set_level("INFO")
    units[segs[2]["id"]] = [u + 1 for u in units[segs[2]["id"]]]
    _, second, _ = run(tmp_path, *shard(tmp_path, segs[1:], units), encoders=encoders, layout=layout)
    assert "4 segments, 3 already done or screened out" in caplog.text and "1 to process" in caplog.text
    assert [x["id"] for x in second] == [x["id"] for x in first[1:]]
    for k, (codes, condition) in arrays(second).items():  # reused as they were; the other recomputed
        assert np.array_equal(codes, before[k][0]) == (k != segs[2]["id"])
        assert np.array_equal(condition, before[k][1]) or (
            k == segs[2]["id"] and np.allclose(condition, before[k][1], atol=1e-5)
        )
    kept = arrays(second)
    caplog.clear()
    _, third, _ = run(tmp_path, *shard(tmp_path, segs[2:], units), encoders=None, layout=layout)  # or it loads them
    assert "3 of 3 segments reused from the store" in caplog.text and "loaded on" not in caplog.text
    strip = lambda lines: [{k: v for k, v in x.items() if k not in features.FEATURES} for x in lines]
    assert strip(third) == strip(second[1:])
    for k, (codes, condition) in arrays(third).items():
        assert np.array_equal(codes, kept[k][0]) and np.array_equal(condition, kept[k][1])


def test_a_new_layout_takes_every_array_from_the_store(tmp_path, encoders, caplog):
    """``tts.layout`` says where the arrays go, not what they hold: files, then packed, with no encoder."""
    segs = demo_segments()[:3]
    _, files, _ = run(tmp_path, *shard(tmp_path, segs), encoders=encoders)
    arrays = {(x["id"], k): load_ref(x[k]) for x in files for k in features.FEATURES}
    caplog.set_level("INFO")
    _, packed, _ = run(tmp_path, *shard(tmp_path, segs), encoders=None, layout="packed")
    assert "3 of 3 segments reused from the store" in caplog.text and "loaded on" not in caplog.text
    for (i, k), a in arrays.items():
        line = next(x for x in packed if x["id"] == i)
        assert "#" in line[k] and np.array_equal(load_ref(line[k]), a), (i, k)
