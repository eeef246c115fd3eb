/*
 * device_module.h - what the two halves of a GPU module share.  Both are compiled once per
 * vendor with PSSM_VENDOR_CUDA or PSSM_VENDOR_HIP, which picks the vendor header
 * (backends/cuda/cuda_api.h, backends/hip/hip_api.h) that maps the driver's names, types and
 * constants onto pssm_api_*:
 *   device_module.c   the driver, the devices and their loaded code, probe, the entry point
 *   device_context.c  a context: its stream, memory, events and kernel launches
 */
#ifndef PSSM_DEVICE_MODULE_H
#define PSSM_DEVICE_MODULE_H

#if defined(PSSM_VENDOR_CUDA)
#include "../cuda/cuda_api.h"
#elif defined(PSSM_VENDOR_HIP)
#include "../hip/hip_api.h"
#else
#error "compile the GPU module with PSSM_VENDOR_CUDA or PSSM_VENDOR_HIP"
#endif

#include "device_images.h"
#include "gpu.h"
#include "../../kernels/kernel_parts.h"

#define PSSM_DM_MESSAGE 512

/* Block sizes (in whole warps of 32, up to 1024 threads) whose occupancy a device caches. */
#define PSSM_DM_RESIDENT_SIZES 33

/* A device as the process uses it: made ready once, shared by every context on it. */
typedef struct pssm_dm_device {
    int state;             /* 0 not ready yet, 1 ready, -1 failed for good (no kernel image) */
    portssm_status status; /* of the last attempt */
    char error[PSSM_DM_MESSAGE];
    pssm_api_device dev;
    int activated; /* ctx retained */
    pssm_api_ctx ctx;
    pssm_api_module modules[PSSM_PART_COUNT]; /* one per part of the image, kept to the end */
    const pssm_image *image;
    char name[256];
    char arch[64];
    int32_t warp_size, multiprocessors;
    uint32_t max_grid_y, max_grid_z;
    uint32_t max_shared_per_block; /* static + dynamic, opt-in included */
    pssm_api_function fn[PSSM_KERNEL_COUNT + 1];
    /* The dynamic shared memory each kernel was opted in to (PSSM_API_SHARED_OPT_IN), raised
     * by the first launch that needs more (device_context.c: atomic reads, serialised raises:
     * contexts on other threads launch on the same device). */
    uint32_t shared_opted_in[PSSM_KERNEL_COUNT + 1];
    /* The driver's last answer of resident_blocks for each kernel and block size (threads /
     * 32): dynamic shared bytes << 8 | blocks (0: not asked yet; device_context.c: relaxed
     * atomics, any thread may fill one in). */
    uint32_t resident[PSSM_KERNEL_COUNT + 1][PSSM_DM_RESIDENT_SIZES];
} pssm_dm_device;

/* pssm_bctx.state of a context. */
typedef struct pssm_dm_ctx {
    pssm_gpu gpu; /* first: backends/gpu/ finds it through pssm_bctx.state */
    pssm_dm_device *d;
    pssm_api_stream stream;
} pssm_dm_ctx;

void pssm_dm_format(char *buf, size_t n, const char *fmt, ...) PSSM_PRINTF(3, 4);
/* A driver error is OUT_OF_MEMORY or DEVICE. */
portssm_status pssm_dm_status_of(pssm_api_result r);
/* "<what> failed: <driver's error name>" into c->error; returns pssm_dm_status_of(r). */
portssm_status pssm_dm_fail(pssm_bctx *c, pssm_api_result r, const char *fmt, ...)
    PSSM_PRINTF(3, 4);
/* Opens the driver and readies `device` (once per process; thread-safe): OK with *out, or the
 * status with the reason in msg. */
portssm_status pssm_dm_acquire(int32_t device, pssm_dm_device **out, char *msg, size_t n);

/* device_context.c: the per-context slots of the backend table. */
portssm_status pssm_dm_open(pssm_bctx *c, int32_t device);
void pssm_dm_close(pssm_bctx *c);
portssm_status pssm_dm_set_stream(pssm_bctx *c, void *stream);
portssm_status pssm_dm_synchronize(pssm_bctx *c);
portssm_status pssm_dm_stream_capturing(pssm_bctx *c, int *capturing);
portssm_status pssm_dm_mem_alloc(pssm_bctx *c, void **ptr, size_t bytes);
portssm_status pssm_dm_mem_free(pssm_bctx *c, void *ptr);
portssm_status pssm_dm_mem_copy(pssm_bctx *c, void *dst, const void *src, size_t bytes,
                                portssm_memcpy_kind kind);
portssm_status pssm_dm_mem_set(pssm_bctx *c, void *ptr, int value, size_t bytes);
portssm_status pssm_dm_event_create(pssm_bctx *c, void **ev);
void pssm_dm_event_destroy(pssm_bctx *c, void *ev);
portssm_status pssm_dm_event_record(pssm_bctx *c, void *ev);
portssm_status pssm_dm_event_elapsed_ms(pssm_bctx *c, void *start, void *end, float *ms);

#endif /* PSSM_DEVICE_MODULE_H */
