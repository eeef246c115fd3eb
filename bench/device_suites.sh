# device_suites.sh - sourced by the device scripts (h200_side_by_side.sh, h200_ssd_profile.sh):
# run_suites <build dir> <log dir> runs SUITES on the cuda backend and PTX60_SUITES through the
# ptx_sm60 image (PORTSSM_CUDA_IMAGE, the FMA paths), one log per suite, one summary line each.
# Each suite gets 300 s, or less where the caller defines tl (the seconds its own deadline leaves).
suite_limit() { if declare -F tl >/dev/null; then tl 300; else echo 300; fi; }
run_suites() {
  local b=$1 out=$2 t
  for t in ${SUITES:-}; do
    timeout $(suite_limit) "$b/tests/$t" --backend cuda > "$out/$t.log" 2>&1
    echo "$t: rc=$? $(grep -E 'PASSED|FAILED' "$out/$t.log" | tail -2 | tr '\n' ' ')"
  done
  for t in ${PTX60_SUITES:-}; do
    PORTSSM_CUDA_IMAGE=ptx_sm60 timeout $(suite_limit) "$b/tests/$t" --backend cuda > "$out/${t}_ptx_sm60.log" 2>&1
    echo "$t (ptx_sm60): rc=$? $(grep -E 'PASSED|FAILED' "$out/${t}_ptx_sm60.log" | tail -2 | tr '\n' ' ')"
  done
}
