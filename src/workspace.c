/*
 * workspace.c - the context's own scratch memory, for ops called without a workspace of the
 * caller's (portssm.h, "scratch memory").  It only grows: after the first call of a shape no op
 * allocates, which is what lets a stream of ops be captured into a graph.
 */
#include "core.h"

/* Growth is rounded up to whole MiB, so that a run of slightly larger shapes does not
 * reallocate at every call. */
#define PSSM_WORKSPACE_GRAIN ((size_t)1 << 20)

void pssm_context_workspace_release(portssm_context *ctx)
{
    if (!ctx->workspace)
        return;
    ctx->be->synchronize(&ctx->b); /* no queued op may still use it */
    ctx->be->mem_free(&ctx->b, ctx->workspace);
    ctx->workspace = NULL;
    ctx->workspace_bytes = 0;
}

portssm_status pssm_context_workspace(portssm_context *ctx, const char *fn, size_t bytes,
                                      portssm_workspace *ws)
{
    if (ctx->workspace_bytes >= bytes) {
        ws->data = ctx->workspace;
        ws->bytes = ctx->workspace_bytes;
        return PORTSSM_OK;
    }
    int capturing = 0;
    if (ctx->be->stream_capturing) {
        portssm_status s = ctx->be->stream_capturing(&ctx->b, &capturing);
        if (s != PORTSSM_OK)
            return pssm_backend_result(ctx, fn, s);
    }
    if (capturing)
        return pssm_fail(&ctx->b, PORTSSM_ERR_UNSUPPORTED,
                         "%s: needs %zu bytes of workspace, the context holds %zu, and it cannot "
                         "allocate while its stream is being captured: run the op once before "
                         "the capture, or pass args.workspace",
                         fn, bytes, ctx->workspace_bytes);
    size_t grown = bytes;
    if (grown <= SIZE_MAX - (PSSM_WORKSPACE_GRAIN - 1))
        grown = (grown + PSSM_WORKSPACE_GRAIN - 1) / PSSM_WORKSPACE_GRAIN * PSSM_WORKSPACE_GRAIN;
    const size_t held = ctx->workspace_bytes;
    pssm_context_workspace_release(ctx);
    void *p = NULL;
    portssm_status s = ctx->be->mem_alloc(&ctx->b, &p, grown);
    if (s != PORTSSM_OK || !p) {
        char why[PSSM_ERROR_CAPACITY];
        snprintf(why, sizeof why, "%s", ctx->b.error[0] ? ctx->b.error : portssm_status_string(s));
        return pssm_fail(&ctx->b, s != PORTSSM_OK ? s : PORTSSM_ERR_OUT_OF_MEMORY,
                         "%s: the context's workspace could not grow from %zu to %zu bytes: %s",
                         fn, held, grown, why);
    }
    ctx->workspace = p;
    ctx->workspace_bytes = grown;
    ws->data = p;
    ws->bytes = grown;
    return PORTSSM_OK;
}
