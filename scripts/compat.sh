#!/usr/bin/env bash
# Run the test suite under one torch release, in a throwaway environment of its
# own, so that the main .venv (CI's torch 2.13.0 CPU wheel) is never touched.
#
#     bash scripts/compat.sh 2.15.0            # env in ../envs/t2.15.0, log in ../envs
#     ENVS=/tmp/envs bash scripts/compat.sh 2.11.0 tests/jit   # a subset
#
# Releases other than the CPU wheel on this machine's disk come from the package
# index as CUDA builds (several GB; they run on the CPU). symshape is installed
# editable beside the pinned torch, which `pip install -e .` must leave as it is
# (checked below). The last
# line printed is one row of the release table: release, import, passed, failed,
# skipped.
set -euo pipefail
RELEASE=${1:?usage: compat.sh RELEASE [pytest args...]}
shift
cd "$(dirname "$0")/.."
ENVS=${ENVS:-$PWD/../envs}
VENV=$ENVS/t$RELEASE
LOG=$ENVS/t$RELEASE.log
mkdir -p "$ENVS"
# Both installs ignore local pip configuration: a cap on torch there would make
# the second replace the torch the first installed.
export PIP_CONFIG_FILE=/dev/null
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip >"$ENVS/t$RELEASE.install.log" 2>&1
fi
"$VENV/bin/pip" install -q "torch==$RELEASE" >>"$ENVS/t$RELEASE.install.log" 2>&1
"$VENV/bin/pip" install -q -e '.[test]' pytest-xdist >>"$ENVS/t$RELEASE.install.log" 2>&1
got=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')
if [ "$got" != "$RELEASE" ]; then
    echo "installing symshape replaced torch $RELEASE with $got" >&2
    exit 1
fi
if ! "$VENV/bin/python" -c 'import symshape' 2>"$LOG"; then
    echo "| $RELEASE | fails: $(tail -n 1 "$LOG") | 0 | 0 | 0 |"
    exit 1
fi
set +e
"$VENV/bin/python" -m pytest -p no:cacheprovider -o addopts="-m 'not slow'" -q -rfE \
    -n "${WORKERS:-2}" "${@:-tests}" >"$LOG" 2>&1
rc=$?
set -e
summary=$(tail -n 1 "$LOG")
count() { grep -oE "[0-9]+ $1" <<<"$summary" | grep -oE '[0-9]+' || echo 0; }
grep -E '^(FAILED|ERROR) ' "$LOG" || true
echo "| $RELEASE | ok | $(count passed) | $(($(count failed) + $(count error))) | $(count skipped) |"
exit $rc
