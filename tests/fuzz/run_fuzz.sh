#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh FUZZ_API SECONDS [BACKEND...] - runs the fuzzer for SECONDS on each
# backend (default: cpu sim32 sim64), from a copy of tests/fuzz/corpus; fails on any finding
# (libFuzzer writes the input as crash-*/leak-* in the current directory) and prints each run's
# executions.
# The runs are independent, single-threaded and timed by the clock: PORTSSM_FUZZ_JOBS of them
# (default: the number of cores) run at once, so that each still has a core to itself for its
# SECONDS while the step takes the time of ceil(backends / cores) runs instead of all of them.
set -euo pipefail
fuzz=${1:?usage: run_fuzz.sh FUZZ_API SECONDS [BACKEND...]}
seconds=${2:?usage: run_fuzz.sh FUZZ_API SECONDS [BACKEND...]}
shift 2
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(cpu sim32 sim64)
jobs_max=${PORTSSM_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs_max" -ge 1 ] 2>/dev/null || jobs_max=1
here=$(cd "$(dirname "$0")" && pwd)
# Broadcast inputs (stride 0) make huge logical shapes free in the arena's memory; the work limit
# keeps each call on cpu/sim to a fraction of a second (UNSUPPORTED past it, counted below), so
# that a run explores instead of spending its time inside one call (libFuzzer's -timeout).
export PORTSSM_CPU_WORK_LIMIT=${PORTSSM_CPU_WORK_LIMIT:-1e6}
echo "fuzz_api: PORTSSM_CPU_WORK_LIMIT = $PORTSSM_CPU_WORK_LIMIT, $jobs_max run(s) at once"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# one backend's run: its log in $work/<backend>.log, its exit status in $work/<backend>.rc
fuzz_one() {
  local b=$1 corpus=$work/corpus-$1 rc=0
  mkdir "$corpus"
  cp "$here"/corpus/* "$corpus"/
  # the sim switches stacks between fibers: ASan's fake stacks must be off for it; libFuzzer
  # puts libstdc++ before the shared ASan runtime (harmless: it intercepts nothing)
  PORTSSM_FUZZ_BACKEND=$b ASAN_OPTIONS=detect_stack_use_after_return=0:detect_leaks=1:verify_asan_link_order=0 \
    "$fuzz" -max_total_time="$seconds" -print_final_stats=1 -timeout=60 -rss_limit_mb=4096 \
    "$corpus" > "$work/$b.log" 2>&1 || rc=$?
  echo "$rc" > "$work/$b.rc"
}

for b in "${backends[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
    wait -n || true
  done
  fuzz_one "$b" &
done
wait

status=0
for b in "${backends[@]}"; do
  log=$work/$b.log
  if [ "$(cat "$work/$b.rc" 2>/dev/null || echo missing)" != 0 ]; then
    tail -40 "$log"
    echo "fuzz_api on $b: FINDING (see above; exit $(cat "$work/$b.rc" 2>/dev/null || echo '?'))"
    status=1
    continue
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  outcomes=$(sed -n 's/^fuzz_api outcomes: *//p' "$log" | tail -1)
  echo "fuzz_api on $b: ${runs:-?} executions in ${seconds} s, ${cov:-cov: ?}, 0 findings (${outcomes})"
done
exit $status
