/*
 * device_context.c - a context of a GPU module (device_module.h): its stream, memory, events
 * and kernel launches.  Every driver call is made with the context's device current and the
 * caller's current context/device put back after it, so a caller mixing portssm with the
 * vendor's runtime API sees no change of state.
 */
#include "device_module.h"
#include "tuning.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

static pssm_dm_ctx *dm_of(pssm_bctx *c)
{
    return (pssm_dm_ctx *)c->state;
}

/* Every driver call of a context is bracketed by these two. */
#define PSSM_DM_ENTER(c, x, saved)                                                                 \
    do {                                                                                           \
        pssm_api_result pssm_enter_r_ = pssm_api_enter((x)->d->dev, (x)->d->ctx, &(saved));        \
        if (pssm_enter_r_ != PSSM_API_SUCCESS)                                                     \
            return pssm_dm_fail((c), pssm_enter_r_, "making device %d current", (int)(c)->device); \
    } while (0)
#define PSSM_DM_LEAVE(x, saved) pssm_api_leave((x)->d->dev, (saved))

#if PSSM_API_SHARED_OPT_IN
/* Raises the kernel's dynamic shared memory limit to `bytes` unless an earlier launch did (the
 * device current).  The opt-ins of a process are serialised, so that the driver's limit of a
 * kernel is always the largest any launch asked for. */
static pthread_mutex_t dm_opt_in_lock = PTHREAD_MUTEX_INITIALIZER;
static pssm_api_result dm_shared_opt_in(pssm_dm_device *d, int kernel, uint32_t bytes)
{
    if (__atomic_load_n(&d->shared_opted_in[kernel], __ATOMIC_ACQUIRE) >= bytes)
        return PSSM_API_SUCCESS;
    pssm_api_result r = PSSM_API_SUCCESS;
    pthread_mutex_lock(&dm_opt_in_lock);
    if (d->shared_opted_in[kernel] < bytes) {
        r = pssm_api.func_set_attribute(d->fn[kernel], PSSM_API_FUNC_ATTR_MAX_DYNAMIC_SHARED,
                                        (int)bytes);
        if (r == PSSM_API_SUCCESS)
            __atomic_store_n(&d->shared_opted_in[kernel], bytes, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&dm_opt_in_lock);
    return r;
}
#endif

static portssm_status dm_launch(pssm_gpu *g, int kernel, pssm_dim3 grid, pssm_dim3 block,
                                uint32_t shared_bytes, const void *params, size_t params_size)
{
    pssm_dm_ctx *x = (pssm_dm_ctx *)g;
    pssm_bctx *c = g->ctx;
    const char *name = pssm_gpu_kernel_name(kernel);
    if ((uint64_t)grid.x * block.x > PSSM_API_MAX_GRID_THREADS_X)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "launch of %s: %" PRIu64
                         " threads along x exceed the device's limit %" PRIu64,
                         name, (uint64_t)grid.x * block.x, (uint64_t)PSSM_API_MAX_GRID_THREADS_X);
    /* The parameter struct is the kernel's one argument: its bytes are the argument buffer. */
    size_t size = params_size;
    void *extra[] = {PSSM_API_LAUNCH_BUFFER_POINTER, (void *)params, PSSM_API_LAUNCH_BUFFER_SIZE,
                     &size, PSSM_API_LAUNCH_END};
    int saved;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = PSSM_API_SUCCESS;
#if PSSM_API_SHARED_OPT_IN
    /* (any size: the plain limit of 48 KB counts the kernel's static arrays too) */
    if (shared_bytes > 0)
        r = dm_shared_opt_in(x->d, kernel, shared_bytes);
    if (r != PSSM_API_SUCCESS) {
        PSSM_DM_LEAVE(x, saved);
        return pssm_dm_fail(c, r, "%s of %s to %" PRIu32 " bytes of dynamic shared memory",
                            pssm_api_symbol.func_set_attribute, name, shared_bytes);
    }
    /* tuning builds: every kernel's preferred shared-memory carveout (percent; L1 is the rest) */
    const int64_t carveout = pssm_tune("CARVEOUT", -1);
    if (carveout >= 0 &&
        (r = pssm_api.func_set_attribute(x->d->fn[kernel], PSSM_API_FUNC_ATTR_CARVEOUT,
                                         (int)carveout)) != PSSM_API_SUCCESS) {
        PSSM_DM_LEAVE(x, saved);
        return pssm_dm_fail(c, r, "%s of %s: carveout %d%% (PORTSSM_TUNE_CARVEOUT)",
                            pssm_api_symbol.func_set_attribute, name, (int)carveout);
    }
#endif
    r = pssm_api.launch(x->d->fn[kernel], grid.x, grid.y, grid.z, block.x, block.y, block.z,
                        shared_bytes, x->stream, NULL, extra);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r,
                            "%s of %s (grid %" PRIu32 "x%" PRIu32 "x%" PRIu32 ", block %" PRIu32
                            "x%" PRIu32 "x%" PRIu32 ", %" PRIu32
                            " bytes of dynamic shared memory, %zu parameter bytes)",
                            pssm_api_symbol.launch, name, grid.x, grid.y, grid.z, block.x, block.y,
                            block.z, shared_bytes, params_size);
    return PORTSSM_OK;
}

/* pssm_gpu.resident_blocks: the driver's occupancy of the kernel, its last answer cached per
 * block size (planners ask at every launch); 0 where the driver has no such query or fails it. */
static int32_t dm_resident_blocks(pssm_gpu *g, int kernel, uint32_t threads, uint32_t shared_bytes)
{
    pssm_dm_ctx *x = (pssm_dm_ctx *)g;
    if (pssm_api.occupancy_blocks == NULL || threads == 0 || threads > 1024)
        return 0;
    const int cached = threads % 32 == 0 && shared_bytes < (1u << 23);
    uint32_t *slot = cached ? &x->d->resident[kernel][threads / 32] : NULL;
    if (slot != NULL) {
        const uint32_t known = __atomic_load_n(slot, __ATOMIC_RELAXED);
        if ((known & 0xffu) != 0 && known >> 8 == shared_bytes)
            return (int32_t)(known & 0xffu);
    }
    int blocks = 0, saved;
    if (pssm_api_enter(x->d->dev, x->d->ctx, &saved) != PSSM_API_SUCCESS)
        return 0;
    pssm_api_result r = PSSM_API_SUCCESS;
#if PSSM_API_SHARED_OPT_IN
    /* the driver counts no block that needs more dynamic shared memory than the kernel was
     * opted in to: the opt-in its launch will make, made now */
    if (shared_bytes > 0)
        r = dm_shared_opt_in(x->d, kernel, shared_bytes);
#endif
    if (r == PSSM_API_SUCCESS)
        r = pssm_api.occupancy_blocks(&blocks, x->d->fn[kernel], (int)threads,
                                      (size_t)shared_bytes);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS || blocks < 1)
        return 0;
    blocks = blocks < 255 ? blocks : 255;
    if (slot != NULL)
        __atomic_store_n(slot, shared_bytes << 8 | (uint32_t)blocks, __ATOMIC_RELAXED);
    return blocks;
}

/* pssm_gpu's memory hooks (host code that stages its own buffers: the self-test). */
static portssm_status dm_gpu_alloc(pssm_gpu *g, void **ptr, size_t bytes)
{
    return pssm_dm_mem_alloc(g->ctx, ptr, bytes);
}
static portssm_status dm_gpu_free(pssm_gpu *g, void *ptr) { return pssm_dm_mem_free(g->ctx, ptr); }
static portssm_status dm_gpu_copy_to_host(pssm_gpu *g, void *dst, const void *src, size_t bytes)
{
    return pssm_dm_mem_copy(g->ctx, dst, src, bytes, PORTSSM_DEVICE_TO_HOST);
}
static portssm_status dm_gpu_copy_to_device(pssm_gpu *g, void *dst, const void *src, size_t bytes)
{
    return pssm_dm_mem_copy(g->ctx, dst, src, bytes, PORTSSM_HOST_TO_DEVICE);
}
static portssm_status dm_gpu_sync(pssm_gpu *g) { return pssm_dm_synchronize(g->ctx); }

portssm_status pssm_dm_open(pssm_bctx *c, int32_t device)
{
    pssm_dm_device *d = NULL;
    portssm_status s = pssm_dm_acquire(device, &d, c->error, sizeof c->error);
    if (s != PORTSSM_OK)
        return s;

    pssm_dm_ctx *x = (pssm_dm_ctx *)calloc(1, sizeof *x);
    if (x == NULL)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY, "out of host memory for a context");
    x->gpu.ctx = c;
    x->gpu.warp_size = d->warp_size;
    x->gpu.multiprocessors = d->multiprocessors;
    x->gpu.max_grid_y = d->max_grid_y;
    x->gpu.offset32_span = INT32_MAX;
    x->gpu.max_grid_z = d->max_grid_z;
    x->gpu.max_shared_per_block = d->max_shared_per_block;
    x->gpu.launch = dm_launch;
    x->gpu.resident_blocks = dm_resident_blocks;
    x->gpu.alloc = dm_gpu_alloc;
    x->gpu.free = dm_gpu_free;
    x->gpu.copy_to_host = dm_gpu_copy_to_host;
    x->gpu.copy_to_device = dm_gpu_copy_to_device;
    x->gpu.sync = dm_gpu_sync;
    x->gpu.is_simulator = 0;
    x->gpu.async_copies = pssm_api_async_copies(d->arch);
    x->d = d;
    x->stream = NULL; /* the default stream until set_stream */
    c->state = x;
    return PORTSSM_OK;
}

void pssm_dm_close(pssm_bctx *c)
{
    pssm_dm_ctx *x = dm_of(c);
    if (x == NULL)
        return;
    int saved;
    if (pssm_api_enter(x->d->dev, x->d->ctx, &saved) == PSSM_API_SUCCESS) {
        pssm_api.stream_sync(x->stream); /* nothing may still be reading its arguments */
        PSSM_DM_LEAVE(x, saved);
    }
    free(x);
    c->state = NULL;
}

portssm_status pssm_dm_set_stream(pssm_bctx *c, void *stream)
{
    pssm_dm_ctx *x = dm_of(c);
    pssm_api_stream s = (pssm_api_stream)stream;
    int saved, known, same;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = pssm_api_stream_on_device(s, x->d->dev, x->d->ctx, &known, &same);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT,
                         "stream %p is not a valid " PSSM_API_PRODUCT " stream: %s", stream,
                         pssm_api_error_name(r));
    if (known && !same)
        return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT,
                         "stream %p belongs to another device or context than device %d's "
                         "primary context, which this context uses",
                         stream, (int)c->device);
    x->stream = s;
    return PORTSSM_OK;
}

portssm_status pssm_dm_synchronize(pssm_bctx *c)
{
    pssm_dm_ctx *x = dm_of(c);
    int saved;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = pssm_api.stream_sync(x->stream);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s (it reports errors of earlier asynchronous work too)",
                            pssm_api_symbol.stream_sync);
    return PORTSSM_OK;
}

portssm_status pssm_dm_stream_capturing(pssm_bctx *c, int *capturing)
{
    pssm_dm_ctx *x = dm_of(c);
    int saved, status = 0;
    *capturing = 0;
    if (pssm_api.stream_capturing == NULL)
        return PORTSSM_OK;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = pssm_api.stream_capturing(x->stream, &status);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s", pssm_api_symbol.stream_capturing);
    *capturing = status != 0; /* active, or invalidated: either way no allocation now */
    return PORTSSM_OK;
}

/* ================================================================= memory */

portssm_status pssm_dm_mem_alloc(pssm_bctx *c, void **ptr, size_t bytes)
{
    pssm_dm_ctx *x = dm_of(c);
    pssm_api_dptr p = 0;
    int saved;
    *ptr = NULL;
    if (bytes == 0)
        return PORTSSM_OK;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = pssm_api.mem_alloc(&p, bytes);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s of %zu bytes on device %d", pssm_api_symbol.mem_alloc, bytes,
                            (int)c->device);
    *ptr = pssm_api_ptr_of(p);
    return PORTSSM_OK;
}

portssm_status pssm_dm_mem_free(pssm_bctx *c, void *ptr)
{
    pssm_dm_ctx *x = dm_of(c);
    int saved;
    if (ptr == NULL)
        return PORTSSM_OK;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = pssm_api.mem_free(pssm_api_dptr_of(ptr));
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s of %p", pssm_api_symbol.mem_free, ptr);
    return PORTSSM_OK;
}

portssm_status pssm_dm_mem_copy(pssm_bctx *c, void *dst, const void *src, size_t bytes,
                                portssm_memcpy_kind kind)
{
    pssm_dm_ctx *x = dm_of(c);
    pssm_api_result r;
    const char *what;
    int saved;
    if (bytes == 0)
        return PORTSSM_OK;
    PSSM_DM_ENTER(c, x, saved);
    switch (kind) {
    case PORTSSM_HOST_TO_DEVICE:
        what = pssm_api_symbol.copy_htod;
        r = pssm_api.copy_htod(pssm_api_dptr_of(dst), (void *)src, bytes, x->stream);
        break;
    case PORTSSM_DEVICE_TO_HOST:
        what = pssm_api_symbol.copy_dtoh;
        r = pssm_api.copy_dtoh(dst, pssm_api_dptr_of((void *)src), bytes, x->stream);
        break;
    case PORTSSM_DEVICE_TO_DEVICE:
        what = pssm_api_symbol.copy_dtod;
        r = pssm_api.copy_dtod(pssm_api_dptr_of(dst), pssm_api_dptr_of((void *)src), bytes,
                               x->stream);
        break;
    default:
        PSSM_DM_LEAVE(x, saved);
        return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT,
                         "memcpy kind %d is not a portssm_memcpy_kind", (int)kind);
    }
    /* The copy is complete when this returns (portssm_memcpy's contract). */
    if (r == PSSM_API_SUCCESS) {
        r = pssm_api.stream_sync(x->stream);
        if (r != PSSM_API_SUCCESS)
            what = pssm_api_symbol.stream_sync;
    }
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s of %zu bytes (%p <- %p)", what, bytes, dst, src);
    return PORTSSM_OK;
}

portssm_status pssm_dm_mem_set(pssm_bctx *c, void *ptr, int value, size_t bytes)
{
    pssm_dm_ctx *x = dm_of(c);
    int saved;
    if (bytes == 0)
        return PORTSSM_OK;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r =
        pssm_api.memset8(pssm_api_dptr_of(ptr), (unsigned char)value, bytes, x->stream);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s of %zu bytes at %p", pssm_api_symbol.memset8, bytes, ptr);
    return PORTSSM_OK;
}

/* ================================================================= events */

portssm_status pssm_dm_event_create(pssm_bctx *c, void **ev)
{
    pssm_dm_ctx *x = dm_of(c);
    pssm_api_event e = NULL;
    int saved;
    *ev = NULL;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = pssm_api.event_create(&e, PSSM_API_EVENT_DEFAULT);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s", pssm_api_symbol.event_create);
    *ev = e;
    return PORTSSM_OK;
}

void pssm_dm_event_destroy(pssm_bctx *c, void *ev)
{
    pssm_dm_ctx *x = dm_of(c);
    int saved;
    if (ev == NULL || pssm_api_enter(x->d->dev, x->d->ctx, &saved) != PSSM_API_SUCCESS)
        return;
    pssm_api.event_destroy((pssm_api_event)ev);
    PSSM_DM_LEAVE(x, saved);
}

portssm_status pssm_dm_event_record(pssm_bctx *c, void *ev)
{
    pssm_dm_ctx *x = dm_of(c);
    int saved;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = pssm_api.event_record((pssm_api_event)ev, x->stream);
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s", pssm_api_symbol.event_record);
    return PORTSSM_OK;
}

portssm_status pssm_dm_event_elapsed_ms(pssm_bctx *c, void *start, void *end, float *ms)
{
    pssm_dm_ctx *x = dm_of(c);
    int saved;
    const char *what = pssm_api_symbol.event_sync;
    PSSM_DM_ENTER(c, x, saved);
    pssm_api_result r = pssm_api.event_sync((pssm_api_event)end);
    if (r == PSSM_API_SUCCESS) {
        what = pssm_api_symbol.event_elapsed;
        r = pssm_api.event_elapsed(ms, (pssm_api_event)start, (pssm_api_event)end);
    }
    PSSM_DM_LEAVE(x, saved);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_fail(c, r, "%s", what);
    return PORTSSM_OK;
}
