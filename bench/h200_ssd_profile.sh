#!/usr/bin/env bash
# Usage (on the H200): bash bench/h200_ssd_profile.sh <build dir>
# The SSD's speed work in one short device run: test_ssd on cuda (the build is right), the SSD
# bench rows (graph replay and eager), then one Nsight Compute pass over the fwd+bwd bench row
# with the time of every launch, and a second over the kernels named by PROFILE_KERNELS
# (default: the forward's) with warp-state and source-level stall sampling (a build configured
# with -DPORTSSM_NVCC_FLAGS=-lineinfo names the source lines).  Logs in $OUT.
set -u
B=${1:?build dir}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$B/src:$PWD/$B/deps:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.log" 2>&1
timeout 120 "$B/tests/test_ssd" --backend cuda > "$OUT/test_ssd.log" 2>&1
echo "test_ssd: rc=$? $(grep -E 'PASSED|FAILED' "$OUT/test_ssd.log" | tail -2 | tr '\n' ' ')"
timeout 60 "$B/tests/test_dialect" --backend cuda > "$OUT/test_dialect.log" 2>&1
echo "test_dialect: rc=$? $(tail -1 "$OUT/test_dialect.log")"
# more suites on cuda (SUITES), through the ptx_sm60 image (PTX60_SUITES: the FMA paths) and
# under compute-sanitizer (MEMCHECK_SUITES), e.g. SUITES="test_backward"
. bench/device_suites.sh
run_suites "$B" "$OUT"
CS=compute-sanitizer; command -v $CS >/dev/null || CS=/usr/local/cuda/bin/compute-sanitizer
# (SAN_TOOLS: memcheck by default, racecheck/synccheck for the shared-memory pipelines;
# SAN_FILTER: the cases under them, a cmocka filter)
for tool in ${SAN_TOOLS:-memcheck}; do
  for t in ${MEMCHECK_SUITES:-}; do
    PORTSSM_TEST_FILTER="${SAN_FILTER:-*}" timeout ${SAN_TIMEOUT:-300} $CS --tool $tool \
      --error-exitcode 9 "$B/tests/$t" --backend cuda > "$OUT/${tool}_$t.log" 2>&1
    echo "$tool $t: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/${tool}_$t.log" | tail -1)"
  done
done
timeout 120 "$B/portssm_bench" --backend cuda --graph --filter "${BENCH_FILTER:-ssd}" > "$OUT/bench_graph.log" 2>&1
echo "bench (graph): rc=$?"; grep -E '^\| ssd|copy bandwidth' "$OUT/bench_graph.log"
# the same rows eager from C (no graph: the launch gaps a C caller sees; BENCH_EAGER=0: left out)
if [ "${BENCH_EAGER:-1}" = 1 ]; then
  timeout 120 "$B/portssm_bench" --backend cuda --filter "${BENCH_FILTER:-ssd}" > "$OUT/bench_eager.log" 2>&1
  echo "bench (eager): rc=$?"; grep -E '^\| ssd' "$OUT/bench_eager.log"
fi
N=ncu; command -v $N >/dev/null || N=/usr/local/cuda/bin/ncu
timeout 120 $N --clock-control none --kernel-name 'regex:pssm_ssd|pssm_reduce' --launch-count 24 \
  --section SpeedOfLight --section Occupancy "$B/portssm_bench" --backend cuda \
  --reps 1 --warmup 0 --filter 'ssd_chunk_scan_fwd+bwd' > "$OUT/ncu_times.log" 2>&1
echo "ncu (times): rc=$?"
grep -E '^  pssm_|Duration' "$OUT/ncu_times.log" | paste - - | sed -E 's/\(([0-9]+), ([0-9]+), 1\)x\(([0-9]+), 1, 1\).*Duration +(u|m)s +([0-9.]+)/grid \1x\2 block \3: \5 \4s/'
# (PROFILE_KERNELS=none, PROFILE_SOURCE_KERNEL=none: those passes left out)
[ "${PROFILE_KERNELS:-}" = none ] || timeout ${PROFILE_TIMEOUT:-180} $N --clock-control none \
  --kernel-name "regex:${PROFILE_KERNELS:-pssm_ssd_chunk_(out|state)_bf16}" --launch-count ${PROFILE_COUNT:-2} \
  --section WarpStateStats --section SourceCounters --section InstructionStats --section SpeedOfLight \
  "$B/portssm_bench" --backend cuda --reps 1 --warmup 0 \
  --filter "${PROFILE_FILTER:-ssd_chunk_scan_fwd bf16 B4 L2048 H80}" > "$OUT/ncu_stalls.log" 2>&1
echo "ncu (stalls): rc=$?"
grep -E '^  pssm_|Stall|stall|Warp Cycles|Issued|Executed Ipc|Duration' "$OUT/ncu_stalls.log" | head -60
# per-instruction counts and stall samples of one launch of each kernel named by
# PROFILE_SOURCE_KERNEL (space-separated regexes; SASS with the source lines of a -lineinfo
# build), as CSV: ncu_source[_<i>].csv.gz, ncu_details[_<i>].log for the i-th after the first
[ "${PROFILE_SOURCE_KERNEL:-}" = none ] && exit 0
i=0
for K in ${PROFILE_SOURCE_KERNEL:-pssm_ssd_chunk_out_bf16}; do
  sfx=$([ $i = 0 ] && echo "" || echo "_$i"); i=$((i + 1))
  timeout ${PROFILE_TIMEOUT:-180} $N --clock-control none \
    --kernel-name "regex:$K" --launch-count 1 \
    --section SourceCounters --section WarpStateStats --print-details all -f -o "$OUT/prof" \
    "$B/portssm_bench" --backend cuda --reps 1 --warmup 0 \
    --filter "${PROFILE_FILTER:-ssd_chunk_scan_fwd bf16 B4 L2048 H80}" > "$OUT/ncu_source_run$sfx.log" 2>&1
  echo "ncu (source $K): rc=$?"
  $N --import "$OUT/prof.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_source$sfx.csv" 2>&1
  echo "ncu source page: rc=$? $(wc -l < "$OUT/ncu_source$sfx.csv") lines"
  $N --import "$OUT/prof.ncu-rep" --page details --print-details all > "$OUT/ncu_details$sfx.log" 2>&1
  gzip -f "$OUT/ncu_source$sfx.csv"; rm -f "$OUT/prof.ncu-rep"
done
