"""nvcc from PyPI for a source build on a Linux machine without a CUDA toolkit.

portssm_build.py asks two things of this module:
- requirements(config_settings): the build requirements to add (nvidia-cuda-nvcc and the
  packages it needs, pinned) when the build wants the cuda module, finds no nvcc, runs on Linux
  x86_64/aarch64 (the platforms those wheels exist for with a layout CMake can use) and the user
  has not opted out;
- cmake_defines(config_settings): after pip installed them into the build environment, the
  define that points CMake's cuda module at that nvcc.

Opt out with the environment variable PORTSSM_PIP_NVCC=0 or `-C portssm.pip-nvcc=false`
(then, without a toolkit, the wheel has no cuda module, and says so).  PORTSSM_PIP_NVCC=1 (or
`-C portssm.pip-nvcc=true`) takes PyPI's nvcc even where a toolkit is installed: the release
wheel (tools/release_wheel.sh) is then built by the same pinned nvcc on any machine.

Where the wheels put their files: every package of CUDA 13 unpacks into one site-packages tree,
nvidia/cu13/ (bin/nvcc, ptxas, fatbinary, nvlink from nvidia-cuda-nvcc; nvvm/bin/cicc and
nvvm/libdevice from nvidia-nvvm; include/crt from nvidia-cuda-crt; include/ and lib/ from
nvidia-cuda-runtime), and bin/nvcc.profile finds cicc and the headers relative to itself, so the
nvcc there runs from any directory with no environment set.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys

# 13.0 because the kernels' PTX (compute_90, compute_120) must load on the oldest driver that
# runs CUDA 13 code (R580, CUDA 13.0): a driver JIT-compiles no PTX of a newer ISA than its own,
# and a newer nvcc's PTX (13.5 writes ISA 9.x) would leave a newer GPU without kernels there.
# Every package is pinned, because nvidia-cuda-nvcc asks for the others with no version and a
# cicc or crt headers of another release do not match its nvcc.
PIP_NVCC_REQUIREMENTS = [
    "nvidia-cuda-nvcc==13.0.*",
    "nvidia-nvvm==13.0.*",
    "nvidia-cuda-crt==13.0.*",
    "nvidia-cuda-runtime==13.0.*",
]
_SETTING = "portssm.pip-nvcc"  # our own config setting: removed before scikit-build-core sees it
_NO = ("0", "false", "off", "no", "never")
_YES = ("1", "true", "on", "yes", "always")


def strip_setting(config_settings):
    """config_settings without portssm's own keys (scikit-build-core refuses unknown ones)."""
    if not config_settings or _SETTING not in config_settings:
        return config_settings
    return {k: v for k, v in config_settings.items() if k != _SETTING}


def _define(config_settings, name):
    """The value of a CMake define given to the build, or None (config setting, then the
    environment variables scikit-build-core reads)."""
    value = (config_settings or {}).get("cmake.define." + name)
    if value is not None:
        return str(value)
    for item in os.environ.get("SKBUILD_CMAKE_DEFINE", "").split(";"):
        if item.partition("=")[0].strip() == name:
            return item.partition("=")[2]
    m = re.search(r"-D\s*%s(?::\w+)?=(\S*)" % name, os.environ.get("CMAKE_ARGS", ""))
    return m.group(1) if m else None


def system_nvcc():
    """The nvcc CMake's cuda module would find by itself (backends/cuda/CMakeLists.txt: PATH,
    /usr/local/cuda/bin, $CUDA_HOME/bin, $CUDA_PATH/bin), or None."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in ("/usr/local/cuda", os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    return None


def why_not(config_settings):
    """None when the build should take nvcc from PyPI, else the reason it does not."""
    choice = str((config_settings or {}).get(_SETTING, os.environ.get("PORTSSM_PIP_NVCC", "auto")))
    choice = choice.strip().lower()
    if choice in _NO:
        return "opted out (PORTSSM_PIP_NVCC / -C %s)" % _SETTING
    if choice not in _YES and choice != "auto":
        raise ValueError("PORTSSM_PIP_NVCC / -C %s: %r is none of auto, 0, 1" % (_SETTING, choice))
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"):
        return "PyPI's nvcc is used on Linux x86_64/aarch64 only, not %s %s" % (
            sys.platform, platform.machine())
    backend = _define(config_settings, "BACKEND")
    if backend and "cuda" not in re.split(r"[;,\s]+", backend.lower()):
        return "the cuda module is not requested (BACKEND=%s)" % backend
    if _define(config_settings, "PORTSSM_NVCC"):
        return "PORTSSM_NVCC is given"
    nvcc = system_nvcc()
    if nvcc and choice not in _YES:
        return "nvcc is installed (%s)" % nvcc
    return None


def requirements(config_settings):
    if why_not(config_settings) is not None:
        return []
    sys.stderr.write("portssm: the cuda module is built with nvcc from PyPI (%s): %s; "
                     "PORTSSM_PIP_NVCC=0 opts out\n" % (
                         PIP_NVCC_REQUIREMENTS[0],
                         "asked for" if system_nvcc() else
                         "no nvcc found (PATH, /usr/local/cuda, CUDA_HOME, CUDA_PATH)"))
    return list(PIP_NVCC_REQUIREMENTS)


def pip_nvcc():
    """nvidia/cu13/bin/nvcc of this Python's path (the build environment), or None."""
    for entry in sys.path:
        nvcc = os.path.join(entry or ".", "nvidia", "cu13", "bin", "nvcc")
        if os.access(nvcc, os.X_OK):
            return os.path.abspath(nvcc)
    return None


def cmake_defines(config_settings):
    """{define: value} to add to the build: PORTSSM_NVCC when PyPI's nvcc is to be used."""
    if why_not(config_settings) is not None:
        return {}
    nvcc = pip_nvcc()
    if nvcc is None:  # e.g. --no-build-isolation without the packages: CMake says what is missing
        sys.stderr.write("portssm: no nvcc found, nor PyPI's in this environment (pip install "
                         "%s): the cuda module will be skipped\n" % " ".join(PIP_NVCC_REQUIREMENTS))
        return {}
    return {"cmake.define.PORTSSM_NVCC": nvcc}
