"""A job's one declaration: what a stage package says about each job it runs.

Each stage declares its jobs in its own ``jobs.py`` with :func:`job`: the environment it
runs in, its parameters class, its files (the command line's flags, by the role each plays
in the rule: ``inputs``, ``outputs``, ``options`` from the rule's ``params``), its memory
model and its handler. Everything else reads that declaration: the command line builds
the job's arguments from it (:mod:`speechprep.cli`), the rules take their ``conda:``,
``envmodules:``, ``mem_mb`` and shell line from it (:mod:`speechprep.workflow.rules`), the
test runner picks each stage's environment from it. Standard library only: the Snakefile
imports it.

Flags: ``name`` required, ``name?`` optional, ``name+`` one or more, ``name*`` an optional
list, ``name=`` positional. A flag's name is the rule's key (``-`` read as ``_``); an
optional flag comes from the rule's ``params.<key>``, the whole flag or nothing (the rule
decides whether it is there: :func:`speechprep.workflow.rules.flag_list`); ``threads``
is the rule's threads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, make_dataclass
from typing import Any

from .memprobe import MEM_ENV

# MB per audio second of a GPU batch held in host memory: the decoded float32 audio, its
# padded batch and features before they are copied to the device.
HOST_MB_PER_S = 0.3


@dataclass(frozen=True)
class Memory:
    """A shard job's memory model, declared with its job (``speechprep.<stage>.jobs``):
    ``fixed_mb`` its fixed part (MB, from its demo peak with headroom: docs/cluster.md);
    ``batch_mb_per_s`` MB per audio second held at once in a model batch (activations,
    padded input, features); ``shard_mb_per_s`` MB per audio second of the whole shard kept
    until the shard is written; ``workers``: one decode block per worker thread (VAD);
    ``host_mb_per_s``: MB per audio second of a batch held in host memory when the model
    runs on a GPU."""

    fixed_mb: float
    batch_mb_per_s: float | None = None
    shard_mb_per_s: float = 0.0
    workers: bool = False
    host_mb_per_s: float = HOST_MB_PER_S


# a list flag's value that starts with this names a file of its items (:func:`listed`)
ARGS_FILE_PREFIX = "@"


def listed(words: str) -> str:
    """Shell words (already quoted) as one argument naming a file of them, each ended by a NUL
    byte (a path may hold any other): bash's process substitution of its builtin printf,
    which runs no program, so the list meets no limit on a program's arguments."""
    return f"{ARGS_FILE_PREFIX}<(printf '%s\\0' {words})"


def read_listed(path: str) -> list[str]:
    """The items of a :func:`listed` file (UTF-8; bytes that are not, as Python reads them
    in arguments). No items reads as none, not as one empty path."""
    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
        return [x for x in f.read().split("\0") if x]


# every declared job by name ("<stage> <job>"), filled as the stages' jobs modules are imported
DECLARED: dict[str, Job] = {}
ROLES = ("inputs", "outputs", "options")


@dataclass(frozen=True)
class Flag:
    name: str  # the command line's flag, without "--"
    kind: str  # "" required, "?" optional, "+" one or more, "*" optional list, "=" positional
    role: str  # inputs, outputs or options

    @property
    def key(self) -> str:
        """The rule's key and the files' field."""
        return self.name.replace("-", "_")

    @property
    def optional(self) -> bool:
        return self.kind in ("?", "*")

    def shell(self) -> str:
        """The flag in a rule's shell line. A list (``+``) goes to the job as a file of its
        items (:func:`listed`), not as arguments: a run-wide job reads a path per shard,
        and tens of thousands of them would pass the system's limit on a command's
        arguments (``getconf ARG_MAX``, 2 MB here)."""
        if self.name == "threads":
            return "--threads {threads}"
        if self.optional:
            return f"{{params.{self.key}}}"
        section = {"inputs": "input", "outputs": "output", "options": "params"}[self.role]
        value = f"{{{section}.{self.key}:q}}"
        return f"--{self.name} " + (listed(value) if self.kind == "+" else value)


@dataclass(frozen=True)
class Job:
    """One job of the workflow (module docstring). ``run(files, params)``: the handler,
    ``files`` a dataclass with one field per flag, ``params`` the parameters object (None
    without a parameters class)."""

    name: str
    env: str  # the stage environment it runs in (envs/<env>.yaml)
    run: Callable[[Any, Any], None]
    params: type | str | None = None  # a class, or "<package>.<module>:<class>" under speechprep
    inputs: str = ""
    outputs: str = ""
    options: str = ""
    memory: Memory | None = None  # the shard job's memory model (its request: workflow.resources)
    # a run-wide job's synthetic inputs of a given size, "<package>.<module>:<function>" under
    # speechprep: the plan runs the job on them at two sizes (speechprep.workflow.probe)
    probe: str | None = None
    flags: tuple[Flag, ...] = field(init=False)

    def __post_init__(self):
        flags = []
        for role in ROLES:
            for token in getattr(self, role).split():
                name, kind = (token[:-1], token[-1]) if token[-1] in "?+*=" else (token, "")
                flags.append(Flag(name, kind, role))
        names = [f.name for f in flags]
        if len(set(names)) != len(names):
            raise ValueError(f"job {self.name!r}: a flag declared twice in {names}")
        object.__setattr__(self, "flags", tuple(flags))

    @property
    def help(self) -> str:
        return (self.run.__doc__ or self.name).strip().rstrip(".")

    def files_class(self) -> type:
        return make_dataclass("Files", [(f.key, Any, field(default=None)) for f in self.flags], frozen=True)

    def files(self, namespace: Any) -> Any:
        """The job's files from parsed arguments (``argparse.Namespace``)."""
        return self.files_class()(**{f.key: getattr(namespace, f.key) for f in self.flags})

    def shell(self, job: str | None = None) -> str:
        """The rule's shell line (after its ``{params.cmd}``): every flag from the rule's key,
        ``--params`` from ``params.p``, the log. ``job``: the job's words when the rule chooses
        among jobs of the same flags (e.g. ``"asr {params.job}"``)."""
        parts = [job or self.name] + [f.shell() for f in self.flags if f.kind != "="]
        if self.params is not None:
            parts.append("--params {params.p:q}")
        # a shard job learns its memory request: a model job sizes its batches to it
        # (speechprep.core.memprobe)
        told = f"{MEM_ENV}={{resources.mem_mb}} " if self.memory is not None else ""
        return told + "{params.cmd} " + " ".join(parts) + " > {log:q} 2>&1"


def probe_shell(name: str, like: bool = False) -> str:
    """The shell line of job ``name``'s probe rule (rules/plan.smk; :mod:`speechprep.workflow.probe`):
    the rule's ``params.cmd``, ``params.dir``, ``params.p`` (and ``params.like``), its
    ``n`` wildcard (the items), output and log."""
    if not DECLARED[name].probe:
        raise ValueError(f"job {name!r} declares no probe")
    parts = ["{params.cmd} probe", f"'{name}'", "--items {wildcards.n} --dir {params.dir:q} --params {params.p:q}"]
    parts += ["--like {params.like:q}"] if like else []
    return " ".join([*parts, "--out {output:q} > {log:q} 2>&1"])


def job(
    name: str,
    env: str,
    params: type | None = None,
    inputs: str = "",
    outputs: str = "",
    options: str = "",
    memory: Memory | None = None,
    probe: str | None = None,
) -> Callable:
    """Declare job ``name`` (``"<stage> <job>"``) with the decorated function as its handler
    (its docstring is the job's help)."""

    def register(fn: Callable) -> Callable:
        if name in DECLARED:
            raise ValueError(f"job {name!r} declared twice")
        DECLARED[name] = Job(name, env, fn, params, inputs, outputs, options, memory, probe)
        return fn

    return register


def torch_threads(n: int) -> None:
    """Let torch use the rule's threads (a handler's first step when it runs a torch model)."""
    import torch

    torch.set_num_threads(max(1, n))


def shard_files(f: Any, arrays: dict[str, str] | None = None, layout: str = "files", passed: str | None = None):
    """A model job's :class:`speechprep.core.modelstage.ShardFiles` from its flags
    (``segments``, ``out``, ``rejects``, ``resume``)."""
    from .modelstage import ShardFiles

    return ShardFiles(f.segments, f.out, f.rejects, f.resume, arrays or {}, layout, passed)


def grammar_dirs(dirs) -> dict[str, str]:
    """Built text-normalisation grammars by language (each directory is named after its language)."""
    from pathlib import Path

    return {Path(d).name: d for d in dirs or ()}
