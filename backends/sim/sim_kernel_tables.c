/*
 * sim_kernel_tables.c - the entry points of the sim's kernels at warp widths 32 and 64, in
 * pssm_kernel_id order.  The kernels themselves are compiled part by part (kernels/kernel_parts.h,
 * backends/sim/CMakeLists.txt); each entry is pssm_sim<warp>_<kernel> (PSSM_KERNEL in
 * pssm_dialect.h).
 */
#include "../../kernels/kernel_list.h"
#include "sim_launch.h"

#define PSSM_SIM_DECLARE_(name, part)                                                                 \
    void pssm_sim32_##name(const void *params);                                                 \
    void pssm_sim64_##name(const void *params);
PSSM_KERNEL_LIST(PSSM_SIM_DECLARE_)
#undef PSSM_SIM_DECLARE_

#define PSSM_SIM_ENTRY32_(name, part) pssm_sim32_##name,
#define PSSM_SIM_ENTRY64_(name, part) pssm_sim64_##name,
const pssm_sim_kernel_fn pssm_sim32_kernels[PSSM_KERNEL_COUNT + 1] = {
    PSSM_KERNEL_LIST(PSSM_SIM_ENTRY32_) NULL};
const pssm_sim_kernel_fn pssm_sim64_kernels[PSSM_KERNEL_COUNT + 1] = {
    PSSM_KERNEL_LIST(PSSM_SIM_ENTRY64_) NULL};
