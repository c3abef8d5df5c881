"""What a whole run costs, from what a pilot measured: the arithmetic of ``python -m speechprep
plan`` (:mod:`speechprep.workflow.pilot` measures; this module scales and packs).

A rule's jobs in the whole run are a :class:`RuleLoad`: how many, each one's wall seconds,
threads, memory and GPUs. On a :class:`Cluster` of identical nodes a node runs as many of a
rule's jobs at once as its cores, memory and GPUs allow (:func:`slots`); a rule's jobs take
:func:`makespan` (waves of equal jobs over every node's slots); the run takes at least the longest
path through the rule graph, each rule weighing its makespan (:func:`critical_path`), and at
least its core-seconds over the cluster's cores (:func:`capacity_bound`): the larger of the
two. Two simplifications, both in docs/cluster.md: rules on parallel branches are each given
the whole cluster on the path (the capacity bound corrects it where the work is large), and a
rule starts once the rules before it have ended, though Snakemake starts a shard's next job as
soon as that shard's job before it is done (pessimistic). Standard library only;
tests/core/test_bill.py pins it on a hand-made graph.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import UsageError


@dataclass(frozen=True)
class Cluster:
    """``nodes`` identical nodes of ``cores`` cores, ``gpus`` GPUs and ``mem_gb`` GB each."""

    nodes: int
    cores: int
    gpus: int
    mem_gb: float


@dataclass(frozen=True)
class RuleLoad:
    """A rule's jobs in the whole run: how many, each one's wall ``seconds``, ``threads``,
    memory (``mem_mb``, what it asks the scheduler for) and ``gpus``."""

    jobs: int
    seconds: float
    threads: int
    mem_mb: float
    gpus: int = 0


def slots(load: RuleLoad, cluster: Cluster) -> int:
    """How many of the rule's jobs one node runs at once (0: one job does not fit a node)."""
    by = [cluster.cores // max(1, load.threads), int(cluster.mem_gb * 1024 // max(load.mem_mb, 1.0))]
    if load.gpus:
        by.append(cluster.gpus // load.gpus)
    return max(0, min(by))


def makespan(name: str, load: RuleLoad, cluster: Cluster) -> float:
    """Seconds the rule's jobs take on the whole cluster: waves of ``slots x nodes`` jobs."""
    if load.jobs <= 0:
        return 0.0
    at_once = slots(load, cluster) * cluster.nodes
    if at_once == 0:
        raise UsageError(
            f"a {name} job ({load.threads} threads, {load.mem_mb:.0f} MB, {load.gpus} GPUs) fits no node "
            f"of the cluster ({cluster.cores} cores, {cluster.mem_gb:g} GB, {cluster.gpus} GPUs)"
        )
    return math.ceil(load.jobs / at_once) * load.seconds


def critical_path(
    loads: dict[str, RuleLoad], edges: Iterable[tuple[str, str]], cluster: Cluster
) -> tuple[float, list[str]]:
    """``(seconds, rules)`` of the longest path through the rule graph (``edges``: ``(before,
    after)``; rules without a load weigh 0), each rule weighing its :func:`makespan`."""
    edges = [(a, b) for a, b in edges if a != b]
    nodes = sorted(set(loads) | {x for e in edges for x in e})
    before: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        before[b].append(a)
    done: dict[str, tuple[float, list[str]]] = {}

    def longest(n: str, seen: tuple[str, ...] = ()) -> tuple[float, list[str]]:
        if n in seen:
            raise UsageError(f"the rule graph has a cycle through {n}")
        if n not in done:
            own = makespan(n, loads[n], cluster) if n in loads else 0.0
            best = max((longest(p, (*seen, n)) for p in sorted(before[n])), default=(0.0, []), key=lambda x: x[0])
            done[n] = (best[0] + own, [*best[1], n])
        return done[n]

    return max((longest(n) for n in nodes), default=(0.0, []), key=lambda x: x[0])


def capacity_bound(loads: dict[str, RuleLoad], cluster: Cluster) -> float:
    """Seconds the cluster needs for the run's work, whatever the order: every job's
    core-seconds over all cores, and its GPU-seconds over all GPUs (a lower bound on the wall
    time, as the critical path is; where work is large, the one that holds)."""
    cores = sum(x.jobs * x.threads * x.seconds for x in loads.values()) / (cluster.nodes * cluster.cores)
    gpu_work = sum(x.jobs * x.gpus * x.seconds for x in loads.values())
    return max(cores, gpu_work / (cluster.nodes * cluster.gpus) if gpu_work else 0.0)


@dataclass(frozen=True)
class Line:
    """``value = fixed + per_item x items``: a run-wide step's cost fitted on two pilot sizes."""

    fixed: float
    per_item: float

    def __call__(self, items: float) -> float:
        return self.fixed + self.per_item * items


def fit(points: list[tuple[float, float]], noise: float = 0.0, proportional: bool = True) -> Line:
    """The line through the two measurements ``(items, value)`` (the last two). A change of at
    most ``noise`` or 10 % between them is no growth: the larger value, whatever the size
    (a streaming job's memory does not become 10^5 times its noise at 10^5 times the size).
    One measurement, or two at one size: ``proportional`` to the items, or the value."""
    if len(points) >= 2 and points[-1][0] != points[-2][0]:
        (n1, v1), (n2, v2) = sorted(points[-2:])
        if v2 - v1 <= max(noise, 0.1 * max(v1, v2)):
            return Line(max(v1, v2), 0.0)
        slope = (v2 - v1) / (n2 - n1)
        return Line(max(0.0, v2 - slope * n2), slope)
    n, v = points[-1]
    return Line(0.0, v / n) if n and proportional else Line(v, 0.0)


def fit_jobs(points: list[tuple[float, float]], min_spread: float = 1.5) -> Line:
    """``value = fixed + per_item x items`` over a rule's jobs (each ``(items, value)``, e.g. a
    shard's audio hours and its CPU seconds): least squares, neither part negative. A job's
    fixed part (interpreter, imports, the model's load) is what a pilot's small shards
    overstate when scaled by hours alone. Fewer than 3 jobs, or sizes too alike (the largest
    under ``min_spread`` times the smallest) to tell the parts apart: no fixed part."""
    pts = [(x, y) for x, y in points if x > 0]
    xs = [x for x, _ in pts]
    if len(pts) < 3 or max(xs) < min_spread * min(xs):
        return Line(0.0, sum(y for _, y in pts) / sum(xs) if pts else 0.0)
    mx, my = sum(xs) / len(pts), sum(y for _, y in pts) / len(pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x in xs)
    fixed = my - slope * mx
    if fixed < 0:  # through the origin
        return Line(0.0, sum(x * y for x, y in pts) / sum(x * x for x in xs))
    if slope < 0:  # no growth with size: the mean
        return Line(my, 0.0)
    return Line(fixed, slope)


def interval(rates: list[float], weights: list[float]) -> tuple[float, float] | None:
    """A 95% interval of the weighted mean of per-shard ``rates`` (their standard error over
    the shards; ``None`` with fewer than 2 shards)."""
    if len(rates) < 2 or sum(weights) <= 0:
        return None
    w = sum(weights)
    mean = sum(r * x for r, x in zip(rates, weights, strict=True)) / w
    var = sum(x * (r - mean) ** 2 for r, x in zip(rates, weights, strict=True)) / w
    se = math.sqrt(var / (len(rates) - 1))
    return max(0.0, mean - 1.96 * se), mean + 1.96 * se


@dataclass(frozen=True)
class FileCost:
    """``value = per_file + per_second x s + per_second2 x s^2``: one file's cost by its length
    ``s`` (a diarization job's CPU seconds by the file's seconds of speech)."""

    per_file: float
    per_second: float
    per_second2: float

    def __call__(self, seconds: float) -> float:
        return self.per_file + self.per_second * seconds + self.per_second2 * seconds * seconds


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """``a x = b`` by Gaussian elimination with partial pivoting (None: singular)."""
    n = len(b)
    m = [[*row, v] for row, v in zip(a, b, strict=True)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(m[r][i]))
        if abs(m[p][i]) < 1e-12 * max(1.0, max(abs(x) for row in m for x in row[:n])):
            return None
        m[i], m[p] = m[p], m[i]
        for r in range(i + 1, n):
            f = m[r][i] / m[i][i]
            m[r] = [x - f * y for x, y in zip(m[r], m[i], strict=True)]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][j] * x[j] for j in range(i + 1, n))) / m[i][i]
    return x


def fit_files(points: list[tuple[float, float]]) -> FileCost:
    """:class:`FileCost` over ``(seconds, value)`` points, least squares with no part negative:
    of the fits on every subset of the three terms whose parts are all >= 0, the one with the
    least squared error (the terms scaled to the longest file, so that a long file's square
    does not swamp the sums). No points: nothing; one length only: its mean per file."""
    pts = [(x, y) for x, y in points if x >= 0]
    if not pts:
        return FileCost(0.0, 0.0, 0.0)
    top = max(x for x, _ in pts) or 1.0
    rows = [((1.0, x / top, (x / top) ** 2), y) for x, y in pts]
    best: tuple[float, list[float]] = (sum(y * y for _, y in pts), [0.0, 0.0, 0.0])
    for terms in ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)):
        a = [[sum(r[i] * r[j] for r, _ in rows) for j in terms] for i in terms]
        coef = _solve(a, [sum(r[i] * y for r, y in rows) for i in terms])
        if coef is None or min(coef) < 0:
            continue
        full = [0.0, 0.0, 0.0]
        for i, v in zip(terms, coef, strict=True):
            full[i] = v
        err = sum((y - sum(f * t for f, t in zip(full, r, strict=True))) ** 2 for r, y in rows)
        if err < best[0] - 1e-12 * max(1.0, best[0]):
            best = (err, full)
    c0, c1, c2 = best[1]
    return FileCost(c0, c1 / top, c2 / top / top)


# -- sizing a run for a cluster (docs/cluster_scale.md, "Sizing a run for a cluster") -------------
# Snakemake's own cost per job (Snakemake 9.27, the project's pins): the DAG's, of the project's
# Snakefile (issue 65); the scheduler's, measured by bench/workflow/scheduler.py with the profiles'
# settings at 5x10^4 ready jobs (docs/cluster_scale.md, "Snakemake's own cost"): update them here
# from its figures.
SNAKEMAKE_DAG_S_PER_JOB = 1.55e-3  # CPU seconds to build the DAG, per job
SNAKEMAKE_DAG_KB_PER_JOB = 27.0  # the DAG's memory per job
SNAKEMAKE_SCHEDULER_S_PER_JOB = 5.1e-3  # CPU seconds to start a job and see it finish
# the final local ``all`` job checks each of its inputs against its producers one by one before
# it runs: CPU seconds per input squared (318 s at 5x10^4 inputs)
SNAKEMAKE_FINAL_S_PER_INPUT2 = 1.27e-7
SUBMIT_S_PER_JOB = 1.0  # wall seconds the SLURM executor plugin takes per submission
FIXED_SHARE = 0.05  # the most of a model job's wall time its fixed part may take
# the largest shard whose jobs' peak memory was measured (bench/workflow/shard_memory.py):
# nothing larger is recommended
MAX_SHARD_HOURS = 50.0


@dataclass(frozen=True)
class RuleSize:
    """A shard rule as the sizing sees it: ``fixed_s`` wall seconds of a job before its first
    item (its ``job ready`` line: imports, the model's restore, warm-up), ``per_hour_s`` wall
    seconds per audio hour of its shard after that, on its device; ``at_once`` of its jobs the
    cluster runs at once; ``jobs_per_shard``; ``most_hours``: the largest shard whose job fits a
    node's memory; ``model``: its fixed part is a model's (the share rule applies)."""

    name: str
    fixed_s: float
    per_hour_s: float
    at_once: int
    jobs_per_shard: float = 1.0
    most_hours: float = math.inf
    model: bool = True

    def share(self, hours: float) -> float:
        """The fixed part's share of a job of a shard of ``hours``."""
        whole = self.fixed_s + self.per_hour_s * hours
        return self.fixed_s / whole if whole > 0 else 0.0

    def hours_for_share(self, share: float = FIXED_SHARE) -> float:
        """The smallest shard (hours) whose job's fixed part is at most ``share`` of it."""
        if self.fixed_s <= 0:
            return 0.0
        if self.per_hour_s <= 0:
            return math.inf
        return self.fixed_s * (1 - share) / share / self.per_hour_s

    def hours_to_feed(self, jobs: int, submit_s: float = SUBMIT_S_PER_JOB) -> float:
        """The smallest shard whose job lasts as long as submitting ``jobs`` of the rule one by
        one takes (shorter jobs end before their devices are all fed: the submissions are the
        bottleneck)."""
        if self.per_hour_s <= 0:
            return 0.0
        return max(0.0, (min(jobs, self.at_once) * submit_s - self.fixed_s) / self.per_hour_s)


def _round_up(hours: float) -> float:
    """``hours`` rounded up to a quarter hour (from 1 h), else to two significant digits."""
    if hours <= 0:
        return 0.0
    if hours >= 1:
        return math.ceil(hours * 4 - 1e-9) / 4
    step = 10 ** (math.floor(math.log10(hours)) - 1)
    return round(math.ceil(hours / step - 1e-9) * step, 12)


def concurrent_jobs(rules: Iterable[RuleSize], max_queued: int | None = None, jobs: int | None = None) -> int:
    """Snakemake's ``--jobs`` for the run: as many as the rule the cluster runs most of at once
    can use, within the site's limits (``max_queued``: jobs a user may have queued or running,
    array tasks counted; ``jobs``: a cap of the site's or the user's)."""
    most = max((r.at_once for r in rules), default=1)
    return max(1, min(x for x in (most, max_queued, jobs) if x))


def recommend(
    rules: list[RuleSize],
    hours: float,
    configured: float,
    max_queued: int | None = None,
    jobs: int | None = None,
    most: float = MAX_SHARD_HOURS,
) -> dict:
    """The shard size for a corpus of ``hours`` on a cluster (``rules``' ``at_once``) and a
    site's limits: the smallest that keeps each model rule's fixed part under
    :data:`FIXED_SHARE` of its job and each rule's jobs long enough for the submissions to
    keep its devices fed, at most ``most`` and each rule's ``most_hours`` (memory); where no
    constraint binds, ``configured``. Where a rule needs shards larger than that allows, its
    jobs would have to take several shards each (``shards_per_job``). Returns ``shard_hours``,
    ``jobs`` (Snakemake's ``--jobs``), ``range`` (the smallest and largest size that hold),
    ``shards_per_job``, each rule's fixed share at that size and notes."""
    n = concurrent_jobs(rules, max_queued, jobs)
    need = {r.name: r.hours_for_share() for r in rules if r.model}
    feed = {r.name: r.hours_to_feed(n) for r in rules}
    low = max([*need.values(), *feed.values(), 0.0])
    high = min([most, *(r.most_hours for r in rules)])
    notes = []
    size = min(_round_up(low), high) if low > 0 else min(configured, high)
    per_job = {name: max(1, math.ceil(h / size)) for name, h in need.items() if size and h > size}
    for name in per_job:
        why = f"shards of at most {high:g} h" if math.isfinite(need[name]) else "no per-hour part measured"
        notes.append(
            f"{name}: its fixed part is under {FIXED_SHARE:.0%} of a job only at {need[name]:.3g} h a job "
            f"({why}): its jobs would take {per_job[name]} shards each; the runner runs one shard a job"
        )
    shards = math.ceil(hours / size) if size else 0
    for r in rules:
        if shards * r.jobs_per_shard < min(n, r.at_once):
            notes.append(f"{r.name}: {shards * r.jobs_per_shard:.0f} jobs for {min(n, r.at_once)} slots: some idle")
    return {
        "shard_hours": size,
        "jobs": n,
        "range": [round(low, 4), high],
        "shards": shards,
        "shards_per_job": per_job,
        "fixed_share": {r.name: round(r.share(size), 4) for r in rules if r.model},
        "notes": notes,
    }


def snakemake_cost(dag_jobs: int, final_inputs: int | None = None, per_part: int | None = None) -> dict:
    """Snakemake's own cost for a run of ``dag_jobs`` jobs (the constants above): its DAG's
    build (CPU s) and memory (MB), its scheduler's CPU to start them all and to run the final
    ``all`` job of ``final_inputs`` inputs (``final_job_cpu_s``, counted in ``scheduler_cpu_s``;
    unknown: as many as the jobs, an upper bound) read in parts of ``per_part`` (the config's
    ``targets_per_part``: ``all`` over a marker a part, each part a local job of its own), and
    the wall time of submitting them one by one."""
    n = dag_jobs if final_inputs is None else final_inputs
    parts = -(-n // per_part) if per_part and n > per_part else 1
    lookups = n**2 if parts == 1 else parts**2 + parts * per_part**2
    final = SNAKEMAKE_FINAL_S_PER_INPUT2 * lookups
    return {
        "dag_jobs": dag_jobs,
        "dag_s": round(dag_jobs * SNAKEMAKE_DAG_S_PER_JOB, 3),
        "dag_mb": round(dag_jobs * SNAKEMAKE_DAG_KB_PER_JOB / 1000, 3),
        "scheduler_cpu_s": round(dag_jobs * SNAKEMAKE_SCHEDULER_S_PER_JOB + final, 3),
        "final_job_cpu_s": round(final, 3),
        "submit_s": round(dag_jobs * SUBMIT_S_PER_JOB, 1),
    }
