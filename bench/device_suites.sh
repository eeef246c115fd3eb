# device_suites.sh - sourced by the device scripts (h200_ab.sh, h200_side_by_side.sh,
# h200_ssd_profile.sh, h200_final.sh, h200_focus.sh, h200_ssd_bwd.sh): the steps they share.
#
# tl <seconds>: a step's time limit, or less where the caller set DEADLINE (epoch seconds): what
# is left before it, 15 s kept for packing the logs, so that they come back inside the device's
# limit.
tl() {
  [ -n "${DEADLINE:-}" ] || { echo "$1"; return; }
  local left=$(( DEADLINE - $(date +%s) - 15 ))
  [ "$left" -lt "$1" ] && echo $(( left > 1 ? left : 1 )) || echo "$1"
}
# run_suites <build dir> <log dir> runs SUITES on the cuda backend and PTX60_SUITES through the
# ptx_sm60 image (PORTSSM_CUDA_IMAGE, the FMA paths), one log per suite, one summary line each.
run_suites() {
  local b=$1 out=$2 t
  # (the build's own libraries and carried deps such as cmocka, whatever the caller exported)
  local d=$b; case $b in /*) ;; *) d=$PWD/$b ;; esac
  local LD_LIBRARY_PATH="$d/src:$d/deps:${LD_LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH
  for t in ${SUITES:-}; do
    timeout $(tl 300) "$b/tests/$t" --backend cuda > "$out/$t.log" 2>&1
    echo "$t: rc=$? $(grep -E 'PASSED|FAILED' "$out/$t.log" | tail -2 | tr '\n' ' ')"
  done
  for t in ${PTX60_SUITES:-}; do
    PORTSSM_CUDA_IMAGE=ptx_sm60 timeout $(tl 300) "$b/tests/$t" --backend cuda > "$out/${t}_ptx_sm60.log" 2>&1
    echo "$t (ptx_sm60): rc=$? $(grep -E 'PASSED|FAILED' "$out/${t}_ptx_sm60.log" | tail -2 | tr '\n' ' ')"
  done
}
# run_pytest <build dir> <log> <seconds>: the Python package's tests on cuda over that build
# (its compiled extension required), without the reference packages on the path.
run_pytest() {
  PYTHONPATH=python/src PORTSSM_LIBRARY_DIR="$1/src" PORTSSM_EXPECT_EXTENSION=1 timeout $(tl "$3") \
    python3 -m pytest -q -rs -p no:cacheprovider python/tests > "$2" 2>&1
  echo "pytest on cuda: rc=$? $(tail -1 "$2")"
}
# anchors_path: the reference packages' PYTHONPATH prefix ("/tmp/anchors:"), unpacked once from
# a carried .anchors/anchors.tar.xz; empty without it (the scripts then time portssm alone).
anchors_path() {
  [ -f .anchors/anchors.tar.xz ] || return 0
  if [ ! -f /tmp/anchors/.unpacked ]; then
    mkdir -p /tmp/anchors && tar xf .anchors/anchors.tar.xz -C /tmp/anchors || return 0
    touch /tmp/anchors/.unpacked
  fi
  echo /tmp/anchors:
}
