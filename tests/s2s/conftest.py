"""Fixtures written by a 2021 stack: legacy_writer.py in .venvs/legacy_fixtures."""

import os
from pathlib import Path

import pytest
import torch
from s2s_helpers import REPO, run_writer, tagged


@pytest.fixture(scope="session")
def legacy_python():
    """The fixture interpreter: SPEECHPREP_LEGACY_PYTHON, else the one scripts/setup.sh builds."""
    python = Path(os.environ.get("SPEECHPREP_LEGACY_PYTHON") or REPO / ".venvs" / "legacy_fixtures" / "bin" / "python")
    if not python.exists():
        pytest.skip(
            f"no legacy fixture interpreter at {python}: scripts/setup.sh builds .venvs/legacy_fixtures "
            "from envs/legacy_fixtures.yaml (or set SPEECHPREP_LEGACY_PYTHON)"
        )
    return python


@pytest.fixture(scope="session")
def write_legacy(legacy_python, tmp_path_factory):
    """``write(state, out, legacy_format=False)``: ``state`` pickled by numpy 1.x, OmegaConf 2.0."""
    tmp = tmp_path_factory.mktemp("legacy_plain")

    def write(state, out: Path, legacy_format: bool = False) -> Path:
        plain = tmp / f"{out.name}.plain.pt"
        torch.save(tagged(state), plain)
        run_writer(legacy_python, "checkpoint", plain, out, *(["--legacy-format"] if legacy_format else []))
        return out

    return write


def pytest_collection_modifyitems(items):
    from tests.support import mark_slow

    mark_slow(items, {"demo_models", "models", "legacy_python", "write_legacy"})
