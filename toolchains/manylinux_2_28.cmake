# toolchains/manylinux_2_28.cmake - the release build (tools/release_wheel.sh): every NVIDIA and
# AMD target the tools here build, with host code that runs on glibc 2.28 and newer.
#
#   pip install ziglang nvidia-cuda-nvcc-cu12      (plus: apt-get install clang-15 clang-19
#                                                   lld-19 hipcc libamdhip64-dev)
#   cmake -B build -DCMAKE_TOOLCHAIN_FILE=toolchains/manylinux_2_28.cmake
#
# - C: toolchains/zig-cc (zig's clang, linking against glibc 2.28's symbol versions).  gcc on a
#   newer system links exp@GLIBC_2.29, dlopen@GLIBC_2.34, pthread_create@GLIBC_2.34 and
#   __libc_start_main@GLIBC_2.34 (Debian 12: the wheel would be manylinux_2_34); zig ships the
#   headers and link stubs of every glibc version, so no older system (container) is needed.
#   Device code is not affected: nvcc (host compiler for its preprocessing only) and clang
#   write fatbinaries and code objects, no host objects.
# - NVIDIA: toolchains/cuda12-pip.cmake (CUDA 13's nvcc for sm_75 and newer + PTX, clang-15 PTX
#   assembled by pip's CUDA 12 ptxas for sm_60/61/70).
# - AMD: toolchains/clang19-hip.cmake (clang 19 for gfx906 ... gfx1201, ten targets).
# Sets the C compiler; the rest are cache variables, so a value given on the command line wins.
set(CMAKE_C_COMPILER "${CMAKE_CURRENT_LIST_DIR}/zig-cc")
include(${CMAKE_CURRENT_LIST_DIR}/cuda12-pip.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/clang19-hip.cmake)
