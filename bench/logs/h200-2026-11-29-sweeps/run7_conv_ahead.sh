#!/usr/bin/env bash
# conv fwd build variants (PSSM_C1_AHEAD, PSSM_C1_NV_F32) against the release tree build-h200.
set -u
D=$PWD/build-h200/deps
run() { # name dir
  export LD_LIBRARY_PATH=$2/src:$D
  echo "== $1: $($2/tests/test_conv1d --backend cuda 2>&1 | grep -E 'PASSED|FAILED' | head -2 | tr '\n' ' ')"
  for i in 1 2; do $2/portssm_bench --backend cuda --filter "causal_conv1d_fwd " 2>&1 | grep -E "^\| causal"; done
}
run "release (AHEAD 1, NV16 2, NV32 4)" $PWD/build-h200
for k in a2 a2f2 f2; do run "$k" $PWD/build-exp/$k; done
