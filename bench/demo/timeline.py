"""Where a Snakemake run's wall time went, from its log: per rule and per job.

    .venvs/workflow/bin/python bench/demo/timeline.py [--jobs] [.snakemake/log/<run>.snakemake.log ...]

Reads the logs Snakemake writes under .snakemake/log/ (default: the newest), pairs
every job's start (``[date]`` then ``rule X:`` / ``localrule X:`` with its
``jobid``) with its ``Finished jobid: N`` line, and prints each rule's job
count, summed and longest job wall time, and the run's span; ``--jobs`` first
lists every job with its start and end in seconds from the start of its log.
Several logs (a run that was resumed) are read as one. Timestamps have a
resolution of one second. Standard library only.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?(?:rule|checkpoint|localcheckpoint) (\S+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")


def jobs(log: Path) -> list[tuple[str, datetime, datetime]]:
    """``(rule, start, end)`` of every job that finished in ``log``."""
    started: dict[str, tuple[str, datetime]] = {}
    done = []
    now = rule = None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if m := STAMP.match(line):
            now = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif (m := RULE.match(line)) and now:
            rule = m.group(1)
        elif (m := JOBID.match(line)) and rule and now:
            started[m.group(1)] = (rule, now)
            rule = None
        elif (m := FINISHED.match(line)) and now and m.group(1) in started:
            name, t0 = started.pop(m.group(1))
            done.append((name, t0, now))
    return done


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if a != "--jobs"]
    logs = [Path(a) for a in args] or sorted(Path(".snakemake/log").glob("*.snakemake.log"))[-1:]
    runs = [(log, jobs(log)) for log in logs]
    runs = [(log, rows) for log, rows in runs if rows]
    if not runs:
        print("no finished jobs in the Snakemake log(s) given or found under .snakemake/log", file=sys.stderr)
        return 2
    per_rule: dict[str, list[float]] = defaultdict(list)
    span = 0.0
    for log, rows in runs:
        t0 = min(start for _, start, _ in rows)
        span += (max(end for _, _, end in rows) - t0).total_seconds()
        if "--jobs" in argv:
            print(f"{log}:")
            for name, start, end in sorted(rows, key=lambda r: r[1]):
                print(f"  {(start - t0).total_seconds():6.0f} {(end - t0).total_seconds():6.0f}  {name}")
        for name, start, end in rows:
            per_rule[name].append((end - start).total_seconds())
    print(f"{'rule':<22} {'jobs':>4} {'sum s':>8} {'max s':>8}")
    for name, secs in sorted(per_rule.items(), key=lambda kv: -sum(kv[1])):
        print(f"{name:<22} {len(secs):>4} {sum(secs):>8.0f} {max(secs):>8.0f}")
    n = sum(len(s) for s in per_rule.values())
    busy = sum(sum(s) for s in per_rule.values())
    print(f"{n} jobs, {busy:.0f} s of job wall time, runs' span {span:.0f} s ({len(runs)} log(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
