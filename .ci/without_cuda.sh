#!/usr/bin/env bash
# .ci/without_cuda.sh CMD...: runs CMD as on a machine without a CUDA toolkit, in a private mount
# namespace: every /usr/local/cuda* directory (links resolved) is an empty one, every nvcc still
# on PATH (wrapper scripts such as /usr/local/bin/nvcc) is an empty file that is not executable,
# and CUDA_HOME/CUDA_PATH are unset.  Needs root (or CAP_SYS_ADMIN) for unshare; says so and
# fails otherwise.
set -euo pipefail
if ! unshare -m --propagation private true 2>/dev/null; then
  echo "without_cuda.sh: unshare -m failed (needs root or CAP_SYS_ADMIN): cannot hide the CUDA toolkit" >&2
  exit 2
fi
exec unshare -m --propagation private env -u CUDA_HOME -u CUDA_PATH bash -c '
  set -eu
  for d in /usr/local/cuda*; do
    [ -d "$d" ] && mount -t tmpfs -o size=1m,mode=755 none "$(readlink -f "$d")"
  done
  # (not `command -v`: bash names a file that is not executable when nothing else is found)
  executable_nvcc() {
    local dir IFS=:
    for dir in $PATH; do [ -f "$dir/nvcc" ] && [ -x "$dir/nvcc" ] && { echo "$dir/nvcc"; return 0; }; done
    return 1
  }
  blank=$(mktemp); chmod 644 "$blank"
  while nvcc=$(executable_nvcc); do mount --bind "$blank" "$nvcc"; done
  exec "$@"' without_cuda "$@"
