"""scripts/setup.sh: pip's package sources handed to uv; an env built, left alone, and a bad pin reported."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def uv_index_args(tmp_path, pip_conf, **env):
    """UV_INDEX_ARGS and exports as bash sees them after eval, with only ``pip_conf`` as pip's config."""
    (tmp_path / "pip.conf").write_text(pip_conf, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_")) and k != "SSL_CERT_FILE"}
    clean.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path), PIP_CONFIG_FILE=str(tmp_path / "pip.conf"), **env)
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "uv_index_args.py")],
        capture_output=True, text=True, encoding="utf-8", env=clean, check=True,
    ).stdout  # fmt: skip
    show = 'eval "$1"; for a in "${UV_INDEX_ARGS[@]}"; do echo "$a"; done; echo "timeout=${UV_HTTP_TIMEOUT:-}"'
    shown = subprocess.run(
        ["bash", "-c", show, "_", out], capture_output=True, text=True, encoding="utf-8", env=clean, check=True
    ).stdout.splitlines()
    return shown[:-1], shown[-1].removeprefix("timeout=")


def test_pip_sources_become_uv_options_with_pips_precedence(tmp_path):
    args, timeout = uv_index_args(
        tmp_path,
        "[global]\nindex-url = https://mirror.example/simple\n"
        "extra-index-url = file:///opt/a/simple\n  file:///opt/b/simple\nfind-links = /opt/global-wheels\n"
        "[install]\nfind-links = /opt/wheels /srv/it's $HOME\n",
        PIP_DEFAULT_TIMEOUT="42",
    )
    assert args == [
        "--index-url", "https://mirror.example/simple",
        "--extra-index-url", "file:///opt/a/simple", "--extra-index-url", "file:///opt/b/simple",
        # [install] over [global], split on whitespace as pip does; quoted, nothing expanded
        "--find-links", "/opt/wheels", "--find-links", "/srv/it's", "--find-links", "$HOME",
    ]  # fmt: skip
    assert timeout == "42"
    # a PIP_* variable wins over every file, as in pip
    args, _ = uv_index_args(
        tmp_path, "[global]\nfind-links = /opt/wheels\n", PIP_FIND_LINKS="/env/wheels", PIP_NO_INDEX="1"
    )
    assert args == ["--no-index", "--find-links", "/env/wheels"]


def test_no_pip_sources_leave_uv_on_its_defaults(tmp_path):
    args, timeout = uv_index_args(tmp_path, "[global]\ndisable-pip-version-check = 1\n")
    assert args == [] and timeout == ""


def _uv() -> str:
    bootstrapped = REPO / ".venvs" / ".uv" / "bin" / "uv"
    found = str(bootstrapped) if bootstrapped.exists() else shutil.which("uv")
    if not found:
        pytest.fail("no uv: scripts/setup.sh installs one into .venvs/.uv")
    return found


def _setup(copy: Path, *stages: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copy's own speechprep
    env.update(SPEECHPREP_UV=_uv(), SPEECHPREP_SETUP_JOBS="2")
    return subprocess.run(
        ["bash", str(copy / "scripts" / "setup.sh"), *stages],
        capture_output=True, text=True, encoding="utf-8", env=env, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
def test_setup_builds_an_env_leaves_it_alone_and_reports_a_bad_pin(tmp_path):
    copy = tmp_path / "repo"
    skip = {".venvs", ".git", ".cache", "results", ".snakemake", "models", "__pycache__", ".pytest_cache"}
    shutil.copytree(REPO, copy, ignore=lambda d, names: [n for n in names if n in skip], symlinks=True)

    first = _setup(copy, "ingest")
    assert first.returncode == 0, first.stderr
    assert "env 'ingest' built in" in first.stderr and "setup: ready: envs ingest" in first.stderr
    py = copy / ".venvs" / "ingest" / "bin" / "python"
    where = subprocess.run(
        [str(py), "-c", "import speechprep, soundfile; print(speechprep.__file__)"],
        capture_output=True, text=True, encoding="utf-8", check=True, cwd="/",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    ).stdout.strip()  # fmt: skip
    assert where == str(copy / "speechprep" / "__init__.py")  # editable, from the copy
    # pip is there (ensurepip's), for `python -m pip install --no-deps <pin>`
    assert subprocess.run([str(py), "-m", "pip", "--version"], capture_output=True).returncode == 0
    assert (copy / ".venvs" / "modulefiles" / "speechprep" / "ingest").is_file()
    assert "soundfile==0.14.0" in (copy / ".venvs" / ".logs" / "ingest.log").read_text(encoding="utf-8")
    stamp = (copy / ".venvs" / "ingest" / ".speechprep-stamp").read_text(encoding="utf-8")

    (copy / "envs" / "broken.yaml").write_text(
        "name: broken\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - pyyaml==0.0.1\n", encoding="utf-8"
    )
    second = _setup(copy, "ingest", "broken")
    assert second.returncode == 1
    assert "env 'ingest' up to date" in second.stderr
    assert "env(s) not built: broken" in second.stderr
    assert "pyyaml" in second.stderr.split("--- the end of", 1)[1]  # the end of its log, shown
    assert (copy / ".venvs" / "ingest" / ".speechprep-stamp").read_text(encoding="utf-8") == stamp
    assert not (copy / ".venvs" / "broken" / ".speechprep-stamp").exists()
