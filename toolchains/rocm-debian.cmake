# toolchains/rocm-debian.cmake - the hip module with Debian's ROCm 5.2 hipcc
# (apt-get install hipcc libamdhip64-dev): gfx906 gfx908 gfx90a gfx940 gfx1030.
#
#   cmake -B build -DBACKEND=hip -DCMAKE_TOOLCHAIN_FILE=toolchains/rocm-debian.cmake
#   cmake -B build -DBACKEND=hip -C toolchains/rocm-debian.cmake        (same, as an initial cache)
#
# Only sets cache variables, so a value given on the command line wins.  hipcc is driven
# directly: CMake's HIP language does not find this layout (its hip-lang config lives in the
# multiarch lib directory).
set(PORTSSM_HIPCC /usr/bin/hipcc CACHE FILEPATH "hipcc for the hip module")
# every target ROCm 5.2 builds: what PORTSSM_HIP_ARCHS=all (and auto without an AMD GPU) builds
set(PORTSSM_HIP_ARCHS_ALL "gfx906;gfx908;gfx90a;gfx940;gfx1030" CACHE STRING
    "AMD targets of PORTSSM_HIP_ARCHS=all")
