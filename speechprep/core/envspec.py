"""Per-stage environments: read the pins of ``envs/<stage>.yaml`` and check them.

``envs/<stage>.yaml`` is the single source of pins. Conda users get the whole
file; ``scripts/setup.sh`` builds ``.venvs/<stage>`` from its ``pip:`` list.

A rule's environment is applied by Snakemake (``--sdm env-modules`` or
``--sdm conda``), but a module that fails to load does not fail the job: the
shell runs ``module load X; cmd`` and ignores the load error. So every stage's
entry point calls :func:`require_stage_env` first; it exits non-zero with a
message naming what is wrong when the running interpreter does not carry the
stage's pinned packages at their pinned versions.

This module deliberately uses only the standard library: it must be able to
say "wrong environment" from any Python, including one without PyYAML.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import sys
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;#]+)$")


class EnvSpecError(ValueError):
    pass


def pip_requirements(path: Path) -> list[str]:
    """The entries of the ``pip:`` list of a conda environment file.

    Reads the small subset of YAML these files use: a ``- pip:`` item whose
    children are ``- <requirement>`` lines indented deeper than it.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    reqs: list[str] = []
    pip_indent = None
    for raw in lines:
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if pip_indent is None:
            if text in ("- pip:", "-pip:"):
                pip_indent = indent
            continue
        if indent <= pip_indent:
            break
        if not text.startswith("- "):
            raise EnvSpecError(f"{path}: unexpected line in pip list: {raw!r}")
        reqs.append(text[2:].strip().strip("'\""))
    if pip_indent is None:
        raise EnvSpecError(f"{path}: no `- pip:` list found")
    return reqs


def setup_options(path: Path) -> dict[str, str]:
    """``{requirement: pip options}`` for pip-list lines annotated ``# setup: <options>``.

    Conda ignores the comment; scripts/setup.sh installs these after the
    other pins, each with its options (e.g. ``--no-build-isolation``).
    """
    opts = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        text = raw.strip()
        if text.startswith("- ") and "# setup:" in text:
            req, _, opt = text[2:].partition("# setup:")
            opts[req.strip().strip("'\"")] = opt.strip()
    return opts


# The entry that installs speechprep itself (editable, from the checkout the
# Snakefile sets SPEECHPREP_REPO to): not a pin.
SELF = "--editable=${SPEECHPREP_REPO}"


def pinned_packages(path: Path) -> dict[str, str]:
    """``{distribution name: version}`` for every ``name==version`` pin.

    Entries that are not exact pins (options such as ``--no-build-isolation``
    lines are not allowed here) are an error: the env files pin exactly.
    """
    pins = {}
    for req in pip_requirements(path):
        if req == SELF:
            continue
        m = _PIN.match(req)
        if not m:
            raise EnvSpecError(f"{path}: {req!r} is not an exact pin (name==version)")
        pins[m.group(1)] = m.group(3)
    return pins


def _public_version(v: str) -> str:
    """``2.13.0+cpu`` -> ``2.13.0``: a local label still satisfies ``==2.13.0`` (PEP 440)."""
    return v.split("+", 1)[0]


def env_python(env: str) -> Path | None:
    """The interpreter of stage environment ``env``: the sibling of the running one
    (``<venvs>/<env>/bin/python``), else the checkout's ``.venvs/<env>``; None where neither is built."""
    repo = Path(__file__).resolve().parents[2]
    for python in (Path(sys.prefix).parent / env / "bin" / "python", repo / ".venvs" / env / "bin" / "python"):
        if python.is_file():
            return python
    return None


def check_stage_env(env_file: str | os.PathLike) -> list[str]:
    """Problems that make this interpreter the wrong one for the env file's pins (empty if none)."""
    problems = []
    for name, want in pinned_packages(Path(env_file)).items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{name}=={want} is not installed")
            continue
        if _public_version(have) != _public_version(want):
            problems.append(f"{name} is {have}, the env pins {want}")
    return problems


def require_stage_env(stage: str, env_file: str | os.PathLike) -> None:
    """Raise :class:`EnvironmentMismatch` (exit 3) unless we run in ``stage``'s env (the pins of
    its ``env_file``, ``envs/<stage>.yaml`` of the checkout the rule runs from)."""
    from ..errors import EnvironmentMismatch

    problems = check_stage_env(env_file)
    if problems:
        raise EnvironmentMismatch(
            f"the '{stage}' stage is running outside its environment "
            f"(interpreter {sys.executable}, prefix {sys.prefix}); it needs the pins of {env_file}: "
            + "; ".join(problems)
            + f". With env-modules: run scripts/setup.sh and check that `module load speechprep/{stage}` "
            "works in a job's shell. With conda: run snakemake with --sdm conda."
        )
    logging.getLogger("speechprep.envspec").info(
        "stage '%s' env ok: prefix=%s python=%s", stage, sys.prefix, sys.executable
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m speechprep.core.envspec PATH [--plain|--setup]`` (PATH: ``envs/<stage>.yaml``).

    Prints the stage's pip list, one requirement a line; ``--plain`` only the
    lines without a ``# setup:`` annotation, ``--setup`` only the annotated
    ones as ``<requirement>\t<options>``.
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2) or (len(args) == 2 and args[1] not in ("--plain", "--setup")):
        print("usage: python -m speechprep.core.envspec PATH [--plain|--setup]", file=sys.stderr)
        return 2
    path = Path(args[0])
    special = setup_options(path)
    for req in pip_requirements(path):
        if len(args) == 1 or (args[1] == "--plain" and req not in special):
            print(req)
        elif args[1] == "--setup" and req in special:
            print(f"{os.path.expandvars(req)}\t{special[req]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
