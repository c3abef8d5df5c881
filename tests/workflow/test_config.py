"""Config refusals and lint, as dry runs: fast (make test-fast runs them)."""

import hashlib
import json
import shutil
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


def test_a_moved_key_is_refused_with_its_new_name(tmp_path):
    """A speaker model's thresholds moved into `speakers:`: an old key names its new one."""
    write_config(tmp_path, {"d": {"audio_dir": "a"}}, curate={"speaker_threshold": 0.2}, diarize={"switch_penalty": 1})
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc != 0 and "curate.speaker_threshold is now speakers.threshold" in out, out[-3000:]
    assert "diarize.switch_penalty is now speakers.diarize.switch_penalty" in out


def test_a_speaker_model_without_thresholds_of_its_own_stops_before_any_job(tmp_path):
    model = tmp_path / "lab.onnx"
    model.write_bytes(b"a lab's speaker model")
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    write_config(tmp_path, {"d": {"audio_dir": "a"}}, speakers={"model": str(model)})
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc != 0 and f"speakers.model {model} has no thresholds of its own" in out, out[-3000:]
    assert f"speakers.calibrated_for is resemblyzer, not {sha}" in out and f"calibrated_for: {sha}" in out
    assert "rule " not in out and "checkpoint " not in out  # nothing planned, nothing run
    write_config(tmp_path, {"d": {"audio_dir": "a"}}, speakers={"model": str(tmp_path / "gone.nemo")})
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc != 0 and "is neither resemblyzer nor an existing .nemo" in out, out[-3000:]


def test_a_diarization_model_that_is_not_a_file_stops_before_any_job(tmp_path):
    """`diarize.model` and a dataset's own `diarize_model` (a Sortformer .nemo) are checked
    at load, each named by its key."""
    write_config(
        tmp_path,
        {"d": {"audio_dir": "a", "diarize_model": str(tmp_path / "mine.nemo")}},
        diarize={"model": str(tmp_path / "gone.nemo")},
    )
    rc, out = snakemake(tmp_path, "--dry-run", check=False)
    assert rc != 0 and f"diarize.model: {tmp_path / 'gone.nemo'} is not a file" in out, out[-3000:]
    assert f"datasets.d.diarize_model: {tmp_path / 'mine.nemo'} is not a file" in out
    assert "rule " not in out and "checkpoint " not in out  # nothing planned, nothing run


def test_telephone_audio_meeting_the_built_in_speaker_model_is_warned_before_the_run(tmp_path):
    """Real telephone prompts (8 kHz, and the same upsampled to 16 kHz: measured, not read off
    the header) clustered with Resemblyzer get the warning with its figures and the two ways
    out; real wideband speech, speakers given in the manifest, or a model of the lab's own do not."""
    from tests import real_speech

    tel = tmp_path / "tel"
    tel.mkdir()
    prompts = real_speech.telephone_prompts("allison_en", 8)
    for u in prompts[:4]:
        shutil.copy(u.path, tel / u.path.name)
    for u in prompts[4:]:  # 16 kHz files of 4 kHz speech
        subprocess.run(["sox", str(u.path), "-r", "16000", str(tel / f"up_{u.path.name}")], check=True)
    wide = real_speech.librivox()[0].path.parent
    manifest = tmp_path / "given.jsonl"
    manifest.write_text(
        "".join(json.dumps({"audio_filepath": str(u.path), "speaker": "allison"}) + "\n" for u in prompts),
        encoding="utf-8",
    )
    model = tmp_path / "lab.onnx"
    model.write_bytes(b"a lab's speaker model")
    lab = {"model": str(model), "calibrated_for": hashlib.sha256(model.read_bytes()).hexdigest()}
    for datasets, speakers, warned in (
        ({"tel": {"audio_dir": str(tel)}}, {}, True),
        ({"wide": {"audio_dir": str(wide)}}, {}, False),
        ({"given": {"manifest": str(manifest)}}, {}, False),
        ({"tel": {"audio_dir": str(tel)}}, {"speakers": lab}, False),
    ):
        write_config(tmp_path / "work", datasets, **speakers)
        rc, out = snakemake(tmp_path / "work", "--dry-run", check=False)
        assert rc == 0, out[-3000:]
        line = next((x for x in out.splitlines() if "telephone band" in x), None)
        assert (line is not None) == warned, (datasets, out[-3000:])
    assert line is None
    write_config(tmp_path / "work", {"tel": {"audio_dir": str(tel)}})
    _, out = snakemake(tmp_path / "work", "--dry-run", check=False)
    line = next(x for x in out.splitlines() if "telephone band" in x)
    assert line.startswith("WARNING: dataset tel: 8 of 8 sampled files are telephone band"), line
    assert "inverse purity 0.69" in line and "speakers.model" in line and "`speaker` on every line" in line
