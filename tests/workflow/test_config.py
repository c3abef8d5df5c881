"""Config refusals and lint, as dry runs: fast (make test-fast runs them)."""

import subprocess
import sys

import pytest
from conftest import REPO, snakemake, write_config


def test_lint_is_clean():
    p = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, capture_output=True, text=True, encoding="utf-8"
    )
    assert p.returncode == 0 and "Lints for" not in p.stdout + p.stderr, p.stdout + p.stderr


def test_invalid_config_is_refused_at_load(tmp_path):
    write_config(tmp_path, {"both": {"audio_dir": "a", "manifest": "b.jsonl"}})
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc != 0 and "dataset 'both' has both `audio_dir` and `manifest`: give one" in out
    write_config(tmp_path, {"d": {"audio_dir": "a"}}, vad={"threshold": 2.0})
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc != 0 and "threshold" in out


@pytest.mark.parametrize(
    "sections,expect",
    [
        ({"vda": {"max_segment": 20}}, "'vda' was unexpected"),  # a misspelt top-level key
        ({"vad": {"max_segmnet": 20}}, "'max_segmnet' was unexpected"),
        ({"tts": {"languages": {"en": {"lowercse": True}}}}, "'lowercse' was unexpected"),
    ],
)
def test_unknown_keys_are_refused_at_every_level(tmp_path, sections, expect):
    write_config(tmp_path, {"d": {"audio_dir": "a"}}, **sections)
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc != 0 and expect in out, out[-3000:]


def test_dataset_without_input_names_both_keys(tmp_path):
    write_config(tmp_path, {"d": {"shards": 2}})
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc != 0 and "neither `audio_dir`" in out and "nor `manifest`" in out, out[-3000:]
    assert "not valid under any of the given schemas" not in out


def test_the_demo_plans_from_a_clean_directory(tmp_path):
    """A dry run of the whole workflow on the demo corpus: the DAG up to the ingest checkpoint."""
    write_config(tmp_path, {"demo": {"audio_dir": str(REPO / "resources" / "demo" / "audio"), "shards": 3}})
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc == 0, out[-3000:]
    for rule in ("ingest", "all"):  # the rest is planned once the checkpoint has run
        assert f"rule {rule}:" in out or f"checkpoint {rule}:" in out or f"localrule {rule}:" in out, rule


def test_a_real_corpus_meeting_the_demo_models_is_warned_before_the_run(tmp_path):
    from tests import real_speech

    librivox = real_speech.librivox()[0].path.parent
    write_config(tmp_path, {"librivox": {"audio_dir": str(librivox)}})
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc == 0, out[-3000:]
    assert "WARNING: dataset(s) librivox meet the demo model asr.model" in out and "low_confidence" in out
    assert "meet the demo model s2s.hubert" in out
