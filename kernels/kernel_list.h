/*
 * kernel_list.h - every kernel entry point, once.  The position in the list is the kernel id
 * (pssm_kernel_id) that host code launches; each target turns the list into its own table
 * (function handles by name for cuda/hip, function pointers for sim).
 *
 * Each family lists its stamped specialisations in its own *_list.h as PSSM_<FAMILY>_KERNELS(X),
 * calling X(name, part) once per extern "C" symbol: part is the kernel part (kernel_parts.h)
 * that compiles it, where the GPU modules look the kernel up (the sim's build checks each
 * claim: backends/sim/CMakeLists.txt).
 */
#ifndef PSSM_KERNEL_LIST_H
#define PSSM_KERNEL_LIST_H

#include "selftest_list.h"
#include "conv1d_list.h"
#include "scan_list.h"
#include "reduce_list.h"
#include "ssd_list.h"
#include "norm_list.h"

#define PSSM_KERNEL_LIST(X)                                                                     \
    PSSM_SELFTEST_KERNELS(X) PSSM_CONV1D_KERNELS(X) PSSM_SCAN_KERNELS(X) PSSM_REDUCE_KERNELS(X)          \
        PSSM_SSD_KERNELS(X) PSSM_NORM_KERNELS(X)

typedef enum pssm_kernel_id {
#define PSSM_KERNEL_ID_(name, part) PSSM_KID_##name,
    PSSM_KERNEL_LIST(PSSM_KERNEL_ID_)
#undef PSSM_KERNEL_ID_
    PSSM_KERNEL_COUNT
} pssm_kernel_id;

#endif /* PSSM_KERNEL_LIST_H */
