/*
 * cpu_norm.c - the row norms of the cpu backend: ref_norm.c reads the inputs where they lie
 * and writes each output element once.  The backward's only scratch, the summed dweight and
 * dbias, is allocated before anything is written.
 */
#include "cpu_io.h"
#include "cpu_ops.h"
#include "ref.h"

static void norm_params(const portssm_tensor *x, const portssm_tensor *residual,
                        const portssm_tensor *z, const portssm_tensor *weight,
                        const portssm_tensor *bias, portssm_norm_kind kind,
                        int32_t norm_before_gate, int64_t group_size, pssm_ref_norm *p)
{
    p->R = x->shape[0];
    p->H = x->shape[1];
    p->G = group_size > 0 ? p->H / group_size : 1;
    p->x = pssm_cpu_in(x);
    p->residual = pssm_cpu_in(residual);
    p->z = pssm_cpu_in(z);
    p->weight = pssm_cpu_in(weight);
    p->bias = pssm_cpu_in(bias);
    p->rms = kind == PORTSSM_NORM_RMS;
    p->norm_before_gate = norm_before_gate != 0;
    p->eps = 0.0;
}

/* No scratch at all: the forward cannot run out of memory. */
portssm_status pssm_cpu_norm_fwd(pssm_bctx *c, const portssm_norm_fwd_args *a)
{
    (void)c;
    pssm_ref_norm p;
    norm_params(&a->x, &a->residual, &a->z, &a->weight, &a->bias, a->kind, a->norm_before_gate,
                a->group_size, &p);
    p.eps = (double)a->eps;
    const pssm_ref_out out = pssm_cpu_out(&a->out), res = pssm_cpu_out(&a->residual_out);
    const pssm_ref_out mean = pssm_cpu_out(&a->mean), rstd = pssm_cpu_out(&a->rstd);
    pssm_ref_norm_fwd(&p, &out, &res, &mean, &rstd);
    return PORTSSM_OK;
}

portssm_status pssm_cpu_norm_bwd(pssm_bctx *c, const portssm_norm_bwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_norm p;
    const portssm_tensor none = {0};
    norm_params(&a->x, &none, &a->z, &a->weight, &a->bias, a->kind, a->norm_before_gate,
                a->group_size, &p);
    const pssm_ref_in mean = pssm_cpu_in(&a->mean), rstd = pssm_cpu_in(&a->rstd);
    const pssm_ref_in dout = pssm_cpu_in(&a->dout), dres_out = pssm_cpu_in(&a->dresidual_out);
    const pssm_ref_out dx = pssm_cpu_out(&a->dx), dres = pssm_cpu_out(&a->dresidual);
    const pssm_ref_out dz = pssm_cpu_out(&a->dz), out = pssm_cpu_out(&a->out);
    double *dweight = pssm_cpu_sum(&s, &a->dweight), *dbias = pssm_cpu_sum(&s, &a->dbias);
    if (s.failed)
        return pssm_cpu_oom(c, &s, "norm_bwd");
    pssm_ref_norm_bwd(&p, &mean, &rstd, &dout, &dres_out, &dx, &dres, &dz, &out, dweight,
                      dbias);
    pssm_cpu_store(&a->dweight, dweight);
    pssm_cpu_store(&a->dbias, dbias);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}
