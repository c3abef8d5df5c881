"""A pytest plugin: each test's CPU seconds (its process's and every child's it waited for,
user + system) and wall seconds, a line per test, appended to ``CPU_PER_TEST_OUT`` (default
``cpu_per_test.tsv`` in the current directory); with pytest-xdist, each worker's lines name it.

    PYTHONPATH=. .venvs/workflow/bin/python -m pytest tests/workflow -p tests.cpu_per_test \\
        -n 2 --dist loadfile --no-loadscope-reorder -p no:cacheprovider
    sort -rn cpu_per_test.tsv | head

A test's module and session fixtures count in the first test that uses them. SLURM jobs
are not children of the test (slurmd runs them): their CPU is not counted.
"""

from __future__ import annotations

import os
import resource
import time

import pytest


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu(), time.monotonic()
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "-")
    line = f"{_cpu() - cpu:.1f}\t{time.monotonic() - wall:.1f}\t{worker}\t{item.nodeid}\n"
    with open(os.environ.get("CPU_PER_TEST_OUT", "cpu_per_test.tsv"), "a", encoding="utf-8") as f:
        f.write(line)
