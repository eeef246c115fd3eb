/*
 * ops_ssd.c - the Mamba-2 SSD's backward (ssd_chunk_scan_bwd) on the selective scan's kernels,
 * and what the forward (ops_ssd_fwd.c, by chunks) shares with it: the packed-row helpers.  Shared
 * by the cuda, hip and sim backends.
 *
 * The SSD's recurrence is the selective scan's with a channel per (head h, p): d = h*P + p, A and
 * dt one per head (indexed by h, the `ssd` form of the kernels takes one exp per step), B and C
 * variable with a group of H/G heads, plus restarts at sequence boundaries and a clamp of dt.
 * So the backward runs on the scan's kernels (kernels/scan_fwd.body.h, scan_bwd.body.h), not by
 * chunks yet.  Packed sequences (cu_seqlens) become per-token sequence indices in the workspace
 * first (kernels/ssd_kernels.h).
 *
 * The backward: checkpoints by the scan's forward kernel in its states-only mode, then the
 * backward kernel per window (dx, dz, dinitial_states; dB, dC and ddt as per-step partials
 * reduced per window), then the reduce kernel for dA, dD, ddt_bias.
 */
#include "gpu.h"
#include "ops_reduce.h"
#include "ops_ssd.h"
#include "ops_scan_bwd.h"
#include "plan_util.h"
#include "workspace_plan.h"

#include "../../kernels/params.h"

#include <string.h>

/* The scan's forward kernel's parameters for the SSD, for the backward's checkpoints. */
static void fill_fwd(const ssd_common *s, void *ws_base, const ssd_ws *ws,
                     pssm_scan_fwd_params *p)
{
    const int64_t *xs = s->x->stride, *dts = s->dt->stride;
    const int64_t H = s->x->shape[2], P = s->x->shape[3], G = s->B->shape[2];
    memset(p, 0, sizeof *p);
    p->u = s->x->data;
    p->delta = s->dt->data;
    p->z = s->z->data;
    p->Bm = s->B->data;
    p->Cm = s->C->data;
    p->A = (const float *)s->A->data;
    p->D = (const float *)s->D->data;
    p->delta_bias = (const float *)s->dt_bias->data;
    p->x0 = (const float *)s->init->data;
    p->batch = s->x->shape[0];
    p->seqlen = s->x->shape[1];
    p->dim = H * P;
    p->hdim = P;
    p->dstate = s->B->shape[3];
    /* (B,L,H,P) as (b, h, t) rows with p's stride apart */
    p->u_s[0] = xs[0], p->u_s[1] = xs[2], p->u_s[2] = xs[1], p->u_sp = xs[3];
    p->delta_s[0] = dts[0], p->delta_s[1] = dts[2], p->delta_s[2] = dts[1], p->delta_sp = 0;
    if (p->z) {
        const int64_t *zs = s->z->stride;
        p->z_s[0] = zs[0], p->z_s[1] = zs[2], p->z_s[2] = zs[1], p->z_sp = zs[3];
    }
    p->A_s[0] = s->A->stride[0], p->A_s[1] = 0, p->A_sp = 0; /* one per head: tied */
    const int64_t *bs = s->B->stride, *cs = s->C->stride; /* (B,L,G,N) as (b, g, n, t) */
    p->B_s[0] = bs[0], p->B_s[1] = bs[2], p->B_s[2] = bs[3], p->B_s[3] = bs[1];
    p->C_s[0] = cs[0], p->C_s[1] = cs[2], p->C_s[2] = cs[3], p->C_s[3] = cs[1];
    if (p->D) {
        p->D_s = s->D->stride[0];
        p->D_sp = s->D->ndim == 2 ? s->D->stride[1] : 0;
    }
    if (p->delta_bias)
        p->bias_s = s->dt_bias->stride[0];
    if (p->x0) {
        const int64_t *is = s->init->stride; /* (B,H,P,N) */
        p->x0_s[0] = is[0], p->x0_s[1] = is[1], p->x0_s[2] = is[3], p->x0_sp = is[2];
    }
    p->B_dpg = p->C_dpg = (H / G) * P;
    p->var_B = p->var_C = 1;
    p->softplus = s->softplus != 0;
    p->ssd = 1;
    p->dt_limit = s->dt_limit != 0;
    p->dt_min = s->dt_min;
    p->dt_max = s->dt_max;
    if (s->cu->data) { /* the sequences derived from cu_seqlens (one row) */
        p->seq = (const int32_t *)pssm_ws_at(ws_base, ws->seq_off);
        p->seq_s[0] = 0;
        p->seq_s[1] = 1;
        p->nseq = s->cu->shape[0] - 1;
    } else if (s->seq_idx->data) {
        p->seq = (const int32_t *)s->seq_idx->data;
        p->seq_s[0] = s->seq_idx->stride[0];
        p->seq_s[1] = s->seq_idx->stride[1];
    }
}

portssm_status pssm_gpu_ssd_launch_seq(pssm_gpu *g, const ssd_common *s, int32_t *seq,
                                       const portssm_tensor *varlen)
{
    if (!s->cu->data)
        return PORTSSM_OK;
    pssm_ssd_seq_params q;
    memset(&q, 0, sizeof q);
    q.cu = (const int32_t *)s->cu->data;
    q.cu_s = s->cu->stride[0];
    q.seq = seq;
    q.seqlen = s->x->shape[1];
    q.nseq = s->cu->shape[0] - 1;
    q.heads = s->x->shape[2];
    q.hdim = s->x->shape[3];
    q.dstate = s->B->shape[3];
    const int64_t sms = g->multiprocessors > 0 ? g->multiprocessors : 1;
    const pssm_dim3 block = {PSSM_SSD_BLOCK, 1, 1};
    int64_t blocks = pssm_plan_cdiv(q.seqlen, PSSM_SSD_BLOCK);
    pssm_dim3 grid = {(uint32_t)(blocks < 4 * sms ? blocks : 4 * sms), 1, 1};
    PSSM_LAUNCH(g, PSSM_KID_pssm_ssd_seq_from_cu, grid, block, q);
    if (varlen && varlen->data) {
        q.varlen = (float *)varlen->data;
        pssm_plan_strides(q.varlen_s, varlen, 4);
        if (s->init->data) {
            q.x0 = (const float *)s->init->data;
            q.x0_s[0] = s->init->stride[1];
            q.x0_s[1] = s->init->stride[2];
            q.x0_s[2] = s->init->stride[3];
        }
        blocks = pssm_plan_cdiv(q.nseq * q.heads * q.hdim * q.dstate, PSSM_SSD_BLOCK);
        grid.x = (uint32_t)(blocks < 4 * sms ? blocks : 4 * sms);
        PSSM_LAUNCH(g, PSSM_KID_pssm_ssd_varlen_empty, grid, block, q);
    }
    return PORTSSM_OK;
}

/* ---------------------------------------------------------------- backward */

static ssd_common bwd_common(const portssm_ssd_chunk_scan_bwd_args *a)
{
    const ssd_common s = {&a->x, &a->dt, &a->A, &a->B, &a->C, &a->D, &a->z, &a->dt_bias,
                          &a->initial_states, &a->seq_idx, &a->cu_seqlens, a->dt_softplus,
                          a->dt_limit, a->dt_min, a->dt_max};
    return s;
}

/* (B,L,H,P) as the kernel's (b, h, t) rows with p's stride apart. */
static void rows_bhtp(const portssm_tensor *t, int64_t *s3, int64_t *sp)
{
    s3[0] = t->stride[0], s3[1] = t->stride[2], s3[2] = t->stride[1];
    *sp = t->stride[3];
}

/* (B,H,P,N) as the kernel's (b, h, n) with p's stride apart. */
static void state_bhpn(const portssm_tensor *t, int64_t *s3, int64_t *sp)
{
    s3[0] = t->stride[0], s3[1] = t->stride[1], s3[2] = t->stride[3];
    *sp = t->stride[2];
}

/* The backward kernel's operands (the core planner does the rest). */
static void fill_bwd(const ssd_common *s, const portssm_ssd_chunk_scan_bwd_args *a,
                     void *ws_base, const ssd_ws *ws, pssm_scan_bwd_params *p)
{
    pssm_scan_fwd_params f; /* the forward's operands, strides and SSD fields, reused */
    fill_fwd(s, ws_base, ws, &f);
    memset(p, 0, sizeof *p);
    const int64_t H = a->x.shape[2], P = a->x.shape[3], G = a->B.shape[2];
    p->u = f.u, p->delta = f.delta, p->z = f.z, p->Bm = f.Bm, p->Cm = f.Cm;
    p->A = f.A, p->D = f.D, p->delta_bias = f.delta_bias, p->x0 = f.x0;
    p->dout = a->dout.data;
    p->du = a->dx.data;
    p->dz = a->dz.data;
    p->dfinal = (const float *)a->dfinal_states.data;
    p->dinit = (float *)a->dinitial_states.data;
    p->batch = f.batch, p->dim = f.dim, p->seqlen = f.seqlen, p->dstate = f.dstate;
    p->hdim = P;
    memcpy(p->u_s, f.u_s, sizeof p->u_s), p->u_sp = f.u_sp;
    memcpy(p->delta_s, f.delta_s, sizeof p->delta_s);
    memcpy(p->z_s, f.z_s, sizeof p->z_s), p->z_sp = f.z_sp;
    rows_bhtp(&a->dout, p->dout_s, &p->dout_sp);
    rows_bhtp(&a->dx, p->du_s, &p->du_sp);
    if (p->dz)
        rows_bhtp(&a->dz, p->dz_s, &p->dz_sp);
    memcpy(p->A_s, f.A_s, sizeof p->A_s);
    memcpy(p->B_s, f.B_s, sizeof p->B_s);
    memcpy(p->C_s, f.C_s, sizeof p->C_s);
    p->D_s = f.D_s, p->D_sp = f.D_sp, p->bias_s = f.bias_s;
    memcpy(p->x0_s, f.x0_s, sizeof p->x0_s), p->x0_sp = f.x0_sp;
    if (p->dfinal)
        state_bhpn(&a->dfinal_states, p->df_s, &p->df_sp);
    if (p->dinit)
        state_bhpn(&a->dinitial_states, p->di_s, &p->di_sp);
    /* 16-byte groups need time stride 1: never in (B,L,H,P) unless H * P == 1 */
    p->u_vec = pssm_plan_group_vec(&a->x, 1);
    p->delta_vec = pssm_plan_group_vec(&a->dt, 1);
    p->z_vec = pssm_plan_group_vec(&a->z, 1);
    p->dout_vec = pssm_plan_group_vec(&a->dout, 1);
    p->du_vec = pssm_plan_group_vec(&a->dx, 1);
    p->dz_vec = pssm_plan_group_vec(&a->dz, 1);
    p->B_vec = pssm_plan_group_vec(&a->B, 1);
    p->C_vec = pssm_plan_group_vec(&a->C, 1);
    p->var_B = p->var_C = 1;
    p->B_dpg = p->C_dpg = (H / G) * P;
    p->B_groups = p->C_groups = G;
    p->softplus = f.softplus;
    p->ssd = 1;
    p->dt_limit = f.dt_limit, p->dt_min = f.dt_min, p->dt_max = f.dt_max;
    p->seq = f.seq;
    memcpy(p->seq_s, f.seq_s, sizeof p->seq_s);
}

static portssm_status plan_bwd(pssm_gpu *g, const portssm_ssd_chunk_scan_bwd_args *a, void *base,
                               ssd_ws *ws, pssm_scan_bwd_plan *pl)
{
    const ssd_common s = bwd_common(a);
    ssd_ws_begin(&s, ws);
    memset(pl, 0, sizeof *pl);
    fill_bwd(&s, a, base, ws, &pl->p);
    return pssm_gpu_scan_bwd_plan(g, pl, &ws->w, base, a->dD.data != NULL,
                                  a->ddt_bias.data != NULL, a->x.dtype, "ssd_chunk_scan_bwd");
}

portssm_status pssm_gpu_ssd_chunk_scan_bwd_workspace(pssm_bctx *c,
                                                     const portssm_ssd_chunk_scan_bwd_args *a,
                                                     size_t *bytes)
{
    ssd_ws ws;
    pssm_scan_bwd_plan pl;
    PSSM_TRY_STATUS(plan_bwd(pssm_gpu_of(c), a, NULL, &ws, &pl));
    *bytes = ws.w.used;
    return PORTSSM_OK;
}

portssm_status pssm_gpu_ssd_chunk_scan_bwd(pssm_bctx *c, const portssm_ssd_chunk_scan_bwd_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    const ssd_common s = bwd_common(a);
    ssd_ws ws;
    pssm_scan_bwd_plan pl;
    PSSM_TRY_STATUS(plan_bwd(g, a, a->workspace.data, &ws, &pl));
    PSSM_TRY_STATUS(pssm_gpu_ssd_launch_seq(g, &s, (int32_t *)pl.p.seq, NULL));
    if (pl.need_ck) { /* the forward, states only, into the planned checkpoints */
        pssm_scan_fwd_params f;
        fill_fwd(&s, a->workspace.data, &ws, &f);
        f.ck = (float *)pl.p.ck;
        memcpy(f.ck_s, pl.p.ck_s, sizeof f.ck_s);
        f.ck_sp = pl.p.ck_sp;
        PSSM_TRY_STATUS(pssm_gpu_scan_fwd_launch(g, &f, a->x.dtype, "ssd_chunk_scan_bwd"));
    }
    static const int bgnt[4] = {0, 2, 3, 1}, bht[3] = {0, 2, 1}; /* (B,L,G,N), (B,L,H) */
    const portssm_tensor dB_v = pssm_scan_bwd_view(&a->dB, bgnt, 4);
    const portssm_tensor dC_v = pssm_scan_bwd_view(&a->dC, bgnt, 4);
    const portssm_tensor ddt_v = pssm_scan_bwd_view(&a->ddt, bht, 3);
    PSSM_TRY_STATUS(pssm_gpu_scan_bwd_launch(g, &pl, &dB_v, &dC_v, &ddt_v));

    /* the sums over time: dA over (b, p, lane), dD and ddt_bias over (b[, p]) */
    const pssm_scan_bwd_params *p = &pl.p;
    const int64_t batch = p->batch, D = p->dim, P = p->hdim, tpc = p->tpc;
    const int64_t a_s[1] = {P * tpc}, hp_s[2] = {P, 1}, h_s[1] = {P};
    pssm_reduce_batch r;
    memset(&r, 0, sizeof r);
    pssm_reduce_add2(&r, p->part_A, batch, D * tpc, P * tpc, 1, a_s, &a->dA);
    if (a->dD.data) {
        if (a->dD.ndim == 2)
            pssm_reduce_add(&r, p->part_D, batch, D, hp_s, &a->dD);
        else
            pssm_reduce_add2(&r, p->part_D, batch, D, P, 1, h_s, &a->dD);
    }
    if (a->ddt_bias.data)
        pssm_reduce_add2(&r, p->part_bias, batch, D, P, 1, h_s, &a->ddt_bias);
    return pssm_reduce_launch(g, &r);
}
