#!/usr/bin/env bash
# Run the test suite: the workflow tests (real snakemake runs, on SPEECHPREP_TEST_WORKERS
# pytest-xdist workers, default 2) in the driver venv, and meanwhile, at a lower CPU priority,
# each stage's unit tests inside that stage's own venv (two suites at a time) and the shared
# pieces' tests: the workflow tests leave part of the two cores idle (jobs that wait on the
# scheduler, a run down to one job), which the unit tests fill. Their output follows the
# workflow tests'. `make test-fast` passes -m "not slow".
# Prints the ten slowest tests and one closing line "N passed, N failed" over all of them.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
reports="$(mktemp -d)"
status=0
run() {  # run ENV TESTDIR [pytest options]: 1 when its tests failed
  local env="$1" dir="$2"
  shift 2
  [ -d "$dir" ] || return 0
  echo "== tests/$(basename "$dir") in .venvs/$env =="
  ".venvs/$env/bin/python" -m pytest "$dir" -q -p no:cacheprovider --junitxml="$reports/$env-$(basename "$dir").xml" "$@" "${PYTEST_ARGS[@]}"
  local rc=$?
  # 5: no tests collected in that directory
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then return 1; fi
}
suite() {  # suite STAGE: a stage's unit tests (core: the shared pieces'), its output printed at once when they end
  local name="$1" env
  # the env the stage's jobs are declared with (speechprep/<stage>/jobs.py), else the stage's name
  env="$(awk -v s="$name" '$1 == s {print $2}' <<< "$STAGE_ENVS")"
  env="${env:-$name}"
  [ "$name" != core ] || env=workflow
  if [ ! -d ".venvs/$env" ]; then
    echo "no .venvs/$env for tests/$name: run scripts/setup.sh"
    return 1
  fi
  run "$env" "tests/$name" > "$reports/$name.log" 2>&1
  local rc=$?
  cat "$reports/$name.log"
  return $rc
}
export -f run suite
export reports
# what the stage suites build once and share (tests/support.py: the English grammars)
export SPEECHPREP_TEST_CACHE="$reports/cache"
# "<stage> <env>" lines from the jobs' declarations (standard library only: any python3)
STAGE_ENVS="$(python3 -m speechprep.jobs)" || { echo "cannot read the jobs' declarations"; exit 1; }
export STAGE_ENVS
if [ "${1:-}" = --print-envs ]; then echo "$STAGE_ENVS"; rm -rf "$reports"; exit 0; fi
PYTEST_ARGS=("$@")
# real human speech from Debian's archive (tests/real_speech.py), fetched once
python3 tests/real_speech.py || { echo "cannot fetch the real-speech test data"; exit 1; }
PYTEST_ARGS_Q=""  # the options again, for the suites' subshells
[ $# -eq 0 ] || PYTEST_ARGS_Q="$(printf '%q ' "$@")"
export PYTEST_ARGS_Q
# tests/<stage> runs in .venvs/<stage> and tests/core (shared pieces) in .venvs/workflow, two
# suites at a time, the longest first (asr and curate, about 30 min each beside the workflow
# tests; then s2s, tts, diarize and core, 0.7-2 min each; then the rest, under 40 s each), so
# that the last two end together;
# all of it niced: in the background of tests/workflow (real snakemake runs), which keep their
# share of the CPU (docs/benchmarks/workflow.md, "Test suite")
stages=$(for d in tests/*/; do n="$(basename "$d")"; case "$n" in workflow|__pycache__) ;; *) echo "$n" ;; esac; done \
  | awk '{r = index(" asr curate s2s tts diarize core ", " " $1 " "); print (r ? r : 99), $1}' | sort -n | cut -d' ' -f2)
(
  printf '%s\n' $stages | nice -n 10 xargs -P 2 -I{} bash -c 'eval "PYTEST_ARGS=($PYTEST_ARGS_Q)"; suite {}'
) > "$reports/unit.log" 2>&1 &
unit=$!
workers="${SPEECHPREP_TEST_WORKERS:-2}"
if [ "$workers" -gt 1 ]; then
  # a test file per worker at a time: its module fixtures (one run each) stay in one process;
  # tests/workflow/conftest.py orders the files and shares the demo run between the workers
  run workflow tests/workflow -n "$workers" --dist loadfile --no-loadscope-reorder || status=1
else
  run workflow tests/workflow || status=1
fi
wait "$unit" || status=1
cat "$reports/unit.log"
python3 - "$reports" "$SECONDS" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
t = f = e = s = 0
times = []
for p in glob.glob(sys.argv[1] + "/*.xml"):
    for suite in ET.parse(p).getroot().iter("testsuite"):
        t += int(suite.get("tests", 0)); f += int(suite.get("failures", 0))
        e += int(suite.get("errors", 0)); s += int(suite.get("skipped", 0))
        times += [(float(c.get("time", 0)), f"{c.get('classname')}::{c.get('name')}") for c in suite.iter("testcase")]
print("\nthe ten slowest tests (s):")
for sec, name in sorted(times, reverse=True)[:10]:
    print(f"  {sec:8.1f}  {name}")
wall = int(sys.argv[2])
print(f"\nall suites: {t - f - e - s} passed, {f + e} failed, {s} skipped in {wall // 60} min {wall % 60} s")
PY
rm -rf "$reports"
exit $status
