#!/usr/bin/env bash
# Usage (on the H200):
#   bash bench/h200_images.sh <sm_80-only dir> <compute_90-PTX-only dir> <tests dir> [<ptx_sm60 dir>]
# The kernel-image proofs of issue #11 (item 4), from prebuilt, carried trees:
#   1. a module with sm_80 machine code only (PORTSSM_CUDA_ARCHS=sm_80, no PTX): `portssm info`
#      and `portssm doctor --backend cuda` must report PORTSSM_ERR_NO_KERNEL_IMAGE naming sm_90
#      and the images present, and AUTO must fall back to cpu saying why;
#   2. a module with compute_90 PTX only (PORTSSM_CUDA_ARCHS=compute_90): the driver JIT-compiles
#      it (into a fresh cache, so the first load's cost shows), `portssm info` says which image
#      runs, and the suites pass on it;
#   3. (with a fourth dir, a module configured with -DPORTSSM_CUDA_EXTRA_PTX=ON) the suites
#      again with PORTSSM_CUDA_IMAGE=ptx_sm60: the Pascal PTX, JIT-compiled for sm_90.
# <dir>/src holds libportssm.so* and libportssm_cuda.so (<sm_80 dir>/portssm the command); the
# tests dir holds tests/test_* and deps/libcmocka.so.0.  Logs: $OUT/images.tar.gz.
set -u
A=${1:?sm_80-only dir} P=${2:?compute_90-PTX-only dir} T=${3:?tests dir} P60=${4:-}
OUT=${OUT:-/tmp/out}
L=$(mktemp -d /tmp/images.XXXX)
deps="$PWD/$T/deps"
cli="$PWD/$A/portssm"
start=$(date +%s)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }

want() { [[ " ${PARTS:-1 2 3} " == *" $1 "* ]]; } # PARTS="3": only the ptx_sm60 suites
if want 1; then
echo "== 1. sm_80 machine code only, on sm_90"
export LD_LIBRARY_PATH="$PWD/$A/src:$deps"
"$cli" info > "$L/info_sm80.log" 2>&1; echo "portssm info: rc=$?"
grep -iE "cuda|kernel image|auto" "$L/info_sm80.log" | head -12
"$cli" doctor --backend cuda > "$L/doctor_cuda_sm80.log" 2>&1; echo "portssm doctor --backend cuda: rc=$?"
grep -iE "NO_KERNEL_IMAGE|kernel image" "$L/doctor_cuda_sm80.log" | head -4
"$cli" doctor > "$L/doctor_auto_sm80.log" 2>&1; echo "portssm doctor (auto): rc=$?"
grep -iE "auto|picks|PASS|FAIL" "$L/doctor_auto_sm80.log" | head -6

fi

echo "== 2. compute_90 PTX only, JIT-compiled by the driver"
export LD_LIBRARY_PATH="$PWD/$P/src:$deps"
export CUDA_CACHE_PATH=$(mktemp -d /tmp/jitcache.XXXX) CUDA_CACHE_MAXSIZE=4294967296
if want 2; then
t0=$(date +%s.%N)
"$cli" info > "$L/info_ptx90.log" 2>&1; echo "portssm info (first load, fresh JIT cache): rc=$? $(since $t0) s"
grep -iE "image|cuda" "$L/info_ptx90.log" | head -10
t0=$(date +%s.%N)
"$cli" info > /dev/null 2>&1; echo "portssm info (cached): $(since $t0) s"
fi
# run_suites <label>: every suite on cuda within what is left of BUDGET_S
run_suites() {
  for s in ${SUITES:-test_api test_validation test_properties test_dialect test_conv1d test_scan test_decode test_backward test_ssd test_large}; do
    left=$(( ${BUDGET_S:-400} - ($(date +%s) - start) ))
    [ "$left" -gt 10 ] || { echo "$s: not run (budget spent)"; continue; }
    t0=$(date +%s)
    timeout "$left" "$T/tests/$s" --backend cuda > "$L/$s.$1.log" 2>&1
    rc=$?
    echo "$s on cuda via $1: rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$L/$s.$1.log" | tr '\n' ' ')($(( $(date +%s) - t0 )) s)"
  done
}
if want 2; then run_suites compute_90_ptx; fi
if [ -n "$P60" ] && want 3; then
  echo "== 3. the ptx_sm60 image (Pascal PTX), JIT-compiled for sm_90"
  export LD_LIBRARY_PATH="$PWD/$P60/src:$deps" PORTSSM_CUDA_IMAGE=ptx_sm60
  t0=$(date +%s.%N)
  "$cli" info > "$L/info_ptx60.log" 2>&1; echo "portssm info (first load): rc=$? $(since $t0) s"
  grep -iE "runs image" "$L/info_ptx60.log" | head -3
  run_suites ptx_sm60
fi
tar czf "$OUT/images.tar.gz" -C "$L" .
echo "== done in $(( $(date +%s) - start )) s"
