# Installs the build tree into a temporary prefix, then builds and runs a consumer against it,
# once with find_package(portssm) and once with pkg-config.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DC_COMPILER=... [-DSANITIZE_FLAGS=...]
#         -P run_install_test.cmake
# SANITIZE_FLAGS: the compile and link flags of a sanitizer build (PORTSSM_SANITIZE), without
# which a program cannot load the sanitized library.
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_install_test.cmake: -D${v}=... is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

file(GLOB_RECURSE pc_files ${prefix}/*/portssm.pc)
file(GLOB_RECURSE libs ${prefix}/*/libportssm.so)
if(NOT pc_files OR NOT libs OR NOT EXISTS ${prefix}/include/portssm.h)
  message(FATAL_ERROR "the install lacks portssm.pc, libportssm.so or include/portssm.h")
endif()
list(GET pc_files 0 pc_file)
list(GET libs 0 lib)
get_filename_component(pc_dir ${pc_file} DIRECTORY)
get_filename_component(lib_dir ${lib} DIRECTORY)

# ---- find_package(portssm)
separate_arguments(san_flags UNIX_COMMAND "${SANITIZE_FLAGS}")
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_C_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)

# A version the package does not satisfy must be refused.
file(WRITE ${WORK_DIR}/too_new/CMakeLists.txt
     "cmake_minimum_required(VERSION 3.20)\nproject(too_new LANGUAGES C)\n"
     "find_package(portssm 99.0 CONFIG)\n"
     "if(portssm_FOUND)\n  message(FATAL_ERROR \"portssm 99.0 accepted\")\nendif()\n")
run(${CMAKE_COMMAND} -S ${WORK_DIR}/too_new -B ${WORK_DIR}/too_new/build
    -DCMAKE_PREFIX_PATH=${prefix})

# ---- pkg-config
find_program(PKG_CONFIG pkg-config pkgconf REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs portssm RESULT_VARIABLE rc
                OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs portssm failed: ${err}")
endif()
message(STATUS "pkg-config: ${flags}")
# The .pc file is relocatable (paths relative to itself): resolve them before comparing.
string(REGEX MATCH "-I([^ ]+)" _ "${flags}")
get_filename_component(inc "${CMAKE_MATCH_1}" REALPATH)
string(REGEX MATCH "-L([^ ]+)" _ "${flags}")
get_filename_component(libpath "${CMAKE_MATCH_1}" REALPATH)
get_filename_component(want_inc "${prefix}/include" REALPATH)
get_filename_component(want_lib "${lib_dir}" REALPATH)
if(NOT inc STREQUAL want_inc OR NOT libpath STREQUAL want_lib)
  message(FATAL_ERROR "pkg-config does not point into the install prefix ${prefix}: ${flags}")
endif()
separate_arguments(flag_list UNIX_COMMAND "${flags}")
run(${C_COMPILER} ${SOURCE_DIR}/consumer.c -o ${WORK_DIR}/consumer_pc ${flag_list} ${san_flags})
# in front of what the environment has (a sanitizer's runtime may be found through it)
if(DEFINED ENV{LD_LIBRARY_PATH} AND NOT "$ENV{LD_LIBRARY_PATH}" STREQUAL "")
  set(ENV{LD_LIBRARY_PATH} "${lib_dir}:$ENV{LD_LIBRARY_PATH}")
else()
  set(ENV{LD_LIBRARY_PATH} ${lib_dir})
endif()
run(${WORK_DIR}/consumer_pc)
