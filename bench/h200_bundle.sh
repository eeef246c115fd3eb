#!/usr/bin/env bash
# Runs a prebuilt build-h200/ tree (built on the Debian machine with CUDA 13, carried to the
# H200) without recompiling: doctor, every suite on the cuda backend, the bench (stream launches
# and --graph replays), then
# memcheck/racecheck/synccheck over every suite.  The logs come back as $OUT/h200_logs.tar.gz
# (with bench.json); a summary prints last.
# It saves the device time a build there costs (bench/device_run.sh builds on the device instead).
#
# Here:   bash bench/h200_prepare.sh
# There:  run(command="bash bench/h200_bundle.sh build-h200", carry=["build-h200"])
# Knobs:  SAN_TOOLS, SAN_SUITES, SAN_TIMEOUT (seconds per sanitizer run), SKIP_BENCH=1,
#         SKIP_LARGE=1 (test_large: tensors past 2^31 elements, ~80 GiB), SWEEP=<plan file> (a
#         PORTSSM_TUNING=ON build: bench/tune_sweep.sh with that plan file, last), SUITES (the
#         suites to run), SKIP_PTX60=1, BENCH_FILTER (portssm_bench --filter for both benches),
#         PROFILE="<kernel regex>@<bench filter>;..." (Nsight Compute, clocks left alone: one
#         launch of the kernel in the bench cases that match the filter; reports in ncu<i>.log).
# A build configured with -DPORTSSM_CUDA_EXTRA_PTX=ON also gets the Pascal pass: doctor and the
# kernel suites with PORTSSM_CUDA_IMAGE=ptx_sm60 (the sm_60 PTX, JIT-compiled by the driver).
set -u
B=${1:-build-h200}
export LD_LIBRARY_PATH="$PWD/$B/src:$PWD/$B/deps:${LD_LIBRARY_PATH:-}"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# The device returns only a few files from $OUT: logs go to LOG and come back as one tarball.
RESULT=$OUT; OUT=$(mktemp -d /tmp/h200logs.XXXX)
sum=()
# Every step starts only inside the budget (BUDGET_S, default 540 s of the device's 600 s per
# command): the logs and the tarball must come back even when the sanitizers run long.
T0=$(date +%s); BUDGET_S=${BUDGET_S:-540}
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
step() { local name=$1; shift; local t0=$(date +%s)
         if [ "$(left)" -lt 10 ]; then sum+=("$(printf '%-28s skipped: budget spent' "$name")"); return 0; fi
         timeout --kill-after=5 "$(left)" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
         sum+=("$(printf '%-28s rc=%-3s %4ss' "$name" "$rc" $(( $(date +%s) - t0 )))"); return $rc; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.log" 2>&1
step info "$B/portssm" info
step doctor "$B/portssm" doctor --backend cuda
SUITES=${SUITES:-test_api test_validation test_properties test_dialect test_conv1d test_scan test_decode test_backward test_ssd test_contexts}
for t in $SUITES; do
  step "$t" "$B/tests/$t" --backend cuda
done
[ -z "${SKIP_LARGE:-}" ] && step test_large "$B/tests/test_large" --backend cuda
if [ -z "${SKIP_PTX60:-}" ] && grep -q ptx_sm60 "$OUT/info.log" "$B/src/libportssm_cuda.so" 2>/dev/null; then
  export PORTSSM_CUDA_IMAGE=ptx_sm60
  step ptx60_info "$B/portssm" info
  step ptx60_doctor "$B/portssm" doctor --backend cuda
  for t in test_conv1d test_scan test_decode test_backward test_ssd; do step "ptx60_$t" "$B/tests/$t" --backend cuda; done
  unset PORTSSM_CUDA_IMAGE
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  filt=(); [ -n "${BENCH_FILTER:-}" ] && filt=(--filter "$BENCH_FILTER")
  step bench "$B/portssm_bench" --backend cuda "${filt[@]}" --json "$OUT/bench.json"
  step bench_graph "$B/portssm_bench" --backend cuda --graph "${filt[@]}" --json "$OUT/bench_graph.json"
fi
if [ -n "${PROFILE:-}" ]; then
  N=ncu; command -v $N >/dev/null || N=/usr/local/cuda/bin/ncu
  IFS=';' read -ra jobs <<< "$PROFILE"
  for i in "${!jobs[@]}"; do
    kern=${jobs[$i]%%@*}; filt=${jobs[$i]#*@}
    step "ncu$i" $N --clock-control none --kernel-name "regex:$kern" --launch-skip 3 --launch-count 1 \
         --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
         --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats \
         "$B/portssm_bench" --backend cuda --reps 3 --warmup 2 --filter "$filt"
  done
fi
if [ -n "${SWEEP:-}" ]; then
  step tune env OUT="$OUT" PORTSSM_TEST_FILTER="${SWEEP_TEST_FILTER:-bwd*}" \
    bash bench/tune_sweep.sh "$B" "$SWEEP"
  [ -f "$OUT/sweep.log" ] && cat "$OUT/sweep.log"
fi
S=compute-sanitizer; command -v $S >/dev/null || S=/usr/local/cuda/bin/compute-sanitizer
for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
  for t in ${SAN_SUITES:-$SUITES}; do
    # test_api asks cuMemAlloc for more than the GPU has on purpose (PORTSSM_ERR_OUT_OF_MEMORY is
    # its expected answer): that API error is not reported, everything else is.
    api=(); [ "$t" = test_api ] && api=(--report-api-errors no)
    step "san_${tool}_$t" timeout ${SAN_TIMEOUT:-120} $S --tool $tool "${api[@]}" --error-exitcode 9 "$B/tests/$t" --backend cuda
  done
done
[ -f "$OUT/bench.log" ] && tail -40 "$OUT/bench.log"
[ -f "$OUT/bench_graph.log" ] && grep -E "^\| (causal|selective)|timing|graph" "$OUT/bench_graph.log"
grep -h -m2 -iE 'cuda:0|image' "$OUT/info.log" "$OUT"/ptx60_info.log 2>/dev/null
for t in "$OUT"/test_*.log "$OUT"/ptx60_*.log "$OUT"/san_*.log; do echo "== $(basename $t): $(grep -E 'PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|doctor:|self-test' $t | tr '\n' ' ' | cut -c1-200)"; done
cat "$OUT/gpu.log"; printf '%s\n' "${sum[@]}"
printf '%s\n' "${sum[@]}" > "$OUT/summary.log"
tar -C "$OUT" -czf "$RESULT/h200_logs.tar.gz" . && cp "$OUT"/bench*.json "$RESULT/" 2>/dev/null
echo "logs: h200_logs.tar.gz ($(ls "$OUT" | wc -l) files)"
