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
    return {m for p in DOCS.glob("*.md") for m in pattern.findall(p.read_text(encoding="utf-8"))}


def test_every_config_key_is_documented():
    named = documented()
    missing = sorted(k for k in config_keys() if "." in k and k not in named)
    assert not missing, f"config keys no doc names as `section.key`: {missing}"


def test_every_documented_key_exists():
    unknown = sorted(documented() - config_keys())
    assert not unknown, f"docs name keys config/config.yaml does not have: {unknown}"
