#!/usr/bin/env bash
# The checks to run on a machine with a CUDA GPU, in one go, in at most 8 minutes:
# the differential op tests against eager on the GPU, then GPT-2 (124M) forward,
# greedy decode and a training step through eager, symshape, symshape with
# Inductor (Triton) and torch.compile (STEPS="tests decode": static-cache decode with
# CUDA graphs instead of GPT-2's table). Each step is bounded and logged; a failing
# step does not stop the next. It ends with one report: the CUDA test counts and
# failures, and the GPT-2 table. Logs and report go to $OUT (default ./device-logs).
#
#     OUT=/tmp/logs bash scripts/device_check.sh
#
# It uses the machine's own python3 and torch (symshape on PYTHONPATH): nothing is
# installed, so its torch may be another release than CI's; the report says which.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-device-logs}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/inductor-cache}
PY=${PY:-python3}

step() {  # step NAME SECONDS COMMAND...: its log in $OUT/NAME.log, its rc in the report
    local name=$1 secs=$2
    shift 2
    echo "== $name (at most ${secs}s)"
    local t0=$SECONDS
    timeout "$secs" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "- $name: rc=$rc in $((SECONDS - t0)) s" >>"$OUT/steps.txt"
    tail -n "${TAIL:-5}" "$OUT/$name.log"
}

: >"$OUT/steps.txt"
step env 60 $PY -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), 'transformers', transformers.__version__); import symshape; print('symshape imports')"
WORKERS=$($PY -c "import xdist" 2>/dev/null && echo "-n ${WORKERS:-8}")
STEPS=${STEPS:-tests gpt2}  # also: decode (bench_decode.py), buckets (bench_buckets.py --quick)
case " $STEPS " in *" tests "*)
    step tests_cuda "${TESTS_SECONDS:-170}" env SYMSHAPE_TEST_DEVICE=cuda $PY -m pytest tests/ops \
        tests/jit/test_default_device.py tests/jit/test_backends.py tests/jit/test_cudagraphs.py tests/jit/test_padding_graphs.py \
        tests/jit/test_global_state.py \
        $WORKERS -q -p no:cacheprovider -o addopts="-m 'not slow'" -rfE --no-header \
        --junitxml="$OUT/tests_cuda.xml" ;;
esac
case " $STEPS " in *" gpt2 "*)
    step gpt2 "${BENCH_SECONDS:-250}" $PY benchmarks/bench_device.py --device cuda --budget "${BUDGET:-190}" ;;
esac
case " $STEPS " in *" buckets "*)
    step buckets "${BUCKETS_SECONDS:-300}" $PY benchmarks/bench_buckets.py --device cuda --quick --calls 30 ;;
esac
case " $STEPS " in *" decode "*)
    step decode "${DECODE_SECONDS:-300}" $PY benchmarks/bench_decode.py --device cuda --budget "${DECODE_BUDGET:-240}" ;;
esac

{
    echo "# device check"
    echo
    cat "$OUT/env.log"
    echo
    cat "$OUT/steps.txt"
    echo
    $PY - "$OUT/tests_cuda.xml" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as e:
    print(f"CUDA tests: no report ({e})")
    raise SystemExit
suite = root if root.tag == "testsuite" else root.find("testsuite")
n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
print(f"CUDA tests: {passed} passed, {n['failures'] + n['errors']} failed, {n['skipped']} skipped")
for case in suite.iter("testcase"):
    bad = case.find("failure") if case.find("failure") is not None else case.find("error")
    if bad is not None:
        msg = (bad.get("message") or "").splitlines()[0][:160] if bad.get("message") else ""
        print(f"- FAILED {case.get('classname')}::{case.get('name')}: {msg}")
PYEOF
    echo
    for log in gpt2 decode buckets; do
        [ -f "$OUT/$log.log" ] || continue
        grep -E '^(GPT-2|greedy|\||#|symshape|eager|torch|[0-9]+ s in all)' "$OUT/$log.log" || tail -n 5 "$OUT/$log.log"
        echo
    done
} >"$OUT/report.md"
cat "$OUT/report.md"
