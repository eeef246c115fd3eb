/*
 * ops_scan_bwd.c - launch planning of selective_scan_bwd (kernels/scan_bwd.body.h), shared by
 * the cuda, hip and sim backends.
 *
 * Launches, in stream order:
 *   1. without the caller's checkpoints (and L past one interval): the forward kernel in its
 *      states-only mode writes them into the workspace;
 *   2. the backward kernel: du, ddelta, dz, dinitial_state, and partial sums of every
 *      reduction into the workspace;
 *   3. the reduce kernel: dA, dB, dC, dD, ddelta_bias from the partials, in a fixed order.
 * Workspace, in order: checkpoints (when computed here), group states, the partials.
 */
#include "gpu.h"
#include "ops_reduce.h"
#include "plan_util.h"
#include "tuning.h"
#include "workspace_plan.h"

#include "../../kernels/params.h"

#include <string.h>

/* Threads per backward block: four warps (two on a 64-wide device). */
#define SCAN_BWD_THREADS 128
/* Lanes per multiprocessor below which a channel's states are split over more lanes (each
 * lane then holds 4 instead of 8). */
#define SCAN_BWD_LANES_PER_SM 256
#define SCAN_BWD_MAX_STATES 256

static const int bwd_kernels[3][2] = {
    {PSSM_KID_pssm_scan_bwd_n4_f32, PSSM_KID_pssm_scan_bwd_n8_f32},
    {PSSM_KID_pssm_scan_bwd_n4_f16, PSSM_KID_pssm_scan_bwd_n8_f16},
    {PSSM_KID_pssm_scan_bwd_n4_bf16, PSSM_KID_pssm_scan_bwd_n8_bf16},
};

typedef struct scan_bwd_plan {
    pssm_scan_bwd_params p;
    int ns, threads;
    int64_t blocks, kbB, kbC;       /* blocks; blocks per group of a variable B / C */
    int need_ck;                    /* the checkpoints are computed into the workspace */
    int64_t nck;                    /* checkpoints per row                           */
    size_t ck_off;
    size_t bytes;
} scan_bwd_plan;

static portssm_status plan_bwd(pssm_gpu *g, const portssm_selective_scan_bwd_args *a, void *ws,
                               scan_bwd_plan *pl)
{
    pssm_bctx *c = g->ctx;
    pssm_scan_bwd_params *p = &pl->p;
    memset(pl, 0, sizeof *pl);
    const int64_t batch = a->u.shape[0], D = a->u.shape[1], L = a->u.shape[2];
    const int64_t N = a->A.shape[1];
    const int vb = a->B.ndim == 4, vc = a->C.ndim == 4;
    if (N > SCAN_BWD_MAX_STATES)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "selective_scan_bwd: N = %lld states, the GPU kernels hold at most %d",
                         (long long)N, SCAN_BWD_MAX_STATES);

    /* states per lane and lanes per channel */
    int ns = N <= 4 ? 4 : 8;
    int64_t tpc = pssm_plan_pow2_ceil((N + ns - 1) / ns);
    const int64_t want = (int64_t)(g->multiprocessors > 0 ? g->multiprocessors : 1) *
                         pssm_tune("SCAN_BWD_LANES_PER_SM", SCAN_BWD_LANES_PER_SM);
    if (ns == 8 && batch * D * tpc < want && tpc * 2 <= g->warp_size) {
        ns = 4;
        tpc *= 2;
    }
    if (tpc > g->warp_size)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "selective_scan_bwd: N = %lld states need %lld lanes per channel, more "
                         "than the warp width %d",
                         (long long)N, (long long)tpc, (int)g->warp_size);
    int64_t threads = pssm_tune("SCAN_BWD_THREADS", SCAN_BWD_THREADS);
    if (threads < g->warp_size || threads > PSSM_SCAN_MAX_THREADS || threads % g->warp_size ||
        threads < tpc)
        threads = SCAN_BWD_THREADS < g->warp_size ? g->warp_size : SCAN_BWD_THREADS;
    /* Shared memory: the tile of 8 steps of B and C (two buffers, or one for large N) and the
     * stage of one group of every lane's contributions, rows of npad floats plus 4 (so that the
     * reducers' 16-byte reads of neighbouring channels fall in different banks).  Blocks shrink
     * (down to a warp) until it fits. */
    const int64_t npad = tpc * ns, row = npad + 4, tile_floats = 2 * PSSM_SCAN_GROUP * npad;
    int tile_buffers = 2;
    for (;;) {
        const int64_t stage = PSSM_SCAN_GROUP * 2 * (threads / tpc) * row;
        if (2 * tile_floats + stage <= PSSM_SCAN_BWD_SMEM_FLOATS) {
            tile_buffers = 2;
            break;
        }
        if (tile_floats + stage <= PSSM_SCAN_BWD_SMEM_FLOATS) {
            tile_buffers = 1;
            break;
        }
        if (threads / 2 < g->warp_size || threads / 2 < tpc)
            return pssm_fail(c, PORTSSM_ERR_INTERNAL,
                             "selective_scan_bwd: plan for N = %lld (%lld lanes x %d states) "
                             "needs more than %d floats of shared memory",
                             (long long)N, (long long)tpc, ns, PSSM_SCAN_BWD_SMEM_FLOATS);
        threads /= 2;
    }
    const int64_t cb = threads / tpc;
    pl->ns = ns;
    pl->threads = (int)threads;
    p->stage_row = (int32_t)row;
    p->tile_buffers = tile_buffers;

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
    p->batch = batch;
    p->dim = D;
    p->seqlen = L;
    p->dstate = N;
    p->seqlen_pad = pssm_plan_cdiv(L, PSSM_SCAN_GROUP) * PSSM_SCAN_GROUP;
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
    p->ck_interval = PSSM_SCAN_CHECKPOINT_INTERVAL;
    p->hdim = 1; /* Mamba-1: every channel its own (the *_sp strides stay 0) */
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
    p->tpc = (int32_t)tpc;
    p->log2_tpc = pssm_plan_ilog2(tpc);

    /* tiles of channels that never straddle a group of a variable B or C (as the forward) */
    p->B_dpg = vb ? D / a->B.shape[1] : D;
    p->C_dpg = vc ? D / a->C.shape[1] : D;
    p->B_groups = vb ? a->B.shape[1] : 1;
    p->C_groups = vc ? a->C.shape[1] : 1;
    p->tile_dpg = pssm_plan_gcd(p->B_dpg, p->C_dpg);
    p->tiles = D / p->tile_dpg;
    p->blocks_per_tile = pssm_plan_cdiv(p->tile_dpg, cb);
    pl->blocks = batch * p->tiles * p->blocks_per_tile;
    if (pl->blocks > INT32_MAX)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "selective_scan_bwd: %lld blocks exceed the grid limit (B = %lld, "
                         "D = %lld)",
                         (long long)pl->blocks, (long long)batch, (long long)D);
    pl->kbB = (p->B_dpg / p->tile_dpg) * p->blocks_per_tile;
    pl->kbC = (p->C_dpg / p->tile_dpg) * p->blocks_per_tile;

    /* workspace */
    pl->nck = pssm_scan_checkpoints(L);
    pl->need_ck = pl->nck > 0 && !a->checkpoints.data;
    pssm_ws_plan w = {0, 0};
    pl->ck_off = pssm_ws_take(&w, pl->need_ck ? batch * D * pl->nck * N : 0, sizeof(float));
    const size_t gs_off = pssm_ws_take(
        &w, pl->blocks * (p->ck_interval / PSSM_SCAN_GROUP) * ns * threads, sizeof(float));
    const size_t a_off = pssm_ws_take(&w, batch * D * N, sizeof(float));
    const int64_t pb = vb ? pl->kbB * batch * p->B_groups * N * p->seqlen_pad : batch * D * N;
    const int64_t pc = vc ? pl->kbC * batch * p->C_groups * N * p->seqlen_pad : batch * D * N;
    const size_t b_off = pssm_ws_take(&w, pb, sizeof(float));
    const size_t c_off = pssm_ws_take(&w, pc, sizeof(float));
    const size_t d_off = pssm_ws_take(&w, a->dD.data ? batch * D : 0, sizeof(float));
    const size_t bias_off = pssm_ws_take(&w, a->ddelta_bias.data ? batch * D : 0, sizeof(float));
    if (w.overflow)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "selective_scan_bwd: its workspace would exceed the address space");
    pl->bytes = w.used;

    p->ck = pl->need_ck ? (const float *)pssm_ws_at(ws, pl->ck_off)
                        : (const float *)a->checkpoints.data;
    if (pl->need_ck) { /* contiguous (B,D,K,N) */
        p->ck_s[3] = 1;
        p->ck_s[2] = N;
        p->ck_s[1] = pl->nck * N;
        p->ck_s[0] = D * pl->nck * N;
    } else if (a->checkpoints.data) {
        pssm_plan_strides(p->ck_s, &a->checkpoints, 4);
    }
    p->gs = (float *)pssm_ws_at(ws, gs_off);
    p->part_A = (float *)pssm_ws_at(ws, a_off);
    p->part_B = (float *)pssm_ws_at(ws, b_off);
    p->part_C = (float *)pssm_ws_at(ws, c_off);
    p->part_D = a->dD.data ? (float *)pssm_ws_at(ws, d_off) : NULL;
    p->part_bias = a->ddelta_bias.data ? (float *)pssm_ws_at(ws, bias_off) : NULL;
    return PORTSSM_OK;
}

portssm_status pssm_gpu_selective_scan_bwd_workspace(pssm_bctx *c,
                                                     const portssm_selective_scan_bwd_args *a,
                                                     size_t *bytes)
{
    scan_bwd_plan pl;
    PSSM_TRY_STATUS(plan_bwd(pssm_gpu_of(c), a, NULL, &pl));
    *bytes = pl.bytes;
    return PORTSSM_OK;
}

/* The forward in its states-only mode: checkpoints of the inputs into the workspace. */
static portssm_status compute_checkpoints(pssm_bctx *c, const portssm_selective_scan_bwd_args *a,
                                          const scan_bwd_plan *pl)
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
    /* contiguous (B,D,K,N), as plan_bwd laid it out (modules do not link libportssm, so no
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
    scan_bwd_plan pl;
    PSSM_TRY_STATUS(plan_bwd(g, a, a->workspace.data, &pl));
    if (pl.need_ck)
        PSSM_TRY_STATUS(compute_checkpoints(c, a, &pl));
    const pssm_scan_bwd_params *p = &pl.p;
    const int kernel = bwd_kernels[pssm_plan_dtype_index(a->u.dtype)][pl.ns == 4 ? 0 : 1];
    pssm_dim3 grid = {(uint32_t)pl.blocks, 1, 1}, block = {(uint32_t)pl.threads, 1, 1};
    PSSM_LAUNCH(g, kernel, grid, block, *p);

    const int64_t batch = p->batch, D = p->dim, N = p->dstate, Lp = p->seqlen_pad;
    const int64_t dn_s[2] = {N, 1}, d_s[1] = {1};
    pssm_reduce_batch r;
    memset(&r, 0, sizeof r);
    pssm_reduce_add(&r, p->part_A, batch, D * N, dn_s, &a->dA);
    const float *parts[2] = {p->part_B, p->part_C};
    const portssm_tensor *outs[2] = {&a->dB, &a->dC};
    const int64_t groups[2] = {p->B_groups, p->C_groups}, kbs[2] = {pl.kbB, pl.kbC};
    for (int i = 0; i < 2; i++) {
        if (outs[i]->ndim == 4) { /* variable: over the blocks of each group */
            const int64_t G = groups[i];
            const int64_t v_s[4] = {G * N * Lp, N * Lp, Lp, 1};
            pssm_reduce_add(&r, parts[i], kbs[i], batch * G * N * Lp, v_s, outs[i]);
        } else { /* constant: over the batch rows */
            pssm_reduce_add(&r, parts[i], batch, D * N, dn_s, outs[i]);
        }
    }
    if (a->dD.data)
        pssm_reduce_add(&r, p->part_D, batch, D, d_s, &a->dD);
    if (a->ddelta_bias.data)
        pssm_reduce_add(&r, p->part_bias, batch, D, d_s, &a->ddelta_bias);
    return pssm_reduce_launch(g, &r);
}
