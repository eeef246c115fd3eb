/*
 * sim_backend.c - the "sim" backend: the GPU kernels of kernels/ run on the CPU with SIMT
 * semantics (sim_runtime.c).  Device 0 has warp width 32, device 1 warp width 64.  Memory is
 * host memory, every call is synchronous, and the ops are the shared GPU host code of
 * backends/gpu/ launching through sim_launch_kernel.
 */
#include "sim_launch.h"
#include "../host/host_device.h"

#include "../gpu/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIM_DEVICES 2
/* The multiprocessors the launch planner sees: fixed, so that every machine (and valgrind's one
 * thread) takes the same plans and the suites reach the same kernels (tests/kernel_coverage.c
 * checks that they reach all).  The OS threads that run the blocks are pssm_sim_host_threads(). */
#define SIM_MULTIPROCESSORS 2

typedef struct sim_state {
    pssm_gpu gpu;                     /* first: pssm_gpu_of() */
    const pssm_sim_kernel_fn *kernels; /* built for gpu.warp_size */
    int defer_copies;                  /* asynchronous copies land at their wait */
    char launch_log[1024];             /* PORTSSM_SIM_LAUNCH_LOG: a file, or "" */
} sim_state;

static int32_t sim_warp_of(int32_t device) { return device == 0 ? 32 : 64; }

static int sim_defer_copies(int32_t device)
{
    const char *e = getenv("PORTSSM_SIM_DEFER_COPIES");
    if (e && (strcmp(e, "0") == 0 || strcmp(e, "1") == 0))
        return e[0] == '1';
    return device == 1;
}

/* ---------------------------------------------------------------- pssm_gpu primitives */

static portssm_status sim_launch_kernel(pssm_gpu *g, int kernel, pssm_dim3 grid, pssm_dim3 block,
                                        uint32_t shared_bytes, const void *params,
                                        size_t params_size)
{
    const sim_state *s = (const sim_state *)g;
    if (kernel < 0 || kernel >= PSSM_KERNEL_COUNT)
        return pssm_fail(g->ctx, PORTSSM_ERR_INTERNAL, "sim: kernel id %d, expected 0..%d",
                         kernel, PSSM_KERNEL_COUNT - 1);
    const pssm_sim_launch l = {
        .fn = s->kernels[kernel],
        .name = pssm_gpu_kernel_name(kernel),
        .params = params,
        .grid = {grid.x, grid.y, grid.z},
        .block = {block.x, block.y, block.z},
        .warp = g->warp_size,
        .dynamic_shared = shared_bytes,
        .shared_limit = g->max_shared_per_block,
        .defer_copies = s->defer_copies,
    };
    const portssm_status st = pssm_sim_run(&l, g->ctx->error, sizeof g->ctx->error);
    if (st == PORTSSM_OK && s->launch_log[0]) {
        /* one line per launch that ran to its end, "<kernel> sim<warp>": tests/kernel_coverage.c
         * checks that the suites ran every kernel (the file opened per launch: the suites' own
         * threads and processes may share it) */
        FILE *f = fopen(s->launch_log, "a");
        if (f) {
            fprintf(f, "%s sim%d\n", l.name, (int)g->warp_size);
            fclose(f);
        }
    }
    return st;
}

/* ---------------------------------------------------------------- memory (host) */

static portssm_status sim_gpu_alloc(pssm_gpu *g, void **ptr, size_t bytes)
{
    return pssm_host_mem_alloc(g->ctx, ptr, bytes);
}

static portssm_status sim_gpu_free(pssm_gpu *g, void *ptr) { return pssm_host_mem_free(g->ctx, ptr); }

static portssm_status sim_gpu_copy(pssm_gpu *g, void *dst, const void *src, size_t bytes)
{
    return pssm_host_mem_copy(g->ctx, dst, src, bytes, PORTSSM_DEVICE_TO_DEVICE);
}

static portssm_status sim_gpu_sync(pssm_gpu *g) { return PORTSSM_OK; }

/* ---------------------------------------------------------------- backend table */

static portssm_status sim_probe(int32_t *num_devices, const char **reason)
{
    *num_devices = SIM_DEVICES;
    if (reason)
        *reason = "built in: the GPU kernels run on the CPU with SIMT semantics "
                  "(device 0: warp 32, device 1: warp 64)";
    return PORTSSM_OK;
}

static portssm_status sim_device_info(int32_t device, portssm_device_info *info)
{
    if (device < 0 || device >= SIM_DEVICES)
        return PORTSSM_ERR_NO_DEVICE;
    const int32_t warp = sim_warp_of(device);
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "sim (warp %d)", (int)warp);
    snprintf(info->arch, sizeof info->arch, "sim%d", (int)warp);
    info->warp_size = warp;
    info->multiprocessors = SIM_MULTIPROCESSORS;
    info->total_memory = pssm_host_total_memory();
    return PORTSSM_OK;
}

static portssm_status sim_open(pssm_bctx *c, int32_t device)
{
    if (device < 0 || device >= SIM_DEVICES)
        return pssm_fail(c, PORTSSM_ERR_NO_DEVICE,
                         "sim: device %d does not exist (0: warp 32, 1: warp 64)", (int)device);
    sim_state *s = calloc(1, sizeof *s);
    if (!s)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY, "sim: out of memory for a context");
    s->kernels = device == 0 ? pssm_sim32_kernels : pssm_sim64_kernels;
    s->gpu.ctx = c;
    s->gpu.warp_size = sim_warp_of(device);
    s->gpu.multiprocessors = SIM_MULTIPROCESSORS;
    s->gpu.max_grid_y = 65535;
    s->gpu.max_grid_z = 65535;
    s->gpu.offset32_span = 4096; /* (see gpu.h: the suites' larger shapes take the 64-bit kernels) */
    /* Shared memory a block may use: warp 32 as much as the sim holds (plans that want more than
     * 48 KB run there, as on the GPUs with an opt-in), warp 64 only the 48 KB of every device
     * (their fallbacks run there, as on Pascal), so that the suites run both. */
    s->gpu.max_shared_per_block = device == 0 ? PSSM_SIM_SHARED_MAX : PSSM_GPU_SHARED_PLAIN;
    /* Asynchronous copies: warp 32 lands them at once, warp 64 at their wait, so that a kernel
     * that reads a tile before its wait, or writes over one in flight, fails one of the two
     * (PORTSSM_SIM_DEFER_COPIES=0/1 sets both, to tell which). */
    s->defer_copies = sim_defer_copies(device);
    const char *log = getenv("PORTSSM_SIM_LAUNCH_LOG");
    if (log && strlen(log) < sizeof s->launch_log)
        strcpy(s->launch_log, log);
    else if (log)
        fprintf(stderr, "portssm sim: PORTSSM_SIM_LAUNCH_LOG is longer than %d characters: "
                        "no launch log\n", (int)sizeof s->launch_log - 1);
    s->gpu.launch = sim_launch_kernel;
    s->gpu.alloc = sim_gpu_alloc;
    s->gpu.free = sim_gpu_free;
    s->gpu.copy_to_host = sim_gpu_copy;
    s->gpu.copy_to_device = sim_gpu_copy;
    s->gpu.sync = sim_gpu_sync;
    s->gpu.is_simulator = 1;
    s->gpu.async_copies = 1;
    c->state = s;
    return PORTSSM_OK;
}

static void sim_close(pssm_bctx *c)
{
    free(c->state);
    c->state = NULL;
}

const pssm_backend pssm_sim_backend = {
    .name = "sim",
    .abi = PSSM_BACKEND_ABI,
    .runs_on_host = 1,
    .probe = sim_probe,
    .device_info = sim_device_info,
    .open = sim_open,
    .close = sim_close,
    PSSM_HOST_DEVICE_SLOTS,
    PSSM_GPU_OPS,
};
