# kernel_parts.cmake - the kernel parts of kernels/kernel_parts.h, for every build of the
# kernels (backends/sim, backends/cuda, backends/hip): each part is one compile.
#
#   portssm_kernel_parts(<var>)   the part names, in the header's order

function(portssm_kernel_parts out)
  # a part added to or removed from the header reconfigures the build
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${PROJECT_SOURCE_DIR}/kernels/kernel_parts.h)
  file(STRINGS ${PROJECT_SOURCE_DIR}/kernels/kernel_parts.h _lines
       REGEX "^#define PSSM_PART_ID_[a-z0-9_]+ [0-9]+$")
  set(_parts "")
  foreach(_l IN LISTS _lines)
    string(REGEX REPLACE "^#define PSSM_PART_ID_([a-z0-9_]+) [0-9]+$" "\\1" _p "${_l}")
    list(APPEND _parts ${_p})
  endforeach()
  file(STRINGS ${PROJECT_SOURCE_DIR}/kernels/kernel_parts.h _count
       REGEX "^#define PSSM_PART_COUNT [0-9]+$")
  string(REGEX REPLACE "^#define PSSM_PART_COUNT ([0-9]+)$" "\\1" _count "${_count}")
  list(LENGTH _parts _n)
  if(NOT _n EQUAL _count)
    message(FATAL_ERROR "kernels/kernel_parts.h: ${_n} PSSM_PART_ID_ lines, PSSM_PART_COUNT ${_count}")
  endif()
  set(${out} ${_parts} PARENT_SCOPE)
endfunction()
