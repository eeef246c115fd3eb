#!/usr/bin/env bash
# Usage (on the H200): bash bench/h200_final.sh <build dir>
# A session's closing device run over a carried sm_90 build: every suite on cuda, the whole bench
# (stream launches and graph replay), memcheck over the kernel suites and racecheck over the
# SSD's, pytest on cuda, the SSD beside mamba-ssm from Python (.anchors/anchors.tar.xz carried)
# and the time of every launch of the SSD's fwd+bwd.  Each step has its own time limit, so that
# the logs come back inside the device's 600 s; every log lands in $OUT/final_logs.tar.gz.
set -u
B=${1:?build dir}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
L=$(mktemp -d /tmp/final.XXXX)
export SUITES=${SUITES:-"test_api test_validation test_properties test_dialect test_conv1d test_scan test_decode test_backward test_ssd"}
export SKIP_LARGE=${SKIP_LARGE:-1} SKIP_PTX60=${SKIP_PTX60:-1} BENCH_FILTER=${BENCH_FILTER:-_}
export SAN_TOOLS=${SAN_TOOLS:-memcheck}
export SAN_SUITES=${SAN_SUITES:-"test_dialect test_ssd test_conv1d test_scan test_decode test_backward"}
export BUDGET_S=${BUDGET_S:-200}
OUT=$L bash bench/h200_bundle.sh "$B" > "$L/bundle.log" 2>&1
tail -30 "$L/bundle.log"
export LD_LIBRARY_PATH="$PWD/$B/src:$PWD/$B/deps:${LD_LIBRARY_PATH:-}"
S=compute-sanitizer; command -v $S >/dev/null || S=/usr/local/cuda/bin/compute-sanitizer
PORTSSM_TEST_SKIP='*131072*' timeout 60 $S --tool racecheck --error-exitcode 9 \
  "$B/tests/test_ssd" --backend cuda > "$L/racecheck_ssd_short.log" 2>&1
echo "racecheck test_ssd (short cases): rc=$? $(grep -E 'RACECHECK SUMMARY' "$L/racecheck_ssd_short.log" | tail -1)"
. bench/device_suites.sh
run_pytest "$B" "$L/pytest.log" ${PYTEST_TIMEOUT:-150}
REF=$(anchors_path)
PYTHONPATH="${REF}python/src" PORTSSM_LIBRARY_DIR="$B/src" timeout ${COMPARE_TIMEOUT:-170} \
  python3 bench/python_ssd_compare.py --reps 10 --shapes ${COMPARE_SHAPES:-B4,L2048,H80 B4,L2048,H24} \
  > "$L/python_ssd_compare.log" 2>&1
echo "python_ssd_compare: rc=$?"; tail -8 "$L/python_ssd_compare.log"
N=ncu; command -v $N >/dev/null || N=/usr/local/cuda/bin/ncu
timeout 60 $N --clock-control none --kernel-name 'regex:pssm_ssd|pssm_reduce' --launch-count 17 \
  --section SpeedOfLight "$B/portssm_bench" --backend cuda --reps 1 --warmup 0 \
  --filter 'ssd_chunk_scan_fwd+bwd' > "$L/ncu_times.log" 2>&1
echo "ncu: rc=$?"
grep -E '^  pssm_|Duration' "$L/ncu_times.log" | paste - - | sed -E 's/\(([0-9]+), ([0-9]+), 1\)x\(([0-9]+), 1, 1\).*Duration +(u|m)s +([0-9.]+)/grid \1x\2 block \3: \5 \4s/'
tar czf "$OUT/final_logs.tar.gz" -C "$L" .
