/* capability.c - which ops a context's backend implements (a NULL entry of its table), so that
 * a binding can refuse early with the op's own message instead of after preparing a call. */
#include "core.h"

PORTSSM_API const char *portssm_op_name(portssm_op op)
{
    switch (op) {
    case PORTSSM_OP_CAUSAL_CONV1D_FWD: return "causal_conv1d_fwd";
    case PORTSSM_OP_CAUSAL_CONV1D_BWD: return "causal_conv1d_bwd";
    case PORTSSM_OP_CAUSAL_CONV1D_UPDATE: return "causal_conv1d_update";
    case PORTSSM_OP_SELECTIVE_SCAN_FWD: return "selective_scan_fwd";
    case PORTSSM_OP_SELECTIVE_SCAN_BWD: return "selective_scan_bwd";
    case PORTSSM_OP_SELECTIVE_STATE_UPDATE: return "selective_state_update";
    case PORTSSM_OP_SSD_CHUNK_SCAN_FWD: return "ssd_chunk_scan_fwd";
    case PORTSSM_OP_SSD_CHUNK_SCAN_BWD: return "ssd_chunk_scan_bwd";
    case PORTSSM_OP_NORM_FWD: return "norm_fwd";
    case PORTSSM_OP_NORM_BWD: return "norm_bwd";
    }
    return NULL;
}

/* The table entry of op: non-zero when the backend implements it. */
static int implements(const pssm_backend *be, portssm_op op)
{
    switch (op) {
    case PORTSSM_OP_CAUSAL_CONV1D_FWD: return be->causal_conv1d_fwd != NULL;
    case PORTSSM_OP_CAUSAL_CONV1D_BWD: return be->causal_conv1d_bwd != NULL;
    case PORTSSM_OP_CAUSAL_CONV1D_UPDATE: return be->causal_conv1d_update != NULL;
    case PORTSSM_OP_SELECTIVE_SCAN_FWD: return be->selective_scan_fwd != NULL;
    case PORTSSM_OP_SELECTIVE_SCAN_BWD: return be->selective_scan_bwd != NULL;
    case PORTSSM_OP_SELECTIVE_STATE_UPDATE: return be->selective_state_update != NULL;
    case PORTSSM_OP_SSD_CHUNK_SCAN_FWD: return be->ssd_chunk_scan_fwd != NULL;
    case PORTSSM_OP_SSD_CHUNK_SCAN_BWD: return be->ssd_chunk_scan_bwd != NULL;
    case PORTSSM_OP_NORM_FWD: return be->norm_fwd != NULL;
    case PORTSSM_OP_NORM_BWD: return be->norm_bwd != NULL;
    }
    return 0;
}

PORTSSM_API portssm_status portssm_op_supported(portssm_context *ctx, portssm_op op)
{
    PSSM_ENTER(ctx, "portssm_op_supported");
    const char *name = portssm_op_name(op);
    if (!name)
        return pssm_fail(&ctx->b, PORTSSM_ERR_INVALID_ARGUMENT,
                         "portssm_op_supported: 'op' must be a portssm_op (0 to %d), got %d",
                         PORTSSM_OP_COUNT - 1, (int)op);
    if (!implements(ctx->be, op)) /* the words of the op itself (ops.c) */
        return pssm_fail(&ctx->b, PORTSSM_ERR_UNSUPPORTED, "%s is not implemented by the %s backend",
                         name, ctx->be->name);
    return PORTSSM_OK;
}
