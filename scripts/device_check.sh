#!/usr/bin/env bash
# The device check (bench/workflow/device_check.py; docs/device_check.md): each model stage's
# RTFx at real size, its fixed part, GPU memory per batch-second, OOM halving and the audio
# feed rate per CPU core, on one CUDA GPU; on a machine without CUDA the same steps on the CPU.
#
#   bash scripts/device_check.sh carry     # here, once: builds .device_check/ (git-ignored):
#                                          # wheels/ (CPython 3.12) + real_speech/, ~35 MiB
#   bash scripts/device_check.sh [--quick] [--models a,b] [--json FILE] ...
#
# On the lent GPU machine (its own python3 with a CUDA torch, no registry, none of our envs) the
# device tool carries .device_check (carry: [".device_check"]); this script installs its wheels
# into /tmp/site, without deps or an index, and runs everything with that python3. Here (no
# CUDA) it runs in the project's venvs (.venvs/asr, .venvs/s2s), which scripts/setup.sh builds.
set -euo pipefail
cd "$(dirname "$0")/.."
carry=.device_check

if [ "${1:-}" = "carry" ]; then
    exec .venvs/asr/bin/python bench/workflow/device_check.py carry "${@:2}"
fi

export PYTHONUNBUFFERED=1
if [ -x .venvs/asr/bin/python ]; then
    py=.venvs/asr/bin/python
else  # the lent machine: the wheels it carries, over its own Python's packages
    if [ ! -d "$carry/wheels" ]; then
        echo "no $carry/wheels: build it here with 'bash scripts/device_check.sh carry' and carry it" >&2
        exit 2
    fi
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$carry"/wheels/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    py=python3
fi
if [ -d "$carry/real_speech" ]; then
    export SPEECHPREP_REAL_SPEECH="$PWD/$carry/real_speech"
fi
json=()
if [ -n "${OUT:-}" ]; then  # the device tool brings $OUT back
    json=(--json "$OUT/device_check.json")
fi
exec "$py" bench/workflow/device_check.py run "${json[@]}" "$@"
