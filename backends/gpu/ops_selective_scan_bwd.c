/*
 * ops_selective_scan_bwd.c - selective_scan_bwd (Mamba-1) on the scan's backward kernel
 * (ops_scan_bwd.h), shared by the cuda, hip and sim backends.
 *
 * Launches, in stream order:
 *   1. without the caller's checkpoints (and L past one interval): the forward kernel in its
 *      states-only mode writes them into the workspace;
 *   2. per window of steps, the backward kernel (du, ddelta, dz, dinitial_state and partial
 *      sums into the workspace), then the reduce kernel for a variable dB / dC's window;
 *   3. the reduce kernel: dA, a constant dB / dC, dD, ddelta_bias, in a fixed order.
 */
#include "ops_reduce.h"
#include "ops_scan_bwd.h"
#include "plan_util.h"

#include <string.h>

/* The kernel's operands for args (the planner does the rest). */
static void fill(const portssm_selective_scan_bwd_args *a, pssm_scan_bwd_params *p)
{
    memset(p, 0, sizeof *p);
    const int vb = a->B.ndim == 4, vc = a->C.ndim == 4;
    const int64_t D = a->u.shape[1];
    p->u = a->u.data;
    p->delta = a->delta.data;
    p->z = a->z.data;
    p->dout = a->dout.data;
    p->du = a->du.data;
    p->ddelta = a->ddelta.data;
    p->dz = a->dz.data;
    p->Bm = a->B.data;
    p->Cm = a->C.data;
    p->A = (const float *)a->A.data;
    p->D = (const float *)a->D.data;
    p->delta_bias = (const float *)a->delta_bias.data;
    p->x0 = (const float *)a->initial_state.data;
    p->dfinal = (const float *)a->dfinal_state.data;
    p->dinit = (float *)a->dinitial_state.data;
    p->batch = a->u.shape[0];
    p->dim = D;
    p->seqlen = a->u.shape[2];
    p->dstate = a->A.shape[1];
    pssm_plan_strides(p->u_s, &a->u, 3);
    pssm_plan_strides(p->delta_s, &a->delta, 3);
    if (p->z)
        pssm_plan_strides(p->z_s, &a->z, 3);
    pssm_plan_strides(p->dout_s, &a->dout, 3);
    pssm_plan_strides(p->du_s, &a->du, 3);
    pssm_plan_strides(p->ddelta_s, &a->ddelta, 3);
    if (p->dz)
        pssm_plan_strides(p->dz_s, &a->dz, 3);
    pssm_plan_strides(p->A_s, &a->A, 2);
    pssm_plan_strides(p->B_s, &a->B, vb ? 4 : 2);
    pssm_plan_strides(p->C_s, &a->C, vc ? 4 : 2);
    p->D_s = p->D ? a->D.stride[0] : 0;
    p->bias_s = p->delta_bias ? a->delta_bias.stride[0] : 0;
    if (p->x0)
        pssm_plan_strides(p->x0_s, &a->initial_state, 3);
    if (p->dfinal)
        pssm_plan_strides(p->df_s, &a->dfinal_state, 3);
    if (p->dinit)
        pssm_plan_strides(p->di_s, &a->dinitial_state, 3);
    if (a->checkpoints.data) {
        p->ck = (const float *)a->checkpoints.data;
        pssm_plan_strides(p->ck_s, &a->checkpoints, 4);
    }
    p->u_vec = pssm_plan_group_vec(&a->u, 2);
    p->delta_vec = pssm_plan_group_vec(&a->delta, 2);
    p->z_vec = pssm_plan_group_vec(&a->z, 2);
    p->dout_vec = pssm_plan_group_vec(&a->dout, 2);
    p->du_vec = pssm_plan_group_vec(&a->du, 2);
    p->ddelta_vec = pssm_plan_group_vec(&a->ddelta, 2);
    p->dz_vec = pssm_plan_group_vec(&a->dz, 2);
    p->B_vec = vb && pssm_plan_group_vec(&a->B, 3);
    p->C_vec = vc && pssm_plan_group_vec(&a->C, 3);
    p->var_B = vb;
    p->var_C = vc;
    p->softplus = a->delta_softplus != 0;
    p->B_dpg = vb ? D / a->B.shape[1] : D;
    p->C_dpg = vc ? D / a->C.shape[1] : D;
    p->B_groups = vb ? a->B.shape[1] : 1;
    p->C_groups = vc ? a->C.shape[1] : 1;
}

static portssm_status plan(pssm_gpu *g, const portssm_selective_scan_bwd_args *a, void *ws,
                           pssm_scan_bwd_plan *pl, size_t *bytes)
{
    memset(pl, 0, sizeof *pl);
    fill(a, &pl->p);
    pssm_ws_plan w = {0, 0};
    PSSM_TRY_STATUS(pssm_gpu_scan_bwd_plan(g, pl, &w, ws, a->dD.data != NULL,
                                           a->ddelta_bias.data != NULL, a->u.dtype,
                                           "selective_scan_bwd"));
    *bytes = w.used;
    return PORTSSM_OK;
}

portssm_status pssm_gpu_selective_scan_bwd_workspace(pssm_bctx *c,
                                                     const portssm_selective_scan_bwd_args *a,
                                                     size_t *bytes)
{
    pssm_scan_bwd_plan pl;
    return plan(pssm_gpu_of(c), a, NULL, &pl, bytes);
}

/* The forward in its states-only mode: checkpoints of the inputs into the workspace. */
static portssm_status compute_checkpoints(pssm_bctx *c, const portssm_selective_scan_bwd_args *a,
                                          const pssm_scan_bwd_plan *pl)
{
    portssm_selective_scan_fwd_args f;
    memset(&f, 0, sizeof f);
    f.u = a->u;
    f.delta = a->delta;
    f.A = a->A;
    f.B = a->B;
    f.C = a->C;
    f.delta_bias = a->delta_bias;
    f.initial_state = a->initial_state;
    f.delta_softplus = a->delta_softplus;
    /* contiguous (B,D,K,N), as the planner laid it out (modules do not link libportssm, so no
     * portssm_tensor_contiguous here) */
    portssm_tensor *ck = &f.checkpoints;
    ck->data = (void *)pl->p.ck;
    ck->dtype = PORTSSM_F32;
    ck->ndim = 4;
    ck->shape[0] = a->u.shape[0];
    ck->shape[1] = a->u.shape[1];
    ck->shape[2] = pl->nck;
    ck->shape[3] = a->A.shape[1];
    for (int i = 0; i < 4; i++)
        ck->stride[i] = pl->p.ck_s[i];
    return pssm_gpu_selective_scan_fwd(c, &f);
}

portssm_status pssm_gpu_selective_scan_bwd(pssm_bctx *c, const portssm_selective_scan_bwd_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    pssm_scan_bwd_plan pl;
    size_t bytes;
    PSSM_TRY_STATUS(plan(g, a, a->workspace.data, &pl, &bytes));
    if (pl.need_ck)
        PSSM_TRY_STATUS(compute_checkpoints(c, a, &pl));
    PSSM_TRY_STATUS(pssm_gpu_scan_bwd_launch(g, &pl, a->dB.ndim == 4 ? &a->dB : NULL,
                                             a->dC.ndim == 4 ? &a->dC : NULL));

    const pssm_scan_bwd_params *p = &pl.p;
    const int64_t batch = p->batch, D = p->dim, N = p->dstate;
    const int64_t dn_s[2] = {N, 1}, d_s[1] = {1};
    pssm_reduce_batch r;
    memset(&r, 0, sizeof r);
    pssm_reduce_add(&r, p->part_A, batch, D * N, dn_s, &a->dA);
    if (a->dB.ndim != 4) /* constant: over the batch rows */
        pssm_reduce_add(&r, p->part_B, batch, D * N, dn_s, &a->dB);
    if (a->dC.ndim != 4)
        pssm_reduce_add(&r, p->part_C, batch, D * N, dn_s, &a->dC);
    if (a->dD.data)
        pssm_reduce_add(&r, p->part_D, batch, D, d_s, &a->dD);
    if (a->ddelta_bias.data)
        pssm_reduce_add(&r, p->part_bias, batch, D, d_s, &a->ddelta_bias);
    return pssm_reduce_launch(g, &r);
}
