/* context.c - lifetime and accessors of a context, its last error, stream and synchronization. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PORTSSM_API portssm_status portssm_create(portssm_context **out, portssm_backend backend,
                                          int32_t device)
{
    pssm_thread_clear();
    if (!out)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT, "portssm_create: 'ctx' is NULL");
    *out = NULL;
    pssm_selection sel;
    portssm_status s = pssm_select(backend, device, &sel);
    if (s != PORTSSM_OK)
        return s;
    portssm_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return pssm_thread_fail(PORTSSM_ERR_OUT_OF_MEMORY,
                                "portssm_create: out of host memory for the context");
    ctx->be = sel.table;
    ctx->kind = sel.kind;
    ctx->b.device = sel.device;
    memcpy(ctx->report, sel.report, sizeof ctx->report);
    s = ctx->be->open(&ctx->b, sel.device);
    if (s != PORTSSM_OK) {
        pssm_thread_fail(s, "portssm_create: opening %s device %d failed: %s",
                         portssm_backend_name(sel.kind), (int)sel.device,
                         ctx->b.error[0] ? ctx->b.error : portssm_status_string(s));
        free(ctx);
        return s;
    }
    ctx->b.error[0] = '\0';
    *out = ctx;
    return PORTSSM_OK;
}

PORTSSM_API void portssm_destroy(portssm_context *ctx)
{
    if (!ctx)
        return;
    ctx->be->synchronize(&ctx->b); /* nothing to report it to: close must happen regardless */
    pssm_context_workspace_release(ctx);
    ctx->be->close(&ctx->b);
    free(ctx);
}

PORTSSM_API portssm_backend portssm_get_backend(const portssm_context *ctx)
{
    return ctx ? ctx->kind : PORTSSM_BACKEND_AUTO;
}

PORTSSM_API int32_t portssm_get_device(const portssm_context *ctx)
{
    return ctx ? ctx->b.device : -1;
}

PORTSSM_API portssm_status portssm_get_device_info(const portssm_context *ctx,
                                                   portssm_device_info *info)
{
    if (!ctx)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_get_device_info: 'ctx' is NULL");
    portssm_context *c = (portssm_context *)ctx; /* only its message changes */
    c->b.error[0] = '\0';
    if (!info)
        return pssm_fail(&c->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_get_device_info: 'info' is NULL");
    portssm_device_info got; /* *info is written only on success */
    memset(&got, 0, sizeof got);
    portssm_status s = ctx->be->device_info(ctx->b.device, &got);
    if (s != PORTSSM_OK) {
        if (!c->b.error[0])
            pssm_fail(&c->b, s, "portssm_get_device_info: the %s backend could not describe "
                                "device %d: %s",
                      ctx->be->name, (int)ctx->b.device, portssm_status_string(s));
        return s;
    }
    got.name[sizeof got.name - 1] = '\0';
    got.arch[sizeof got.arch - 1] = '\0';
    *info = got;
    return PORTSSM_OK;
}

PORTSSM_API const char *portssm_selection_report(const portssm_context *ctx)
{
    return ctx ? ctx->report : "no context";
}

PORTSSM_API const char *portssm_last_error(const portssm_context *ctx)
{
    return ctx ? ctx->b.error : pssm_thread_error();
}

PORTSSM_API portssm_status portssm_set_stream(portssm_context *ctx, void *stream)
{
    PSSM_ENTER(ctx, "portssm_set_stream");
    if (!ctx->be->set_stream) {
        if (stream)
            return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                             "portssm_set_stream: the %s backend runs synchronously and has no "
                             "streams: 'stream' must be NULL",
                             ctx->be->name);
        ctx->b.stream = NULL;
        return PORTSSM_OK;
    }
    /* The context's own workspace is ordered on its stream: work queued on the old stream may
     * still use it, and the new stream does not wait for that. */
    if (ctx->workspace && stream != ctx->b.stream) {
        portssm_status w = ctx->be->synchronize(&ctx->b);
        if (w != PORTSSM_OK)
            return pssm_backend_result(ctx, "portssm_set_stream (waiting for the old stream, "
                                            "which may still use the context's workspace)",
                                       w);
    }
    portssm_status s = ctx->be->set_stream(&ctx->b, stream);
    if (s == PORTSSM_OK) {
        ctx->b.stream = stream;
        return PORTSSM_OK;
    }
    /* the backend's words, under the name of the argument it refused */
    char why[PSSM_ERROR_CAPACITY];
    snprintf(why, sizeof why, "%s", ctx->b.error[0] ? ctx->b.error : portssm_status_string(s));
    return pssm_fail(&ctx->b, s, "portssm_set_stream: 'stream' %p refused by the %s backend: %s",
                     stream, ctx->be->name, why);
}

PORTSSM_API void *portssm_get_stream(const portssm_context *ctx)
{
    return ctx ? ctx->b.stream : NULL;
}

PORTSSM_API portssm_status portssm_synchronize(portssm_context *ctx)
{
    PSSM_ENTER(ctx, "portssm_synchronize");
    return pssm_backend_result(ctx, "portssm_synchronize", ctx->be->synchronize(&ctx->b));
}
