#!/usr/bin/env bash
# tools/check_images.sh BUILD_DIR [IMAGE...] - what the GPU modules' device code really holds.
#
# For every image the build configured (backends/{cuda,hip}/image_targets.txt: "<image> <file
# with @PART@> <target>..."), lists each part file's contents with the vendor's own tool and
# fails if a configured target is missing from any part:
#   cuda  cuobjdump -lelf -lptx (CUDA toolkit, or `pip install nvidia-cuda-cuobjdump`): sm_XY is
#         an ELF for sm_XY, compute_XY a PTX for sm_XY; PTX text files (ptx_sm60) by .target
#   hip   clang-offload-bundler --list: gfxNNN is a code object for amdgcn-amd-amdhsa--gfxNNN
# Images not built in BUILD_DIR are reported and skipped, unless named as IMAGE (then missing
# files fail; "main" names main_80, main_90, ... too, the images a packed build splits it into).
# Prints each image's size (and packed size) and each module's.  Exit status: 0 all present,
# 1 something missing, 2 a listing tool is missing.
set -euo pipefail
build=${1:?usage: tools/check_images.sh BUILD_DIR [IMAGE...]}
shift
named=("$@")
parts=$(sed -n 's/^#define PSSM_PART_ID_\([a-z0-9_]*\) [0-9]*$/\1/p' \
        "$(dirname "$0")/../kernels/kernel_parts.h")

find_tool() { # name, then candidates
  local t
  for t in "${@:2}"; do
    command -v "$t" >/dev/null 2>&1 && { echo "$t"; return; }
  done
  if [ "$1" = cuobjdump ]; then # pip's nvidia-cuda-cuobjdump
    t=$(python3 -c 'import nvidia, os; [print(os.path.join(p, d, "bin", "cuobjdump")) for p in nvidia.__path__ for d in sorted(os.listdir(p)) if os.path.isfile(os.path.join(p, d, "bin", "cuobjdump"))]' 2>/dev/null | head -1)
    [ -n "$t" ] && { echo "$t"; return; }
  fi
  echo ""
}

# the targets one file holds, one per line (sm_XY, compute_XY or gfxNNN)
contents() { # vendor file
  case "$1:$2" in
    cuda:*.ptx) sed -n 's/^\.target \(sm_[0-9a-z]*\).*/\1/p' "$2" | sed 's/^sm_/compute_/' ;;
    cuda:*)
      "$cuobjdump" -lelf -lptx "$2" 2>/dev/null |
        sed -n -e 's/^ELF file.*\.\(sm_[0-9a-z]*\)\.cubin$/\1/p' \
               -e 's/^PTX file.*\.sm_\([0-9a-z]*\)\.ptx$/compute_\1/p' ;;
    hip:*) "$bundler" --list --type=o --input="$2" | sed -n 's/.*amdgcn-amd-amdhsa-[^-]*-\(gfx[0-9a-z]*\).*/\1/p' ;;
  esac
}

status=0
for vendor in cuda hip; do
  list="$build/backends/$vendor/image_targets.txt"
  [ -f "$list" ] || continue
  case $vendor in
    cuda) cuobjdump=$(find_tool cuobjdump cuobjdump /usr/local/cuda/bin/cuobjdump)
          [ -n "$cuobjdump" ] || { echo "$vendor: no cuobjdump (pip install nvidia-cuda-cuobjdump)"; exit 2; } ;;
    hip)  bundler=$(find_tool bundler clang-offload-bundler clang-offload-bundler-19 \
                    clang-offload-bundler-18 clang-offload-bundler-17 clang-offload-bundler-16 \
                    clang-offload-bundler-15)
          [ -n "$bundler" ] || { echo "$vendor: no clang-offload-bundler"; exit 2; } ;;
  esac
  while read -r image pattern targets; do
    want=0
    # (a name also stands for the images it was split into when packed: main -> main_90, ...)
    for n in "${named[@]+"${named[@]}"}"; do
      case $image in "$n" | "$n"_*) want=1 ;; esac
    done
    files=()
    missing_files=0
    for part in $parts; do
      f=${pattern//@PART@/$part}
      files+=("$f")
      [ -f "$f" ] || missing_files=1
    done
    if [ $missing_files = 1 ]; then
      if [ $want = 1 ]; then
        echo "$vendor $image: FAILED: not built in $build"; status=1
      else
        echo "$vendor $image: not built here (skipped)"
      fi
      continue
    fi
    bytes=0
    bad=""
    for f in "${files[@]}"; do
      have=$(contents $vendor "$f" | sort -u | tr '\n' ' ')
      for t in $targets; do
        case " $have" in *" $t "*) ;; *) bad="$bad $(basename "$f"):$t" ;; esac
      done
      bytes=$(( bytes + $(stat -c %s "$f") ))
    done
    nparts=${#files[@]}
    if [ -n "$bad" ]; then
      echo "$vendor $image: FAILED: missing$bad"; status=1
    else
      packed=""
      stream="$build/backends/$vendor/${vendor}_${image}_packed.raw.lzma"
      [ -f "$stream" ] && packed=$(awk -v b="$(stat -c %s "$stream")" \
                                   'BEGIN { printf ", packed %.1f MB", b / 1000000 }')
      printf '%s %s: %s in each of %d parts, %.1f MB%s\n' $vendor "$image" "$targets" "$nparts" \
        "$(awk -v b="$bytes" 'BEGIN { print b / 1000000 }')" "$packed"
    fi
  done < "$list"
done
for m in $(find "$build" -maxdepth 2 -name 'libportssm_*.so' | sort); do
  printf 'module %s: %.1f MB\n' "$(basename "$m")" "$(awk -v b="$(stat -c %s "$m")" 'BEGIN { print b / 1000000 }')"
done
exit $status
