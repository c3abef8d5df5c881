"""The package's shape: stages are independent subpackages, functions stay short."""

import ast
from pathlib import Path

from tests.support import REPO

PACKAGE = REPO / "speechprep"
# subpackages that are stages (or build a stage's demo models); shared pieces live in core/,
# encoders.py and text/
STAGES = {"ingest", "vad", "diarize", "asr", "s2s", "curate", "tts", "export", "report"}
MAX_LINES = 60


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def imported_subpackage(path: Path, node: ast.ImportFrom) -> str | None:
    """The top-level subpackage of speechprep an import names (None for a relative import
    within the module's own subpackage, or another package)."""
    if node.level == 0:
        parts = (node.module or "").split(".")
        return parts[1] if parts[0] == "speechprep" and len(parts) > 1 else None
    own = path.relative_to(PACKAGE).parts[:-1]
    base = list(own[: len(own) - (node.level - 1)])
    target = base + ((node.module or "").split(".") if node.module else [node.names[0].name])
    return target[0] if target else None


def test_no_stage_imports_another_stage():
    wrong = []
    for path, tree in modules():
        own = path.relative_to(PACKAGE).parts
        if len(own) < 2 or own[0] not in STAGES:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = imported_subpackage(path, node)
                if target in STAGES and target != own[0]:
                    wrong.append(f"{path.relative_to(REPO)}:{node.lineno} imports {target}")
    assert not wrong, wrong


def test_no_function_over_60_lines():
    long = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long
