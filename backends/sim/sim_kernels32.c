/* sim_kernels32.c - the kernels for the sim device with warp width 32 (device 0). */
#define PSSM_SIM_WARP 32
#define PSSM_SIM_PREFIX pssm_sim32_
#include "sim_kernels_table.h"
