#!/usr/bin/env bash
# Usage (on the H200): bash bench/h200_ssd_bwd.sh <build dir>
# The SSD's device run: bench/h200_focus.sh without bench/python_overhead.py (SKIP_PYTHON; pytest
# on cuda runs here instead), then bench/python_ssd_compare.py (portssm's mamba_chunk_scan_combined
# beside mamba-ssm's, every gradient compared, with the references from .anchors/anchors.tar.xz
# when carried) and one Nsight Compute pass over the SSD fwd+bwd bench row (the time of every
# launch).  Logs come back in $OUT.  SKIP_PYTEST=1 leaves pytest out.
set -u
B=${1:?build dir}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SKIP_PYTHON=1 BUDGET_S=${BUDGET_S:-150} RACE_TIMEOUT=${RACE_TIMEOUT:-60} bash bench/h200_focus.sh "$B"
export LD_LIBRARY_PATH="$PWD/$B/src:$PWD/$B/deps:${LD_LIBRARY_PATH:-}"
. bench/device_suites.sh
[ -z "${SKIP_PYTEST:-}" ] && run_pytest "$B" "$OUT/pytest.log" ${PYTEST_TIMEOUT:-170}
REF=$(anchors_path)
PYTHONPATH="${REF}python/src" PORTSSM_LIBRARY_DIR="$B/src" timeout ${COMPARE_TIMEOUT:-200} \
  python3 bench/python_ssd_compare.py --reps 10 > "$OUT/python_ssd_compare.log" 2>&1
echo "python_ssd_compare: rc=$?"; tail -12 "$OUT/python_ssd_compare.log"
N=ncu; command -v $N >/dev/null || N=/usr/local/cuda/bin/ncu
timeout 120 $N --clock-control none --kernel-name 'regex:pssm_ssd|pssm_reduce' --launch-count 24 \
  --section SpeedOfLight --section LaunchStats --section Occupancy "$B/portssm_bench" --backend cuda \
  --reps 1 --warmup 0 --filter 'ssd_chunk_scan_fwd+bwd' > "$OUT/ncu_ssd_bwd.log" 2>&1
echo "ncu: rc=$?"
grep -E '^  pssm_|Duration' "$OUT/ncu_ssd_bwd.log" | paste - - | sed -E 's/\(([0-9]+), ([0-9]+), 1\)x\(([0-9]+), 1, 1\).*Duration +(u|m)s +([0-9.]+)/grid \1x\2 block \3: \5 \4s/'
