#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh FUZZ_API SECONDS [BACKEND...] - runs the fuzzer for SECONDS on each
# backend (default: cpu sim32 sim64), from a copy of tests/fuzz/corpus; fails on the first
# finding (libFuzzer writes the input as crash-*/leak-* in the current directory) and prints
# each run's executions.
set -euo pipefail
fuzz=${1:?usage: run_fuzz.sh FUZZ_API SECONDS [BACKEND...]}
seconds=${2:?usage: run_fuzz.sh FUZZ_API SECONDS [BACKEND...]}
shift 2
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(cpu sim32 sim64)
here=$(cd "$(dirname "$0")" && pwd)
# Broadcast inputs (stride 0) make huge logical shapes free in the arena's memory; the work limit
# keeps each call on cpu/sim to a fraction of a second (UNSUPPORTED past it, counted below), so
# that a run explores instead of spending its time inside one call (libFuzzer's -timeout).
export PORTSSM_CPU_WORK_LIMIT=${PORTSSM_CPU_WORK_LIMIT:-1e6}
echo "fuzz_api: PORTSSM_CPU_WORK_LIMIT = $PORTSSM_CPU_WORK_LIMIT"
for b in "${backends[@]}"; do
  corpus=$(mktemp -d)
  cp "$here"/corpus/* "$corpus"/
  log=$(mktemp)
  # the sim switches stacks between fibers: ASan's fake stacks must be off for it; libFuzzer
  # puts libstdc++ before the shared ASan runtime (harmless: it intercepts nothing)
  if ! PORTSSM_FUZZ_BACKEND=$b ASAN_OPTIONS=detect_stack_use_after_return=0:detect_leaks=1:verify_asan_link_order=0 \
       "$fuzz" -max_total_time="$seconds" -print_final_stats=1 -timeout=60 -rss_limit_mb=4096 \
       "$corpus" > "$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz_api on $b: FINDING (see above)"
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  outcomes=$(sed -n 's/^fuzz_api outcomes: *//p' "$log" | tail -1)
  echo "fuzz_api on $b: ${runs:-?} executions in ${seconds} s, ${cov:-cov: ?}, 0 findings (${outcomes})"
  rm -rf "$corpus" "$log"
done
