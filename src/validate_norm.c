/* validate_norm.c - arguments of norm_fwd and norm_bwd (the row norms of portssm.h). */
#include "validate.h"

#include <math.h>

/* kind is a portssm_norm_kind; group_size is 0 or divides H (from 'what'); fixes g, the groups
 * of a row. */
static portssm_status norm_options(pssm_validator *v, portssm_norm_kind kind, int64_t group_size,
                                   const portssm_tensor *x, const char *what)
{
    if (kind != PORTSSM_NORM_LAYER && kind != PORTSSM_NORM_RMS)
        return pssm_invalid(v, "'kind' must be PORTSSM_NORM_LAYER (0) or PORTSSM_NORM_RMS (1), "
                               "got %d",
                            (int)kind);
    const int64_t H = x->shape[1];
    if (group_size < 0 || group_size > H || (group_size > 0 && H % group_size != 0))
        return pssm_invalid(v, "'group_size' must be 0 (one group) or a divisor of H = %lld "
                               "(from '%s'), got %lld",
                            (long long)H, what, (long long)group_size);
    pssm_fix(v, 'g', group_size > 0 ? H / group_size : 1, "H / group_size");
    return PORTSSM_OK;
}

/* The work of a row norm: r*h elements (each read, normalised and written once or twice). */
static portssm_status check_norm_work(pssm_validator *v)
{
    const int64_t work = pssm_size_mul(pssm_work_dim(v, 'r'), pssm_work_dim(v, 'h'));
    return pssm_check_work(v, work, "r*h", "rh");
}

/* mean belongs to LayerNorm: RMSNorm has none (forward: not written; backward: not read). */
static portssm_status norm_mean(pssm_validator *v, portssm_norm_kind kind,
                                const portssm_tensor *mean, int required)
{
    if (kind == PORTSSM_NORM_RMS && pssm_present(mean))
        return pssm_invalid(v, "'mean' is given but 'kind' is PORTSSM_NORM_RMS, which has no "
                               "mean: leave it absent");
    if (kind == PORTSSM_NORM_LAYER && required && !pssm_present(mean))
        return pssm_invalid(v, "'mean' is required for PORTSSM_NORM_LAYER (the forward's mean) "
                               "but absent (data is NULL)");
    return PORTSSM_OK;
}

portssm_status pssm_validate_norm_fwd(pssm_bctx *c, const portssm_norm_fwd_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "norm_fwd");
    pssm_add(&v, "x", &a->x, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "rh");
    pssm_add(&v, "residual", &a->residual, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_PARAM, "rh");
    pssm_add(&v, "z", &a->z, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, "rh");
    int w = pssm_add(&v, "weight", &a->weight, PSSM_IN, PSSM_REQUIRED, PSSM_DT_PARAM, "h");
    pssm_add_like(&v, "bias", &a->bias, PSSM_IN, PSSM_OPTIONAL, w, "h");
    pssm_add(&v, "out", &a->out, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "rh");
    pssm_add(&v, "residual_out", &a->residual_out, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_PARAM, "rh");
    pssm_add(&v, "mean", &a->mean, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32, "rg");
    pssm_add(&v, "rstd", &a->rstd, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32, "rg");

    PSSM_TRY(pssm_check_tensors(&v));
    if (!(a->eps >= 0.0f) || isinf(a->eps))
        return pssm_invalid(&v, "'eps' must be finite and >= 0, got %g", (double)a->eps);
    PSSM_TRY(norm_options(&v, a->kind, a->group_size, &a->x, "x"));
    PSSM_TRY(norm_mean(&v, a->kind, &a->mean, 0));
    PSSM_TRY(pssm_check_shapes(&v));
    PSSM_TRY(check_norm_work(&v));
    return pssm_check_overlaps(&v);
}

portssm_status pssm_validate_norm_bwd(pssm_bctx *c, const portssm_norm_bwd_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "norm_bwd");
    /* dout first: it fixes the activation dtype, which x (F32 or act) is checked against */
    pssm_add(&v, "dout", &a->dout, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "rh");
    pssm_add(&v, "x", &a->x, PSSM_IN, PSSM_REQUIRED, PSSM_DT_PARAM, "rh");
    pssm_add(&v, "z", &a->z, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, "rh");
    int w = pssm_add(&v, "weight", &a->weight, PSSM_IN, PSSM_REQUIRED, PSSM_DT_PARAM, "h");
    pssm_add_like(&v, "bias", &a->bias, PSSM_IN, PSSM_OPTIONAL, w, "h");
    pssm_add(&v, "mean", &a->mean, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, "rg");
    pssm_add(&v, "rstd", &a->rstd, PSSM_IN, PSSM_REQUIRED, PSSM_DT_F32, "rg");
    pssm_add(&v, "dresidual_out", &a->dresidual_out, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_PARAM, "rh");
    pssm_add(&v, "dx", &a->dx, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "rh");
    pssm_add(&v, "dresidual", &a->dresidual, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_PARAM, "rh");
    pssm_add(&v, "dz", &a->dz, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_ACT, "rh");
    pssm_add_like(&v, "dweight", &a->dweight, PSSM_OUT, PSSM_OPTIONAL, w, "h");
    pssm_add_like(&v, "dbias", &a->dbias, PSSM_OUT, PSSM_OPTIONAL, w, "h");
    pssm_add(&v, "out", &a->out, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_ACT, "rh");

    PSSM_TRY(pssm_check_tensors(&v));
    PSSM_TRY(pssm_check_needs(&v, "dz", &a->dz, "z", &a->z, NULL));
    PSSM_TRY(pssm_check_needs(&v, "dbias", &a->dbias, "bias", &a->bias, NULL));
    PSSM_TRY(norm_options(&v, a->kind, a->group_size, &a->dout, "dout"));
    PSSM_TRY(norm_mean(&v, a->kind, &a->mean, 1));
    PSSM_TRY(pssm_check_shapes(&v));
    PSSM_TRY(check_norm_work(&v));
    PSSM_TRY(pssm_check_overlaps(&v));
    return pssm_check_workspace(&v, &a->workspace);
}
