/*
 * ops.c - the public ops.  Each one validates every argument, then runs the backend's entry; a
 * backend without the entry makes the op PORTSSM_ERR_UNSUPPORTED (never a fall-back).
 */
#include "core.h"
#include "validate.h"

/* Defines portssm_<op>(ctx, args) for one op of the backend table. */
#define PSSM_DEFINE_OP(op)                                                                      \
    PORTSSM_API portssm_status portssm_##op(portssm_context *ctx, const portssm_##op##_args *a) \
    {                                                                                           \
        PSSM_ENTER(ctx, #op);                                                                   \
        if (!a)                                                                                 \
            return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT, #op ": 'args' is NULL");    \
        portssm_status s = pssm_validate_##op(&ctx->b, a);                                      \
        if (s != PORTSSM_OK)                                                                    \
            return s;                                                                           \
        if (!ctx->be->op)                                                                       \
            return pssm_fail(&ctx->b, PORTSSM_ERR_UNSUPPORTED,                                  \
                             #op " is not implemented by the %s backend", ctx->be->name);       \
        return pssm_backend_result(ctx, #op, ctx->be->op(&ctx->b, a));                          \
    }

PSSM_DEFINE_OP(causal_conv1d_fwd)
PSSM_DEFINE_OP(causal_conv1d_bwd)
PSSM_DEFINE_OP(causal_conv1d_update)
PSSM_DEFINE_OP(selective_scan_fwd)
PSSM_DEFINE_OP(selective_scan_bwd)
PSSM_DEFINE_OP(selective_state_update)
