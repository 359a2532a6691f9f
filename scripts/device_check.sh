#!/usr/bin/env bash
# The checks to run on a machine with a CUDA GPU, in one go: the differential op
# tests against eager on the GPU, then the front-end and Inductor (Triton)
# benchmarks there. Each step is bounded and logged; a failing step does not stop
# the next. Logs go to $OUT (default ./device-logs).
#
#     OUT=/tmp/logs bash scripts/device_check.sh
#
# It uses the machine's own python3 and torch (symshape on PYTHONPATH): nothing is
# installed, so the torch there may be another release than the one pyproject.toml
# pins; the first log line says which.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-device-logs}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/inductor-cache}
PY=${PY:-python3}

step() {  # step NAME SECONDS COMMAND...
    local name=$1 secs=$2
    shift 2
    echo "== $name (at most ${secs}s)"
    local t0=$SECONDS
    timeout "$secs" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "   rc=$rc in $((SECONDS - t0))s"
    tail -n "${TAIL:-25}" "$OUT/$name.log"
}

step env 60 $PY -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), 'transformers', transformers.__version__); import symshape; print('symshape imports')"
TAIL=12 step tests_ops "${OPS_SECONDS:-150}" env SYMSHAPE_TEST_DEVICE=cuda $PY -m pytest tests/ops -q -p no:cacheprovider -o addopts="-m 'not slow'" -rf --no-header --maxfail=1000
TAIL=12 step tests_backends 60 env SYMSHAPE_TEST_DEVICE=cuda $PY -m pytest tests/jit/test_backends.py -q -p no:cacheprovider -rf --no-header
step bench_frontend 90 $PY benchmarks/bench_frontend.py --quick --only "GPT-2 12L" --device cuda
step bench_backend "${BACKEND_SECONDS:-220}" $PY benchmarks/bench_backend.py --quick --device cuda --models gpt2
