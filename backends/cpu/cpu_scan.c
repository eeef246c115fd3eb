/*
 * cpu_scan.c - the scan ops of the cpu backend: every input read into doubles, ref_scan.c or
 * ref_update.c, outputs written at the end (so a failed allocation writes nothing).
 */
#include "cpu_io.h"
#include "cpu_ops.h"
#include "ref.h"

/* The fields the forward and the backward share.  A variable B/C is (B,G,N,L): 4 dims. */
static void scan_params(pssm_cpu_scratch *s, const portssm_tensor *u, const portssm_tensor *delta,
                        const portssm_tensor *A, const portssm_tensor *B, const portssm_tensor *C,
                        const portssm_tensor *D, const portssm_tensor *z,
                        const portssm_tensor *delta_bias, const portssm_tensor *initial_state,
                        int32_t softplus, pssm_ref_scan *p)
{
    p->B = u->shape[0];
    p->D = u->shape[1];
    p->L = u->shape[2];
    p->N = A->shape[1];
    p->GB = B->ndim == 4 ? B->shape[1] : 0;
    p->GC = C->ndim == 4 ? C->shape[1] : 0;
    p->u = pssm_cpu_load(s, u);
    p->delta = pssm_cpu_load(s, delta);
    p->A = pssm_cpu_load(s, A);
    p->Bm = pssm_cpu_load(s, B);
    p->Cm = pssm_cpu_load(s, C);
    p->Dv = pssm_cpu_load(s, D);
    p->z = pssm_cpu_load(s, z);
    p->delta_bias = pssm_cpu_load(s, delta_bias);
    p->initial_state = pssm_cpu_load(s, initial_state);
    p->softplus = softplus != 0;
}

portssm_status pssm_cpu_selective_scan_fwd(pssm_bctx *c, const portssm_selective_scan_fwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_scan p;
    scan_params(&s, &a->u, &a->delta, &a->A, &a->B, &a->C, &a->D, &a->z, &a->delta_bias,
                &a->initial_state, a->delta_softplus, &p);
    double *out = pssm_cpu_out(&s, &a->out);
    double *final_state = pssm_cpu_out(&s, &a->final_state);
    double *checkpoints = pssm_cpu_out(&s, &a->checkpoints);
    double *work = pssm_cpu_alloc(&s, pssm_ref_scan_fwd_work(&p), sizeof(double));
    if (s.failed)
        return pssm_cpu_oom(c, &s, "selective_scan_fwd");
    pssm_ref_scan_fwd(&p, out, final_state, checkpoints, PSSM_SCAN_CHECKPOINT_INTERVAL, work);
    pssm_cpu_store(&a->out, out);
    pssm_cpu_store(&a->final_state, final_state);
    pssm_cpu_store(&a->checkpoints, checkpoints);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

/* The oracle computes the backward from its definition: checkpoints, valid or not, change
 * nothing here (the GPU backends read them). */
portssm_status pssm_cpu_selective_scan_bwd(pssm_bctx *c, const portssm_selective_scan_bwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_scan p;
    scan_params(&s, &a->u, &a->delta, &a->A, &a->B, &a->C, &a->D, &a->z, &a->delta_bias,
                &a->initial_state, a->delta_softplus, &p);
    const double *dout = pssm_cpu_load(&s, &a->dout);
    const double *dfinal = pssm_cpu_load(&s, &a->dfinal_state);
    pssm_ref_scan_grads g;
    g.du = pssm_cpu_out(&s, &a->du);
    g.ddelta = pssm_cpu_out(&s, &a->ddelta);
    g.dA = pssm_cpu_out(&s, &a->dA);
    g.dB = pssm_cpu_out(&s, &a->dB);
    g.dC = pssm_cpu_out(&s, &a->dC);
    g.dD = pssm_cpu_out(&s, &a->dD);
    g.dz = pssm_cpu_out(&s, &a->dz);
    g.ddelta_bias = pssm_cpu_out(&s, &a->ddelta_bias);
    g.dinitial_state = pssm_cpu_out(&s, &a->dinitial_state);
    double *work = pssm_cpu_alloc(&s, pssm_ref_scan_bwd_work(&p), sizeof(double)); /* -1 fails */
    if (s.failed)
        return pssm_cpu_oom(c, &s, "selective_scan_bwd");
    pssm_ref_scan_bwd(&p, dout, dfinal, &g, work);
    pssm_cpu_store(&a->du, g.du);
    pssm_cpu_store(&a->ddelta, g.ddelta);
    pssm_cpu_store(&a->dA, g.dA);
    pssm_cpu_store(&a->dB, g.dB);
    pssm_cpu_store(&a->dC, g.dC);
    pssm_cpu_store(&a->dD, g.dD);
    pssm_cpu_store(&a->dz, g.dz);
    pssm_cpu_store(&a->ddelta_bias, g.ddelta_bias);
    pssm_cpu_store(&a->dinitial_state, g.dinitial_state);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

/* Both forms map onto the heads form of ref.h: Mamba-1 state (B',D,N) is H = 1, P = D, G = 1,
 * and its (B,D), (B,N), (D,N), (D) tensors have the row-major layout of (B,1,D), (B,1,N),
 * (1,D,N), (1,D). */
portssm_status pssm_cpu_selective_state_update(pssm_bctx *c,
                                               const portssm_selective_state_update_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_state_update p;
    int heads = a->state.ndim == 4;
    p.B = a->x.shape[0];
    p.Bp = a->state.shape[0];
    p.H = heads ? a->state.shape[1] : 1;
    p.P = a->state.shape[heads ? 2 : 1];
    p.N = a->state.shape[heads ? 3 : 2];
    p.G = heads ? a->B.shape[1] : 1;
    p.x = pssm_cpu_load(&s, &a->x);
    p.dt = pssm_cpu_load(&s, &a->dt);
    p.A = pssm_cpu_load(&s, &a->A);
    p.Bm = pssm_cpu_load(&s, &a->B);
    p.Cm = pssm_cpu_load(&s, &a->C);
    p.Dv = pssm_cpu_load(&s, &a->D);
    p.z = pssm_cpu_load(&s, &a->z);
    p.dt_bias = pssm_cpu_load(&s, &a->dt_bias);
    p.state_indices = pssm_cpu_load_i32(&s, &a->state_batch_indices);
    p.softplus = a->dt_softplus != 0;
    double *state = pssm_cpu_load(&s, &a->state);
    double *out = pssm_cpu_out(&s, &a->out);
    unsigned char *used = pssm_cpu_rows_used(&s, p.state_indices, p.B, p.Bp);
    if (s.failed)
        return pssm_cpu_oom(c, &s, "selective_state_update");
    pssm_ref_state_update_run(&p, state, out);
    pssm_cpu_store(&a->out, out);
    pssm_cpu_store_rows(&a->state, state, used); /* other rows stay untouched, bit for bit */
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}
