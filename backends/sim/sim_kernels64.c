/* sim_kernels64.c - the kernels for the sim device with warp width 64 (device 1). */
#define PSSM_SIM_WARP 64
#define PSSM_SIM_PREFIX pssm_sim64_
#include "sim_kernels_table.h"
