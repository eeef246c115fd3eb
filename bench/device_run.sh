#!/usr/bin/env bash
# bench/device_run.sh - the one script run on the GPU machine (NVIDIA H200, CUDA 13.0, no network):
# build with the cuda backend, check it, sanitize it, time it.
#
#   here, once:    bash bench/carry_deps.sh           (cmocka into .deps/, which is git-ignored)
#   device run:    command "bash bench/device_run.sh [step...]", carry [".deps"]
#
# Steps, in this order (default: all):
#   build     configure (-DBACKEND=cuda, the carried cmocka) and build -j$JOBS, timed
#   info      nvidia-smi and `portssm info`
#   doctor    `portssm doctor --backend cuda`
#   test      ctest -L cuda --output-on-failure
#   sanitize  compute-sanitizer memcheck / racecheck / synccheck over the doctor (every op) and
#             the kernel suites (--backend cuda), each run bounded by SANITIZE_TIMEOUT
#   bench     portssm_bench --backend cuda --json $OUT/bench.json
#   ptx60     the suites and the doctor again with PORTSSM_CUDA_IMAGE=$PTX_IMAGE: the sm_60 PTX,
#             JIT-compiled by the driver.  The build embeds that image (PORTSSM_CUDA_EXTRA_PTX)
#             when a clang 15+ is found (PTX_BUILD=auto; on / off force it); else this skips.
#   anchors   unpacks the reference packages (carry .anchors/anchors.tar.xz, a copy of
#             shared/anchors/anchors.tar.xz) into $ANCHOR_DIR for parity and e2e
#   pytest    the Python package's tests on cuda over this build (python/src, the build's
#             libportssm), without the reference packages on the path
#   parity    bench/parity_mamba_ssm.py: mamba-ssm's model code on the reference and on portssm's
#             import surface, one checkpoint ($OUT/parity.json)
#   e2e       bench/e2e.py: transformers' Mamba and Mamba-2 on portssm and on the references
#             (E2E_ARGS, default --size 130m --adamw; $OUT/e2e.json)
# Steps not named on the command line do not run: the default is the first seven.
# Each step writes $OUT/<step>.log (at most 8 files come back: 7 logs + bench.json); the bench
# table and a summary table are printed last.  A step that would start with less than
# MIN_STEP_S seconds of BUDGET_S left is skipped, and each step is cut at the budget.
#
# Environment: OUT (default ./build-device-out), BUILD_DIR (build-device), JOBS (16), BUDGET_S (540),
#   CMAKE_EXTRA (more configure arguments), TEST_REGEX (the test step's suites: ctest -R),
#   SANITIZE_TOOLS ("memcheck racecheck synccheck"),
#   SANITIZE_PROGS ("doctor test_dialect test_conv1d test_scan test_decode test_properties"),
#   SANITIZE_TIMEOUT (150 s per run), BENCH_ARGS (more portssm_bench arguments),
#   PTX_IMAGE (ptx_sm60), PTX_BUILD (auto | on | off).
# Exit status: 0 when no step failed.
# shellcheck disable=SC2317,SC2155  # steps are called as "step_$name"; locals hold plain output
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD

OUT=${OUT:-$ROOT/build-device-out}
BUILD=${BUILD_DIR:-$ROOT/build-device}
JOBS=${JOBS:-16}
BUDGET_S=${BUDGET_S:-540}
MIN_STEP_S=${MIN_STEP_S:-15}
SANITIZE_TOOLS=${SANITIZE_TOOLS:-memcheck racecheck synccheck}
SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-150}
SANITIZE_PROGS=${SANITIZE_PROGS:-doctor test_dialect test_conv1d test_scan test_decode test_properties}
PTX_IMAGE=${PTX_IMAGE:-ptx_sm60}
PTX_BUILD=${PTX_BUILD:-auto}
CMOCKA=$ROOT/.deps/cmocka
mkdir -p "$OUT"
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac

for d in /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer; do
    [ -d "$d" ] && PATH=$PATH:$d
done
export PATH
[ -d "$CMOCKA/lib" ] && export LD_LIBRARY_PATH=$CMOCKA/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

ALL_STEPS="build info doctor test sanitize bench ptx60 anchors pytest parity e2e"
STEPS=${*:-build info doctor test sanitize bench ptx60}
ANCHOR_DIR=${ANCHOR_DIR:-/tmp/anchors}
for s in $STEPS; do
    case " $ALL_STEPS " in *" $s "*) ;; *)
        echo "device_run: unknown step '$s' (steps: $ALL_STEPS)" >&2; exit 2 ;;
    esac
done

START=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
# Runs a command cut at the budget (and at an optional lower limit in seconds).
bounded() {
    local limit=$(left)
    if [ -n "${CAP:-}" ] && [ "$CAP" -lt "$limit" ]; then limit=$CAP; fi
    [ "$limit" -lt 1 ] && return 124
    timeout --kill-after=10 "$limit" "$@"
}
bin() { # the built program $1, wherever the build put it
    local p
    for p in "$BUILD/src/$1" "$BUILD/bin/$1" "$BUILD/bench/$1" "$BUILD/$1"; do
        [ -x "$p" ] && { echo "$p"; return 0; }
    done
    p=$(find "$BUILD" -maxdepth 3 -type f -name "$1" -perm -u+x 2>/dev/null | head -n 1)
    [ -n "$p" ] && { echo "$p"; return 0; }
    return 1
}

declare -A RESULT SECONDS_OF NOTE
NOTE_FILE=$(mktemp)
note() { echo "$*" >"$NOTE_FILE"; } # a step's one-line summary

# ---------------------------------------------------------------- steps
# Each returns 0 (PASS), 77 (SKIP) or anything else (FAIL), and may call note.

find_clang() { # a clang of version 15 or newer, which can emit sm_60 PTX
    local c v
    for c in clang-19 clang-18 clang-17 clang-16 clang-15 clang; do
        command -v "$c" >/dev/null || continue
        v=$("$c" -dumpversion 2>/dev/null | cut -d. -f1)
        [ -n "$v" ] && [ "$v" -ge 15 ] 2>/dev/null && { command -v "$c"; return 0; }
    done
    return 1
}

step_build() {
    if ! command -v nvcc >/dev/null; then note "nvcc not found"; return 1; fi
    nvcc --version | tail -n 2
    local testing=() tnote=""
    if [ -f "$CMOCKA/include/cmocka.h" ] && [ -f "$CMOCKA/lib/libcmocka.so" ]; then
        testing=(-DCMOCKA_INCLUDE_DIR="$CMOCKA/include" -DCMOCKA_LIBRARY="$CMOCKA/lib/libcmocka.so")
    else
        echo "no carried cmocka in $CMOCKA (run bench/carry_deps.sh and carry .deps): tests off"
        testing=(-DBUILD_TESTING=OFF)
        tnote=", NO TESTS (no cmocka carried)"
    fi
    # the ptx_sm60 image (for the ptx60 step) is made by clang 15+, if the machine has one
    local ptx=() clang
    if [ "$PTX_BUILD" = on ]; then
        ptx=(-DPORTSSM_CUDA_EXTRA_PTX=ON)
    elif [ "$PTX_BUILD" = auto ] && clang=$(find_clang); then
        ptx=(-DPORTSSM_CUDA_EXTRA_PTX=ON -DPORTSSM_CLANG_CUDA="$clang")
        echo "sm_60 PTX image by $clang"
    else
        echo "no clang 15+ here (or PTX_BUILD=off): no ptx_sm60 image, the ptx60 step will skip"
    fi
    local t0=$(date +%s)
    # shellcheck disable=SC2086
    bounded cmake -S "$ROOT" -B "$BUILD" -DBACKEND=cuda -DCMAKE_BUILD_TYPE=Release \
        "${testing[@]}" "${ptx[@]}" ${CMAKE_EXTRA:-} || { note "configure failed"; return 1; }
    local t1=$(date +%s)
    bounded cmake --build "$BUILD" -j "$JOBS" || { note "build failed"; return 1; }
    local t2=$(date +%s)
    local mod=$(find "$BUILD" -name 'libportssm_cuda.so*' -type f | head -n 1)
    note "configure $((t1 - t0)) s, build $((t2 - t1)) s (-j$JOBS)${mod:+, module $(du -h "$mod" | cut -f1)}$tnote"
    return 0
}

step_info() {
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
            --format=csv
    else
        echo "nvidia-smi not found"
    fi
    local p
    p=$(bin portssm) || { note "no portssm binary (build first)"; return 1; }
    bounded "$p" info 2>&1 | tee "$OUT/info.tmp"
    local rc=${PIPESTATUS[0]}
    local picked=$(sed -n 's/^auto picks //p' "$OUT/info.tmp")
    local dev=$(awk '/^  cuda:0 /{ $1=""; print; exit }' "$OUT/info.tmp")
    rm -f "$OUT/info.tmp"
    note "auto picks ${picked:-?};${dev:- no cuda device}"
    return $rc
}

last_line() { # the last non-empty line of a file, for a note when a program said nothing else
    grep -v '^[[:space:]]*$' "$1" | tail -n 1 | cut -c1-200
}

doctor_note() { # from a doctor log
    local line
    line=$(grep -E '^doctor: [0-9]+ passed' "$1" | tail -n 1)
    if [ -n "$line" ]; then echo "${line#doctor: }"; else last_line "$1"; fi
}

step_doctor() {
    local p
    p=$(bin portssm) || { note "no portssm binary (build first)"; return 1; }
    bounded "$p" doctor --backend cuda 2>&1 | tee "$OUT/doctor.tmp"
    local rc=${PIPESTATUS[0]}
    local selftest=$(grep -E '^self-test:' "$OUT/doctor.tmp" | head -n 1)
    note "$(doctor_note "$OUT/doctor.tmp")${selftest:+; $selftest}"
    rm -f "$OUT/doctor.tmp"
    return $rc
}

ctest_note() { # "N% tests passed, F failed out of T" (+ skipped)
    local sum skipped
    sum=$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$1" | tail -n 1)
    skipped=$(grep -c -E '\*\*\*Skipped|Not Run' "$1")
    echo "${sum:-no ctest summary}; $skipped skipped"
}

step_test() {
    [ -f "$BUILD/CTestTestfile.cmake" ] || { note "not built"; return 1; }
    grep -q BUILD_TESTING:BOOL=OFF "$BUILD/CMakeCache.txt" && { note "built without tests (no cmocka)"; return 77; }
    # shellcheck disable=SC2086
    bounded ctest --test-dir "$BUILD" -L cuda ${TEST_REGEX:+-R "$TEST_REGEX"} --output-on-failure \
        -j 4 2>&1 | tee "$OUT/test.tmp"
    local rc=${PIPESTATUS[0]}
    note "$(ctest_note "$OUT/test.tmp")"
    rm -f "$OUT/test.tmp"
    return $rc
}

step_sanitize() {
    local cs
    cs=$(command -v compute-sanitizer) || { note "compute-sanitizer not found"; return 77; }
    # the doctor first under every tool (every op, small shapes: cheap), then each suite
    local name p runs_list=() tool
    for name in $SANITIZE_PROGS; do
        if [ "$name" = doctor ]; then
            p=$(bin portssm) && for tool in $SANITIZE_TOOLS; do
                runs_list+=("$tool|$p doctor --backend cuda --seed 1")
            done
        elif [ -x "$BUILD/tests/$name" ]; then
            for tool in $SANITIZE_TOOLS; do runs_list+=("$tool|$BUILD/tests/$name --backend cuda"); done
        else
            echo "== $name: not built, not sanitized"
        fi
    done
    [ ${#runs_list[@]} -gt 0 ] || { note "nothing to sanitize (build first)"; return 1; }
    local run prog rc summary fails=0 runs=0 clean=0 timeouts=0 skipped=0
    declare -A tclean truns
    for run in "${runs_list[@]}"; do
        tool=${run%%|*}
        prog=${run#*|}
        if [ "$(left)" -lt "$MIN_STEP_S" ]; then
            echo "== $tool: $prog: not run (time budget)"; skipped=$((skipped + 1)); continue
        fi
        echo "== compute-sanitizer --tool $tool $prog"
        # shellcheck disable=SC2086
        CAP=$SANITIZE_TIMEOUT bounded "$cs" --tool "$tool" --error-exitcode 99 \
            --print-limit 20 $prog >"$OUT/san.tmp" 2>&1
        rc=$?
        tail -n 40 "$OUT/san.tmp"
        summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san.tmp" | tail -n 1)
        runs=$((runs + 1)); truns[$tool]=$(( ${truns[$tool]:-0} + 1 ))
        case $rc in
        0|77) clean=$((clean + 1)); tclean[$tool]=$(( ${tclean[$tool]:-0} + 1 ))
              echo "-- clean (exit $rc): $summary" ;;
        124|137) timeouts=$((timeouts + 1)); echo "-- TIMEOUT after ${SANITIZE_TIMEOUT}s (not a finding)" ;;
        99) fails=$((fails + 1)); echo "-- SANITIZER ERRORS: $summary" ;;
        *) fails=$((fails + 1)); echo "-- the program failed under the sanitizer (exit $rc): $summary" ;;
        esac
    done
    rm -f "$OUT/san.tmp"
    local line="" tnote=""
    for tool in $SANITIZE_TOOLS; do
        line="$line $tool ${tclean[$tool]:-0}/${truns[$tool]:-0} clean;"
    done
    [ "$timeouts" -gt 0 ] && tnote=" $timeouts timed out;"
    note "${line# }$tnote $skipped not run (budget)"
    [ "$fails" -eq 0 ] || return 1
    [ "$runs" -gt 0 ] || return 77
    return 0
}

step_bench() {
    local p
    p=$(bin portssm_bench) || { note "no portssm_bench binary (build first)"; return 1; }
    # shellcheck disable=SC2086
    bounded "$p" --backend cuda --json "$OUT/bench.json" ${BENCH_ARGS:-}
    local rc=$?
    local timed unsup
    timed=$(grep -cE '^\| [a-z_+0-9]+ \| [a-z0-9]+ \| [^|]+ \| [0-9.]+ \|' "$OUT/bench.log" 2>/dev/null)
    unsup=$(grep -cE '\| UNSUPPORTED \[' "$OUT/bench.log" 2>/dev/null)
    local copy=$(grep -m1 -o 'copy bandwidth[^|]*GB/s' "$OUT/bench.log")
    if [ "$timed" -gt 0 ] || [ "$unsup" -gt 0 ]; then
        note "$timed timed, $unsup unsupported${copy:+; $copy}"
    else
        note "$(last_line "$OUT/bench.log")"
    fi
    return $rc
}

step_ptx60() {
    local p
    p=$(bin portssm) || { note "no portssm binary (build first)"; return 1; }
    if ! PORTSSM_CUDA_IMAGE=$PTX_IMAGE bounded "$p" info >"$OUT/ptx.tmp" 2>&1 ||
        ! grep -qE '^  cuda +available' "$OUT/ptx.tmp"; then
        cat "$OUT/ptx.tmp"
        note "image '$PTX_IMAGE' not usable: $(grep -E '^  cuda ' "$OUT/ptx.tmp" | head -n 1 | sed 's/^  cuda *//')"
        rm -f "$OUT/ptx.tmp"
        return 77
    fi
    cat "$OUT/ptx.tmp"
    rm -f "$OUT/ptx.tmp"
    local rc=0 dnote="" tnote="not run"
    PORTSSM_CUDA_IMAGE=$PTX_IMAGE bounded "$p" doctor --backend cuda 2>&1 | tee "$OUT/ptx.tmp"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    dnote=$(doctor_note "$OUT/ptx.tmp")
    if [ -f "$BUILD/CTestTestfile.cmake" ] && ! grep -q BUILD_TESTING:BOOL=OFF "$BUILD/CMakeCache.txt"; then
        PORTSSM_CUDA_IMAGE=$PTX_IMAGE bounded ctest --test-dir "$BUILD" -L cuda \
            --output-on-failure -j 4 2>&1 | tee "$OUT/ptx.tmp"
        [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
        tnote=$(ctest_note "$OUT/ptx.tmp")
    fi
    rm -f "$OUT/ptx.tmp"
    note "$PTX_IMAGE: doctor $dnote; ctest $tnote"
    return $rc
}

# The Python side runs from the checkout over this build's libportssm.
py_env() { # (a subshell, so that "$@" may be a shell function such as bounded)
    (
        export PYTHONPATH="$ROOT/python/src${PYTHONPATH:+:$PYTHONPATH}" \
            PORTSSM_LIBRARY_DIR="$BUILD/src" PYTHONUNBUFFERED=1 PORTSSM_REFERENCE_PATH="$ANCHOR_DIR"
        "$@"
    )
}

step_anchors() {
    local tarball=$ROOT/.anchors/anchors.tar.xz
    [ -f "$tarball" ] || { note "no $tarball (carry .anchors)"; return 77; }
    mkdir -p "$ANCHOR_DIR" && bounded tar xf "$tarball" -C "$ANCHOR_DIR" || { note "unpack failed"; return 1; }
    PYTHONPATH=$ANCHOR_DIR bounded python3 -c 'import torch, causal_conv1d, mamba_ssm
from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
print("torch", torch.__version__, "| mamba_ssm", mamba_ssm.__version__, "from", mamba_ssm.__file__)' ||
        { note "the reference packages do not import"; return 1; }
    note "mamba_ssm and causal_conv1d in $ANCHOR_DIR"
}

step_pytest() {
    [ -f "$BUILD/src/libportssm.so" ] || { note "not built"; return 1; }
    py_env bounded python3 -m pytest -q -rs -p no:cacheprovider "$ROOT/python/tests" 2>&1 |
        tee "$OUT/pytest.tmp"
    local rc=${PIPESTATUS[0]}
    note "$(grep -E '[0-9]+ (passed|failed)' "$OUT/pytest.tmp" | tail -n 1)"
    rm -f "$OUT/pytest.tmp"
    return $rc
}

step_parity() {
    [ -d "$ANCHOR_DIR/mamba_ssm" ] || { note "no reference packages (step anchors)"; return 77; }
    py_env bounded python3 "$ROOT/bench/parity_mamba_ssm.py" --reference-path "$ANCHOR_DIR" \
        --json "$OUT/parity.json" 2>&1 | tee "$OUT/parity.tmp"
    local rc=${PIPESTATUS[0]}
    note "$(grep -E '^parity:' "$OUT/parity.tmp" | tail -n 1)"
    rm -f "$OUT/parity.tmp"
    return $rc
}

step_e2e() {
    local modes=portssm
    [ -d "$ANCHOR_DIR/mamba_ssm" ] && modes=portssm,reference
    # shellcheck disable=SC2086
    py_env bounded python3 "$ROOT/bench/e2e.py" --device cuda --modes "$modes" \
        --json "$OUT/e2e.json" ${E2E_ARGS:---size 130m --adamw}
    local rc=$?
    note "modes $modes; table in e2e.log"
    return $rc
}

# ---------------------------------------------------------------- driver

for s in $STEPS; do
    log=$OUT/$s.log
    : >"$NOTE_FILE"
    if [ "$(left)" -lt "$MIN_STEP_S" ]; then
        RESULT[$s]=SKIP; SECONDS_OF[$s]=0; NOTE[$s]="not started: $(left) s of the budget left"
        echo "device_run: $s skipped (time budget)"
        continue
    fi
    echo "device_run: $s ... (log $log, $(left) s of budget left)"
    t0=$(date +%s)
    "step_$s" >"$log" 2>&1
    rc=$?
    SECONDS_OF[$s]=$(($(date +%s) - t0))
    NOTE[$s]=$(cat "$NOTE_FILE")
    case $rc in
    0) RESULT[$s]=PASS ;;
    77) RESULT[$s]=SKIP ;;
    124|137) RESULT[$s]=FAIL; NOTE[$s]="cut at the time budget; ${NOTE[$s]}" ;;
    *) RESULT[$s]=FAIL ;;
    esac
    if [ "${RESULT[$s]}" = FAIL ] && [ "$s" != bench ]; then
        echo "---- last lines of $s.log"
        tail -n 25 "$log"
        echo "----"
    fi
done
rm -f "$NOTE_FILE"

# the bench table, then the summary: the reply shows only the tail
if [ -f "$OUT/bench.log" ] && [ -n "${RESULT[bench]:-}" ]; then
    sed -n '/^## portssm bench/,$p' "$OUT/bench.log"
fi
echo
echo "== device_run summary: $(( $(date +%s) - START )) s of a ${BUDGET_S} s budget; logs in $OUT"
printf '| %-8s | %-6s | %7s | %s\n' step result seconds note
printf '|%s|%s|%s|%s\n' ---------- -------- --------- ------
failed=0
for s in $STEPS; do
    printf '| %-8s | %-6s | %7s | %s\n' "$s" "${RESULT[$s]:-?}" "${SECONDS_OF[$s]:-0}" "${NOTE[$s]:-}"
    [ "${RESULT[$s]:-}" = FAIL ] && failed=1
done
exit $failed
