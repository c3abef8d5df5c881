#!/usr/bin/env bash
# Set up everything speechprep needs on this machine, idempotently:
#   - Debian packages (installed when root; otherwise the exact command is printed)
#   - one virtual environment per envs/<stage>.yaml, built from its `pip:` list,
#     rebuilt only when that list changes
#   - an environment-modules modulefile per environment (.venvs/modulefiles),
#     which is what `snakemake --sdm env-modules` loads for each rule
# Usage: scripts/setup.sh [stage ...]   (default: every envs/*.yaml)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENVS="$ROOT/.venvs"
# each env's pip list ends with speechprep itself: --editable=${SPEECHPREP_REPO}
export SPEECHPREP_REPO="$ROOT"
PY="${SPEECHPREP_PYTHON:-python3}"
DEBIAN_PACKAGES=(libc++1 environment-modules)
# The tests' real codecs (GSM, MP3, G.722, Opus) and Chromaprint's fpcalc; the
# stages do not need them. SPEECHPREP_NO_TEST_TOOLS=1 leaves them out.
[ -n "${SPEECHPREP_NO_TEST_TOOLS:-}" ] || DEBIAN_PACKAGES+=(sox libsox-fmt-all ffmpeg)
# Test-only tool installed next to each stage's pins so its unit tests run in it.
TEST_TOOLS=(pytest==9.2.0)

pip_q() {  # pip, quiet, without the warnings this machine's index config prints
  "$venv/bin/python" -m pip "$@" -q --disable-pip-version-check 2>&1 | { grep -v "^WARNING: Location" || true; }
  return "${PIPESTATUS[0]}"
}
say() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

# --- Python -----------------------------------------------------------------
command -v "$PY" >/dev/null || die "no '$PY' on PATH; install Python 3.11 (or set SPEECHPREP_PYTHON)"
pyver="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ "$pyver" = "3.11" ] || die "'$PY' is Python $pyver; speechprep's environments pin Python 3.11 (set SPEECHPREP_PYTHON to a 3.11 interpreter)"
"$PY" -c 'import venv, ensurepip' 2>/dev/null || die "'$PY' lacks venv/ensurepip (Debian: apt-get install python3.11-venv)"

# --- Debian packages --------------------------------------------------------
missing=()
if command -v dpkg-query >/dev/null; then
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    die "missing Debian packages: ${missing[*]}
  run as root:  apt-get update && apt-get install -y ${missing[*]}
  (conda users: the envs/*.yaml files carry libcxx; environment-modules is only needed for --sdm env-modules)"
  fi
fi
MODULES_INIT=""
for f in /usr/share/modules/init/bash /etc/profile.d/modules.sh; do
  [ -f "$f" ] && { MODULES_INIT="$f"; break; }
done
[ -n "$MODULES_INIT" ] || die "environment-modules is installed but its bash init script was not found"

# --- one venv per stage -----------------------------------------------------
if [ $# -gt 0 ]; then stages=("$@"); else
  stages=(); for f in "$ROOT"/envs/*.yaml; do stages+=("$(basename "$f" .yaml)"); done
fi
mkdir -p "$VENVS/modulefiles/speechprep"
for stage in "${stages[@]}"; do
  spec="$ROOT/envs/$stage.yaml"
  [ -f "$spec" ] || die "no env file $spec"
  venv="$VENVS/$stage"
  reqs="$(cd "$ROOT" && "$PY" -m speechprep.core.envspec "$spec" --plain)"
  stamp="$({ printf '%s\n%s\n' "$pyver" "${TEST_TOOLS[*]}"; cat "$spec"; } | sha256sum | cut -c1-16)"
  if [ -f "$venv/.speechprep-stamp" ] && [ "$(cat "$venv/.speechprep-stamp")" = "$stamp" ] \
     && "$venv/bin/python" -c 'pass' 2>/dev/null; then
    say "env '$stage' up to date"
  else
    say "building env '$stage' in $venv"
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    reqfile="$(mktemp)"
    (cd "$ROOT" && "$PY" -m speechprep.core.envspec "$spec" --plain) > "$reqfile"
    # The env's own pins double as constraints (extras dropped: pip refuses
    # them there), so nothing pulled in transitively replaces a pinned package.
    confile="$(mktemp)"; printf '%s\n' "$reqs" | sed -E 's/\[[^]]*\]//' > "$confile"
    # torch first, on its own: `pip install torch==X` takes the local CPU
    # wheel; resolved together with other packages it could pull a CUDA build.
    torch_pin="$(grep -E '^torch==' "$reqfile" || true)"
    if [ -n "$torch_pin" ]; then
      pip_q install "$torch_pin"
    fi
    pip_q install -r "$reqfile" -c "$confile" "${TEST_TOOLS[@]}"
    # then lines annotated `# setup: <pip options>` (builds needing the above)
    while IFS=$'\t' read -r req opts; do
      [ -n "$req" ] || continue
      say "  $req ($opts)"
      # shellcheck disable=SC2086
      pip_q install $opts "$req" -c "$confile"
    done < <(cd "$ROOT" && "$PY" -m speechprep.core.envspec "$spec" --setup)
    # PyPI's torchaudio is a CUDA build that breaks on import here; no stage uses it
    if "$venv/bin/python" -m pip show torchaudio >/dev/null 2>&1; then
      pip_q uninstall -y torchaudio
    fi
    rm -f "$reqfile" "$confile"
    (cd "$ROOT" && "$venv/bin/python" -c "import sys; from speechprep.core.envspec import check_stage_env as c; p = c('$spec'); print(*p, sep='\n', file=sys.stderr); sys.exit(1 if p else 0)") \
      || die "env '$stage' does not satisfy envs/$stage.yaml after install"
    echo "$stamp" > "$venv/.speechprep-stamp"
  fi
  # an env built from another checkout (the repository moved): point it here
  if grep -q -- '--editable=${SPEECHPREP_REPO}' "$spec" \
     && ! (cd / && "$venv/bin/python" -c "import sys, speechprep; sys.exit(speechprep.__file__ != '$ROOT/speechprep/__init__.py')" 2>/dev/null); then
    say "  speechprep -> $ROOT (editable)"
    pip_q install --no-deps --editable="$ROOT"
  fi
  # A wheel that installs a top-level `tests` package (nemo-text-processing's does)
  # would shadow this repository's tests/ (tests.support) in the env: remove its files.
  "$venv/bin/python" - <<'PY'
import importlib.metadata as md
from pathlib import Path

for name in ("nemo-text-processing",):
    try:
        files = md.distribution(name).files or []
    except md.PackageNotFoundError:
        continue
    for f in files:
        if f.parts[0] == "tests":
            Path(f.locate()).unlink(missing_ok=True)
    top = Path(md.distribution(name).locate_file("tests"))
    for d in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True) + [top]:
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()
PY
  cat > "$VENVS/modulefiles/speechprep/$stage" <<EOF
#%Module1.0
## speechprep '$stage' stage environment, written by scripts/setup.sh from envs/$stage.yaml
module-whatis "speechprep $stage environment ($venv)"
conflict speechprep
setenv VIRTUAL_ENV $venv
setenv SPEECHPREP_ENV $stage
prepend-path PATH $venv/bin
EOF
done

# Where the Snakefile finds the modules init and modulefiles (also sourced by
# users who want `module load speechprep/<stage>` in their own shell).
cat > "$VENVS/modules.env" <<EOF
# written by scripts/setup.sh
export SPEECHPREP_MODULES_INIT=$MODULES_INIT
export SPEECHPREP_MODULEPATH=$VENVS/modulefiles
EOF
say "ready: envs ${stages[*]}; modulefiles in $VENVS/modulefiles"
