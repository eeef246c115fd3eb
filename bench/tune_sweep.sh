#!/usr/bin/env bash
# Sweeps launch plans on a GPU with a tuning build (-DPORTSSM_TUNING=ON: the planners read
# PORTSSM_TUNE_* overrides, backends/gpu/tuning.h) and prints one line per plan and case:
#   <plan>  <case>  <median us>  <GB/s>  <% copy>
# Each plan first runs the suite that checks the affected op against the CPU oracle on the same
# device with the same overrides; a plan whose suite fails is reported FAILED and not timed.
#
#   device run: CMAKE_EXTRA=-DPORTSSM_TUNING=ON TUNE_PLANS=<plan file> bash bench/device_run.sh build tune
#   or by hand:  bash bench/tune_sweep.sh <tuning build dir> <plan file>
# A plan file has one plan per line: "<suite> | <bench filter> | VAR=value ..." (VAR without the
# PORTSSM_TUNE_ prefix; '#' starts a comment).  Output and per-plan logs: $OUT/sweep.log, sweep/.
set -u
B=${1:?build dir}; PLANS=${2:?plan file}
export LD_LIBRARY_PATH="$PWD/$B/src:$PWD/$B/deps:${LD_LIBRARY_PATH:-}"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/sweep"
i=0
while IFS='|' read -r suite filter vars; do
  suite=$(echo "$suite" | xargs); filter=$(echo "$filter" | xargs)
  case "$suite" in ''|\#*) continue ;; esac
  i=$((i + 1)); envs=(); for v in $vars; do envs+=("PORTSSM_TUNE_$v"); done
  plan="${vars:- default}"; plan=$(echo "$plan" | xargs)
  if ! env "${envs[@]}" "$B/tests/$suite" --backend cuda > "$OUT/sweep/$i.test.log" 2>&1; then
    echo "$plan | $filter | FAILED ($suite, sweep/$i.test.log)" | tee -a "$OUT/sweep.log"; continue
  fi
  env "${envs[@]}" "$B/portssm_bench" --backend cuda --filter "$filter" --json "$OUT/sweep/$i.json" \
      > "$OUT/sweep/$i.bench.log" 2>&1
  python3 - "$OUT/sweep/$i.json" "$plan" <<'PY' | tee -a "$OUT/sweep.log"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    med = r.get("median_us")
    name = f'{r.get("op")} {r.get("dtype")} {r.get("shape")}'
    if med:
        gbps = r["bytes"] / (med * 1e-6) / 1e9 if r.get("bytes") else 0
        print(f'{sys.argv[2]:<44} | {name:<44} | {med:9.2f} us | {gbps:6.0f} GB/s | '
              f'{100 * gbps / d["copy_gbps"]:5.1f} %')
PY
done < "$PLANS"
