/*
 * cpu_ssd.c - the Mamba-2 SSD ops of the cpu backend: inputs read into doubles, ref_ssd.c,
 * outputs written at the end (so a failure writes nothing).  Host memory lets this backend also
 * check cu_seqlens' values, which the GPU backends cannot read without waiting for the device.
 */
#include "cpu_io.h"
#include "cpu_ops.h"
#include "ref.h"

typedef struct ssd_inputs {
    const portssm_tensor *x, *dt, *A, *B, *C, *D, *z, *dt_bias, *init, *seq_idx, *cu;
    int32_t softplus, limit;
    float dt_min, dt_max;
} ssd_inputs;
/* The inputs of either op's args (the bwd's args name them as the fwd's do). */
#define SSD_INPUTS_OF(a)                                                                      \
    {&(a)->x, &(a)->dt, &(a)->A, &(a)->B, &(a)->C, &(a)->D, &(a)->z, &(a)->dt_bias,            \
     &(a)->initial_states, &(a)->seq_idx, &(a)->cu_seqlens, (a)->dt_softplus, (a)->dt_limit,  \
     (a)->dt_min, (a)->dt_max}

static void load(pssm_cpu_scratch *s, const ssd_inputs *in, pssm_ref_ssd *p)
{
    p->B = in->x->shape[0];
    p->L = in->x->shape[1];
    p->H = in->x->shape[2];
    p->P = in->x->shape[3];
    p->G = in->B->shape[2];
    p->N = in->B->shape[3];
    p->x = pssm_cpu_load(s, in->x);
    p->dt = pssm_cpu_load(s, in->dt);
    p->A = pssm_cpu_load(s, in->A);
    p->Bm = pssm_cpu_load(s, in->B);
    p->Cm = pssm_cpu_load(s, in->C);
    p->Dv = pssm_cpu_load(s, in->D);
    p->D_per_head = in->D->data && in->D->ndim == 1;
    p->z = pssm_cpu_load(s, in->z);
    p->dt_bias = pssm_cpu_load(s, in->dt_bias);
    p->initial_states = pssm_cpu_load(s, in->init);
    p->seq_idx = pssm_cpu_load_i32(s, in->seq_idx);
    p->cu_seqlens = pssm_cpu_load_i32(s, in->cu);
    p->nseq = in->cu->data ? in->cu->shape[0] - 1 : 0;
    p->softplus = in->softplus != 0;
    p->limit = in->limit != 0;
    p->dt_min = in->dt_min;
    p->dt_max = in->dt_max;
}

/* cu_seqlens must run from 0 to L without going down. */
static portssm_status check_offsets(pssm_bctx *c, const char *op, const pssm_ref_ssd *p)
{
    if (!p->cu_seqlens)
        return PORTSSM_OK;
    for (int64_t k = 0; k <= p->nseq; k++) {
        const int32_t v = p->cu_seqlens[k], want_first = 0;
        const int bad = (k == 0 && v != want_first) || (k == p->nseq && v != p->L) ||
                        (k > 0 && v < p->cu_seqlens[k - 1]);
        if (bad)
            return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT,
                             "%s: 'cu_seqlens' must run from 0 to L = %lld without decreasing; "
                             "cu_seqlens[%lld] = %d",
                             op, (long long)p->L, (long long)k, (int)v);
    }
    return PORTSSM_OK;
}

portssm_status pssm_cpu_ssd_chunk_scan_fwd(pssm_bctx *c, const portssm_ssd_chunk_scan_fwd_args *a)
{
    pssm_cpu_scratch s = {0};
    const ssd_inputs in = SSD_INPUTS_OF(a);
    pssm_ref_ssd p;
    load(&s, &in, &p);
    double *out = pssm_cpu_out(&s, &a->out);
    double *fin = pssm_cpu_out(&s, &a->final_states);
    double *var = pssm_cpu_out(&s, &a->varlen_states);
    double *work = pssm_cpu_alloc(&s, pssm_ref_ssd_work(&p), sizeof(double)); /* -1 fails */
    if (s.failed)
        return pssm_cpu_oom(c, &s, "ssd_chunk_scan_fwd");
    portssm_status st = check_offsets(c, "ssd_chunk_scan_fwd", &p);
    if (st != PORTSSM_OK) {
        pssm_cpu_release(&s);
        return st;
    }
    pssm_ref_ssd_fwd(&p, out, fin, var, work);
    pssm_cpu_store(&a->out, out);
    pssm_cpu_store(&a->final_states, fin);
    pssm_cpu_store(&a->varlen_states, var);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

portssm_status pssm_cpu_ssd_chunk_scan_bwd(pssm_bctx *c, const portssm_ssd_chunk_scan_bwd_args *a)
{
    pssm_cpu_scratch s = {0};
    const ssd_inputs in = SSD_INPUTS_OF(a);
    pssm_ref_ssd p;
    load(&s, &in, &p);
    const double *dout = pssm_cpu_load(&s, &a->dout);
    const double *dfinal = pssm_cpu_load(&s, &a->dfinal_states);
    pssm_ref_ssd_grads g;
    g.dx = pssm_cpu_out(&s, &a->dx);
    g.ddt = pssm_cpu_out(&s, &a->ddt);
    g.dA = pssm_cpu_out(&s, &a->dA);
    g.dB = pssm_cpu_out(&s, &a->dB);
    g.dC = pssm_cpu_out(&s, &a->dC);
    g.dD = pssm_cpu_out(&s, &a->dD);
    g.dz = pssm_cpu_out(&s, &a->dz);
    g.ddt_bias = pssm_cpu_out(&s, &a->ddt_bias);
    g.dinitial_states = pssm_cpu_out(&s, &a->dinitial_states);
    double *work = pssm_cpu_alloc(&s, pssm_ref_ssd_work(&p), sizeof(double));
    if (s.failed)
        return pssm_cpu_oom(c, &s, "ssd_chunk_scan_bwd");
    portssm_status st = check_offsets(c, "ssd_chunk_scan_bwd", &p);
    if (st != PORTSSM_OK) {
        pssm_cpu_release(&s);
        return st;
    }
    pssm_ref_ssd_bwd(&p, dout, dfinal, &g, work);
    const portssm_tensor *outs[9] = {&a->dx, &a->ddt, &a->dA, &a->dB, &a->dC,
                                     &a->dD, &a->dz, &a->ddt_bias, &a->dinitial_states};
    double *vals[9] = {g.dx, g.ddt, g.dA, g.dB, g.dC, g.dD, g.dz, g.ddt_bias, g.dinitial_states};
    for (int i = 0; i < 9; i++)
        pssm_cpu_store(outs[i], vals[i]);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}
