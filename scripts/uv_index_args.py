"""Print pip's index settings as uv options, for scripts/setup.sh to eval.

uv does not read pip's configuration (pip.conf files, PIP_* variables), so
setup.sh asks pip itself (`python -m pip config list`, the values pip would
use: a PIP_* variable over an [install] setting over a [global] one) and
passes the same package sources to uv:

    index-url        -> --index-url URL
    extra-index-url  -> --extra-index-url URL   (one per URL)
    find-links       -> --find-links LOC        (one per location)
    no-index         -> --no-index
    trusted-host     -> --allow-insecure-host HOST
    cert             -> SSL_CERT_FILE           (unless already set)
    timeout          -> UV_HTTP_TIMEOUT         (unless already set)

Output is bash: `UV_INDEX_ARGS=(...)` and `export` lines, every value quoted
with shlex.quote. With no pip in the interpreter, or no such settings, the
array is empty and uv uses its own defaults (PyPI, plus any uv.toml / UV_*
settings of the user). Standard library only.

Usage: python scripts/uv_index_args.py [PYTHON]   (PYTHON: whose pip to ask;
default: this interpreter)
"""

from __future__ import annotations

import ast
import os
import shlex
import subprocess
import sys

# pip option -> uv option; list-valued pip options are whitespace-separated
LIST_OPTIONS = {
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "trusted-host": "--allow-insecure-host",
}
SINGLE_OPTIONS = {"index-url": "--index-url"}
ENV_OPTIONS = {"cert": "SSL_CERT_FILE", "timeout": "UV_HTTP_TIMEOUT", "default-timeout": "UV_HTTP_TIMEOUT"}
TRUE = {"1", "true", "yes", "on"}


def pip_config(python: str) -> dict[str, str]:
    """``{option: value}`` as pip resolves it for ``pip install``."""
    try:
        out = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=True,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(
            f"uv_index_args: cannot read pip's configuration with {python} ({e}); uv uses its defaults", file=sys.stderr
        )
        return {}
    # keys: "global.X" / "install.X" (config files), ":env:.X" (PIP_X variables)
    rank = {"global": 0, "install": 1, ":env:": 2}
    best: dict[str, tuple[int, str]] = {}
    for line in out.splitlines():
        key, sep, raw = line.partition("=")
        section, dot, option = key.rpartition(".")
        if not sep or not dot or section not in rank:
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        if option not in best or rank[section] >= best[option][0]:
            best[option] = (rank[section], str(value))
    return {option: value for option, (_, value) in best.items()}


def uv_settings(cfg: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    args: list[str] = []
    env: dict[str, str] = {}
    if cfg.get("no-index", "").lower() in TRUE:
        args.append("--no-index")
    for option, flag in SINGLE_OPTIONS.items():
        if cfg.get(option):
            args += [flag, cfg[option]]
    for option, flag in LIST_OPTIONS.items():
        for value in cfg.get(option, "").split():
            args += [flag, value]
    for option, var in ENV_OPTIONS.items():
        if cfg.get(option) and var not in os.environ and var not in env:
            env[var] = cfg[option]
    return args, env


def main(argv: list[str]) -> int:
    python = argv[1] if len(argv) > 1 else sys.executable
    args, env = uv_settings(pip_config(python))
    print("UV_INDEX_ARGS=(" + " ".join(shlex.quote(a) for a in args) + ")")
    for var, value in env.items():
        print(f"export {var}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
