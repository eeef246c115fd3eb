# toolchains/cuda12-pip.cmake - the cuda module for every NVIDIA chip from Pascal on:
# CUDA 13 builds sm_75..sm_90 + compute_90 PTX, and the CUDA 12.x tools from pip add the
# sm_60, sm_61 and sm_70 machine code that CUDA 13 dropped.
#
#   pip install nvidia-cuda-nvcc-cu12        (plus: apt-get install clang-15)
#   cmake -B build -DBACKEND=cuda -DCMAKE_TOOLCHAIN_FILE=toolchains/cuda12-pip.cmake
#   cmake -B build -DBACKEND=cuda -C toolchains/cuda12-pip.cmake        (same, as an initial cache)
#
# The pip package ships ptxas and libdevice but no nvcc, so the old targets are built as clang-15
# PTX (sm_60) assembled by that ptxas for each target (PORTSSM_PTXAS_LEGACY); a full CUDA 12.x
# toolkit's nvcc, if one is installed under /usr/local/cuda-12*, is used instead
# (PORTSSM_NVCC_LEGACY).  Only sets cache variables, so a value given on the command line wins.
include(${CMAKE_CURRENT_LIST_DIR}/cuda13.cmake)

file(GLOB _portssm_cuda12 /usr/local/cuda-12*/bin/nvcc)
if(_portssm_cuda12)
  list(SORT _portssm_cuda12 COMPARE NATURAL ORDER DESCENDING)
  list(GET _portssm_cuda12 0 _portssm_cuda12)
  set(PORTSSM_NVCC_LEGACY "${_portssm_cuda12}" CACHE FILEPATH "a CUDA 12.x nvcc for sm_60/61/70")
elseif(NOT PORTSSM_PTXAS_LEGACY) # (given: tools/release_wheel.sh, from a pip build's own venv)
  # Where pip put nvidia/cuda_nvcc: ask the Python that pip installs into.
  find_program(_portssm_python NAMES python3 python)
  if(_portssm_python)
    execute_process(
      COMMAND ${_portssm_python} -c [=[
import sys, os
for p in sys.path:
    d = os.path.join(p, 'nvidia', 'cuda_nvcc')
    if os.path.isfile(os.path.join(d, 'bin', 'ptxas')):
        print(d)
        break
]=]
      OUTPUT_VARIABLE _portssm_pip_nvcc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(_portssm_pip_nvcc)
    set(PORTSSM_PTXAS_LEGACY "${_portssm_pip_nvcc}/bin/ptxas" CACHE FILEPATH
        "a CUDA 12.x ptxas for sm_60/61/70")
    set(PORTSSM_LIBDEVICE "${_portssm_pip_nvcc}/nvvm/libdevice/libdevice.10.bc" CACHE FILEPATH
        "libdevice linked into clang-made PTX")
  else()
    message(WARNING "toolchains/cuda12-pip.cmake: neither a CUDA 12.x toolkit under "
                    "/usr/local/cuda-12* nor the pip package nvidia-cuda-nvcc-cu12 was found "
                    "(pip install nvidia-cuda-nvcc-cu12): sm_60/61/70 will be dropped")
  endif()
endif()
