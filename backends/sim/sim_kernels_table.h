/*
 * sim_kernels_table.h - the body of sim_kernels32.c and sim_kernels64.c: every kernel of
 * kernels/ compiled for the sim target at one warp width, and the table of their entry points
 * in pssm_kernel_id order.  The including file defines PSSM_SIM_WARP and PSSM_SIM_PREFIX.
 */
#include "../../kernels/all_kernels.h"
#include "../../kernels/kernel_list.h"
#include "sim_launch.h"

#define PSSM_SIM_TABLE_ENTRY_(name) PSSM_SIM_CAT(PSSM_SIM_PREFIX, name),
const pssm_sim_kernel_fn PSSM_SIM_CAT(PSSM_SIM_PREFIX, kernels)[PSSM_KERNEL_COUNT + 1] = {
    PSSM_KERNEL_LIST(PSSM_SIM_TABLE_ENTRY_) NULL};
#undef PSSM_SIM_TABLE_ENTRY_
