/*
 * gpu.h - the host half shared by every GPU-style backend (cuda, hip, sim).
 *
 * The ops of backends/gpu/ turn an op's (validated) args into kernel parameter structs
 * (kernels/params.h), pick a specialisation and a grid, and launch through the device's one
 * primitive, pssm_gpu.launch.  They are compiled into each GPU module and into the sim backend,
 * so launch planning, like the kernels themselves, is written once.
 *
 * Every GPU-style backend keeps a pssm_gpu as the FIRST member of its per-context state
 * (pssm_bctx.state), which is how these ops find it.
 */
#ifndef PSSM_GPU_H
#define PSSM_GPU_H

#include "../../src/backend.h"
#include "../../kernels/kernel_list.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pssm_dim3 {
    uint32_t x, y, z;
} pssm_dim3;

typedef struct pssm_gpu pssm_gpu;
struct pssm_gpu {
    pssm_bctx *ctx;               /* for error messages                                  */
    int32_t warp_size;            /* of the device (kernels were compiled for it)        */
    int32_t multiprocessors;      /* SMs / CUs, for sizing grids                          */
    uint32_t max_grid_y, max_grid_z; /* launch limits (x is at least 2^31 - 1 everywhere) */
    /* The largest span (elements from an operand's first to its last) that planners give to
     * kernels with 32-bit offsets: INT32_MAX on devices; the simulator's is small, so that its
     * suites run both the 32- and the 64-bit kernels (0: the 64-bit kernels everywhere). */
    int64_t offset32_span;
    /* Shared memory a block may use, static and dynamic together (bytes): a plan that gives a
     * kernel dynamic shared memory (PSSM_SHARED_DYNAMIC) keeps it and the kernel's static
     * arrays within this (the launch checks the dynamic part).  Past PSSM_GPU_SHARED_PLAIN in
     * all, a CUDA kernel needs the opt-in the launch makes for it. */
    uint32_t max_shared_per_block;
    /* Launch kernel `kernel` (a pssm_kernel_id) with `shared_bytes` of dynamic shared memory
     * and the parameter struct at `params`, asynchronously on the context's stream.  Returns a
     * status with ctx->error set. */
    portssm_status (*launch)(pssm_gpu *g, int kernel, pssm_dim3 grid, pssm_dim3 block,
                             uint32_t shared_bytes, const void *params, size_t params_size);
    /* Blocks of `threads` threads (and `shared_bytes` of dynamic shared memory) of `kernel`
     * that one multiprocessor holds at once, as the driver computes it from the kernel's
     * registers and shared memory; 0 where the backend cannot tell (NULL: never).  Planners
     * that size work to whole waves read it through pssm_gpu_resident_blocks. */
    int32_t (*resident_blocks)(pssm_gpu *g, int kernel, uint32_t threads, uint32_t shared_bytes);
    /* Device memory for host code that stages its own buffers (the dialect self-test,
     * ops_selftest.c).  Copies are complete on return; sync waits for the stream and reports
     * asynchronous kernel errors.  A backend may leave them NULL: the self-test is then
     * unsupported there. */
    portssm_status (*alloc)(pssm_gpu *g, void **ptr, size_t bytes);
    portssm_status (*free)(pssm_gpu *g, void *ptr);
    portssm_status (*copy_to_host)(pssm_gpu *g, void *dst, const void *src, size_t bytes);
    portssm_status (*copy_to_device)(pssm_gpu *g, void *dst, const void *src, size_t bytes);
    portssm_status (*sync)(pssm_gpu *g);
    int32_t is_simulator; /* non-zero on the sim backend: the self-test's misuse modes run */
    /* Non-zero where the dialect's copies to shared memory (pssm_copy_async16) are in flight
     * without holding the thread (NVIDIA sm_80 and newer; the sim, which checks their waits):
     * plans that copy ahead only pay off there. */
    int32_t async_copies;
};

static inline pssm_gpu *pssm_gpu_of(pssm_bctx *c) { return (pssm_gpu *)c->state; }

/* Returns from the calling function with the status unless it is OK. */
#define PSSM_TRY_STATUS(expr)                                                                   \
    do {                                                                                        \
        portssm_status pssm_try_status_ = (expr);                                               \
        if (pssm_try_status_ != PORTSSM_OK)                                                     \
            return pssm_try_status_;                                                            \
    } while (0)

/* The shared memory every supported device gives a block without an opt-in (CUDA's static
 * limit; Pascal's whole limit). */
#define PSSM_GPU_SHARED_PLAIN (48u * 1024u)

/* Checks the grid, block and dynamic shared memory against the device limits, then launches;
 * returns the status (the message is already in the context). */
portssm_status pssm_gpu_launch(pssm_gpu *g, int kernel, pssm_dim3 grid, pssm_dim3 block,
                               uint32_t shared_bytes, const void *params, size_t params_size);
/* g->resident_blocks where it answers, else `fallback` (the planner's assumption). */
int32_t pssm_gpu_resident_blocks(pssm_gpu *g, int kernel, uint32_t threads, uint32_t shared_bytes,
                                 int32_t fallback);
/* The kernel's name (its extern "C" symbol) for messages; "(unknown kernel)" outside the list. */
const char *pssm_gpu_kernel_name(int kernel);
/* The kernel part (kernels/kernel_parts.h) that compiles it: the image part to look it up in. */
const char *pssm_gpu_kernel_part(int kernel);
/* Launches (no dynamic shared memory); on failure returns from the calling function with the
 * status. */
#define PSSM_LAUNCH(g, kernel, grid, block, params)                                             \
    PSSM_LAUNCH_SHARED(g, kernel, grid, block, 0u, params)
/* The same with `shared_bytes` of dynamic shared memory (PSSM_SHARED_DYNAMIC in the kernel), a
 * size the plan checked against pssm_gpu.max_shared_per_block. */
#define PSSM_LAUNCH_SHARED(g, kernel, grid, block, shared_bytes, params)                        \
    do {                                                                                        \
        portssm_status pssm_launch_status_ = pssm_gpu_launch(                                   \
            (g), (kernel), (grid), (block), (shared_bytes), &(params), sizeof(params));         \
        if (pssm_launch_status_ != PORTSSM_OK)                                                  \
            return pssm_launch_status_;                                                         \
    } while (0)

/* The ops, with the signatures of pssm_backend's slots.  A NULL slot (no GPU kernel yet) makes
 * the op PORTSSM_ERR_UNSUPPORTED through the core. */
portssm_status pssm_gpu_causal_conv1d_fwd(pssm_bctx *c, const portssm_causal_conv1d_fwd_args *a);
portssm_status pssm_gpu_causal_conv1d_bwd(pssm_bctx *c, const portssm_causal_conv1d_bwd_args *a);
portssm_status pssm_gpu_causal_conv1d_bwd_workspace(pssm_bctx *c,
                                                    const portssm_causal_conv1d_bwd_args *a,
                                                    size_t *bytes);
portssm_status pssm_gpu_causal_conv1d_update(pssm_bctx *c,
                                             const portssm_causal_conv1d_update_args *a);
portssm_status pssm_gpu_selective_scan_fwd(pssm_bctx *c, const portssm_selective_scan_fwd_args *a);
portssm_status pssm_gpu_selective_scan_bwd(pssm_bctx *c, const portssm_selective_scan_bwd_args *a);
portssm_status pssm_gpu_selective_scan_bwd_workspace(pssm_bctx *c,
                                                     const portssm_selective_scan_bwd_args *a,
                                                     size_t *bytes);
portssm_status pssm_gpu_selective_state_update(pssm_bctx *c,
                                               const portssm_selective_state_update_args *a);
portssm_status pssm_gpu_selftest(pssm_bctx *c, int32_t mode);
portssm_status pssm_gpu_ssd_chunk_scan_fwd(pssm_bctx *c, const portssm_ssd_chunk_scan_fwd_args *a);
portssm_status pssm_gpu_ssd_chunk_scan_fwd_workspace(pssm_bctx *c,
                                                     const portssm_ssd_chunk_scan_fwd_args *a,
                                                     size_t *bytes);
portssm_status pssm_gpu_ssd_chunk_scan_bwd(pssm_bctx *c, const portssm_ssd_chunk_scan_bwd_args *a);
portssm_status pssm_gpu_ssd_chunk_scan_bwd_workspace(pssm_bctx *c,
                                                     const portssm_ssd_chunk_scan_bwd_args *a,
                                                     size_t *bytes);
portssm_status pssm_gpu_norm_fwd(pssm_bctx *c, const portssm_norm_fwd_args *a);
portssm_status pssm_gpu_norm_bwd(pssm_bctx *c, const portssm_norm_bwd_args *a);
portssm_status pssm_gpu_norm_bwd_workspace(pssm_bctx *c, const portssm_norm_bwd_args *a,
                                           size_t *bytes);

/* The selective scan's planning and launches from filled kernel parameters (every pointer,
 * stride and option; the planner sets the plan fields), for the ops built on the scan kernels
 * (Mamba-1's and the SSD's).  kernels/scan_params.h. */
struct pssm_scan_fwd_params;
portssm_status pssm_gpu_scan_fwd_launch(pssm_gpu *g, struct pssm_scan_fwd_params *p,
                                        portssm_dtype act, const char *op);

/* Designated initialisers for a backend table's op slots. */
#define PSSM_GPU_OPS                                                                            \
    .causal_conv1d_fwd = pssm_gpu_causal_conv1d_fwd, .causal_conv1d_bwd = pssm_gpu_causal_conv1d_bwd,\
    .causal_conv1d_update = pssm_gpu_causal_conv1d_update,                                      \
    .selective_scan_fwd = pssm_gpu_selective_scan_fwd, .selective_scan_bwd = pssm_gpu_selective_scan_bwd, \
    .selective_state_update = pssm_gpu_selective_state_update, .selftest = pssm_gpu_selftest,   \
    .causal_conv1d_bwd_workspace = pssm_gpu_causal_conv1d_bwd_workspace,                      \
    .selective_scan_bwd_workspace = pssm_gpu_selective_scan_bwd_workspace,                    \
    .ssd_chunk_scan_fwd = pssm_gpu_ssd_chunk_scan_fwd,                                        \
    .ssd_chunk_scan_fwd_workspace = pssm_gpu_ssd_chunk_scan_fwd_workspace,                    \
    .ssd_chunk_scan_bwd = pssm_gpu_ssd_chunk_scan_bwd,                                        \
    .ssd_chunk_scan_bwd_workspace = pssm_gpu_ssd_chunk_scan_bwd_workspace,                    \
    .norm_fwd = pssm_gpu_norm_fwd, .norm_bwd = pssm_gpu_norm_bwd,                               \
    .norm_bwd_workspace = pssm_gpu_norm_bwd_workspace

#ifdef __cplusplus
}
#endif

#endif /* PSSM_GPU_H */
