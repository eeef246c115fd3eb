/*
 * memory.c - device memory, events and the device self-test: argument checks here, the work in
 * the backend.
 */
#include "core.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define PSSM_MALLOC_ALIGN 256

PORTSSM_API portssm_status portssm_malloc(portssm_context *ctx, void **ptr, size_t bytes)
{
    PSSM_ENTER(ctx, "portssm_malloc");
    if (!ptr)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT, "portssm_malloc: 'ptr' is NULL");
    *ptr = NULL;
    if (bytes == 0)
        return PORTSSM_OK;
    portssm_status s = ctx->be->mem_alloc(&ctx->b, ptr, bytes);
    if (s != PORTSSM_OK) {
        *ptr = NULL;
        return pssm_backend_result(ctx, "portssm_malloc", s);
    }
    if (!*ptr || (uintptr_t)*ptr % PSSM_MALLOC_ALIGN) {
        if (*ptr)
            ctx->be->mem_free(&ctx->b, *ptr);
        *ptr = NULL;
        return pssm_fail(&ctx->b, PORTSSM_ERR_INTERNAL,
                         "portssm_malloc: the %s backend returned a pointer that is NULL or not "
                         "aligned to %d bytes",
                         ctx->be->name, PSSM_MALLOC_ALIGN);
    }
    return pssm_backend_result(ctx, "portssm_malloc", s);
}

PORTSSM_API portssm_status portssm_free(portssm_context *ctx, void *ptr)
{
    PSSM_ENTER(ctx, "portssm_free");
    if (!ptr)
        return PORTSSM_OK;
    return pssm_backend_result(ctx, "portssm_free", ctx->be->mem_free(&ctx->b, ptr));
}

/* Does [p, p + bytes) wrap around the address space? */
static int wraps(const void *p, size_t bytes) { return (uintptr_t)p > UINTPTR_MAX - bytes; }

PORTSSM_API portssm_status portssm_memcpy(portssm_context *ctx, void *dst, const void *src,
                                          size_t bytes, portssm_memcpy_kind kind)
{
    PSSM_ENTER(ctx, "portssm_memcpy");
    if (kind != PORTSSM_HOST_TO_DEVICE && kind != PORTSSM_DEVICE_TO_HOST &&
        kind != PORTSSM_DEVICE_TO_DEVICE)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_memcpy: 'kind' must be PORTSSM_HOST_TO_DEVICE, "
                         "PORTSSM_DEVICE_TO_HOST or PORTSSM_DEVICE_TO_DEVICE (0 to 2), got %d",
                         (int)kind);
    if (bytes == 0)
        return PORTSSM_OK;
    if (!dst || !src)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT, "portssm_memcpy: '%s' is NULL",
                         dst ? "src" : "dst");
    if (wraps(dst, bytes) || wraps(src, bytes))
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_memcpy: '%s' + %zu bytes wraps around the address space",
                         wraps(dst, bytes) ? "dst" : "src", bytes);
    /* Both ranges are in one address space only for device-to-device copies. */
    if (kind == PORTSSM_DEVICE_TO_DEVICE && (uintptr_t)dst < (uintptr_t)src + bytes &&
        (uintptr_t)src < (uintptr_t)dst + bytes)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_memcpy: 'dst' and 'src' overlap (%zu bytes from %p and %p)",
                         bytes, dst, src);
    return pssm_backend_result(ctx, "portssm_memcpy",
                               ctx->be->mem_copy(&ctx->b, dst, src, bytes, kind));
}

PORTSSM_API portssm_status portssm_memset(portssm_context *ctx, void *ptr, int value,
                                          size_t bytes)
{
    PSSM_ENTER(ctx, "portssm_memset");
    if (bytes == 0)
        return PORTSSM_OK;
    if (!ptr)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT, "portssm_memset: 'ptr' is NULL");
    if (wraps(ptr, bytes))
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_memset: 'ptr' + %zu bytes wraps around the address space",
                         bytes);
    return pssm_backend_result(ctx, "portssm_memset",
                               ctx->be->mem_set(&ctx->b, ptr, value, bytes));
}

/* ---------------------------------------------------------------- events */

/* The wrapper lets the core check ownership and the recorded state before the backend sees it. */
struct portssm_event {
    const portssm_context *owner;
    void *handle;
    int recorded;
};

static portssm_status events_supported(portssm_context *ctx, const char *fn)
{
    const pssm_backend *be = ctx->be;
    if (be->event_create && be->event_destroy && be->event_record && be->event_elapsed_ms)
        return PORTSSM_OK;
    return pssm_fail(&ctx->b, PORTSSM_ERR_UNSUPPORTED, "%s: the %s backend has no events", fn,
                     be->name);
}

static portssm_status check_event(portssm_context *ctx, const char *fn, const char *name,
                                  const portssm_event *ev)
{
    if (!ev)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT, "%s: '%s' is NULL", fn, name);
    if (ev->owner != ctx)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "%s: '%s' was created on another context", fn, name);
    return PORTSSM_OK;
}

PORTSSM_API portssm_status portssm_event_create(portssm_context *ctx, portssm_event **ev)
{
    PSSM_ENTER(ctx, "portssm_event_create");
    if (!ev)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_event_create: 'ev' is NULL");
    *ev = NULL;
    portssm_status s = events_supported(ctx, "portssm_event_create");
    if (s != PORTSSM_OK)
        return s;
    portssm_event *e = calloc(1, sizeof *e);
    if (!e)
        return pssm_fail(&ctx->b, PORTSSM_ERR_OUT_OF_MEMORY,
                         "portssm_event_create: out of host memory");
    e->owner = ctx;
    s = ctx->be->event_create(&ctx->b, &e->handle);
    if (s != PORTSSM_OK) {
        free(e);
        return pssm_backend_result(ctx, "portssm_event_create", s);
    }
    *ev = e;
    return PORTSSM_OK;
}

PORTSSM_API void portssm_event_destroy(portssm_context *ctx, portssm_event *ev)
{
    if (!ctx || !ev || ev->owner != ctx)
        return;
    ctx->be->event_destroy(&ctx->b, ev->handle);
    free(ev);
}

PORTSSM_API portssm_status portssm_event_record(portssm_context *ctx, portssm_event *ev)
{
    PSSM_ENTER(ctx, "portssm_event_record");
    portssm_status s = check_event(ctx, "portssm_event_record", "ev", ev);
    if (s != PORTSSM_OK)
        return s;
    s = ctx->be->event_record(&ctx->b, ev->handle);
    if (s == PORTSSM_OK)
        ev->recorded = 1;
    return pssm_backend_result(ctx, "portssm_event_record", s);
}

PORTSSM_API portssm_status portssm_event_elapsed_ms(portssm_context *ctx, portssm_event *start,
                                                    portssm_event *end, float *ms)
{
    static const char fn[] = "portssm_event_elapsed_ms";
    PSSM_ENTER(ctx, fn);
    if (!ms)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT, "%s: 'ms' is NULL", fn);
    portssm_status s = check_event(ctx, fn, "start", start);
    if (s == PORTSSM_OK)
        s = check_event(ctx, fn, "end", end);
    if (s != PORTSSM_OK)
        return s;
    if (!start->recorded || !end->recorded)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "%s: '%s' was never recorded (call portssm_event_record first)", fn,
                         start->recorded ? "end" : "start");
    float elapsed = 0.0f; /* *ms is written only on success */
    s = ctx->be->event_elapsed_ms(&ctx->b, start->handle, end->handle, &elapsed);
    if (s == PORTSSM_OK && !isfinite(elapsed))
        return pssm_fail(&ctx->b, PORTSSM_ERR_INTERNAL,
                         "%s: the %s backend measured a non-finite time", fn, ctx->be->name);
    s = pssm_backend_result(ctx, fn, s);
    if (s == PORTSSM_OK)
        *ms = elapsed;
    return s;
}

/* ---------------------------------------------------------------- self-test */

PORTSSM_API portssm_status portssm_device_selftest(portssm_context *ctx)
{
    PSSM_ENTER(ctx, "portssm_device_selftest");
    if (!ctx->be->selftest)
        return pssm_fail(&ctx->b, PORTSSM_ERR_UNSUPPORTED,
                         "portssm_device_selftest: the %s backend runs no kernels",
                         ctx->be->name);
    return pssm_backend_result(ctx, "portssm_device_selftest", ctx->be->selftest(&ctx->b, 0));
}
