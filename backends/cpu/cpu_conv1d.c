/*
 * cpu_conv1d.c - the conv1d ops of the cpu backend: every input read into doubles, ref_conv1d.c
 * or ref_update.c, outputs written at the end (so a failed allocation writes nothing).
 */
#include "cpu_io.h"
#include "cpu_ops.h"
#include "ref.h"

/* The fields the forward and the backward share. */
static void conv_params(pssm_cpu_scratch *s, const portssm_tensor *x, const portssm_tensor *weight,
                        const portssm_tensor *bias, const portssm_tensor *seq_idx,
                        const portssm_tensor *initial_states, portssm_activation act,
                        pssm_ref_conv1d *p)
{
    p->B = x->shape[0];
    p->D = x->shape[1];
    p->L = x->shape[2];
    p->W = weight->shape[1];
    p->x = pssm_cpu_load(s, x);
    p->weight = pssm_cpu_load(s, weight);
    p->bias = pssm_cpu_load(s, bias);
    p->seq_idx = pssm_cpu_load_i32(s, seq_idx);
    p->initial_states = pssm_cpu_load(s, initial_states);
    p->silu = act == PORTSSM_ACTIVATION_SILU;
}

portssm_status pssm_cpu_causal_conv1d_fwd(pssm_bctx *c, const portssm_causal_conv1d_fwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_conv1d p;
    conv_params(&s, &a->x, &a->weight, &a->bias, &a->seq_idx, &a->initial_states, a->activation,
                &p);
    double *out = pssm_cpu_out(&s, &a->out);
    double *final_states = pssm_cpu_out(&s, &a->final_states);
    if (s.failed)
        return pssm_cpu_oom(c, &s, "causal_conv1d_fwd");
    pssm_ref_conv1d_fwd(&p, out, final_states);
    pssm_cpu_store(&a->out, out);
    pssm_cpu_store(&a->final_states, final_states);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

portssm_status pssm_cpu_causal_conv1d_bwd(pssm_bctx *c, const portssm_causal_conv1d_bwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_conv1d p;
    conv_params(&s, &a->x, &a->weight, &a->bias, &a->seq_idx, &a->initial_states, a->activation,
                &p);
    const double *dout = pssm_cpu_load(&s, &a->dout);
    const double *dfinal = pssm_cpu_load(&s, &a->dfinal_states);
    double *dx = pssm_cpu_out(&s, &a->dx), *dweight = pssm_cpu_out(&s, &a->dweight);
    double *dbias = pssm_cpu_out(&s, &a->dbias);
    double *dinit = pssm_cpu_out(&s, &a->dinitial_states);
    double *work = pssm_cpu_alloc(&s, p.L, sizeof(double));
    if (s.failed)
        return pssm_cpu_oom(c, &s, "causal_conv1d_bwd");
    pssm_ref_conv1d_bwd(&p, dout, dfinal, dx, dweight, dbias, dinit, work);
    pssm_cpu_store(&a->dx, dx);
    pssm_cpu_store(&a->dweight, dweight);
    pssm_cpu_store(&a->dbias, dbias);
    pssm_cpu_store(&a->dinitial_states, dinit);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

portssm_status pssm_cpu_causal_conv1d_update(pssm_bctx *c,
                                             const portssm_causal_conv1d_update_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_conv1d_update p;
    p.B = a->x.shape[0];
    p.D = a->x.shape[1];
    p.T = a->x.ndim == 3 ? a->x.shape[2] : 1; /* (B,D) is (B,D,1) in row-major order */
    p.W = a->weight.shape[1];
    p.Bp = a->conv_state.shape[0];
    p.S = a->conv_state.shape[2];
    p.x = pssm_cpu_load(&s, &a->x);
    p.weight = pssm_cpu_load(&s, &a->weight);
    p.bias = pssm_cpu_load(&s, &a->bias);
    p.cache_seqlens = pssm_cpu_load_i32(&s, &a->cache_seqlens);
    p.state_indices = pssm_cpu_load_i32(&s, &a->conv_state_indices);
    p.silu = a->activation == PORTSSM_ACTIVATION_SILU;
    double *state = pssm_cpu_load(&s, &a->conv_state);
    double *out = pssm_cpu_out(&s, &a->out);
    unsigned char *used = pssm_cpu_rows_used(&s, p.state_indices, p.B, p.Bp);
    if (s.failed)
        return pssm_cpu_oom(c, &s, "causal_conv1d_update");
    pssm_ref_conv1d_update_run(&p, state, out);
    pssm_cpu_store(&a->out, out);
    pssm_cpu_store_rows(&a->conv_state, state, used); /* other rows stay untouched, bit for bit */
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}
