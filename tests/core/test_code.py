"""The package's shape: stages are independent subpackages, functions stay short."""

import ast
from pathlib import Path

from tests.support import REPO

PACKAGE = REPO / "speechprep"
# subpackages that are stages (demo/ and models/ build models from code); shared pieces live in
# core/, encoders/ and text/
STAGES = {"ingest", "vad", "diarize", "music", "asr", "s2s", "curate", "tts", "export", "report"}
MAX_LINES = 60
# the package's layers, lowest first: a module imports only from its own layer or those below
LAYERS = (
    {"errors"},  # typed errors
    {"io"},  # files read and written
    {"core", "text", "encoders"},  # the job runtime and what several stages share
    STAGES | {"demo", "models"},
    {
        "jobs",
        "cli",
        "__main__",
        "workflow",
        "speakers",
    },  # the declarations gathered, the command line, the Snakefile's side
)


def modules(*roots: Path):
    for root in roots or (PACKAGE,):
        for path in sorted(root.rglob("*.py")):
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


def test_each_layer_imports_only_those_below_it():
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    tops = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert tops - {"__init__"} <= set(rank), f"in no layer: {sorted(tops - set(rank) - {'__init__'})}"
    wrong = []
    for path, tree in modules():
        own = path.relative_to(PACKAGE).with_suffix("").parts[0]
        if own == "__init__":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = imported_subpackage(path, node)
                if target in rank and rank[target] > rank[own]:
                    wrong.append(f"{path.relative_to(REPO)}:{node.lineno} ({own}) imports {target}")
    assert not wrong, wrong


def test_no_function_over_60_lines():
    long = []
    for path, tree in modules(PACKAGE, REPO / "bench", REPO / "scripts"):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def internal_imports(path: Path, tree: ast.AST) -> set[str]:
    """The speechprep modules a module imports, at its top or inside a function (a
    ``from . import x`` names module ``x`` when there is one)."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = (package[: len(package) - (node.level - 1)] if node.level else []) + (
                node.module.split(".") if node.module else []
            )
            for alias in node.names:
                candidate = ".".join([*base, alias.name])
                out.add(
                    candidate if (REPO / candidate.replace(".", "/")).with_suffix(".py").exists() else ".".join(base)
                )
        elif isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
    return {m for m in out if m.startswith("speechprep")}


def test_no_import_circles():
    """No module imports, even inside a function, a module that imports it back (directly or
    through others): each idea lives below what uses it."""
    graph = {_module_name(p): internal_imports(p, t) for p, t in modules()}
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    circles, state = [], {}

    def visit(m, stack):
        state[m] = "open"
        for d in sorted(graph[m]):
            if state.get(d) == "open":
                circles.append(" -> ".join([*stack[stack.index(d) :], d]))
            elif d not in state:
                visit(d, [*stack, d])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not circles, circles
