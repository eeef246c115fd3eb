# module.cmake - what the cuda and hip module builds share (included by backends/gpu).
#
#   portssm_kernel_sources(<var>)    every file of kernels/, for the device compiles' DEPENDS
#   portssm_add_gpu_module(<vendor> DEFINE <macro> IMAGES <name> <file> <targets>...
#                          BUILT_FOR <text> [DROPPED <archs>] [DROPPED_HINT <text>])
#       libportssm_<vendor>.so: backends/gpu/device_*.c compiled with -D<macro>, the host
#       objects of backends/gpu, and the device-code images embedded with .incbin in the order
#       given (the module uses the first one the driver loads).  An image is one file per kernel
#       part (kernels/kernel_parts.h): <file> is a path with @PART@ where the part name goes.
#       <targets> describes an image for messages; BUILT_FOR lists every target of the build,
#       DROPPED what the default list wanted but no compiler here could build, DROPPED_HINT how
#       to build it.

# Every kernel header, for the device compiles that record no depfile (hipcc compiling several
# targets at once): a change anywhere in kernels/ rebuilds them.
function(portssm_kernel_sources out)
  file(GLOB_RECURSE _k CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/*.h)
  set(${out} ${_k} PARENT_SCOPE)
endfunction()

# C string literal of `text` (quotes and backslashes escaped).
function(_portssm_c_string out text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  set(${out} "\"${text}\"" PARENT_SCOPE)
endfunction()

function(portssm_add_gpu_module vendor)
  cmake_parse_arguments(M "" "DEFINE;BUILT_FOR;DROPPED;DROPPED_HINT" "IMAGES" ${ARGN})
  set(target portssm_${vendor})
  set_property(GLOBAL PROPERTY PORTSSM_MODULE_${vendor} "${M_BUILT_FOR}") # (CMakeLists.txt)

  # ---- the generated C file that embeds the images and lists them
  portssm_kernel_parts(_parts)
  set(_blobs "")
  set(_part_tables "")
  set(_rows "")
  set(_files "")
  list(LENGTH M_IMAGES _n)
  math(EXPR _count "${_n} / 3")
  math(EXPR _rest "${_n} % 3")
  if(_count EQUAL 0 OR NOT _rest EQUAL 0)
    message(FATAL_ERROR "portssm_add_gpu_module(${vendor}): IMAGES takes name/file/targets triples")
  endif()
  if(_count GREATER 32) # PSSM_MAX_IMAGES (device_images.h)
    message(FATAL_ERROR "portssm_add_gpu_module(${vendor}): more than 32 images")
  endif()
  math(EXPR _last "${_n} - 1")
  foreach(_i RANGE 0 ${_last} 3)
    math(EXPR _j "${_i} + 1")
    math(EXPR _k "${_i} + 2")
    list(GET M_IMAGES ${_i} _name)
    list(GET M_IMAGES ${_j} _file)
    list(GET M_IMAGES ${_k} _targets)
    if(NOT _file MATCHES "@PART@")
      message(FATAL_ERROR "portssm_add_gpu_module(${vendor}): image ${_name}'s file has no @PART@")
    endif()
    set(_part_rows "")
    set(_image_files "")
    foreach(_part IN LISTS _parts)
      string(REPLACE "@PART@" "${_part}" _part_file "${_file}")
      if(_part_file MATCHES "[\"\\\\\n]")
        message(FATAL_ERROR "portssm: the build directory path may not contain quotes or "
                            "backslashes (${_part_file})")
      endif()
      set(_sym "pssm_image_${vendor}_${_name}_${_part}")
      list(APPEND _image_files ${_part_file})
      if(PORTSSM_PACK_IMAGES) # the parts are found in the inflated stream (image_pack.h)
        string(APPEND _part_rows "    {\"${_part}\", 0, 0},\n")
        continue()
      endif()
      # A NUL byte after each file makes PTX text a C string, as cuModuleLoadData wants.
      string(CONFIGURE [=[
__asm__(".pushsection .rodata\n"
        ".balign 4096\n"
        ".globl @_sym@_begin\n"
        ".hidden @_sym@_begin\n"
        "@_sym@_begin:\n"
        ".incbin \"@_part_file@\"\n"
        ".byte 0\n"
        ".globl @_sym@_end\n"
        ".hidden @_sym@_end\n"
        "@_sym@_end:\n"
        ".popsection\n");
extern const unsigned char @_sym@_begin[], @_sym@_end[];
]=] _blob @ONLY)
      string(APPEND _blobs "${_blob}")
      string(APPEND _part_rows "    {\"${_part}\", ${_sym}_begin, ${_sym}_end},\n")
    endforeach()
    set(_pack "0, 0, 0, 0")
    if(PORTSSM_PACK_IMAGES)
      # The parts end to end, then LZMA: one stream an image (image_pack.h).
      set(_stem ${CMAKE_CURRENT_BINARY_DIR}/${vendor}_${_name}_packed)
      add_custom_command(OUTPUT ${_stem}.index ${_stem}.raw.lzma
        COMMAND portssm_pack_image ${_stem}.index ${_stem}.raw ${_image_files}
        COMMAND ${PORTSSM_XZ} --format=lzma -9 -T1 -f ${_stem}.raw
        DEPENDS portssm_pack_image ${_image_files}
        COMMENT "xz: image ${_name} of the ${vendor} module, packed"
        VERBATIM)
      set(_sym "pssm_image_${vendor}_${_name}_pack")
      foreach(_piece index stream)
        set(_piece_file ${_stem}.index)
        if(_piece STREQUAL "stream")
          set(_piece_file ${_stem}.raw.lzma)
        endif()
        string(CONFIGURE [=[
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".globl @_sym@_@_piece@_begin\n"
        ".hidden @_sym@_@_piece@_begin\n"
        "@_sym@_@_piece@_begin:\n"
        ".incbin \"@_piece_file@\"\n"
        ".globl @_sym@_@_piece@_end\n"
        ".hidden @_sym@_@_piece@_end\n"
        "@_sym@_@_piece@_end:\n"
        ".popsection\n");
extern const unsigned char @_sym@_@_piece@_begin[], @_sym@_@_piece@_end[];
]=] _blob @ONLY)
        string(APPEND _blobs "${_blob}")
      endforeach()
      set(_pack "${_sym}_index_begin, ${_sym}_index_end, ${_sym}_stream_begin, ${_sym}_stream_end")
      set(_embedded ${_stem}.index ${_stem}.raw.lzma)
    else()
      set(_embedded ${_image_files})
    endif()
    list(APPEND _files ${_embedded})
    string(APPEND _part_tables
           "static const pssm_image_part pssm_image_${vendor}_${_name}_parts[] = {\n"
           "${_part_rows}};\n")
    # `cmake --build <dir> --target portssm_<vendor>_image_<name>` builds that image's files
    # alone (CI checks the legacy images this way without building the main one again).
    add_custom_target(${target}_image_${_name} DEPENDS ${_image_files})
    _portssm_c_string(_cname "${_name}")
    _portssm_c_string(_ctargets "${_targets}")
    list(LENGTH _parts _nparts)
    string(APPEND _rows "    {${_cname}, ${_ctargets}, pssm_image_${vendor}_${_name}_parts, "
                        "${_nparts}, ${_pack}},\n")
  endforeach()
  _portssm_c_string(_built_for "${M_BUILT_FOR}")
  _portssm_c_string(_dropped "${M_DROPPED}")
  _portssm_c_string(_hint "${M_DROPPED_HINT}")
  set(_gen ${CMAKE_CURRENT_BINARY_DIR}/${vendor}_images.c)
  file(CONFIGURE OUTPUT ${_gen} @ONLY CONTENT [=[
/* Generated by backends/gpu/module.cmake: the device-code images of libportssm_@vendor@.so. */
#include "device_images.h"

@_blobs@
@_part_tables@
const pssm_image pssm_images[] = {
@_rows@};
const int pssm_image_count = @_count@;
const char pssm_images_built_for[] = @_built_for@;
const char pssm_images_dropped[] = @_dropped@;
const char pssm_images_dropped_hint[] = @_hint@;
]=])
  # .incbin is invisible to the dependency scanner: name the images explicitly.
  set_source_files_properties(${_gen} PROPERTIES OBJECT_DEPENDS "${_files}")

  # ---- the module
  add_library(${target} SHARED
    ${PROJECT_SOURCE_DIR}/backends/gpu/device_module.c
    ${PROJECT_SOURCE_DIR}/backends/gpu/device_context.c
    ${PROJECT_SOURCE_DIR}/backends/gpu/image_order.c
    ${PROJECT_SOURCE_DIR}/backends/gpu/image_unpack.c
    ${PROJECT_SOURCE_DIR}/backends/gpu/lzma_decode.c
    ${_gen}
    ${_files}   # not compiled: attaches the rules that build the images
    $<TARGET_OBJECTS:portssm_gpu_host_objs>)
  target_compile_definitions(${target} PRIVATE ${M_DEFINE})
  if(PORTSSM_TUNING)
    target_compile_definitions(${target} PRIVATE PSSM_TUNING)
  endif()
  target_include_directories(${target} PRIVATE
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/backends/gpu)
  if(DEFINED PORTSSM_LIBRARY_DIR)
    set(_outdir ${PORTSSM_LIBRARY_DIR})
  else()
    set(_outdir ${PROJECT_BINARY_DIR})
  endif()
  # Loaded by name from libportssm's own directory: no version suffix, no soname games.
  set_target_properties(${target} PROPERTIES
    C_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${_outdir}
    NO_SONAME ON)
  if(NOT APPLE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  # No GPU runtime: the driver is opened with dlopen.  libm for the host objects' math.
  target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS} m)
endfunction()
