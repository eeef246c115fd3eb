/* validate_conv1d.c - arguments of causal_conv1d_fwd and causal_conv1d_bwd. */
#include "validate.h"

/* The inputs both directions share; returns the index of 'weight'. */
static int conv_inputs(pssm_validator *v, const portssm_tensor *x, const portssm_tensor *weight,
                       const portssm_tensor *bias, const portssm_tensor *seq_idx,
                       const portssm_tensor *initial_states)
{
    pssm_add(v, "x", x, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    int w = pssm_add(v, "weight", weight, PSSM_IN, PSSM_REQUIRED, PSSM_DT_PARAM, "DW");
    pssm_add_like(v, "bias", bias, PSSM_IN, PSSM_OPTIONAL, w, "D");
    pssm_add(v, "seq_idx", seq_idx, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_I32, "BL");
    pssm_add(v, "initial_states", initial_states, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, "BDw");
    return w;
}

/* The work of a conv over every token: B*D*L*W multiply-adds. */
static portssm_status check_conv_work(pssm_validator *v)
{
    const int64_t work = pssm_size_mul(
        pssm_size_mul(pssm_work_dim(v, 'B'), pssm_work_dim(v, 'D')),
        pssm_size_mul(pssm_work_dim(v, 'L'), pssm_work_dim(v, 'W')));
    return pssm_check_work(v, work, "B*D*L*W", "BDLW");
}

portssm_status pssm_fix_conv_width(pssm_validator *v, const portssm_tensor *weight)
{
    int64_t W = weight->shape[1];
    for (int i = 0; i < v->n && W < 2; i++) {
        const pssm_arg *a = &v->args[i];
        for (const char *d = a->dims; *d; d++)
            if (*d == 'w' && pssm_present(a->t))
                return pssm_invalid(v, "'%s' holds W-1 columns and needs W >= 2, but W = %lld "
                                       "(from 'weight')",
                                    a->name, (long long)W);
    }
    pssm_fix(v, 'W', W, "weight");
    pssm_fix(v, 'w', W - 1, "weight");
    return PORTSSM_OK;
}

portssm_status pssm_validate_causal_conv1d_fwd(pssm_bctx *c,
                                               const portssm_causal_conv1d_fwd_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "causal_conv1d_fwd");
    conv_inputs(&v, &a->x, &a->weight, &a->bias, &a->seq_idx, &a->initial_states);
    pssm_add(&v, "final_states", &a->final_states, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_ACT, "BDw");
    pssm_add(&v, "out", &a->out, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");

    PSSM_TRY(pssm_check_activation(&v, a->activation));
    PSSM_TRY(pssm_check_tensors(&v));
    PSSM_TRY(pssm_fix_conv_width(&v, &a->weight));
    PSSM_TRY(pssm_check_shapes(&v));
    PSSM_TRY(check_conv_work(&v));
    return pssm_check_overlaps(&v);
}

portssm_status pssm_validate_causal_conv1d_bwd(pssm_bctx *c,
                                               const portssm_causal_conv1d_bwd_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "causal_conv1d_bwd");
    int w = conv_inputs(&v, &a->x, &a->weight, &a->bias, &a->seq_idx, &a->initial_states);
    pssm_add(&v, "dout", &a->dout, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    pssm_add(&v, "dfinal_states", &a->dfinal_states, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, "BDw");
    pssm_add(&v, "dx", &a->dx, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    pssm_add_like(&v, "dweight", &a->dweight, PSSM_OUT, PSSM_REQUIRED, w, "DW");
    pssm_add_like(&v, "dbias", &a->dbias, PSSM_OUT, PSSM_OPTIONAL, w, "D");
    pssm_add(&v, "dinitial_states", &a->dinitial_states, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_ACT,
             "BDw");

    PSSM_TRY(pssm_check_activation(&v, a->activation));
    PSSM_TRY(pssm_check_tensors(&v));
    PSSM_TRY(pssm_check_needs(&v, "dbias", &a->dbias, "bias", &a->bias, NULL));
    PSSM_TRY(pssm_fix_conv_width(&v, &a->weight));
    PSSM_TRY(pssm_check_shapes(&v));
    PSSM_TRY(check_conv_work(&v));
    PSSM_TRY(pssm_check_overlaps(&v));
    return pssm_check_workspace(&v, &a->workspace);
}
