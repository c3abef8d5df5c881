"""Checks of the workflow config that the JSON schema cannot word clearly (stdlib only).

``config/schema.yaml`` checks types, ranges and unknown keys; what it would
report as "not valid under any of the given schemas" is checked here first,
with a message that names the keys.
"""
from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    pass


def check(config: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` naming every dataset that lacks its input, or has two."""
    problems = []
    datasets = config.get("datasets")
    if isinstance(datasets, dict):
        for name, ds in datasets.items():
            if not isinstance(ds, dict):
                continue  # the schema says what is wrong
            given = [k for k in ("audio_dir", "manifest") if ds.get(k)]
            if not given:
                problems.append(f"dataset {name!r} has neither `audio_dir` (a directory of audio files) "
                                "nor `manifest` (a JSONL file with audio_filepath per line): give one")
            elif len(given) == 2:
                problems.append(f"dataset {name!r} has both `audio_dir` and `manifest`: give one")
    if problems:
        raise ConfigError("invalid config: " + "; ".join(problems))
