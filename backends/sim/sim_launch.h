/*
 * sim_launch.h - the host side of the simulator: run one launch of a kernel compiled for the
 * sim target (one object per kernel part and warp width, listed by sim_kernel_tables.c) with
 * SIMT semantics.  The kernel side of the same runtime is sim_runtime.h.
 */
#ifndef PSSM_SIM_LAUNCH_H
#define PSSM_SIM_LAUNCH_H

#include "../../src/backend.h"
#include "sim_runtime.h"

/* Every sim kernel entry has this signature (see PSSM_KERNEL in pssm_dialect.h). */
typedef void (*pssm_sim_kernel_fn)(const void *params);

/* Entry points of the warp-32 and warp-64 builds, indexed by pssm_kernel_id. */
extern const pssm_sim_kernel_fn pssm_sim32_kernels[];
extern const pssm_sim_kernel_fn pssm_sim64_kernels[];

typedef struct pssm_sim_launch {
    pssm_sim_kernel_fn fn;
    const char *name; /* for messages */
    const void *params;
    pssm_sim_dim3 grid, block;
    int warp; /* the warp width the kernel was compiled for: 32 or 64 */
    /* Dynamic shared memory of each block (PSSM_SHARED_DYNAMIC), and the most shared memory,
     * static and dynamic together, the simulated device gives a block (at most
     * PSSM_SIM_SHARED_MAX): a block that declares past it fails, as the launch would on a GPU. */
    size_t dynamic_shared, shared_limit;
    /* Non-zero: asynchronous copies land at their wait, not at once (sim_runtime.h). */
    int defer_copies;
} pssm_sim_launch;

/* The most shared memory a simulated block may have, static and dynamic together. */
#define PSSM_SIM_SHARED_MAX (64 * 1024)

/*
 * Runs every block of the launch and returns when all are done.  OK; PORTSSM_ERR_DEVICE when a
 * block misused a barrier, a shuffle or shared memory (the message names the block, the warp
 * and the source line; blocks after the first failing one are not run); PORTSSM_ERR_INTERNAL
 * for a grid or block outside the CUDA limits.  The message goes to err.
 *
 * Partial warps: a block whose size is not a multiple of the warp has a last warp with fewer
 * lanes.  Its missing lanes are inactive: a shuffle completes when the existing lanes reach it,
 * and a lane that reads a missing lane gets its own value back (as for a source out of range).
 */
portssm_status pssm_sim_run(const pssm_sim_launch *l, char *err, size_t err_capacity);

/* OS threads a launch spreads its blocks over: min(online CPUs, 4), or PORTSSM_SIM_THREADS
 * (1..64) when set.  Decided once per process. */
int pssm_sim_host_threads(void);

#endif /* PSSM_SIM_LAUNCH_H */
