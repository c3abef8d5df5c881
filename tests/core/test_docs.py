"""The docs say what the config holds: every key of config/config.yaml is documented (named
as `section.key` in docs/), and every `section.key` the docs name exists."""

import re

import yaml

from tests.support import CONFIG_FILE, REPO

DOCS = REPO / "docs"
# keys a dataset of `datasets:` may set (config/schema.yaml), named `datasets.<name>.<key>` in docs
DATASET = "datasets.<name>"


def config_keys() -> set[str]:
    cfg = yaml.safe_load(CONFIG_FILE.read_text(encoding="utf-8"))
    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text(encoding="utf-8"))
    keys = {k for k, v in cfg.items() if not isinstance(v, dict) or k == "datasets"}
    keys |= {f"{s}.{k}" for s, v in cfg.items() if isinstance(v, dict) and s != "datasets" for k in v}
    dataset = schema["properties"]["datasets"]["additionalProperties"]["properties"]
    keys |= {f"{DATASET}.{k}" for k in dataset}
    return keys


def documented() -> set[str]:
    sections = {k.split(".")[0] for k in config_keys() if "." in k} - {"datasets"}
    names = "|".join(sorted(sections))
    pattern = re.compile(rf"`((?:{names})\.[a-z_]+|datasets\.<name>\.[a-z_]+)`")
    return {m for p in DOCS.rglob("*.md") for m in pattern.findall(p.read_text(encoding="utf-8"))}


def test_every_config_key_is_documented():
    named = documented()
    missing = sorted(k for k in config_keys() if "." in k and k not in named)
    assert not missing, f"config keys no doc names as `section.key`: {missing}"


def test_every_documented_key_exists():
    unknown = sorted(documented() - config_keys())
    assert not unknown, f"docs name keys config/config.yaml does not have: {unknown}"


# a maintainer reads a page in a minute: no page of docs/ much over this many lines
MAX_PAGE_LINES = 420


def test_no_doc_page_is_long():
    long = {
        str(p.relative_to(REPO)): n
        for p in DOCS.rglob("*.md")
        if (n := p.read_text(encoding="utf-8").count("\n")) > MAX_PAGE_LINES
    }
    assert not long, f"pages over {MAX_PAGE_LINES} lines (split them by what they cover): {long}"


def test_bench_is_by_stage():
    """bench/ has a README naming each folder and no script at its top; each folder is a stage or workflow."""
    bench = REPO / "bench"
    top = sorted(p.name for p in bench.iterdir() if p.is_file() and p.name != "README.md")
    assert not top, f"scripts at bench/'s top level (put them in bench/<stage>/): {top}"
    readme = (bench / "README.md").read_text(encoding="utf-8")
    folders = sorted(p.name for p in bench.iterdir() if p.is_dir() and p.name not in ("out", "__pycache__"))
    unnamed = [f for f in folders if f"`{f}/`" not in readme]
    assert not unnamed, f"bench/README.md does not name: {unnamed}"
    stages = {p.name for p in (REPO / "speechprep").iterdir() if p.is_dir()} | {"workflow"}
    assert set(folders) <= stages, f"bench folders named after no stage: {sorted(set(folders) - stages)}"


def test_every_doc_page_is_linked():
    """Each page of docs/ is linked from README.md's docs list, docs/stages/README.md or docs/benchmarks.md."""
    index = "".join(
        (REPO / f).read_text(encoding="utf-8") for f in ("README.md", "docs/stages/README.md", "docs/benchmarks.md")
    )
    unlinked = []
    for p in DOCS.rglob("*.md"):
        rel = p.relative_to(DOCS)
        if f"docs/{rel}" not in index and f"({rel}" not in index and f"({p.name})" not in index:
            unlinked.append(str(p.relative_to(REPO)))
    assert not unlinked, f"pages no index links: {unlinked}"
