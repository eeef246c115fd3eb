#!/usr/bin/env bash
# Runs a prebuilt build-h200/ tree (built on the Debian machine with CUDA 13, carried to the
# H200) without recompiling: doctor, every suite on the cuda backend, the bench, then
# memcheck/racecheck/synccheck over the kernel suites.  Logs land in $OUT; a summary prints last.
# It saves the device time a build there costs (bench/device_run.sh builds on the device instead).
#
# Here:   cmake -S . -B build-h200 -DBACKEND=cuda && cmake --build build-h200 -j2 &&
#         mkdir -p build-h200/deps && cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 build-h200/deps/
# There:  run(command="bash bench/h200_bundle.sh build-h200", carry=["build-h200"])
# Knobs:  SAN_TOOLS, SAN_SUITES, SAN_TIMEOUT (seconds per sanitizer run).
set -u
B=${1:-build-h200}
export LD_LIBRARY_PATH="$PWD/$B/src:$PWD/$B/deps:${LD_LIBRARY_PATH:-}"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
sum=()
step() { local name=$1; shift; local t0=$(date +%s); "$@" > "$OUT/$name.log" 2>&1; local rc=$?;
         sum+=("$(printf '%-28s rc=%-3s %4ss' "$name" "$rc" $(( $(date +%s) - t0 )))"); return $rc; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.log" 2>&1
step doctor "$B/portssm" doctor --backend cuda
for t in test_api test_validation test_properties test_dialect test_conv1d test_scan test_decode; do
  step "$t" "$B/tests/$t" --backend cuda
done
step bench "$B/portssm_bench" --backend cuda --json "$OUT/bench.json"
S=compute-sanitizer; command -v $S >/dev/null || S=/usr/local/cuda/bin/compute-sanitizer
for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
  for t in ${SAN_SUITES:-test_dialect test_conv1d test_scan test_decode}; do
    step "san_${tool}_$t" timeout ${SAN_TIMEOUT:-120} $S --tool $tool --error-exitcode 9 "$B/tests/$t" --backend cuda
  done
done
tail -40 "$OUT/bench.log"
for t in "$OUT"/test_*.log "$OUT"/san_*.log; do echo "== $(basename $t): $(grep -E 'PASSED|FAILED|SKIPPED|ERROR SUMMARY|RACECHECK SUMMARY' $t | tr '\n' ' ' | cut -c1-200)"; done
cat "$OUT/gpu.log"; printf '%s\n' "${sum[@]}"
