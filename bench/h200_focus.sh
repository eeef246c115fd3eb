#!/usr/bin/env bash
# Usage (on the H200): bash bench/h200_focus.sh <build dir>
# A focused device run for a prebuilt, carried build (an sm_90-only tree is enough): the bundle
# (bench/h200_bundle.sh, its knobs pass through; default here: the SSD's and the dialect's suites,
# the SSD bench rows, memcheck over them), racecheck over test_ssd's short cases, then the Python
# package on cuda (pytest, without the reference packages on PYTHONPATH so that transformers
# takes portssm's kernels) and bench/python_overhead.py (with the references, from
# .anchors/anchors.tar.xz when carried).  Every log comes back in $OUT/focus_logs.tar.gz.
set -u
B=${1:?build dir}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
L=$(mktemp -d /tmp/focus.XXXX)
export SUITES=${SUITES:-"test_dialect test_ssd"} SKIP_LARGE=${SKIP_LARGE:-1}
export SKIP_PTX60=${SKIP_PTX60:-1} BENCH_FILTER=${BENCH_FILTER:-ssd}
export SAN_TOOLS=${SAN_TOOLS:-memcheck} SAN_SUITES=${SAN_SUITES:-"test_dialect test_ssd"}
export BUDGET_S=${BUDGET_S:-240}
OUT=$L bash bench/h200_bundle.sh "$B" > "$L/bundle.log" 2>&1
tail -25 "$L/bundle.log"
export LD_LIBRARY_PATH="$PWD/$B/src:$PWD/$B/deps:${LD_LIBRARY_PATH:-}"
S=compute-sanitizer; command -v $S >/dev/null || S=/usr/local/cuda/bin/compute-sanitizer
PORTSSM_TEST_SKIP='*131072*' timeout ${RACE_TIMEOUT:-90} $S --tool racecheck --error-exitcode 9 \
  "$B/tests/test_ssd" --backend cuda > "$L/racecheck_ssd_short.log" 2>&1
echo "racecheck test_ssd (short cases): rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$L/racecheck_ssd_short.log" | tail -1)"
if [ -z "${SKIP_PYTHON:-}" ]; then
  . bench/device_suites.sh
  run_pytest "$B" "$L/pytest.log" ${PYTEST_TIMEOUT:-200}
  PYTHONPATH="$(anchors_path)python/src" PORTSSM_LIBRARY_DIR="$B/src" timeout 120 \
    python3 bench/python_overhead.py --device cuda --repeats 5 > "$L/python_overhead.log" 2>&1
  cat "$L/python_overhead.log"
fi
tar czf "$OUT/focus_logs.tar.gz" -C "$L" .
