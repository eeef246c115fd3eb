# bundle_archs.cmake - joins one-target code-object bundles into one bundle of every target,
# as hipcc --genco with several --offload-arch makes it (host entry empty, 4096-byte alignment).
# The kernels compile once per part and target (in parallel); this puts a part's targets back
# into the one bundle hipModuleLoadData picks the device's code object from.
#
#   cmake -DBUNDLER=<clang-offload-bundler> -DOUTPUT=<bundle> -DINPUTS=<a.co;b.co;...>
#         [-DARCHS=<gfxA;gfxB;...>] -P bundle_archs.cmake
# With ARCHS the inputs are raw code objects (a clang's --no-gpu-bundle-output), one per target
# in that order; without, one-target bundles (hipcc --genco).
foreach(_v BUNDLER OUTPUT INPUTS)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "bundle_archs.cmake: ${_v} is not set")
  endif()
endforeach()
set(_targets "")
set(_inputs "")
set(_host "")
if(DEFINED ARCHS)
  list(LENGTH ARCHS _na)
  list(LENGTH INPUTS _ni)
  if(NOT _na EQUAL _ni)
    message(FATAL_ERROR "bundle_archs.cmake: ${_ni} inputs for ${_na} ARCHS")
  endif()
  set(_host host-x86_64-unknown-linux-gnu)
  foreach(_a _in IN ZIP_LISTS ARCHS INPUTS)
    list(APPEND _targets hipv4-amdgcn-amd-amdhsa--${_a})
    list(APPEND _inputs --input=${_in})
  endforeach()
  set(INPUTS "")
endif()
foreach(_in IN LISTS INPUTS)
  execute_process(COMMAND ${BUNDLER} --list --type=o --input=${_in}
                  OUTPUT_VARIABLE _list RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${BUNDLER} --list ${_in}: ${_err}")
  endif()
  string(REPLACE "\n" ";" _list "${_list}")
  foreach(_t IN LISTS _list)
    if(_t MATCHES "^host-")
      set(_host ${_t})
    elseif(_t)
      set(_elf ${_in}.${_t}.elf)
      execute_process(COMMAND ${BUNDLER} --unbundle --type=o --targets=${_t} --input=${_in}
                              --output=${_elf}
                      RESULT_VARIABLE _rc ERROR_VARIABLE _err)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "${BUNDLER} --unbundle ${_t} ${_in}: ${_err}")
      endif()
      list(APPEND _targets ${_t})
      list(APPEND _inputs --input=${_elf})
    endif()
  endforeach()
endforeach()
if(NOT _host OR NOT _targets)
  message(FATAL_ERROR "bundle_archs.cmake: no host or no device entry in ${INPUTS}")
endif()
string(REPLACE ";" "," _all "${_host};${_targets}")
execute_process(COMMAND ${BUNDLER} --type=o --bundle-align=4096 --targets=${_all}
                        --input=/dev/null ${_inputs} --output=${OUTPUT}
                RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${BUNDLER} (bundle ${OUTPUT}): ${_err}")
endif()
