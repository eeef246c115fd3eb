#!/usr/bin/env bash
# Usage (on the H200): bash bench/h200_ab.sh <build A> [<build B> ...]
# Builds side by side in one device run, for deciding whether a change (a branch, a compile-time
# plan) wins: the first build is main's and gets the checks a run owes main (SUITES on cuda and
# PTX60_SUITES through the ptx_sm60 image first; pytest on cuda with PYTEST=1 and
# python_ssd_compare with COMPARE=1 at the end); every other build runs AB_SUITES (default
# test_ssd) on cuda; then ROUNDS rounds of
# `portssm_bench --graph --filter AB_FILTER` (';' between several rows) visit the builds in turn
# (the clocks drift between minutes, so each round is one sample of every build), and Nsight Compute times AB_KERNELS'
# launches (a regex; AB_KERNELS=none leaves it out) in the row AB_NCU_FILTER on each build, with
# the sections AB_NCU_SECTIONS (default: speed of light, launch statistics, occupancy).
# Packed builds (PACKS="a/build.tar.xz b/build.tar.xz") are unpacked into the current directory
# first.  Every step's time limit is cut to what BUDGET_S (default 560 s, under the device's
# 600) leaves, so that the logs always come back: $OUT/ab_logs.tar.gz; a summary prints.
set -u
DEADLINE=$(( $(date +%s) + ${BUDGET_S:-560} )) # (tl of device_suites.sh cuts each limit to it)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
L=$(mktemp -d /tmp/ab.XXXX)
for p in ${PACKS:-}; do tar xJf "$p" || { echo "unpacking $p failed"; exit 1; }; done
BUILDS=("$@"); A=${BUILDS[0]}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$L/gpu.log" 2>&1
lib() { echo "$PWD/$1/src:$PWD/$1/deps:${LD_LIBRARY_PATH:-}"; }
. bench/device_suites.sh
( export LD_LIBRARY_PATH=$(lib "$A"); run_suites "$A" "$L" )
for b in "${BUILDS[@]:1}"; do
  n=$(basename "$b")
  for t in ${AB_SUITES-test_ssd}; do
    LD_LIBRARY_PATH=$(lib "$b") timeout $(tl 300) "$b/tests/$t" --backend cuda > "$L/${t}_$n.log" 2>&1
    echo "$t ($n): rc=$? $(grep -E 'PASSED|FAILED' "$L/${t}_$n.log" | tail -2 | tr '\n' ' ')"
  done
done
# AB_FILTER may name several rows, separated by ';' (the bench takes any of its --filter's).
filters=(); IFS=';' read -ra fs <<< "${AB_FILTER:-ssd_chunk_scan}"
for f in "${fs[@]}"; do filters+=(--filter "$f"); done
for r in $(seq 1 "${ROUNDS:-3}"); do
  for b in "${BUILDS[@]}"; do
    n=$(basename "$b")
    LD_LIBRARY_PATH=$(lib "$b") timeout $(tl 120) "$b/portssm_bench" --backend cuda --graph \
      "${filters[@]}" --json "$L/bench_${n}_$r.json" > "$L/bench_${n}_$r.log" 2>&1
    echo "round $r $n: rc=$?"; grep -E '^\| [a-z]' "$L/bench_${n}_$r.log" | cut -c1-120
  done
done
N=ncu; command -v $N >/dev/null || N=/usr/local/cuda/bin/ncu
sections=(); for s in ${AB_NCU_SECTIONS:-SpeedOfLight LaunchStats Occupancy}; do sections+=(--section "$s"); done
for b in "${BUILDS[@]}"; do
  [ "${AB_KERNELS:-}" = none ] && break
  n=$(basename "$b")
  LD_LIBRARY_PATH=$(lib "$b") timeout $(tl 120) $N --clock-control none \
    --kernel-name "regex:${AB_KERNELS:-pssm_ssd_chunk_state}" --launch-count ${AB_NCU_COUNT:-4} \
    "${sections[@]}" "$b/portssm_bench" \
    --backend cuda --reps 1 --warmup 0 --filter "${AB_NCU_FILTER:-ssd_chunk_scan_fwd bf16 B4 L2048 H80}" \
    > "$L/ncu_$n.log" 2>&1
  echo "ncu $n: rc=$?"
  grep -E '^  pssm_|Duration|Registers Per|Dynamic Shared|Achieved Occupancy|Issue Slots Busy|No Eligible|Stall' "$L/ncu_$n.log" | tr -s ' '
done
# (the checks of the Python layer last: the A/B above is what the run is for)
[ -n "${PYTEST:-}" ] && LD_LIBRARY_PATH=$(lib "$A") run_pytest "$A" "$L/pytest.log" ${PYTEST_TIMEOUT:-150}
if [ -n "${COMPARE:-}" ]; then
  LD_LIBRARY_PATH=$(lib "$A") PYTHONPATH="$(anchors_path)python/src" PORTSSM_LIBRARY_DIR="$A/src" \
    timeout $(tl ${COMPARE_TIMEOUT:-150}) python3 bench/python_ssd_compare.py --reps 10 \
    --shapes ${COMPARE_SHAPES:-B4,L2048,H80 B4,L2048,H24} > "$L/python_ssd_compare.log" 2>&1
  echo "python_ssd_compare: rc=$?"; tail -12 "$L/python_ssd_compare.log"
fi
tar czf "$OUT/ab_logs.tar.gz" -C "$L" .
