#!/usr/bin/env bash
# bench/device_run.sh - the one script run on the GPU machine (an NVIDIA H100 or H200, CUDA 13.0,
# no network): build with the cuda backend, check it, sanitize it, time it, set it beside the
# references.
#
#   here, once:    bash bench/carry_deps.sh           (cmocka into .deps/, which is git-ignored)
#                  mkdir -p .anchors && cp <shared>/anchors/anchors.tar.xz .anchors/  (git-ignored;
#                  for the steps that need the reference packages)
#   device run:    command "OUT=$OUT bash bench/device_run.sh [step...]", carry [".deps", ".anchors"]
#
# Steps, in this order (default: the first seven):
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
#             shared/anchors/anchors.tar.xz) into $ANCHOR_DIR for the steps below that use them
#   pytest    the Python package's tests on cuda over this build (python/src, the build's
#             libportssm), without the reference packages on the path (PYTEST_FILES: only those)
#   parity    bench/parity_mamba_ssm.py: mamba-ssm's model code on the reference and on portssm's
#             import surface, one checkpoint (PARITY_ARGS, e.g. --layers Mamba1; $OUT/parity.json)
#   e2e       bench/e2e.py: transformers' Mamba and Mamba-2 on portssm and on the references
#             (E2E_ARGS, default --size 130m --adamw; $OUT/e2e.json)
#   sidebyside  the op table beside the references: `portssm_bench --backend cuda --graph` over
#             every row (BENCH_FILTER narrows it; $OUT/bench_graph.json), then
#             bench/side_by_side.py times the references at the same rows the same way and
#             compares their outputs with portssm's ($OUT/side_by_side.md, .json; SBS_FILTER,
#             SBS_TIMEOUT).  Without the references (step anchors) portssm's columns only.
#   compare   bench/python_ssd_compare.py: the SSD from Python beside mamba-ssm's, every
#             gradient compared (COMPARE_SHAPES, COMPARE_REPS)
#   overhead  bench/python_overhead.py --device cuda: the decode ops' host time per call
#   ab        this build (A) against the build trees in AB_BUILDS (carried, or unpacked from the
#             xz tarballs in AB_PACKS first): AB_SUITES (default test_ssd) on cuda on each, then
#             AB_ROUNDS (3) rounds of `portssm_bench --graph --filter` over AB_FILTER (';' between
#             rows) visiting the builds in turn (the clocks drift between minutes: each round is
#             one sample of every build); a table of the medians and each build's change
#   profile   Nsight Compute, clocks left alone: NCU="<kernel regex>@<bench filter>;..." profiles
#             one launch of portssm's kernel in those portssm_bench rows, NCU_REF="<kernel
#             regex>@<side_by_side filter>;..." one of the reference's (NCU_TIMEOUT per pass)
#   tune      bench/tune_sweep.sh over the plan file TUNE_PLANS (a build configured with
#             CMAKE_EXTRA=-DPORTSSM_TUNING=ON; $OUT/tune/sweep.log)
# Steps not named on the command line do not run.
# Each step writes $OUT/<step>.log; the bench table and a summary table are printed last.  The
# device returns at most 8 files: where more were written, they are packed into $OUT/logs.tar.gz
# (the summary says so).  A step that would start with less than MIN_STEP_S seconds of BUDGET_S
# left is skipped, and each step is cut at the budget.
#
# Environment: OUT (default ./build-device-out), BUILD_DIR (build-device), JOBS (16), BUDGET_S (540),
#   CMAKE_EXTRA (more configure arguments), TEST_REGEX (the test step's suites: ctest -R),
#   SANITIZE_TOOLS ("memcheck racecheck synccheck"),
#   SANITIZE_PROGS ("doctor test_dialect test_conv1d test_scan test_decode test_properties"),
#   SANITIZE_TIMEOUT (150 s per run), BENCH_ARGS (more portssm_bench arguments),
#   PTX_IMAGE (ptx_sm60), PTX_BUILD (auto | on | off), and the knobs named with each step above.
# A prebuilt tree made here (BUILD_DIR=<carried dir>, without the build step) runs as well: the
# steps look for its programs under <dir>/src, <dir>/tests and <dir>, and <dir>/deps is put on
# LD_LIBRARY_PATH (cmocka).
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

ALL_STEPS="build info doctor test sanitize bench ptx60 anchors pytest parity e2e sidebyside compare overhead ab profile tune"
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
bin_in() { # the built program $2 in the build tree $1, wherever the build put it
    local p
    for p in "$1/src/$2" "$1/bin/$2" "$1/bench/$2" "$1/$2"; do
        [ -x "$p" ] && { echo "$p"; return 0; }
    done
    p=$(find "$1" -maxdepth 3 -type f -name "$2" -perm -u+x 2>/dev/null | head -n 1)
    [ -n "$p" ] && { echo "$p"; return 0; }
    return 1
}
bin() { bin_in "$BUILD" "$1"; } # ... of this run's build
[ -d "$BUILD/deps" ] && export LD_LIBRARY_PATH=$BUILD/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

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

ctest_note() { # "N% tests passed, F failed out of T" (+ skipped); ctest prints "100% tests
    local sum skipped  # passed out of T" when none failed
    sum=$(grep -E 'tests passed(, [0-9]+ tests? failed)? out of' "$1" | tail -n 1)
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
    # shellcheck disable=SC2086  # PYTEST_FILES: test files (or node ids) to run instead of all
    py_env bounded python3 -m pytest -q -rs -p no:cacheprovider ${PYTEST_FILES:-"$ROOT/python/tests"} 2>&1 |
        tee "$OUT/pytest.tmp"
    local rc=${PIPESTATUS[0]}
    note "$(grep -E '[0-9]+ (passed|failed)' "$OUT/pytest.tmp" | tail -n 1)"
    rm -f "$OUT/pytest.tmp"
    return $rc
}

step_parity() {
    [ -d "$ANCHOR_DIR/mamba_ssm" ] || { note "no reference packages (step anchors)"; return 77; }
    py_env bounded python3 "$ROOT/bench/parity_mamba_ssm.py" --reference-path "$ANCHOR_DIR" \
        --json "$OUT/parity.json" ${PARITY_ARGS:-} 2>&1 | tee "$OUT/parity.tmp"
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

# The tools that import the references themselves: the reference packages (step anchors) ahead
# of python/src on the path, when unpacked.
ref_env() {
    (
        local refs=""
        [ -d "$ANCHOR_DIR/mamba_ssm" ] && refs="$ANCHOR_DIR:"
        export PYTHONPATH="$refs$ROOT/python/src${PYTHONPATH:+:$PYTHONPATH}" \
            PORTSSM_LIBRARY_DIR="$BUILD/src" PYTHONUNBUFFERED=1
        "$@"
    )
}
refs_note() { [ -d "$ANCHOR_DIR/mamba_ssm" ] && echo "with the references" || echo "portssm alone (no step anchors)"; }

step_sidebyside() {
    local p
    p=$(bin portssm_bench) || { note "no portssm_bench binary (build first)"; return 1; }
    local filt=()
    [ -n "${BENCH_FILTER:-}" ] && filt=(--filter "$BENCH_FILTER")
    bounded "$p" --backend cuda --graph "${filt[@]}" --json "$OUT/bench_graph.json" ||
        { note "portssm_bench --graph failed"; return 1; }
    CAP=${SBS_TIMEOUT:-420} ref_env bounded python3 "$ROOT/bench/side_by_side.py" \
        --bench-json "$OUT/bench_graph.json" --out-md "$OUT/side_by_side.md" \
        --out-json "$OUT/side_by_side.json" ${SBS_FILTER:+--filter "$SBS_FILTER"}
    local rc=$?
    local rows=$(grep -cE '^\| [a-z_+0-9]+ \| (bf16|f16|f32) \|' "$OUT/side_by_side.md" 2>/dev/null)
    note "${rows:-0} rows, $(refs_note); table in side_by_side.md"
    return $rc
}

step_compare() {
    # shellcheck disable=SC2086
    ref_env bounded python3 "$ROOT/bench/python_ssd_compare.py" --reps "${COMPARE_REPS:-10}" \
        ${COMPARE_SHAPES:+--shapes $COMPARE_SHAPES}
    local rc=$?
    note "$(refs_note)"
    return $rc
}

step_overhead() {
    ref_env bounded python3 "$ROOT/bench/python_overhead.py" --device cuda --repeats 5
    local rc=$?
    note "$(refs_note)"
    return $rc
}

step_ab() {
    local pk b n t
    for pk in ${AB_PACKS:-}; do
        bounded tar xJf "$pk" -C "$ROOT" || { note "unpacking $pk failed"; return 1; }
    done
    [ -n "${AB_BUILDS:-}" ] || { note "no AB_BUILDS to compare with"; return 77; }
    local builds=("$BUILD") rc=0
    for b in $AB_BUILDS; do
        case $b in /*) ;; *) b=$ROOT/$b ;; esac
        bin_in "$b" portssm_bench >/dev/null || { note "$b: no portssm_bench"; return 1; }
        builds+=("$b")
    done
    for b in "${builds[@]:1}"; do
        n=$(basename "$b")
        for t in ${AB_SUITES-test_ssd}; do
            echo "== $t on cuda, build $n"
            LD_LIBRARY_PATH="$b/src:$b/deps:${LD_LIBRARY_PATH:-}" CAP=300 bounded \
                "$(bin_in "$b" "$t")" --backend cuda 2>&1 | grep -E '^\[  (PASSED|FAILED) |FAILED'
            [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
        done
    done
    local filters=() fs f r
    IFS=';' read -ra fs <<<"${AB_FILTER:-ssd_chunk_scan}"
    for f in "${fs[@]}"; do filters+=(--filter "$f"); done
    local jsons=()
    mkdir -p "$OUT/ab.tmp"
    for r in $(seq 1 "${AB_ROUNDS:-3}"); do
        for b in "${builds[@]}"; do
            n=$(basename "$b")
            LD_LIBRARY_PATH="$b/src:$b/deps:${LD_LIBRARY_PATH:-}" CAP=120 bounded \
                "$(bin_in "$b" portssm_bench)" --backend cuda --graph "${filters[@]}" \
                --json "$OUT/ab.tmp/${r}_$n.json" >"$OUT/ab.tmp/${r}_$n.log" 2>&1 ||
                { echo "round $r, $n: portssm_bench failed"; tail -5 "$OUT/ab.tmp/${r}_$n.log"; rc=1; }
            jsons+=("$n=$OUT/ab.tmp/${r}_$n.json")
        done
    done
    python3 - "${jsons[@]}" <<'PY'
import json, statistics, sys
runs = {}  # build -> row -> [median per round]
order = []
for arg in sys.argv[1:]:
    name, path = arg.split("=", 1)
    if name not in runs:
        runs[name] = {}
        order.append(name)
    try:
        doc = json.load(open(path))
    except (OSError, ValueError):
        continue
    for r in doc.get("results", []):
        if r.get("status") == "OK":
            key = f'{r["op"]} {r["dtype"]} {r["shape"]} {r.get("options", "")}'
            runs[name].setdefault(key, []).append(r["median_us"])
a = order[0]
# every row any build timed, in first-seen order (a build may have rows the others lack)
keys = list(dict.fromkeys(k for n in order for k in runs[n]))
print("| row | " + " | ".join(f"{n} us" + ("" if n == a else " | change") for n in order) + " |")
print("|---|" + "|".join("---:" if n == a else "---:|---:" for n in order) + "|")
for key in keys:
    base = statistics.median(runs[a][key]) if runs[a].get(key) else None
    cells = [f"{base:.1f}" if base else "-"]
    for n in order[1:]:
        v = runs[n].get(key)
        if v:
            m = statistics.median(v)
            cells += [f"{m:.1f}", f"{100 * (m - base) / base:+.1f}%" if base else "-"]
        else:
            cells += ["-", "-"]
    print(f"| {key} | " + " | ".join(cells) + " |")
PY
    rm -rf "$OUT/ab.tmp"
    note "${#builds[@]} builds, ${AB_ROUNDS:-3} rounds; table in ab.log"
    return $rc
}

step_profile() {
    [ -n "${NCU:-}${NCU_REF:-}" ] || { note "nothing to profile: set NCU and/or NCU_REF"; return 77; }
    local ncu
    ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    [ -x "$ncu" ] || { note "ncu not found"; return 77; }
    local p
    p=$(bin portssm_bench) || { note "no portssm_bench binary (build first)"; return 1; }
    local sections=(--section SpeedOfLight --section Occupancy --section LaunchStats
                    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis)
    local jobs i k f rc=0 n=0 key='Duration|Registers Per|Achieved Occupancy|DRAM Throughput'
    IFS=';' read -ra jobs <<<"${NCU:-}"
    for i in "${!jobs[@]}"; do
        k=${jobs[$i]%%@*}; f=${jobs[$i]#*@}
        echo "== ncu, portssm: $k @ $f"
        CAP=${NCU_TIMEOUT:-120} bounded "$ncu" --clock-control none --kernel-name "regex:$k" \
            --launch-skip 3 --launch-count 1 "${sections[@]}" "$p" --backend cuda --filter "$f" \
            --reps 5 || rc=1
        n=$((n + 1))
    done
    IFS=';' read -ra jobs <<<"${NCU_REF:-}"
    for i in "${!jobs[@]}"; do
        k=${jobs[$i]%%@*}; f=${jobs[$i]#*@}
        echo "== ncu, reference: $k @ $f"
        # side_by_side.py takes its rows from a bench JSON: this run's, or one made for the row
        local js=$OUT/bench_graph.json
        if [ ! -f "$js" ]; then
            js=$(mktemp --suffix=.json)
            CAP=120 bounded "$p" --backend cuda --graph --filter "$f" --reps 3 --json "$js" >/dev/null
        fi
        CAP=${NCU_TIMEOUT:-180} ref_env bounded "$ncu" --clock-control none --kernel-name "regex:$k" \
            --launch-skip 5 --launch-count 1 "${sections[@]}" python3 "$ROOT/bench/side_by_side.py" \
            --bench-json "$js" --filter "$f" --reps 3 || rc=1
        n=$((n + 1))
    done
    note "$n passes; the figures in profile.log ($key)"
    return $rc
}

step_tune() {
    [ -n "${TUNE_PLANS:-}" ] || { note "no TUNE_PLANS (a plan file, e.g. bench/tune_plans/run11.txt)"; return 77; }
    grep -q 'PORTSSM_TUNING:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null ||
        echo "warning: $BUILD was not configured with -DPORTSSM_TUNING=ON: the plans' overrides are ignored"
    mkdir -p "$OUT/tune"
    OUT=$OUT/tune bounded bash "$ROOT/bench/tune_sweep.sh" "$BUILD" "$TUNE_PLANS"
    local rc=$?
    note "$(grep -c ' | ' "$OUT/tune/sweep.log" 2>/dev/null || echo 0) lines in tune/sweep.log"
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
if [ -f "$OUT/side_by_side.md" ] && [ -n "${RESULT[sidebyside]:-}" ]; then
    grep -E '^\|' "$OUT/side_by_side.md"
fi
if [ -n "${RESULT[ab]:-}" ]; then
    grep -E '^\|' "$OUT/ab.log"
fi
# the device returns at most 8 files: more are packed into one
packed=""
if [ "$(find "$OUT" -type f | wc -l)" -gt 8 ]; then
    tar czf "$OUT.tar.gz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "$OUT.tar.gz" "$OUT/logs.tar.gz" &&
        packed="; packed into logs.tar.gz (more than 8 files)"
fi
echo
echo "== device_run summary: $(( $(date +%s) - START )) s of a ${BUDGET_S} s budget; logs in $OUT$packed"
printf '| %-10s | %-6s | %7s | %s\n' step result seconds note
printf '|%s|%s|%s|%s\n' ------------ -------- --------- ------
failed=0
for s in $STEPS; do
    printf '| %-10s | %-6s | %7s | %s\n' "$s" "${RESULT[$s]:-?}" "${SECONDS_OF[$s]:-0}" "${NOTE[$s]:-}"
    [ "${RESULT[$s]:-}" = FAIL ] && failed=1
done
exit $failed
