#!/usr/bin/env bash
# The default GPU targets (PORTSSM_CUDA_ARCHS / PORTSSM_HIP_ARCHS = auto): the project is
# configured (not built) in scratch directories with what the GPU probes would see given in
# their stead (backends/gpu/detect_gpus.cmake: PORTSSM_GPU_PROBE_CUDA_OUTPUT, a fake KFD
# topology for PORTSSM_KFD_TOPOLOGY), and the targets each configure settles on are checked:
# a machine's GPUs + one PTX, the full list without a GPU, `all`, an explicit list winning, and
# the real probe of this machine.
#
#   gpu_targets.sh <cuda|hip> <source dir> <scratch dir>
# Exit 77 (CTest: skipped) when the vendor's compiler is not installed.  $CMAKE: the cmake to run.
set -euo pipefail
vendor=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"

fail() { echo "FAIL: $*"; exit 1; }
n=0
# configure <name> <cmake args...>: the configure's output in $out
configure() {
  local name=$1; shift
  out=$("${CMAKE:-cmake}" -S "$src" -B "$work/$name" -DBUILD_TESTING=OFF -DPORTSSM_PYTHON_EXTENSION=OFF \
              -DPORTSSM_PACK_IMAGES=OFF "$@" 2>&1) || { echo "$out"; fail "$name: configure failed"; }
  n=$((n + 1))
}
# expect <name> <regex>: a line of the last configure matches
expect() {
  grep -Eq -- "$2" <<<"$out" || { echo "$out" | grep -E "^-- (cuda|hip)|Warning" ; fail "$1: no line matches: $2"; }
  echo "ok   $1: $(grep -Em1 -- "$2" <<<"$out")"
}

if [ "$vendor" = cuda ]; then
  nvcc=$(command -v nvcc || true)
  [ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
  [ -n "$nvcc" ] || { echo "nvcc not found: the cuda targets cannot be configured here"; exit 77; }
  ver=$("$nvcc" --version | sed -nE 's/.*release ([0-9]+\.[0-9]+).*/\1/p')
  major=${ver%%.*}
  cu=(-DBACKEND=cuda "-DPORTSSM_NVCC=$nvcc")

  configure one_gpu "${cu[@]}" "-DPORTSSM_GPU_PROBE_CUDA_OUTPUT=sm_90 NVIDIA H100 80GB HBM3"
  expect one_gpu "^-- cuda: this machine's GPUs are NVIDIA H100 80GB HBM3 \(sm_90\): building sm_90 \+ compute_90 PTX"
  expect one_gpu "^-- cuda: nvcc [0-9.]+ \(.*\) builds sm_90 \+ compute_90 PTX$"

  # two kinds of GPU (and one twice; the probe's lines are given as a CMake list): both
  # machine codes, the newest one's PTX
  configure two_gpus "${cu[@]}" \
    "-DPORTSSM_GPU_PROBE_CUDA_OUTPUT=sm_86 NVIDIA RTX A6000;sm_89 NVIDIA L4;sm_86 NVIDIA RTX A6000"
  expect two_gpus "^-- cuda: this machine's GPUs are NVIDIA RTX A6000 \(sm_86\), NVIDIA L4 \(sm_89\): building sm_86 sm_89 \+ compute_89 PTX"
  expect two_gpus "^-- cuda: nvcc [0-9.]+ \(.*\) builds sm_86 sm_89 \+ compute_89 PTX$"

  # no GPU (the probe's own words for a machine without a driver): the full list
  configure no_gpu "${cu[@]}" "-DPORTSSM_GPU_PROBE_CUDA_OUTPUT=none: no NVIDIA driver (libcuda.so.1: cannot open shared object file)"
  expect no_gpu "^-- cuda: no NVIDIA GPU visible \(no NVIDIA driver \(libcuda.so.1: cannot open shared object file\)\): building every target"
  expect no_gpu "^-- cuda: nvcc [0-9.]+ \(.*\) builds sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_103 sm_120 sm_121 \+ compute_90 compute_120 PTX$"

  # what the probe printed makes no sense: the full list, and the message quotes it
  configure garbled "${cu[@]}" "-DPORTSSM_GPU_PROBE_CUDA_OUTPUT=cuInit says hello"
  expect garbled "^-- cuda: no NVIDIA GPU visible \(PORTSSM_GPU_PROBE_CUDA_OUTPUT printed 'cuInit says hello'"

  # all: the full list, whatever the GPUs
  configure all "${cu[@]}" -DPORTSSM_CUDA_ARCHS=all "-DPORTSSM_GPU_PROBE_CUDA_OUTPUT=sm_90 NVIDIA H100"
  expect all "^-- cuda: every target \(PORTSSM_CUDA_ARCHS=all\)"
  expect all "^-- cuda: nvcc [0-9.]+ \(.*\) builds sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_103 sm_120 sm_121 \+ compute_90 compute_120 PTX$"

  # an explicit list wins over the GPUs seen
  configure given "${cu[@]}" "-DPORTSSM_CUDA_ARCHS=sm_80;compute_80" "-DPORTSSM_GPU_PROBE_CUDA_OUTPUT=sm_90 NVIDIA H100"
  expect given "^-- cuda: PORTSSM_CUDA_ARCHS=sm_80 compute_80 \(given\)"
  expect given "^-- cuda: nvcc [0-9.]+ \(.*\) builds sm_80 \+ compute_80 PTX$"

  # a reconfigure follows the GPUs (auto is not frozen into the cache)
  configure given "${cu[@]}" -DPORTSSM_CUDA_ARCHS=auto "-DPORTSSM_GPU_PROBE_CUDA_OUTPUT=sm_120 NVIDIA RTX PRO 6000"
  expect reconfigure "^-- cuda: nvcc [0-9.]+ \(.*\) builds sm_120 \+ compute_120 PTX$"

  if [ "$major" -ge 13 ]; then
    # a Pascal GPU, which CUDA 13 builds no machine code for: its sm_61 goes to the legacy
    # image (dropped here with the hint, no CUDA 12 toolchain given) and the main image keeps
    # the oldest PTX this nvcc has
    configure pascal "${cu[@]}" "-DPORTSSM_GPU_PROBE_CUDA_OUTPUT=sm_61 NVIDIA GeForce GTX 1080"
    expect pascal "^-- cuda: this machine's GPUs are NVIDIA GeForce GTX 1080 \(sm_61\), older than nvcc $ver builds \(the legacy image below\): building sm_61 \+ compute_75 PTX"
    expect pascal "^-- cuda: dropped sm_61: nvcc $ver cannot build sm_61 \(to add them, configure with a CUDA 12.x toolchain"
  fi

  # the real probe (gpu_probe_cuda.c, compiled and run): this machine's GPUs or why there are none
  configure probe "${cu[@]}"
  expect probe "^-- cuda: (this machine's GPUs are .*\(sm_[0-9]+\)|no NVIDIA GPU visible \((no NVIDIA driver|cuInit failed|the NVIDIA driver shows no device))"
elif [ "$vendor" = hip ]; then
  hipcc=$(command -v hipcc || true)
  [ -n "$hipcc" ] || { echo "hipcc not found: the hip targets cannot be configured here"; exit 77; }
  hp=(-DBACKEND=hip "-DPORTSSM_HIPCC=$hipcc")
  # a KFD topology as sysfs lays it out: node 0 a CPU, nodes 1 and 2 an MI210 (gfx90a) each,
  # node 3 an MI100 (gfx908)
  kfd=$work/kfd
  mkdir -p "$kfd"/{0,1,2,3}
  printf 'cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\n' >"$kfd/0/properties"
  printf 'simd_count 416\ngfx_target_version 90010\nvendor_id 4098\n' >"$kfd/1/properties"
  printf 'simd_count 416\ngfx_target_version 90010\nvendor_id 4098\n' >"$kfd/2/properties"
  printf 'simd_count 480\ngfx_target_version 90008\nvendor_id 4098\n' >"$kfd/3/properties"

  configure all "${hp[@]}" -DPORTSSM_HIP_ARCHS=all "-DPORTSSM_KFD_TOPOLOGY=$kfd"
  expect all "^-- hip: every target of PORTSSM_HIP_ARCHS_ALL \(PORTSSM_HIP_ARCHS=all\)"
  expect all "^-- hip: .* builds gfx906 gfx908 gfx90a gfx940 gfx1030$"
  # the compiler's answer for each target (half a second a target, cached per build tree) is
  # the same in every configure below: given to them, so that only the first one asks
  hp+=($(sed -nE 's/^(PORTSSM_HIP_OK_[A-Za-z0-9_]+):INTERNAL=([01])$/-D\1=\2/p' "$work/all/CMakeCache.txt"))

  configure gpus "${hp[@]}" "-DPORTSSM_KFD_TOPOLOGY=$kfd"
  expect gpus "^-- hip: this machine's GPUs are gfx908, gfx90a: building gfx908 gfx90a, which run on those GPUs only"
  expect gpus "^-- hip: .* builds gfx908 gfx90a$"

  mkdir -p "$work/kfd_cpu_only/0"
  printf 'gfx_target_version 0\n' >"$work/kfd_cpu_only/0/properties"
  configure cpu_only "${hp[@]}" "-DPORTSSM_KFD_TOPOLOGY=$work/kfd_cpu_only"
  expect cpu_only "^-- hip: no AMD GPU visible \(the KFD topology \(.*kfd_cpu_only\) lists no GPU node\): building every target"
  expect cpu_only "^-- hip: .* builds gfx906 gfx908 gfx90a gfx940 gfx1030$"

  configure no_driver "${hp[@]}" "-DPORTSSM_KFD_TOPOLOGY=$work/nowhere"
  expect no_driver "^-- hip: no AMD GPU visible \(no AMD GPU driver \(no .*nowhere: the amdgpu kernel driver's KFD is not loaded\)\)"

  # a GPU this compiler cannot build (hipcc 5.2 and an MI300X, gfx942): the full list, and why
  if ! grep -q "^PORTSSM_HIP_OK_.*gfx942:INTERNAL=1" "$work/all/CMakeCache.txt"; then
    mkdir -p "$work/kfd_mi300/1"
    printf 'gfx_target_version 90402\n' >"$work/kfd_mi300/1/properties"
    configure unbuildable "${hp[@]}" "-DPORTSSM_KFD_TOPOLOGY=$work/kfd_mi300"
    expect unbuildable "^-- hip: this machine's GPUs are gfx942, which .* cannot build: building every target"
  fi

  configure given "${hp[@]}" -DPORTSSM_HIP_ARCHS=gfx1030 "-DPORTSSM_KFD_TOPOLOGY=$kfd"
  expect given "^-- hip: PORTSSM_HIP_ARCHS=gfx1030 \(given\)"
  expect given "^-- hip: .* builds gfx1030$"

  # the real sysfs of this machine
  configure probe "${hp[@]}"
  expect probe "^-- hip: (this machine's GPUs are gfx|no AMD GPU visible \((no AMD GPU driver|the KFD topology))"
else
  fail "vendor must be cuda or hip, not '$vendor'"
fi
echo "$n configures of the $vendor targets: every check passed"
