"""envs/<stage>.yaml parsing and the in-environment check."""

import importlib.metadata

import pytest

from speechprep.core import envspec
from tests.support import REPO

ENVS = REPO / "envs"


def test_every_env_file_pins_exactly():
    stages = sorted(p.stem for p in ENVS.glob("*.yaml"))
    assert {"ingest", "vad", "workflow"} <= set(stages)
    for stage in stages:
        pins = envspec.pinned_packages(ENVS / f"{stage}.yaml")
        assert pins and all(v[0].isdigit() for v in pins.values())
    assert envspec.pinned_packages(ENVS / "vad.yaml")["ten-vad"] == "1.0.6.9"


def test_parser_reads_only_the_pip_list(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text(
        "name: x\ndependencies:\n  - python=3.11\n  - libcxx\n  - pip\n  - pip:\n"
        "      - a==1.0  # comment\n      - b-c==2.0.post1\nother: 1\n",
        encoding="utf-8",
    )
    assert envspec.pip_requirements(f) == ["a==1.0", "b-c==2.0.post1"]
    f.write_text("dependencies:\n  - pip:\n      - a>=1\n", encoding="utf-8")
    with pytest.raises(envspec.EnvSpecError, match="not an exact pin"):
        envspec.pinned_packages(f)


def test_check_passes_in_own_env_and_names_what_is_wrong_elsewhere():
    assert envspec.check_stage_env(ENVS / "workflow.yaml") == []
    problems = envspec.check_stage_env(ENVS / "vad.yaml")
    assert "ten-vad==1.0.6.9 is not installed" in problems
    assert importlib.metadata.version("numpy") == "2.4.6"  # shared pins are fine


def test_require_refuses_outside_its_env_with_exit_3():
    from speechprep.errors import EnvironmentMismatch

    with pytest.raises(EnvironmentMismatch, match="running outside its environment") as e:
        envspec.require_stage_env("vad", ENVS / "vad.yaml")
    assert e.value.exit_code == 3 and "ten-vad==1.0.6.9 is not installed" in str(e.value)


def test_another_stage_s_interpreter_is_found_beside_this_one():
    from speechprep.core.envspec import env_python

    ingest = env_python("ingest")  # setup builds every env side by side in .venvs/
    assert ingest is not None and ingest.is_file() and ingest.parent.parent.name == "ingest"
    assert env_python("no-such-env") is None
