/*
 * launch.c - pssm_gpu_launch: the one gate every kernel launch of backends/gpu/ goes through.
 *
 * It checks the launch shape against the device before the device sees it, so that a planning
 * mistake or a shape too large for the device is a clear status with the kernel's name instead
 * of a driver error code (or, in the simulator, a hang).
 */
#include "gpu.h"

#include <inttypes.h>

/* Grid x is at least 2^31 - 1 on every supported device (CUDA since sm_30, HIP, sim). */
#define PSSM_GRID_X_MAX 2147483647u
/* The most threads a block may have on every supported device. */
#define PSSM_BLOCK_THREADS_MAX 1024u

static const char *const pssm_kernel_names[PSSM_KERNEL_COUNT + 1] = {
#define PSSM_KERNEL_NAME_(name, part) #name,
    PSSM_KERNEL_LIST(PSSM_KERNEL_NAME_)
#undef PSSM_KERNEL_NAME_
        NULL};

/* The part (kernels/kernel_parts.h) whose image part holds each kernel. */
static const char *const pssm_kernel_parts[PSSM_KERNEL_COUNT + 1] = {
#define PSSM_KERNEL_PART_(name, part) #part,
    PSSM_KERNEL_LIST(PSSM_KERNEL_PART_)
#undef PSSM_KERNEL_PART_
        NULL};

const char *pssm_gpu_kernel_name(int kernel)
{
    if (kernel < 0 || kernel >= PSSM_KERNEL_COUNT)
        return "(unknown kernel)";
    return pssm_kernel_names[kernel];
}

const char *pssm_gpu_kernel_part(int kernel)
{
    if (kernel < 0 || kernel >= PSSM_KERNEL_COUNT)
        return "(unknown kernel)";
    return pssm_kernel_parts[kernel];
}

portssm_status pssm_gpu_launch(pssm_gpu *g, int kernel, pssm_dim3 grid, pssm_dim3 block,
                               uint32_t shared_bytes, const void *params, size_t params_size)
{
    pssm_bctx *c = g->ctx;
    if (kernel < 0 || kernel >= PSSM_KERNEL_COUNT)
        return pssm_fail(c, PORTSSM_ERR_INTERNAL, "launch: kernel id %d outside [0, %d)", kernel,
                         (int)PSSM_KERNEL_COUNT);
    const char *name = pssm_kernel_names[kernel];

    /* Blocks are sized by launch planning alone: a bad one is a bug in portssm. */
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (threads < 1 || threads > PSSM_BLOCK_THREADS_MAX)
        return pssm_fail(c, PORTSSM_ERR_INTERNAL,
                         "launch of %s: block (%" PRIu32 ",%" PRIu32 ",%" PRIu32 ") has %" PRIu64
                         " threads, expected 1 to %u",
                         name, block.x, block.y, block.z, threads, PSSM_BLOCK_THREADS_MAX);
    /* Warp collectives (kernels/pssm_dialect.h) need every lane of every warp present. */
    if (g->warp_size < 1 || threads % (uint64_t)g->warp_size != 0)
        return pssm_fail(c, PORTSSM_ERR_INTERNAL,
                         "launch of %s: block (%" PRIu32 ",%" PRIu32 ",%" PRIu32 ") has %" PRIu64
                         " threads, not a multiple of the warp width %d",
                         name, block.x, block.y, block.z, threads, (int)g->warp_size);
    if (grid.x < 1 || grid.y < 1 || grid.z < 1)
        return pssm_fail(c, PORTSSM_ERR_INTERNAL,
                         "launch of %s: empty grid (%" PRIu32 ",%" PRIu32 ",%" PRIu32 ")", name,
                         grid.x, grid.y, grid.z);

    /* Grids grow with the problem: too large is a valid case this device cannot run. */
    if (grid.x > PSSM_GRID_X_MAX || grid.y > g->max_grid_y || grid.z > g->max_grid_z)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "launch of %s: grid (%" PRIu32 ",%" PRIu32 ",%" PRIu32
                         ") exceeds the device's limits (%u,%" PRIu32 ",%" PRIu32 ")",
                         name, grid.x, grid.y, grid.z, PSSM_GRID_X_MAX, g->max_grid_y,
                         g->max_grid_z);
    /* Plans size dynamic shared memory from the device's limit: past it is a bug too. */
    if (shared_bytes > g->max_shared_per_block)
        return pssm_fail(c, PORTSSM_ERR_INTERNAL,
                         "launch of %s: %" PRIu32 " bytes of dynamic shared memory, past the %" PRIu32
                         " a block of this device may use",
                         name, shared_bytes, g->max_shared_per_block);
    return g->launch(g, kernel, grid, block, shared_bytes, params, params_size);
}

int32_t pssm_gpu_resident_blocks(pssm_gpu *g, int kernel, uint32_t threads, uint32_t shared_bytes,
                                 int32_t fallback)
{
    if (g->resident_blocks == NULL || kernel < 0 || kernel >= PSSM_KERNEL_COUNT)
        return fallback;
    const int32_t n = g->resident_blocks(g, kernel, threads, shared_bytes);
    return n > 0 ? n : fallback;
}
