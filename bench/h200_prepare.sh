#!/usr/bin/env bash
# Usage: bash bench/h200_prepare.sh [build dir] [cmake args...]
# Builds the tree that bench/h200_bundle.sh runs on the H200, here (CUDA 13.0 + the sm_60/61/70
# images of toolchains/cuda12-pip.cmake + the ptx_sm60 image), adds cmocka (the device has none)
# and drops the intermediates the device does not need: the device takes at most 64 MiB of
# carried files.  Then: run(command="bash bench/h200_bundle.sh build-h200", carry=["build-h200"]).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-h200}
shift || true # the rest: extra cmake arguments (e.g. -DPORTSSM_TUNING=ON for bench/tune_sweep.sh)
command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B "$B" -DBACKEND=cuda -DPORTSSM_CUDA_EXTRA_PTX=ON \
      -DCMAKE_TOOLCHAIN_FILE=toolchains/cuda12-pip.cmake "$@" > "$B.configure.log"
grep -E "cuda:" "$B.configure.log" || true
cmake --build "$B" -j"$(nproc)"
mkdir -p "$B/deps"
cp -L "$(ldconfig -p | awk '/libcmocka.so.0 /{print $NF; exit}')" "$B/deps/"
# Embedded already in libportssm_cuda.so; rebuilt by the next build here.
rm -f "$B"/backends/cuda/*.cubin "$B"/backends/cuda/*.fatbin "$B"/backends/cuda/*.ptx \
      "$B"/backends/cuda/CMakeFiles/portssm_cuda.dir/cuda_images.c.o \
      "$B"/backends/sim/CMakeFiles/portssm_sim_objs.dir/*.o
size=$(du -sm "$B" | cut -f1)
echo "$B: ${size} MiB to carry"
[ "$size" -le 64 ] || { echo "over the device's 64 MiB carry limit"; exit 1; }
