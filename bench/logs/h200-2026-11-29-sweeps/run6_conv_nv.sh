#!/usr/bin/env bash
# conv fwd with 2 and 8 vectors per lane per tile (default 4: build-tune), then ncu of the M1 state update.
set -u
D=$PWD/build-tune/deps
for nv in 2 8; do
  export LD_LIBRARY_PATH=$PWD/build-exp/nv$nv/src:$D
  echo "== NV_16=$nv: $(build-exp/nv$nv/tests/test_conv1d --backend cuda 2>&1 | grep -E 'PASSED|FAILED' | head -2 | tr '\n' ' ')"
  build-exp/nv$nv/portssm_bench --backend cuda --filter "causal_conv1d_fwd " --filter "causal_conv1d_update" 2>&1 | grep -E "^\| causal"
done
export LD_LIBRARY_PATH=$PWD/build-tune/src:$D
echo "== NV_16=4 (default)"; build-tune/portssm_bench --backend cuda --filter "causal_conv1d_fwd " 2>&1 | grep -E "^\| causal"
ncu --clock-control none --kernel-name regex:pssm_state_update_s4_bf16 --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters \
    build-tune/portssm_bench --backend cuda --reps 3 --warmup 2 --filter "B64 D4096 N16" > $OUT/ncu_update_m1.log 2>&1
grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Warp Per|Warp Cycles Per Issued|L2 Hit|Waves Per SM|Block Limit Registers|Grid Size|Block Size" $OUT/ncu_update_m1.log
