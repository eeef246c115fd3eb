# detect_gpus.cmake - the GPUs of the configuring machine, for PORTSSM_CUDA_ARCHS=auto and
# PORTSSM_HIP_ARCHS=auto (backends/cuda, backends/hip).
#
#   portssm_detect_nvidia_gpus(<archs> <names> <why>)
#   portssm_detect_amd_gpus(<archs> <names> <why>)
#
# <archs>: the targets of the GPUs found (sm_90, gfx90a), sorted, each once; empty when none,
# and then <why> says why (no driver, no device, ...).  <names>: "NVIDIA H100 80GB HBM3 (sm_90)"
# per GPU, for the configure message.
#
# NVIDIA: gpu_probe_cuda.c, compiled and run by try_run, asks the driver API (libcuda.so.1,
# opened with dlopen: a machine without a driver says so, it does not fail), so it sees what a
# CUDA program sees (CUDA_VISIBLE_DEVICES applies).  AMD: the KFD topology in sysfs, what ROCm's
# rocm_agent_enumerator reads: each node's gfx_target_version (0 for CPUs).  No ROCm tool is run.
#
# For tests (tests/gpu_detect), what the probes would see can be given instead:
#   PORTSSM_GPU_PROBE_CUDA_OUTPUT   the probe program's output, its lines as a CMake list
#                                   ("sm_90 NVIDIA H100;sm_80 NVIDIA A100" or "none: <why>")
#   PORTSSM_KFD_TOPOLOGY            a directory laid out as /sys/class/kfd/kfd/topology/nodes
# Cross-compiling, nothing is detected: the build host's GPUs say nothing about the target's.

function(portssm_detect_nvidia_gpus archs names why)
  set(${archs} "" PARENT_SCOPE)
  set(${names} "" PARENT_SCOPE)
  if(DEFINED PORTSSM_GPU_PROBE_CUDA_OUTPUT)
    set(_out "${PORTSSM_GPU_PROBE_CUDA_OUTPUT}")
    set(_source "PORTSSM_GPU_PROBE_CUDA_OUTPUT")
  elseif(CMAKE_CROSSCOMPILING)
    set(${why} "cross-compiling: the GPUs of this build host say nothing about the target's"
        PARENT_SCOPE)
    return()
  else()
    set(_source "the driver API probe")
    set(_bin ${CMAKE_BINARY_DIR}/portssm_gpu_probe_cuda)
    try_run(_run _compiled ${_bin} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gpu_probe_cuda.c
            LINK_LIBRARIES ${CMAKE_DL_LIBS}
            COMPILE_OUTPUT_VARIABLE _compile_out RUN_OUTPUT_VARIABLE _out)
    set(_rc "${_run}") # try_run keeps its result in the cache: not wanted, the GPUs may change
    unset(_run CACHE)
    if(NOT _compiled)
      string(REPLACE "\n" " " _compile_out "${_compile_out}")
      set(${why} "the driver API probe did not compile: ${_compile_out}" PARENT_SCOPE)
      return()
    endif()
    if(NOT _rc EQUAL 0)
      set(${why} "the driver API probe failed (${_rc}): ${_out}" PARENT_SCOPE)
      return()
    endif()
  endif()
  string(REPLACE "\r" "" _out "${_out}")
  string(REPLACE "\n" ";" _lines "${_out}")
  set(_found "")
  set(_named "")
  foreach(_line IN LISTS _lines)
    string(STRIP "${_line}" _line)
    if(_line STREQUAL "")
      continue()
    elseif(_line MATCHES "^none: (.*)")
      set(${why} "${CMAKE_MATCH_1}" PARENT_SCOPE)
      return()
    elseif(_line MATCHES "^(sm_[0-9]+) *(.*)$")
      list(APPEND _found ${CMAKE_MATCH_1})
      list(APPEND _named "${CMAKE_MATCH_2} (${CMAKE_MATCH_1})")
    else()
      set(${why} "${_source} printed '${_line}', which is neither 'sm_XY <name>' nor 'none: <why>'"
          PARENT_SCOPE)
      return()
    endif()
  endforeach()
  if(NOT _found)
    set(${why} "${_source} printed nothing" PARENT_SCOPE)
    return()
  endif()
  list(REMOVE_DUPLICATES _found)
  list(SORT _found COMPARE NATURAL)
  list(REMOVE_DUPLICATES _named)
  string(REPLACE ";" ", " _named "${_named}")
  set(${archs} ${_found} PARENT_SCOPE)
  set(${names} "${_named}" PARENT_SCOPE)
  set(${why} "" PARENT_SCOPE)
endfunction()

function(portssm_detect_amd_gpus archs names why)
  set(${archs} "" PARENT_SCOPE)
  set(${names} "" PARENT_SCOPE)
  if(DEFINED PORTSSM_KFD_TOPOLOGY)
    set(_dir "${PORTSSM_KFD_TOPOLOGY}")
  elseif(CMAKE_CROSSCOMPILING)
    set(${why} "cross-compiling: the GPUs of this build host say nothing about the target's"
        PARENT_SCOPE)
    return()
  else()
    set(_dir /sys/class/kfd/kfd/topology/nodes)
  endif()
  if(NOT IS_DIRECTORY "${_dir}")
    set(${why} "no AMD GPU driver (no ${_dir}: the amdgpu kernel driver's KFD is not loaded)"
        PARENT_SCOPE)
    return()
  endif()
  file(GLOB _nodes LIST_DIRECTORIES true "${_dir}/*")
  set(_found "")
  foreach(_node IN LISTS _nodes)
    if(NOT EXISTS "${_node}/properties")
      continue()
    endif()
    file(STRINGS "${_node}/properties" _v REGEX "^gfx_target_version [0-9]+$")
    if(NOT _v)
      continue()
    endif()
    string(REGEX REPLACE "^gfx_target_version " "" _v "${_v}")
    if(_v EQUAL 0) # a CPU node
      continue()
    endif()
    # major * 10000 + minor * 100 + stepping, the stepping written in hex: 90010 -> gfx90a
    math(EXPR _major "${_v} / 10000")
    math(EXPR _minor "(${_v} / 100) % 100")
    math(EXPR _step "${_v} % 100" OUTPUT_FORMAT HEXADECIMAL)
    string(REGEX REPLACE "^0x" "" _step "${_step}")
    string(TOLOWER "${_step}" _step)
    # sorted by the version (gfx908 before gfx90a before gfx1030): "<6-digit version>:<name>"
    string(LENGTH "${_v}" _len)
    math(EXPR _len "6 - ${_len}")
    string(REPEAT "0" ${_len} _pad)
    list(APPEND _found "${_pad}${_v}:gfx${_major}${_minor}${_step}")
  endforeach()
  if(NOT _found)
    set(${why} "the KFD topology (${_dir}) lists no GPU node" PARENT_SCOPE)
    return()
  endif()
  list(REMOVE_DUPLICATES _found)
  list(SORT _found)
  list(TRANSFORM _found REPLACE "^[0-9]+:" "")
  string(REPLACE ";" ", " _named "${_found}")
  set(${archs} ${_found} PARENT_SCOPE)
  set(${names} "${_named}" PARENT_SCOPE)
  set(${why} "" PARENT_SCOPE)
endfunction()
