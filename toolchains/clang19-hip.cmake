# toolchains/clang19-hip.cmake - the hip module compiled by Debian's clang 19 instead of hipcc
# (apt-get install clang-19 lld-19 hipcc libamdhip64-dev: clang 19 compiles the kernels, the HIP
# headers come from Debian's ROCm 5.2, and clang-offload-bundler-15 bundles the targets), for
# every AMD target from one source, CDNA3 and RDNA3/4 included:
#
#   cmake -B build -DBACKEND=hip -C toolchains/clang19-hip.cmake
#
# The kernels are compiled without ROCm device libraries (-nogpulib): ROCm 5.2's stop at
# gfx1036, and the dialect needs none (PSSM_HIP_NOGPULIB: indices, barriers and the few math
# functions from clang's builtins).  Only sets cache variables: a value on the command line wins.
set(PORTSSM_HIP_CLANG /usr/bin/clang++-19 CACHE FILEPATH "clang for the hip kernels")
# every target clang 19 builds: what PORTSSM_HIP_ARCHS=all (and auto without an AMD GPU) builds
set(PORTSSM_HIP_ARCHS_ALL "gfx906;gfx908;gfx90a;gfx940;gfx942;gfx1030;gfx1100;gfx1101;gfx1200;gfx1201"
    CACHE STRING "AMD targets of PORTSSM_HIP_ARCHS=all")
