# toolchains/cuda13.cmake - the cuda module with CUDA 13's nvcc from /usr/local/cuda (sm_75 and
# newer + compute_90 PTX; sm_60/61/70 are dropped, see cuda12-pip.cmake to add them).
#
#   cmake -B build -DBACKEND=cuda -DCMAKE_TOOLCHAIN_FILE=toolchains/cuda13.cmake
#   cmake -B build -DBACKEND=cuda -C toolchains/cuda13.cmake        (same, as an initial cache)
#
# Only sets cache variables, so a value given on the command line wins.  CUDA_HOME or CUDA_PATH
# (environment) point at another CUDA 13 install.
if(DEFINED ENV{CUDA_HOME})
  set(_portssm_cuda13 "$ENV{CUDA_HOME}")
elseif(DEFINED ENV{CUDA_PATH})
  set(_portssm_cuda13 "$ENV{CUDA_PATH}")
else()
  set(_portssm_cuda13 /usr/local/cuda)
endif()
set(PORTSSM_NVCC "${_portssm_cuda13}/bin/nvcc" CACHE FILEPATH "nvcc for the cuda module")
