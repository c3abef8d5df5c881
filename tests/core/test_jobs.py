"""Each job declared once, in its stage's own jobs module: the command line, the rules and
the test runner read that declaration (speechprep.core.jobs)."""

import ast
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from speechprep.cli import expand_listed
from speechprep.core.jobs import DECLARED, Flag, Job, job
from speechprep.jobs import JOBS
from speechprep.workflow import probe

REPO = Path(__file__).resolve().parents[2]
RULES = sorted((REPO / "rules").glob("*.smk"))


def rule_blocks():
    """``(rule name, its text)`` of every rule and checkpoint of the workflow."""
    for f in RULES:
        text = f.read_text(encoding="utf-8")
        for m in re.finditer(r"(?ms)^(?:rule|checkpoint) (\w+):\n(.*?)(?=^\S|\Z)", text):
            yield m.group(1), m.group(2)


def test_every_job_is_declared_in_its_own_stage_package_and_nowhere_else():
    for name, spec in JOBS.items():
        stage = name.split()[0]
        assert spec.run.__module__ == f"speechprep.{stage}.jobs", name
    for path in (REPO / "speechprep").rglob("*.py"):
        if path.name == "jobs.py" and path.parent.parent.name == "speechprep":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "job"]
        assert not calls or path.name == "jobs.py", f"a job declared in {path}"


def test_every_rule_that_runs_a_job_takes_its_env_command_and_shell_line_from_it():
    seen = set()
    for rule, body in rule_blocks():
        if "shell:" not in body:
            continue
        m = re.search(r'(?:job|probe)_shell\("([^"]+)"', body)
        assert m, f"rule {rule} writes its own shell line"
        if "probe_shell(" in body:  # the plan's memory probe of a run-wide job (rules/plan.smk)
            assert JOBS[m.group(1)].probe and rule == f"probe_{probe.rule_of(m.group(1))}", rule
            for directive in (
                f'job_env("{m.group(1)}")',
                f'job_module("{m.group(1)}")',
                f'p=job_params("{m.group(1)}")',
            ):
                assert directive in body, (rule, directive)
            continue
        name = m.group(1)
        seen.add(name)
        for directive in (f'job_env("{name}")', f'job_module("{name}")', f'cmd=job_cmd("{name}")'):
            assert directive in body, (rule, directive)
        assert "../envs/" not in body and "speechprep(" not in body, rule
    # every job but those run by hand has a rule; "asr given" shares the ASR rule's line
    assert set(JOBS) - seen == {
        "ingest items",  # the plan's listing of a source (speechprep.workflow.pilot.source_items)
        "asr given",
        "s2s inspect",
        "models build-tiny",
        "models build-real-size",
        "speakers calibrate",
        "curate calibrate",
    }
    assert [f.name for f in JOBS["asr given"].flags] == [f.name for f in JOBS["asr run"].flags]


def rule_keys_missing(body: str, spec: Job) -> list:
    """The flags of ``spec`` a rule's text does not name as its keys: each required flag is
    the rule's input, output or params key of the same name, each optional one a params key
    holding the whole flag (speechprep.core.jobs)."""
    sections = dict(re.findall(r"(?ms)^    (input|output|params):\n(.*?)(?=^    \S|\Z)", body))
    keys = {s: set(re.findall(r"(?m)^        (\w+)=", text)) for s, text in sections.items()}
    missing = []
    for flag in spec.flags:
        if flag.name == "threads" or (flag.role == "inputs" and "unpack(" in sections["input"]):
            continue  # the rule's threads; inputs named by a function's dict
        section = (
            "params" if flag.optional else {"inputs": "input", "outputs": "output", "options": "params"}[flag.role]
        )
        if flag.key not in keys.get(section, set()):
            missing.append(flag)
        elif flag.optional and not _holds_the_flag(sections["params"], flag):
            missing.append(flag)  # a bare value would run into the flag before it on the shell line
    return missing


def _holds_the_flag(params: str, flag) -> bool:
    """Whether an optional flag's params value writes the flag itself (``flag_list``, a plan
    method that returns flags, or ``--name``)."""
    value = re.search(rf"(?ms)^        {flag.key}=(.*?)(?=^        \w+=|\Z)", params).group(1)
    return any(x in value for x in ("flag_list(", "_flags(", f"--{flag.name}"))


def test_a_rules_keys_are_its_jobs_flags():
    for rule, body in rule_blocks():
        m = re.search(r'job_shell\("([^"]+)"', body)
        if m:
            assert rule_keys_missing(body, JOBS[m.group(1)]) == [], rule


def test_the_adding_a_stage_example_declares_a_job_its_rule_runs():
    """docs/development.md's example: the stage, its declaration and its rule agree."""
    doc = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Adding a stage") : doc.index("## Tests, lint")]
    python = re.findall(r"```python\n(.*?)```", section, re.S)
    rule = re.search(r"```\nrule (\w+):\n(.*?)```", section, re.S)
    assert len(python) == 2 and rule
    namespace: dict = {}
    try:
        exec(compile("\n".join(python), "development.md", "exec"), namespace)
        spec = DECLARED["level run"]
        assert spec.run is namespace["level"] and spec.params is namespace["LevelParams"]
        assert rule_keys_missing(rule.group(2), spec) == []
        for directive in ('job_env("level run")', 'job_module("level run")', 'job_cmd("level run")'):
            assert directive in rule.group(2)
        assert 'job_shell("level run")' in rule.group(2) and 'shard_memory("level run"' in rule.group(2)
    finally:
        DECLARED.pop("level run", None)


def test_the_declaration_gives_the_files_the_shell_line_and_refuses_a_second_one():
    spec = Job("x run", "vad", lambda f, p: None, None, "segments", "out rejects", "threads? resume grammars*")
    assert [(f.name, f.kind, f.role) for f in spec.flags][:2] == [("segments", "", "inputs"), ("out", "", "outputs")]
    line = spec.shell()
    assert line.startswith("{params.cmd} x run --segments {input.segments:q} --out {output.out:q}")
    assert "--threads {threads}" in line and "{params.grammars}" in line and line.endswith("> {log:q} 2>&1")
    assert "--params" not in line  # no parameters class
    files = spec.files(
        type("A", (), {"segments": "s", "out": "o", "rejects": "r", "threads": 2, "resume": "p", "grammars": None})
    )
    assert (files.segments, files.threads, files.grammars) == ("s", 2, None)
    with pytest.raises(ValueError, match="declared twice"):
        Job("x y", "vad", print, None, "a", "a")
    with pytest.raises(ValueError, match="declared twice"):
        job("vad run", "vad")(print)


def test_a_list_past_the_systems_argument_limit_reaches_the_job_whole(tmp_path):
    """A run-wide job's list of shard paths (``name+``) goes through bash as a file of its
    items: more of them than a program's arguments may hold still arrive, each whole (a
    space, quotes, a newline, UTF-8), in order. The same words as arguments are refused by
    the system. (Snakemake runs a shell line this long from a script file, as here.)"""
    n = os.sysconf("SC_ARG_MAX") // 40  # the paths alone are 1.5 times the limit
    paths = [f"/data/ünï 'corpus'/results/ds/vad/shard-{i:06d}.stats.jsonl" for i in range(n)]
    paths[7] = "/data/a\nnewline/and\rreturn.jsonl"
    words = " ".join(shlex.quote(p) for p in paths)
    read = (
        "import hashlib, json, sys; from speechprep.cli import expand_listed; from speechprep.jobs import JOBS; "
        "a = expand_listed(sys.argv[1:], JOBS['vad merge']); "
        "print(len(a), hashlib.sha256(json.dumps(a).encode()).hexdigest())"
    )
    prog = f"{shlex.quote(sys.executable)} -c {shlex.quote(read)}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(line: str) -> subprocess.CompletedProcess:
        script = tmp_path / "script.sh"
        script.write_text(line + "\n", encoding="utf-8")
        return subprocess.run(["bash", script], capture_output=True, text=True, encoding="utf-8", env=env)

    flags = [Flag(name, "+", "inputs").shell().replace(f"{{input.{name}:q}}", words) for name in ("stats", "rejects")]
    out = run(f"{prog} " + " ".join(flags))
    assert out.returncode == 0, out.stderr[-2000:]
    want = ["--stats", *paths, "--rejects", *paths]
    assert out.stdout == f"{len(want)} {hashlib.sha256(json.dumps(want).encode()).hexdigest()}\n"
    refused = run(f"{prog} --stats {words}")
    assert refused.returncode != 0 and "Argument list too long" in refused.stderr


def test_only_a_list_flags_value_is_read_as_a_list_and_no_items_are_none(tmp_path):
    empty, single = tmp_path / "empty", tmp_path / "single"
    empty.write_bytes(b"\0")  # printf's output for no words
    single.write_bytes("a b/ü.jsonl\0".encode())
    spec = JOBS["vad merge"]
    assert expand_listed(["--stats", f"@{single}", "--csv", f"@{single}"], spec) == [
        "--stats",
        "a b/ü.jsonl",
        "--csv",
        f"@{single}",  # not a list flag: a path that starts with "@"
    ]
    assert expand_listed(["--stats", f"@{empty}", "--csv", "x"], spec) == ["--stats", "--csv", "x"]
    assert expand_listed(["--stats", f"@{single}"], None) == ["--stats", f"@{single}"]


def test_the_test_runner_takes_each_stages_env_from_the_declarations():
    out = subprocess.run(
        ["bash", "scripts/run_tests.sh", "--print-envs"], cwd=REPO, capture_output=True, text=True, encoding="utf-8"
    )
    envs = dict(line.split() for line in out.stdout.splitlines())
    assert envs["diarize"] == "curate" and envs["vad"] == "vad"  # diarization runs on curation's Resemblyzer
    assert "demo" not in envs  # its jobs run in two envs: no tests/demo suite


def test_one_fingerprint_policy_every_field_but_those_marked_run_only():
    """A shard job's resume fingerprint holds its parameters' identity(): every field but the
    run-only ones (the failure rule, the digest cache, a watchdog's limit); no job builds it by hand."""
    from dataclasses import fields

    for name, spec in JOBS.items():
        if spec.params is None:
            continue
        marked = {f.name for f in fields(spec.params) if f.metadata.get("run_only")}
        run_only = {"model_failure", "hash_cache", "batch_timeout"}
        if name in ("s2s run", "tts features"):
            run_only.add("layout")  # where the arrays go, not what they hold: a new layout reuses them
        assert marked == {f.name for f in fields(spec.params)} & run_only, name
    calls = []
    for path in (REPO / "speechprep").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ShardJob":
                calls.append((path.name, ast.unparse(node.args[3])))
    assert len(calls) >= 8 and all("identity(" in arg or arg == "stage.fingerprint()" for _, arg in calls), calls
    import inspect

    from speechprep.core.modelstage import ModelStage

    assert "self.p.identity()" in inspect.getsource(ModelStage.fingerprint)  # the model stages' own
