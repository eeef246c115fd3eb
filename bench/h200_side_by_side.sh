#!/usr/bin/env bash
# Usage (on the H200): bash bench/h200_side_by_side.sh <build dir>
# portssm beside the reference packages in one device run (issue #10): the suites (SUITES on
# cuda, PTX60_SUITES through the ptx_sm60 image), `portssm_bench --graph` over every row
# (BENCH_FILTER narrows it), then bench/side_by_side.py times the references at the same rows and
# compares their outputs with portssm's (the references from .anchors/anchors.tar.xz when
# carried; without them the table has portssm's columns only).
# MEMCHECK_SUITES: compute-sanitizer memcheck over those suites; PYTEST=1: python/tests on cuda.
# EAGER_FILTER: those bench rows again without graphs (stream launches: eager from C).
# VARIANTS="name:VAR=v,VAR=v:filter;..." adds one more --graph bench per entry, with those
# environment settings (a PORTSSM_TUNING=ON build reads PORTSSM_TUNE_*), for plans side by side.
# NCU="<kernel regex>@<bench filter>;..." profiles one launch of portssm's kernel in those bench
# rows, NCU_REF="<kernel regex>@<side_by_side filter>;..." one of the reference's (Nsight
# Compute, clocks left alone; reports in ncu_*.log).
# A build too large to carry beside the anchors may come packed: PACK=<dir>/build.tar.xz is
# unpacked into the current directory first.
# $OUT gets logs.tar.gz (every log), bench_graph.json and side_by_side.md/.json; a summary prints.
set -u
B=${1:?build dir}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# (the device returns only a few files: the logs come back as one tarball)
RESULT=$OUT; OUT=$(mktemp -d /tmp/sbs.XXXX)
if [ -n "${PACK:-}" ]; then tar xJf "$PACK" || { echo "unpacking $PACK failed"; exit 1; }; fi
export LD_LIBRARY_PATH="$PWD/$B/src:$PWD/$B/deps:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.log" 2>&1
. bench/device_suites.sh
SUITES=${SUITES-test_decode} run_suites "$B" "$OUT"
for t in ${MEMCHECK_SUITES:-}; do
  S=compute-sanitizer; command -v $S >/dev/null || S=/usr/local/cuda/bin/compute-sanitizer
  timeout $(tl 300) $S --tool memcheck --error-exitcode 9 "$B/tests/$t" --backend cuda > "$OUT/memcheck_$t.log" 2>&1
  echo "memcheck $t: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_$t.log" | tail -1)"
done
[ -n "${PYTEST:-}" ] && run_pytest "$B" "$OUT/pytest.log" 240
filt=(); [ -n "${BENCH_FILTER:-}" ] && filt=(--filter "$BENCH_FILTER")
timeout $(tl 240) "$B/portssm_bench" --backend cuda --graph "${filt[@]}" --json "$OUT/bench_graph.json" \
  > "$OUT/bench_graph.log" 2>&1
echo "bench --graph: rc=$?"; grep -E '^\| ' "$OUT/bench_graph.log" | cut -c1-150
if [ -n "${EAGER_FILTER:-}" ]; then
  timeout $(tl 120) "$B/portssm_bench" --backend cuda --filter "$EAGER_FILTER" \
    --json "$OUT/bench_eager.json" > "$OUT/bench_eager.log" 2>&1
  echo "bench eager ($EAGER_FILTER): rc=$?"; grep -E '^\| [a-z]' "$OUT/bench_eager.log" | cut -c1-110
fi
IFS=';' read -ra variants <<< "${VARIANTS:-}"
for v in "${variants[@]}"; do
  name=${v%%:*}; rest=${v#*:}; envs=${rest%%:*}; vf=${rest#*:}
  IFS=',' read -ra kv <<< "$envs"
  env "${kv[@]}" timeout $(tl 120) "$B/portssm_bench" --backend cuda --graph --filter "$vf" \
    --json "$OUT/bench_$name.json" > "$OUT/bench_$name.log" 2>&1
  echo "variant $name ($envs): rc=$?"; grep -E '^\| [a-z]' "$OUT/bench_$name.log" | cut -c1-110
done
REF=$(anchors_path)
PYTHONPATH="${REF}python/src" PORTSSM_LIBRARY_DIR="$B/src" timeout $(tl ${SBS_TIMEOUT:-420}) \
  python3 bench/side_by_side.py --bench-json "$OUT/bench_graph.json" --out-md "$OUT/side_by_side.md" \
  --out-json "$OUT/side_by_side.json" ${SBS_FILTER:+--filter "$SBS_FILTER"} > "$OUT/side_by_side.log" 2>&1
echo "side_by_side: rc=$?"; cat "$OUT/side_by_side.md" 2>/dev/null || tail -20 "$OUT/side_by_side.log"
N=ncu; command -v $N >/dev/null || N=/usr/local/cuda/bin/ncu
SECTIONS=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
          --section SchedulerStats --section MemoryWorkloadAnalysis)
IFS=';' read -ra jobs <<< "${NCU:-}"
for i in "${!jobs[@]}"; do
  k=${jobs[$i]%%@*}; f=${jobs[$i]#*@}
  timeout $(tl 120) $N --clock-control none --kernel-name "regex:$k" --launch-skip 3 --launch-count 1 \
    "${SECTIONS[@]}" "$B/portssm_bench" --backend cuda --filter "$f" --reps 5 > "$OUT/ncu_$i.log" 2>&1
  echo "ncu $k @ $f: rc=$? $(grep -E 'Duration|Registers Per|Achieved Occupancy|DRAM Throughput' "$OUT/ncu_$i.log" | tr -s ' ' | tr '\n' ';')"
done
IFS=';' read -ra jobs <<< "${NCU_REF:-}"
for i in "${!jobs[@]}"; do
  k=${jobs[$i]%%@*}; f=${jobs[$i]#*@}
  PYTHONPATH="${REF}python/src" PORTSSM_LIBRARY_DIR="$B/src" timeout $(tl 180) $N --clock-control none \
    --kernel-name "regex:$k" --launch-skip 5 --launch-count 1 "${SECTIONS[@]}" \
    python3 bench/side_by_side.py --bench-json "$OUT/bench_graph.json" --filter "$f" --reps 3 \
    > "$OUT/ncu_ref_$i.log" 2>&1
  echo "ncu ref $k @ $f: rc=$? $(grep -E 'Duration|Registers Per|Achieved Occupancy|DRAM Throughput' "$OUT/ncu_ref_$i.log" | tr -s ' ' | tr '\n' ';')"
done
tar czf "$RESULT/logs.tar.gz" -C "$OUT" .
cp "$OUT"/bench_graph.json "$OUT"/side_by_side.md "$OUT"/side_by_side.json "$RESULT"/ 2>/dev/null
