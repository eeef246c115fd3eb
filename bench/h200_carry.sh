#!/usr/bin/env bash
# Usage: bash bench/h200_carry.sh <build dir> [dest, default <build dir>-carry]
# A copy of a build tree with only what runs on the device (the libraries and GPU modules, the
# test and bench programs, the Python extension, cmocka in deps/), so that the build tree itself
# keeps its objects for the next incremental build here.  Carry the copy:
#   run(command="bash bench/h200_focus.sh <dest>", carry=["<dest>"])
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:?build dir}; D=${2:-$B-carry}
rm -rf "$D"
excl=(--exclude CMakeFiles --exclude '*.o' --exclude '*.a' --exclude '*.cubin' --exclude '*.fatbin'
      --exclude '*.ptx' --exclude '*.cmake' --exclude Makefile --exclude install_consumer)
if command -v rsync >/dev/null; then
  rsync -a "${excl[@]}" "$B/" "$D/"
else # (the same patterns through tar where rsync is not installed)
  mkdir -p "$D" && tar cf - "${excl[@]}" -C "$B" . | tar xf - -C "$D"
fi
mkdir -p "$D/deps"
cp -L "$(ldconfig -p | awk '/libcmocka.so.0 /{print $NF; exit}')" "$D/deps/"
size=$(du -sm "$D" | cut -f1)
echo "$D: ${size} MiB to carry"
# (past 40 MiB it no longer travels beside the anchors' 20 MiB: pack it, xz takes it to ~12 MiB)
[ "$size" -le 40 ] || echo "over 40 MiB: pack it to carry it beside the anchors (20 MiB):" \
  "tar cf - $D | xz -T0 -6 > <pack dir>/build.tar.xz, then PACK(S)=<pack dir>/build.tar.xz"
