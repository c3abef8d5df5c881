#!/usr/bin/env bash
# Set up everything speechprep needs on this machine, idempotently:
#   - Debian packages (installed when root; otherwise the exact command is printed)
#   - one virtual environment per envs/<stage>.yaml, built from its `pip:` list
#     by uv, several at a time, rebuilt only when that list changes
#   - an environment-modules modulefile per environment (.venvs/modulefiles),
#     which is what `snakemake --sdm env-modules` loads for each rule
# Usage: scripts/setup.sh [stage ...]   (default: every envs/*.yaml)
# Environment: SPEECHPREP_PYTHON (a Python 3.11; default python3),
#   SPEECHPREP_SETUP_JOBS (envs built at once; default 3), SPEECHPREP_UV (the uv
#   binary to use), SPEECHPREP_NO_TEST_TOOLS=1 (no sox/ffmpeg); uv's own
#   variables (UV_CACHE_DIR, ...) apply.
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
# uv installs the envs: the same pins, resolved and downloaded in parallel,
# files linked from its cache. A uv on PATH is used when it is at least
# UV_MIN; otherwise uv==UV_PIN is installed with pip into .venvs/.uv.
UV_PIN=0.13.9
UV_MIN=0.13.0
# Envs built at once. Downloads and installs wait on the network and disk;
# an env that builds a package against itself (--no-build-isolation) starts first.
JOBS="${SPEECHPREP_SETUP_JOBS:-3}"

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

# --- uv ---------------------------------------------------------------------
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "SPEECHPREP_SETUP_JOBS must be a positive integer, not '$JOBS'"
uv_version() { "$1" --version 2>/dev/null | awk '{print $2}'; }
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]; }
UV="${SPEECHPREP_UV:-}"
if [ -n "$UV" ]; then
  [ -n "$(uv_version "$UV")" ] || die "SPEECHPREP_UV=$UV does not run as uv"
elif command -v uv >/dev/null && version_ge "$(uv_version uv)" "$UV_MIN"; then
  UV="$(command -v uv)"
else
  UV="$VENVS/.uv/bin/uv"
  if [ "$(uv_version "$UV")" != "$UV_PIN" ]; then
    say "installing uv==$UV_PIN into $VENVS/.uv (with pip)"
    rm -rf "$VENVS/.uv"
    mkdir -p "$VENVS"
    "$PY" -m venv "$VENVS/.uv"
    "$VENVS/.uv/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_PIN" 2>&1 \
      | { grep -v "^WARNING: Location" || true; }
    [ "$(uv_version "$UV")" = "$UV_PIN" ] \
      || die "could not install uv==$UV_PIN with pip (or set SPEECHPREP_UV to a uv binary)"
  fi
fi
# uv does not read pip's configuration: pass it the package sources pip uses
# (index-url, extra-index-url, find-links; see scripts/uv_index_args.py), and
# let it pick among all of them as pip does (the best match, not the first
# index that has the name: the local CPU torch wheel must win).
UV_INDEX_ARGS=()
uv_config="$("$PY" "$ROOT/scripts/uv_index_args.py" "$PY")" || die "scripts/uv_index_args.py failed"
eval "$uv_config"
UV_ARGS=(--index-strategy unsafe-best-match "${UV_INDEX_ARGS[@]}")
export UV_NO_PROGRESS=1 UV_PYTHON_DOWNLOADS=never
say "uv $(uv_version "$UV") ($UV); package sources from pip's config: ${UV_INDEX_ARGS[*]:-none, uv defaults}"

uv_install() {  # uv_install ARGS...: `uv pip install` into $venv
  "$UV" pip install --python "$venv/bin/python" "${UV_ARGS[@]}" "$@"
}

# `python -m venv` runs ensurepip, which spends ~3.5 s of CPU per env installing
# its bundled pip and setuptools wheels; uv installs the same two wheels in
# ~0.3 s. Where they cannot be found, plain `python -m venv`.
mapfile -t ENSUREPIP_WHEELS < <("$PY" - 2>/dev/null <<'PY' || true
import ensurepip, os
bundled = os.path.join(os.path.dirname(ensurepip.__file__), "_bundled")
wheels = [p.wheel_path or os.path.join(bundled, p.wheel_name) for p in ensurepip._get_packages().values()]
if all(os.path.isfile(w) for w in wheels):
    print(*wheels, sep="\n")
PY
)
make_venv() {  # make_venv DIR: a venv with ensurepip's pip and setuptools, as `python -m venv` makes it
  if [ ${#ENSUREPIP_WHEELS[@]} -gt 0 ]; then
    "$PY" -m venv --without-pip "$1"
    "$UV" pip install -q --python "$1/bin/python" --no-index "${ENSUREPIP_WHEELS[@]}"
  else
    "$PY" -m venv "$1"
  fi
}

# fairseq's setup.py compiles seven C++/Cython extensions (BLEU, the NAT edit distance,
# balanced assignment, training batchers) unless READTHEDOCS is set; speechprep loads
# HuBERT checkpoints and runs them, which needs none of them (tests/s2s passes without
# them), and the compile was the setup's critical path (472 s of a fresh `make demo`).
export READTHEDOCS=1

# uv installs no bytecode (pip compiles it), and where Python cannot write it (a read-only
# install, PYTHONDONTWRITEBYTECODE=1) every job compiles each module it imports again:
# importing NeMo took 34 s of CPU that way, 14 s with the bytecode (docs/benchmarks/workflow.md, "Setup").
compile_env() {  # compile_env VENV: the bytecode of every module in its site-packages, once
  local venv="$1" site
  [ -f "$venv/.speechprep-bytecode" ] && return 0
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # a few packages ship files that are not Python 3.11 (templates, test data): not an error
  "$venv/bin/python" -m compileall -q -j 0 "$site" > "$venv/.speechprep-bytecode.log" 2>&1 || true
  touch "$venv/.speechprep-bytecode"
}

# librosa's numba kernels, compiled into their on-disk cache before any job can compile
# them beside another job (that can write a cache that crashes later jobs: speechprep/core/kernels.py)
warm_kernels() {  # warm_kernels VENV: once (nothing to do in an env without librosa)
  local venv="$1"
  [ -f "$venv/.speechprep-kernels" ] && return 0
  (cd "$ROOT" && "$venv/bin/python" -m speechprep.core.kernels) || return 1  # from the root: not every env installs speechprep
  touch "$venv/.speechprep-kernels"
}

build_env() {  # build_env STAGE STAMP: (re)build .venvs/STAGE from envs/STAGE.yaml; output goes to its log
  local stage="$1" stamp="$2" spec="$ROOT/envs/$1.yaml" tmp req opts torch_pin
  venv="$VENVS/$stage"
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT  # build_env runs in its own subshell
  rm -rf "$venv"
  make_venv "$venv"
  (cd "$ROOT" && "$PY" -m speechprep.core.envspec "$spec" --plain) > "$tmp/requirements.txt"
  # The env's own pins double as constraints (extras dropped: pip refuses
  # them there), so nothing pulled in transitively replaces a pinned package.
  sed -E 's/\[[^]]*\]//' "$tmp/requirements.txt" > "$tmp/constraints.txt"
  # torch first, on its own: `torch==X` takes the local CPU wheel; resolved
  # together with other packages it could pull a CUDA build.
  torch_pin="$(grep -E '^torch==' "$tmp/requirements.txt" || true)"
  if [ -n "$torch_pin" ]; then
    uv_install "$torch_pin"
  fi
  uv_install -r "$tmp/requirements.txt" -c "$tmp/constraints.txt" "${TEST_TOOLS[@]}"
  # then lines annotated `# setup: <pip options>` (builds needing the above)
  while IFS=$'\t' read -r req opts; do
    [ -n "$req" ] || continue
    echo "setup: $req ($opts)"
    # shellcheck disable=SC2086
    uv_install $opts "$req" -c "$tmp/constraints.txt"
  done < <(cd "$ROOT" && "$PY" -m speechprep.core.envspec "$spec" --setup)
  # PyPI's torchaudio is a CUDA build that breaks on import here; no stage uses it
  if "$venv/bin/python" -c 'import importlib.metadata as m; m.version("torchaudio")' 2>/dev/null; then
    "$UV" pip uninstall --python "$venv/bin/python" torchaudio
  fi
  (cd "$ROOT" && "$venv/bin/python" -c "import sys; from speechprep.core.envspec import check_stage_env as c; p = c('$spec'); print(*p, sep='\n', file=sys.stderr); sys.exit(1 if p else 0)") \
    || { echo "setup: ERROR: env '$stage' does not satisfy envs/$stage.yaml after install"; return 1; }
  compile_env "$venv"
  warm_kernels "$venv"
  echo "$stamp" > "$venv/.speechprep-stamp"
}

# --- one venv per stage -----------------------------------------------------
if [ $# -gt 0 ]; then stages=("$@"); else
  stages=(); for f in "$ROOT"/envs/*.yaml; do stages+=("$(basename "$f" .yaml)"); done
fi
mkdir -p "$VENVS/modulefiles/speechprep" "$VENVS/.logs"
declare -A stamps=()
todo=()
for stage in "${stages[@]}"; do
  spec="$ROOT/envs/$stage.yaml"
  [ -f "$spec" ] || die "no env file $spec"
  venv="$VENVS/$stage"
  stamp="$({ printf '%s\n%s\n' "$pyver" "${TEST_TOOLS[*]}"; cat "$spec"; } | sha256sum | cut -c1-16)"
  if [ -f "$venv/.speechprep-stamp" ] && [ "$(cat "$venv/.speechprep-stamp")" = "$stamp" ] \
     && "$venv/bin/python" -c 'pass' 2>/dev/null; then
    say "env '$stage' up to date"
  else
    stamps[$stage]="$stamp"
    # envs that compile a package against the env (--no-build-isolation) first
    todo+=("$(grep -c -- '# setup:.*--no-build-isolation' "$spec" || true) $stage")
  fi
done
if [ ${#todo[@]} -gt 0 ]; then
  mapfile -t todo < <(printf '%s\n' "${todo[@]}" | sort -s -k1,1nr | cut -d' ' -f2)
  say "building ${#todo[@]} env(s), $JOBS at a time: ${todo[*]} (logs in $VENVS/.logs)"
  running=0
  for stage in "${todo[@]}"; do
    while [ "$running" -ge "$JOBS" ]; do wait -n || true; running=$((running - 1)); done
    log="$VENVS/.logs/$stage.log"
    rm -f "$log.rc"
    {
      set +e
      t0=$SECONDS
      (set -e; build_env "$stage" "${stamps[$stage]}") > "$log" 2>&1
      rc=$?
      echo "$rc" > "$log.rc"
      if [ "$rc" = 0 ]; then say "env '$stage' built in $((SECONDS - t0)) s"
      else say "env '$stage' FAILED after $((SECONDS - t0)) s (exit $rc; log: $log)"; fi
    } &
    running=$((running + 1))
  done
  wait
  failed=()
  for stage in "${todo[@]}"; do
    log="$VENVS/.logs/$stage.log"
    [ "$(cat "$log.rc" 2>/dev/null)" = 0 ] && continue
    failed+=("$stage")
    printf '\n--- the end of %s ---\n' "$log" >&2
    tail -n 30 "$log" >&2
  done
  [ ${#failed[@]} -eq 0 ] || die "env(s) not built: ${failed[*]} (the end of each log is above)"
fi

for stage in "${stages[@]}"; do
  spec="$ROOT/envs/$stage.yaml"
  venv="$VENVS/$stage"
  # an env built from another checkout (the repository moved): point it here
  if grep -q -- '--editable=${SPEECHPREP_REPO}' "$spec" \
     && ! (cd / && "$venv/bin/python" -c "import sys, speechprep; sys.exit(speechprep.__file__ != '$ROOT/speechprep/__init__.py')" 2>/dev/null); then
    say "  speechprep -> $ROOT (editable)"
    uv_install -q --no-deps --editable="$ROOT"
  fi
  [ -f "$venv/.speechprep-bytecode" ] || { say "  compiling the bytecode of env '$stage'"; compile_env "$venv"; }
  [ -f "$venv/.speechprep-kernels" ] || warm_kernels "$venv" || die "env '$stage': librosa's numba kernels did not compile"
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
