#!/usr/bin/env bash
# Run the test suite: each stage's unit tests inside that stage's own venv,
# then the shared pieces' and the workflow tests (real snakemake runs) in the
# driver venv. `make test-fast` passes -m "not slow".
# Prints one closing line "N passed, N failed" over all of them.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
reports="$(mktemp -d)"
status=0
run() {  # run ENV TESTDIR
  local env="$1" dir="$2"
  [ -d "$dir" ] || return 0
  echo "== tests/$(basename "$dir") in .venvs/$env =="
  ".venvs/$env/bin/python" -m pytest "$dir" -q -p no:cacheprovider --junitxml="$reports/$env-$(basename "$dir").xml" "${PYTEST_ARGS[@]}"
  local rc=$?
  # 5: no tests collected in that directory
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=1; fi
}
PYTEST_ARGS=("$@")
# real human speech from Debian's archive (tests/real_speech.py), fetched once
python3 tests/real_speech.py || { echo "cannot fetch the real-speech test data"; exit 1; }
# tests/<stage> runs in .venvs/<stage>; tests/core (shared pieces) and
# tests/workflow (real snakemake runs) in the driver env
for d in tests/*/; do
  d="${d%/}"; name="$(basename "$d")"
  case "$name" in core|workflow|__pycache__) continue ;; esac
  env="$name"
  [ "$name" = diarize ] && env=curate  # the diarization step runs on the curation env's Resemblyzer
  [ -d ".venvs/$env" ] || { echo "no .venvs/$env for $d: run scripts/setup.sh"; status=1; continue; }
  run "$env" "$d"
done
run workflow tests/core
run workflow tests/workflow
python3 - "$reports" <<'PY'
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
print(f"\nall suites: {t - f - e - s} passed, {f + e} failed, {s} skipped")
PY
rm -rf "$reports"
exit $status
