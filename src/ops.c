/*
 * ops.c - the public ops.  Each one validates every argument, then runs the backend's entry; a
 * backend without the entry makes the op PORTSSM_ERR_UNSUPPORTED (never a fall-back).  Ops that
 * take a workspace get one here: the caller's, checked against the backend's need, or the
 * context's own (workspace.c).
 */
#include "core.h"
#include "empty_call.h"
#include "validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * PORTSSM_CPU_WORK_LIMIT: the most logical work (validation's figure, ctx->b.work: state updates
 * of a scan, multiply-adds of a conv, per op in src/validate_*.c) one call may take on a backend
 * that computes on this machine's CPU (cpu, sim).  Broadcast inputs make huge logical shapes
 * free in memory, so work, not memory, is what bounds such a call's time: a fuzzer or a service
 * that passes callers' shapes sets this.  Unset or empty: no limit.  Read at every call, like
 * PORTSSM_CPU_SCRATCH_LIMIT.  GPU backends ignore it.
 */
static portssm_status check_host_work(portssm_context *ctx, const char *op)
{
    if (!ctx->be->runs_on_host)
        return PORTSSM_OK;
    const char *e = getenv("PORTSSM_CPU_WORK_LIMIT");
    if (!e || !*e)
        return PORTSSM_OK;
    char *end;
    const double limit = strtod(e, &end);
    if (*end || !(limit >= 0) || isinf(limit))
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "%s: PORTSSM_CPU_WORK_LIMIT = '%s' is not a number of elements >= 0 "
                         "(e.g. 1e9)",
                         op, e);
    if ((double)ctx->b.work <= limit)
        return PORTSSM_OK;
    return pssm_fail(&ctx->b, PORTSSM_ERR_UNSUPPORTED,
                     "%s (%s): the call's work, %s = %lld, is over PORTSSM_CPU_WORK_LIMIT = "
                     "%.0f (the %s backend computes on this machine's CPU); nothing was written",
                     op, ctx->be->name, ctx->b.work_formula, (long long)ctx->b.work, limit,
                     ctx->be->name);
}

/* The entry checks of every op and query: a context, an args pointer. */
#define PSSM_OP_ENTER(fn, a)                                                                    \
    PSSM_ENTER(ctx, fn);                                                                        \
    if (!(a))                                                                                   \
    return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT, fn ": 'args' is NULL")
/* ... and valid arguments. */
#define PSSM_OP_VALIDATE(op, a)                                                                 \
    do {                                                                                        \
        portssm_status pssm_valid_ = pssm_validate_##op(&ctx->b, (a));                          \
        if (pssm_valid_ != PORTSSM_OK)                                                          \
            return pssm_valid_;                                                                 \
    } while (0)
/* ... and, where the backend computes on this machine's CPU, work within the caller's limit. */
#define PSSM_OP_PROLOGUE(op, fn, a)                                                             \
    PSSM_OP_ENTER(fn, a);                                                                       \
    PSSM_OP_VALIDATE(op, a);                                                                    \
    do {                                                                                        \
        portssm_status pssm_work_ = check_host_work(ctx, fn);                                   \
        if (pssm_work_ != PORTSSM_OK)                                                           \
            return pssm_work_;                                                                  \
    } while (0)

#define PSSM_OP_UNSUPPORTED(op)                                                                 \
    pssm_fail(&ctx->b, PORTSSM_ERR_UNSUPPORTED, #op " is not implemented by the %s backend",   \
              ctx->be->name)

/* Defines portssm_<op>(ctx, args) for an op of the backend table that needs no scratch. */
#define PSSM_DEFINE_OP(op)                                                                      \
    PORTSSM_API portssm_status portssm_##op(portssm_context *ctx, const portssm_##op##_args *a) \
    {                                                                                           \
        PSSM_OP_PROLOGUE(op, #op, a);                                                           \
        if (!ctx->be->op)                                                                       \
            return PSSM_OP_UNSUPPORTED(op);                                                     \
        if (ctx->b.empty)                                                                       \
            return pssm_backend_result(ctx, #op, pssm_empty_##op(ctx, a));                      \
        return pssm_backend_result(ctx, #op, ctx->be->op(&ctx->b, a));                          \
    }

/* Bytes of workspace the backend wants for validated args (0 when it names no need, or for an
 * empty call, which the core answers without the backend). */
#define PSSM_WORKSPACE_NEED(op, a, need)                                                        \
    do {                                                                                        \
        *(need) = 0;                                                                            \
        if (ctx->be->op && ctx->be->op##_workspace && !ctx->b.empty) {                          \
            portssm_status pssm_need_ = ctx->be->op##_workspace(&ctx->b, (a), (need));          \
            if (pssm_need_ != PORTSSM_OK)                                                       \
                return pssm_backend_result(ctx, #op, pssm_need_);                               \
        }                                                                                       \
    } while (0)

/* portssm_<op>(ctx, args) and portssm_<op>_workspace_size() for an op that takes a workspace. */
#define PSSM_DEFINE_OP_WS(op)                                                                   \
    PORTSSM_API portssm_status portssm_##op(portssm_context *ctx, const portssm_##op##_args *a) \
    {                                                                                           \
        PSSM_OP_PROLOGUE(op, #op, a);                                                           \
        if (!ctx->be->op)                                                                       \
            return PSSM_OP_UNSUPPORTED(op);                                                     \
        if (ctx->b.empty) /* (needs no workspace) */                                            \
            return pssm_backend_result(ctx, #op, pssm_empty_##op(ctx, a));                      \
        size_t need;                                                                            \
        PSSM_WORKSPACE_NEED(op, a, &need);                                                      \
        portssm_##op##_args run = *a;                                                           \
        if (a->workspace.data) {                                                                \
            if (a->workspace.bytes < need)                                                      \
                return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,                         \
                                 #op ": 'workspace' holds %zu bytes, these arguments need %zu " \
                                     "on the %s backend (portssm_" #op "_workspace_size)",      \
                                 a->workspace.bytes, need, ctx->be->name);                      \
        } else if (need > 0) {                                                                  \
            portssm_status pssm_ws_ = pssm_context_workspace(ctx, #op, need, &run.workspace);   \
            if (pssm_ws_ != PORTSSM_OK)                                                         \
                return pssm_ws_;                                                                \
        }                                                                                       \
        return pssm_backend_result(ctx, #op, ctx->be->op(&ctx->b, &run));                       \
    }                                                                                           \
    PORTSSM_API portssm_status portssm_##op##_workspace_size(                                   \
        portssm_context *ctx, const portssm_##op##_args *a, size_t *bytes)                      \
    {                                                                                           \
        PSSM_OP_ENTER("portssm_" #op "_workspace_size", a);                                     \
        if (!bytes)                                                                             \
            return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,                             \
                             "portssm_" #op "_workspace_size: 'bytes' is NULL");                \
        portssm_##op##_args q = *a;                                                             \
        memset(&q.workspace, 0, sizeof q.workspace); /* the query ignores it */                 \
        PSSM_OP_VALIDATE(op, &q);                                                               \
        size_t need;                                                                            \
        PSSM_WORKSPACE_NEED(op, &q, &need);                                                     \
        *bytes = need;                                                                          \
        return PORTSSM_OK;                                                                      \
    }

PSSM_DEFINE_OP(causal_conv1d_fwd)
PSSM_DEFINE_OP_WS(causal_conv1d_bwd)
PSSM_DEFINE_OP(causal_conv1d_update)
PSSM_DEFINE_OP(selective_scan_fwd)
PSSM_DEFINE_OP_WS(selective_scan_bwd)
PSSM_DEFINE_OP(selective_state_update)
PSSM_DEFINE_OP_WS(ssd_chunk_scan_fwd)
PSSM_DEFINE_OP_WS(ssd_chunk_scan_bwd)
PSSM_DEFINE_OP(norm_fwd)
PSSM_DEFINE_OP_WS(norm_bwd)

PORTSSM_API portssm_status portssm_selective_scan_checkpoint_shape(
    portssm_context *ctx, const portssm_selective_scan_fwd_args *a, int64_t shape[4])
{
    PSSM_OP_ENTER("portssm_selective_scan_checkpoint_shape", a);
    if (!shape)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_selective_scan_checkpoint_shape: 'shape' is NULL");
    portssm_selective_scan_fwd_args q = *a;
    memset(&q.checkpoints, 0, sizeof q.checkpoints); /* the query ignores it */
    PSSM_OP_VALIDATE(selective_scan_fwd, &q);
    shape[0] = q.u.shape[0];
    shape[1] = q.u.shape[1];
    shape[2] = pssm_scan_checkpoints(q.u.shape[2]);
    shape[3] = q.A.shape[1];
    return PORTSSM_OK;
}

PORTSSM_API portssm_status portssm_ssd_chunk_scan_checkpoint_shape(
    portssm_context *ctx, const portssm_ssd_chunk_scan_fwd_args *a, int64_t shape[4])
{
    PSSM_OP_ENTER("portssm_ssd_chunk_scan_checkpoint_shape", a);
    if (!shape)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_ssd_chunk_scan_checkpoint_shape: 'shape' is NULL");
    portssm_ssd_chunk_scan_fwd_args q = *a;
    memset(&q.checkpoints, 0, sizeof q.checkpoints); /* the query ignores it */
    PSSM_OP_VALIDATE(ssd_chunk_scan_fwd, &q);
    const int64_t T = pssm_ssd_chunk(q.chunk_size, q.x.dtype);
    /* (validation bounds the work, which P*N is part of) */
    shape[0] = q.x.shape[0];
    shape[1] = q.x.shape[2];
    shape[2] = pssm_ssd_checkpoints(q.x.shape[1], T);
    shape[3] = q.x.shape[3] * q.B.shape[3];
    return PORTSSM_OK;
}
