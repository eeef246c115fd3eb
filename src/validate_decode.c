/* validate_decode.c - arguments of the one-step ops: causal_conv1d_update and
 * selective_state_update. */
#include "validate.h"

/* Rows of a state pool: B' with indices, else the batch. */
static int64_t pool_rows(const pssm_validator *v)
{
    return pssm_dim(v, 'b') >= 0 ? pssm_dim(v, 'b') : pssm_work_dim(v, 'B');
}

portssm_status pssm_validate_causal_conv1d_update(pssm_bctx *c,
                                                  const portssm_causal_conv1d_update_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "causal_conv1d_update");
    const char *xdims = pssm_present(&a->x) && a->x.ndim == 3 ? "BDT" : "BD";
    /* without indices, row b of the state belongs to sequence b */
    const char *sdims = pssm_present(&a->conv_state_indices) ? "bDS" : "BDS";
    int x = pssm_add(&v, "x", &a->x, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, xdims);
    v.args[x].forms = "2 dims (B,D) or 3 dims (B,D,T)";
    pssm_add(&v, "conv_state", &a->conv_state, PSSM_INOUT, PSSM_REQUIRED, PSSM_DT_ACT, sdims);
    int w = pssm_add(&v, "weight", &a->weight, PSSM_IN, PSSM_REQUIRED, PSSM_DT_PARAM, "DW");
    pssm_add_like(&v, "bias", &a->bias, PSSM_IN, PSSM_OPTIONAL, w, "D");
    pssm_add(&v, "cache_seqlens", &a->cache_seqlens, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_I32, "B");
    pssm_add(&v, "conv_state_indices", &a->conv_state_indices, PSSM_IN, PSSM_OPTIONAL,
             PSSM_DT_I32, "B");
    pssm_add(&v, "out", &a->out, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, xdims);

    PSSM_TRY(pssm_check_activation(&v, a->activation));
    PSSM_TRY(pssm_check_tensors(&v));
    PSSM_TRY(pssm_fix_conv_width(&v, &a->weight));
    PSSM_TRY(pssm_check_shapes(&v));
    int64_t S = pssm_dim(&v, 'S'), W = pssm_dim(&v, 'W');
    if (S < W - 1)
        return pssm_invalid(&v, "'conv_state' shape[2] (S) must be >= %lld (W-1, from 'weight'), "
                                "got %lld",
                            (long long)(W - 1), (long long)S);
    /* B*D*T*W multiply-adds, and the pool's B'*D*S entries (a ring buffer is read whole) */
    const int64_t D = pssm_work_dim(&v, 'D');
    const int64_t work = pssm_size_add(
        pssm_size_mul(pssm_size_mul(pssm_work_dim(&v, 'B'), D),
                      pssm_size_mul(pssm_work_dim(&v, 'T'), W)),
        pssm_size_mul(pool_rows(&v), pssm_size_mul(D, S)));
    PSSM_TRY(pssm_check_work(&v, work, "B*D*T*W + B'*D*S", "BDTWbS"));
    return pssm_check_overlaps(&v);
}

portssm_status pssm_validate_selective_state_update(
    pssm_bctx *c, const portssm_selective_state_update_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "selective_state_update");
    int heads = pssm_present(&a->state) && a->state.ndim == 4;
    int indexed = pssm_present(&a->state_batch_indices);
    const char *sdims = heads ? (indexed ? "bHPN" : "BHPN") : (indexed ? "bDN" : "BDN");
    const char *xdims = heads ? "BHP" : "BD";    /* x, dt, z, out */
    const char *pdims = heads ? "HP" : "D";      /* D, dt_bias */
    const char *bdims = heads ? "BGN" : "BN";    /* B, C */

    /* the state's dtype is its own (f32, f16 or bf16), not the activations' */
    int s = pssm_add(&v, "state", &a->state, PSSM_INOUT, PSSM_REQUIRED, PSSM_DT_FLOAT, sdims);
    v.args[s].forms = "3 dims (B',D,N) or 4 dims (B',H,P,N) with heads";
    pssm_add(&v, "x", &a->x, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, xdims);
    pssm_add(&v, "dt", &a->dt, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, xdims);
    pssm_add(&v, "A", &a->A, PSSM_IN, PSSM_REQUIRED, PSSM_DT_F32, heads ? "HPN" : "DN");
    pssm_add(&v, "B", &a->B, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, bdims);
    pssm_add(&v, "C", &a->C, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, bdims);
    pssm_add(&v, "D", &a->D, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, pdims);
    pssm_add(&v, "z", &a->z, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, xdims);
    pssm_add(&v, "dt_bias", &a->dt_bias, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, pdims);
    pssm_add(&v, "state_batch_indices", &a->state_batch_indices, PSSM_IN, PSSM_OPTIONAL,
             PSSM_DT_I32, "B");
    pssm_add(&v, "out", &a->out, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, xdims);

    PSSM_TRY(pssm_check_tensors(&v));
    PSSM_TRY(pssm_check_shapes(&v));
    if (heads)
        PSSM_TRY(pssm_check_divides(&v, 'G', 'H'));
    /* the state updates of the batch and the pool's rows (D, or H and P: the other form's
     * symbols count 1) */
    const int64_t per_row = pssm_size_mul(
        pssm_size_mul(pssm_work_dim(&v, 'D'), pssm_work_dim(&v, 'H')),
        pssm_size_mul(pssm_work_dim(&v, 'P'), pssm_work_dim(&v, 'N')));
    const int64_t work =
        pssm_size_mul(pssm_size_add(pssm_work_dim(&v, 'B'), pool_rows(&v)), per_row);
    PSSM_TRY(pssm_check_work(&v, work, heads ? "(B + B')*H*P*N" : "(B + B')*D*N",
                             heads ? "BbHPN" : "BbDN"));
    return pssm_check_overlaps(&v);
}
