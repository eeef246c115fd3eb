#!/usr/bin/env bash
# bench/carry_deps.sh - copies what the GPU machine lacks into .deps/ (git-ignored), so that a
# device run can carry it: cmocka's headers and shared library (Debian package libcmocka-dev)
# into .deps/cmocka/{include,lib}.  Plain files, no symbolic links: a link travels only as a
# link.  libcmocka needs nothing but libc, so the copy from this Debian 12 machine (glibc 2.36)
# runs on the H200 machine's Ubuntu 24.04 (glibc 2.39).
#
#   bash bench/carry_deps.sh        then: device run with carry [".deps"] and
#                                   command "bash bench/device_run.sh [steps...]"
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(uname -m)" != x86_64 ]; then
    echo "carry_deps: this machine is $(uname -m); the GPU machine is x86_64: build cmocka there" >&2
    exit 1
fi

header=${CMOCKA_HEADER:-/usr/include/cmocka.h}
lib=${CMOCKA_LIB:-}
if [ -z "$lib" ]; then
    for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
        if [ -e "$d/libcmocka.so.0" ]; then lib="$d/libcmocka.so.0"; break; fi
    done
fi
if [ ! -f "$header" ] || [ -z "$lib" ] || [ ! -e "$lib" ]; then
    echo "carry_deps: cmocka not found (header '$header', library '${lib:-none}');" \
         "install it: apt-get install libcmocka-dev" >&2
    exit 1
fi

dst=.deps/cmocka
rm -rf "$dst"
mkdir -p "$dst/include" "$dst/lib"
cp -L "$header" "$dst/include/"
# cmocka_pbc.h and any other companion header
for h in "$(dirname "$header")"/cmocka_*.h; do
    [ -e "$h" ] && cp -L "$h" "$dst/include/"
done
# the soname the tests are linked against, and the name the linker looks for
cp -L "$lib" "$dst/lib/libcmocka.so.0"
cp -L "$lib" "$dst/lib/libcmocka.so"

echo "carry_deps: $(du -sh .deps | cut -f1) in .deps:"
find .deps -type f | sort | sed 's/^/  /'
if ! git check-ignore -q .deps 2>/dev/null; then
    echo "carry_deps: warning: .deps is not git-ignored; add '/.deps/' to .gitignore" >&2
fi
