"""Small shared pieces: file names from ids, stage parameters from the one config,
the cached model digest, the CLI's exit codes."""

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from speechprep.core.config import ConfigError, StageParams, check
from speechprep.core.names import MAX_STEM_BYTES, file_stem
from speechprep.io.modelfiles import sha256_cached, sha256_file
from tests.support import REPO, config, params


def test_file_stem_keeps_ordinary_ids_and_shortens_long_ones():
    assert file_stem("us_male__clip01_0000") == "us_male__clip01_0000"
    long_id = "é" * 200 + "_0001"
    stem = file_stem(long_id)
    assert len(stem.encode("utf-8")) <= MAX_STEM_BYTES and stem.startswith("é" * 50)
    assert file_stem("é" * 200 + "_0002") != stem  # the hash keeps ids apart
    for odd in ("a/b", "..", ".", "x\0y", "bad\ud83d"):
        s = file_stem(odd)
        assert "/" not in s and "\0" not in s and s not in (".", "..")
        s.encode("utf-8")  # always a valid name


@dataclass(frozen=True)
class _Params(StageParams):
    SECTION = "vad"
    threshold: float
    pad: float


def test_stage_params_refuse_unknown_and_missing_keys():
    assert _Params.from_dict({"threshold": 0.5, "pad": 0.1, "threads": 4}) == _Params(0.5, 0.1)
    with pytest.raises(ConfigError, match="vad settings: unknown treshold; missing threshold"):
        _Params.from_dict({"treshold": 0.5, "pad": 0.1})
    assert params(_Params).threshold == config()["vad"]["threshold"]


def test_caption_words_must_match_the_annotation_bins():
    cfg = config()
    check(cfg)  # the defaults agree: 7 bins, 7 words a measure
    cfg["curate"]["annotation_bins"] = 5
    with pytest.raises(ConfigError, match=r"tts\.captions\.words\.pitch has 7 words for curate\.annotation_bins 5"):
        check(cfg)
    cfg["tts"]["captions"] = None  # no captions: any bins
    check(cfg)


def test_model_digest_is_cached_per_file_version(tmp_path):
    model, cache = tmp_path / "m.nemo", tmp_path / "cache"
    model.write_bytes(b"weights" * 1000)
    assert sha256_cached(model, cache) == sha256_file(model)
    entry = next(cache.iterdir())
    entry.write_text(entry.read_text(encoding="utf-8").replace(sha256_file(model), "f" * 64), encoding="utf-8")
    assert sha256_cached(model, cache) == "f" * 64  # read from the cache, not recomputed
    model.write_bytes(b"other weights")  # a new version: size and mtime change
    assert sha256_cached(model, cache) == sha256_file(model)


def test_cli_lists_every_job_and_exits_2_on_bad_arguments():
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "speechprep", *a],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    p = run("--help")
    assert p.returncode == 0 and all(s in p.stdout for s in ("ingest", "vad", "asr", "s2s", "tts", "report"))
    p = run("vad", "run", "--shard", "x")
    assert p.returncode == 2 and "the following arguments are required" in p.stderr


def test_cli_flag_kinds():
    from speechprep.cli import parser

    a = parser().parse_args(["s2s", "export", "--checkpoint", "h.pt", "--out", "h.onnx", "--params", "{}"])
    assert (a.checkpoint, a.out, a.threads) == ("h.pt", "h.onnx", 1)  # required, required, optional with default
    a = parser().parse_args(
        ["vad", "merge", "--stats", "a", "b", "--rejects", "r", "--segments", "s", "--csv", "c", "--summary", "j"]
    )
    assert a.stats == ["a", "b"] and a.csv == "c"  # one or more
    base = ["--params", "{}", "--tokenizer", "t", "--features", "f", "--texts", "t", "--rejects", "r"]
    base += ["--asr", "a", "--units", "u", "--pins", "e", "--train", "tr", "--val", "v", "--stats", "s"]
    assert parser().parse_args(["tts", "manifest", *base]).kept is None  # optional list
    assert parser().parse_args(["tts", "manifest", *base, "--kept", "k1", "k2"]).kept == ["k1", "k2"]


def test_slurm_status_shims_go_first_on_path_once(monkeypatch, tmp_path):
    from speechprep.workflow.slurm import use_status_shims

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    use_status_shims(tmp_path)
    use_status_shims(tmp_path)
    assert os.environ["PATH"] == f"{tmp_path / 'scripts' / 'slurm'}:/usr/bin:/bin"
    # the wrappers are there, executable, and named as the commands they wrap
    shims = REPO / "scripts" / "slurm"
    assert all(os.access(shims / name, os.X_OK) for name in ("squeue", "sacct"))


def test_a_demo_model_on_another_corpus_is_said_before_the_run(tmp_path):
    from speechprep.core.config import demo_model_warnings

    cfg = config()
    assert demo_model_warnings(cfg, REPO) == []  # the demo corpus with the demo models
    cfg["datasets"] = {**cfg["datasets"], "lab": {"audio_dir": str(tmp_path)}}
    lines = demo_model_warnings(cfg, REPO)
    assert len(lines) == 2 and all("dataset(s) lab meet the demo model" in x for x in lines), lines
    assert "asr.model: resources/models/demo_asr.nemo" in lines[0] and "low_confidence" in lines[0]
    cfg["asr"] = {**cfg["asr"], "model": str(tmp_path / "parakeet.nemo")}
    cfg["stages"] = ["vad", "asr"]
    assert demo_model_warnings(cfg, REPO) == []  # a real ASR model; S2S not run


def test_a_job_log_names_its_shard_or_none():
    """A shard job's log lines carry its shard (five digits from shard-10000); a merge of every
    shard's outputs names none, not its first input's."""
    from speechprep.cli import _shard_label

    assert (
        _shard_label(["vad", "run", "--shard", "results/d/shards/shard-0007.jsonl", "--threads", "1"]) == "shard-0007"
    )
    assert _shard_label(["x", "--resume", "r/shard-10000.jsonl", "--segments", "r/shard-10000.segments.jsonl"]) == (
        "shard-10000"
    )
    assert _shard_label(["vad", "merge", "r/vad/shard-0000.stats.jsonl", "r/vad/shard-0001.stats.jsonl"]) == "-"
    assert _shard_label(["ingest", "run", "--manifest", "m.jsonl"]) == "-"
