"""Every NeMo ASR model class through the stage, multitask prompts, broken model files, the hash cache.

The models are tiny random-weight ones built from code (``nemo_models``): their
texts are meaningless and never asserted, only that the stage gets one for
every segment.
"""

import io
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import asdict

import pytest
from nemo_models import KINDS
from shards import clean_segments, params, run, shard

from speechprep.asr import stage as asr
from speechprep.asr.words import NemoTranscriber
from speechprep.errors import ModelFileError
from speechprep.io.modelfiles import sha256_file

CLASSES = {
    "ctc": "EncDecCTCModelBPE",
    "rnnt": "EncDecRNNTBPEModel",
    "tdt": "EncDecRNNTBPEModel",
    "tdt_char": "EncDecRNNTModel",
    "hybrid": "EncDecHybridRNNTCTCBPEModel",
    "canary": "EncDecMultiTaskModel",
    "canary2": "EncDecMultiTaskModel",
}


def stage_inputs(model, path):
    """What ``asr.run`` hands ``transcribe_shard``: (transcriber, sample rate, identity)."""
    return NemoTranscriber(model), asr.model_sample_rate(model), path


def cli(tmp_path, segs, **kw):
    """``python -m speechprep asr run`` on one shard, as the workflow runs it (settings: the defaults, ``kw``)."""
    p = shard(tmp_path, segs)
    settings = json.dumps(asdict(params(**kw)))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "speechprep",
            "asr",
            "run",
            "--segments",
            str(p),
            "--params",
            settings,
            "--resume",
            str(tmp_path / "scratch.jsonl"),
            "--out",
            str(tmp_path / "out.jsonl"),
            "--rejects",
            str(tmp_path / "out.rejects.jsonl"),
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=900,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_class_transcribes_every_segment(tmp_path, nemo_model_file, kind):
    path = nemo_model_file(kind)
    model = asr.load_model(str(path), "cpu")
    assert type(model).__name__ == CLASSES[kind]
    if kind.startswith("tdt"):
        assert model.cfg.decoding.model_type == "tdt" and model.joint.num_extra_outputs == 5
    if kind.startswith("canary"):
        assert model.prompt_format == kind
    counts, lines, rejects = run(tmp_path, clean_segments(4), stage_inputs(model, path), p=params(model=str(path)))
    assert not rejects
    assert counts["ok"] == 4 and all(isinstance(x["text"], str) for x in lines)


@pytest.mark.parametrize("kind", ["canary", "canary2"])
def test_multitask_prompt_takes_the_segment_then_dataset_then_config_language(tmp_path, nemo_model_file, kind):
    path = nemo_model_file(kind)
    model = asr.load_model(str(path), "cpu")
    calls = []  # the prompt and the audio lengths of each real NeMo transcribe() call
    transcribe = model.transcribe

    def recording(audio, **kw):
        calls.append((kw, [len(a) for a in audio]))
        return transcribe(audio, **kw)

    model.transcribe = recording
    segs = clean_segments(6)
    for s, lang in zip(segs, ["de", "de", "en"]):
        s["language"] = lang
    for dataset_language, want in [("de", {"de": 5, "en": 1}), (None, {"de": 2, "en": 4})]:
        calls.clear()
        p = params(model=str(path), language="en", dataset_language=dataset_language)
        _, lines, rejects = run(
            tmp_path, segs, stage_inputs(model, path), budget=4.0, p=p, tag=f"ds-{dataset_language}"
        )
        assert not rejects and len(lines) == 6 and all(isinstance(x["text"], str) for x in lines)
        per_language = {}
        for kw, lengths in calls:
            assert kw["source_lang"] == kw["target_lang"]
            assert kw.get("task") == ("asr" if kind == "canary" else None)  # canary2 has no task slot
            assert kw.get("pnc") == "yes"
            assert len(lengths) == 1 or len(lengths) * max(lengths) / 16000 <= 4.0  # the padded-seconds budget
            per_language[kw["source_lang"]] = per_language.get(kw["source_lang"], 0) + len(lengths)
        assert per_language == want


def test_a_language_the_model_does_not_know_rejects_that_segment_saying_so(tmp_path, nemo_model_file):
    path = nemo_model_file("canary2")
    model = asr.load_model(str(path), "cpu")
    segs = clean_segments(4)
    segs[1]["language"] = "fr"
    _, lines, rejects = run(tmp_path, segs, stage_inputs(model, path), p=params(model=str(path)))
    assert [(r["id"], r["reason"]) for r in rejects] == [(segs[1]["id"], "model_error")]
    assert "'fr'" in rejects[0]["detail"] and "en, de" in rejects[0]["detail"]
    assert len(lines) == 3


def test_cli_exits_4_naming_the_model_when_it_fails_on_every_segment(tmp_path, nemo_model_file):
    path = nemo_model_file("canary")
    proc = cli(
        tmp_path,
        clean_segments(8),
        model=str(path),
        device="cpu",
        language="en",
        dataset_language="fr",
        model_failure={"first_errors": 3, "max_error_share": 0.5},
        hash_cache=str(tmp_path / "cache"),
    )
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert str(path) in last and "the first 3 segments all failed" in last and "'fr'" in last
    assert not (tmp_path / "out.jsonl").exists() and (tmp_path / "scratch.jsonl").exists()
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1  # the model hash, cached for the next job


def broken_copies(good, tmp_path):
    """Model files as they arrive broken: each name -> (path, what the reason must say)."""
    data = good.read_bytes()
    d = tmp_path / "broken"
    d.mkdir()
    (d / "truncated.nemo").write_bytes(data[: len(data) // 2])
    with tarfile.open(good) as src, tarfile.open(d / "weights_only.nemo", "w:") as dst:
        m = src.getmember("./model_weights.ckpt")
        dst.addfile(m, src.extractfile(m))
    (d / "text.nemo").write_text("404: Not Found\n", encoding="utf-8")
    (d / "empty.nemo").write_bytes(b"")
    with tarfile.open(good) as src, tarfile.open(d / "bad_weights.nemo", "w:") as dst:
        for m in src.getmembers():
            if m.name == "./model_weights.ckpt":
                junk = b"not a checkpoint" * 100
                m.size = len(junk)
                dst.addfile(m, io.BytesIO(junk))
            else:
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    return {
        "truncated": (d / "truncated.nemo", "truncated"),
        "weights_only": (d / "weights_only.nemo", "no model_config.yaml"),
        "text": (d / "text.nemo", "not a tar archive"),
        "empty": (d / "empty.nemo", "empty file"),
        "bad_weights": (d / "bad_weights.nemo", "NeMo could not restore it"),
    }


@pytest.fixture(scope="module")
def broken(nemo_model_file, tmp_path_factory):
    return broken_copies(nemo_model_file("ctc"), tmp_path_factory.mktemp("models"))


@pytest.mark.parametrize("name", ["truncated", "weights_only", "text", "empty", "bad_weights"])
def test_a_broken_model_file_is_reported_by_path_and_reason(broken, name):
    path, reason = broken[name]
    with pytest.raises(ModelFileError) as e:
        asr.load_model(str(path), "cpu")
    msg = str(e.value)
    assert msg.startswith(f"asr.model: {path} is not a valid .nemo file (") and msg.endswith(")")
    assert reason in msg and "\n" not in msg


def test_cli_exits_2_with_one_line_on_a_broken_model(tmp_path, broken):
    path, _ = broken["truncated"]
    proc = cli(tmp_path, clean_segments(2), model=str(path), device="cpu")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: asr.model: {path} is not a valid .nemo file (")


def test_missing_local_model_says_so(tmp_path):
    with pytest.raises(ModelFileError, match="no such file"):
        asr.load_model(str(tmp_path / "nope.nemo"), "cpu")


def test_model_hash_is_cached_per_file_version(tmp_path):
    model, cache = tmp_path / "model.nemo", tmp_path / "cache"
    model.write_bytes(b"a" * 4096)
    st = model.stat()
    first = asr.model_identity(str(model), str(cache))["asr_model_sha256"]
    assert first == sha256_file(model)
    entries = list(cache.glob("*.json"))
    assert len(entries) == 1 and first in entries[0].read_text(encoding="utf-8")
    # other bytes, same size and mtime: the cached digest is taken, the file is not read again
    model.write_bytes(b"b" * 4096)
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert asr.model_identity(str(model), str(cache))["asr_model_sha256"] == first
    # a new mtime, or a new size: hashed again
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert asr.model_identity(str(model), str(cache))["asr_model_sha256"] == sha256_file(model) != first
    model.write_bytes(b"b" * 4097)
    assert asr.model_identity(str(model), str(cache))["asr_model_sha256"] == sha256_file(model)
