#!/usr/bin/env bash
# .ci/wheel.sh - CI step `wheel` (.ci/run: `step wheel .ci/wheel.sh`):
#  1. the release command (tools/release_wheel.sh) on a machine without a CUDA toolkit
#     (.ci/without_cuda.sh) and with PORTSSM_PIP_NVCC=auto, as a user's `pip install .` meets it:
#     the build backend must add nvcc 13.0 from PyPI to the build requirements and CMake must
#     configure the cuda module with it; the targets are cut to compute_90 PTX and the hip
#     module is left out (the full list, not timed yet, is many times this build; the legacy and hip
#     images are compiled by the readme-test, legacy-images and hip-clang19 steps);
#     auditwheel must accept manylinux_2_28 (release_wheel.sh checks it);
#  2. that wheel installed offline (--no-index) into fresh venvs, one per cell of
#     Python x torch: the oldest supported torch (2.1.0) on the oldest Python (3.9), a middle
#     one (2.8.0) on 3.11, the newest on PyPI on 3.13; in each, python -m portssm doctor and a
#     subset of the package's tests (below), then the matrix is printed.
# Nothing is cached across runs (pip --no-cache-dir, a temporary directory for the venvs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# ---- 1. the wheel, without a toolkit
rm -rf .ci-wheel && mkdir .ci-wheel
PORTSSM_PIP_NVCC=auto PORTSSM_RELEASE_BACKEND=cuda PORTSSM_RELEASE_CUDA_ARCHS=compute_90 \
  CMAKE_BUILD_PARALLEL_LEVEL=2 .ci/without_cuda.sh tools/release_wheel.sh .ci-wheel | tee wheel-build.log
grep -q "^-- cuda: nvcc 13\.0 (.*/nvidia/cu13/bin/nvcc; PORTSSM_NVCC, PyPI's nvidia-cuda-nvcc) builds compute_90 PTX$" wheel-build.log ||
  { echo "the cuda module was not configured with PyPI's nvcc 13.0"; exit 1; }
wheel=$(ls "$root"/.ci-wheel/portssm-*-cp39-abi3-manylinux_2_28_x86_64.whl)
python3 -c 'import json, sys, zipfile
m = json.loads(zipfile.ZipFile(sys.argv[1]).read("portssm/lib/portssm_build_info.json"))["modules"]
sys.exit(m["cuda"] != "compute_90 PTX")' "$wheel" ||
  { echo "the wheel's cuda module is not the compute_90 PTX one"; exit 1; }

# ---- 2. the matrix
# The tests: the library and its ctypes/_fastcall bindings, every torch op against its
# reference, autograd, the drop-in signatures and the import aliases (test_library,
# test_fastcall, test_torch_ops, test_autograd_outputs, test_drop_in_signatures,
# test_import_aliases, test_before_custom_op): what differs between torch versions (the
# custom-op and autograd roads, DLPack) and between Pythons (the abi3 extension).  The module
# layer, transformers and torch.compile suites run in the python step (newest torch, full suite).
tests="test_library.py test_fastcall.py test_torch_ops.py test_autograd_outputs.py
       test_drop_in_signatures.py test_import_aliases.py test_before_custom_op.py"
cells="3.9:torch==2.1.0 3.11:torch==2.8.0 3.13:torch"
venvs=$(mktemp -d)
trap 'rm -rf "$venvs"' EXIT
matrix="" failed=""
for cell in $cells; do
  py=${cell%%:*} req=${cell#*:}
  base=$(ls -d "$HOME"/.pyenv/versions/"$py".*/bin/python3 2>/dev/null | sort -V | tail -1)
  [ -n "$base" ] || { echo "no Python $py under ~/.pyenv/versions (pyenv install $py)"; exit 1; }
  v="$venvs/$py"
  "$base" -m venv "$v"
  "$v/bin/python" -m pip install -q --no-cache-dir "$req" numpy pytest
  "$v/bin/python" -m pip install -q --no-index --no-deps "$wheel"
  tv=$("$v/bin/python" -c 'import torch; print(torch.__version__)')
  echo "== Python $py, torch $tv"
  (cd /tmp && "$v/bin/python" -m portssm doctor | tail -1)
  paths=""
  for t in $tests; do paths="$paths $root/python/tests/$t"; done
  # every cell runs, the matrix is printed, then a failed cell fails the step
  # shellcheck disable=SC2086
  if ! (cd /tmp && PORTSSM_EXPECT_EXTENSION=1 "$v/bin/python" -m pytest -q -p no:cacheprovider $paths) \
       > "$venvs/pytest.log" 2>&1; then
    failed="$failed $py/torch-$tv"
  fi
  cat "$venvs/pytest.log"
  result=$(tail -1 "$venvs/pytest.log")
  matrix="$matrix| $py | $tv | $result |"$'\n'
  rm -rf "$v" # (the disk: each torch with its CUDA libraries is 3-5 GB)
done
echo
echo "== the release wheel ($(basename "$wheel")) in fresh venvs"
echo "| Python | torch | tests |"
echo "|---|---|---|"
printf '%s' "$matrix"
[ -z "$failed" ] || { echo "failed:$failed"; exit 1; }
