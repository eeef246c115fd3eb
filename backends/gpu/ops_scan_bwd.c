/*
 * ops_scan_bwd.c - planning and launching of the selective scan's backward kernel, for
 * selective_scan_bwd (ops_scan_bwd.h).
 *
 * Workspace, in order after the op's own: checkpoints (when computed here), group states, the
 * partials of the sums over time (per batch row), the per-step partials of one window (a
 * variable dB / dC), h between windows.
 */
#include "ops_scan_bwd.h"
#include "ops_reduce.h"
#include "plan_util.h"
#include "tuning.h"

#include <string.h>

/* Threads per backward block: four warps (two on a 64-wide device). */
#define SCAN_BWD_THREADS 128
/* Lanes per multiprocessor below which a channel's states are split over more lanes (each
 * lane then holds 4 instead of 8, and every lane repeats the per-token math).  Measured on an
 * H100 (runs 100-101, bench/scan_bwd_plan_sweep.py, fwd+bwd L2048 N16): the split wins 8-24%
 * at up to 124 lanes an SM with 8 states (B1 D1536 .. B2 D4096) and costs 14-30% at 248 and
 * 496 (B4, B8 D4096), where the 8-state lanes already fill the schedulers. */
#define SCAN_BWD_LANES_PER_SM 128
#define SCAN_BWD_MAX_STATES 256
/* Most workspace for one window's per-step partials, in MiB: longer rows take more launches. */
#define SCAN_BWD_WINDOW_MB 256

/* [dtype][form: any B/C, both variable][4 or 8 states per lane] */
static const int bwd_kernels[3][2][2] = {
    {{PSSM_KID_pssm_scan_bwd_n4_f32, PSSM_KID_pssm_scan_bwd_n8_f32},
     {PSSM_KID_pssm_scan_bwd_var_n4_f32, PSSM_KID_pssm_scan_bwd_var_n8_f32}},
    {{PSSM_KID_pssm_scan_bwd_n4_f16, PSSM_KID_pssm_scan_bwd_n8_f16},
     {PSSM_KID_pssm_scan_bwd_var_n4_f16, PSSM_KID_pssm_scan_bwd_var_n8_f16}},
    {{PSSM_KID_pssm_scan_bwd_n4_bf16, PSSM_KID_pssm_scan_bwd_n8_bf16},
     {PSSM_KID_pssm_scan_bwd_var_n4_bf16, PSSM_KID_pssm_scan_bwd_var_n8_bf16}},
};

portssm_status pssm_gpu_scan_bwd_plan(pssm_gpu *g, pssm_scan_bwd_plan *pl, pssm_ws_plan *w,
                                      void *base, int want_dD, int want_dbias, portssm_dtype act,
                                      const char *op)
{
    pssm_bctx *c = g->ctx;
    pssm_scan_bwd_params *p = &pl->p;
    const int64_t batch = p->batch, D = p->dim, L = p->seqlen, N = p->dstate;
    const int vb = p->var_B, vc = p->var_C;
    if (N > SCAN_BWD_MAX_STATES)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "%s: N = %lld states, the GPU kernels hold at most %d", op, (long long)N,
                         SCAN_BWD_MAX_STATES);

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
                         "%s: N = %lld states need %lld lanes per channel, more than the warp "
                         "width %d",
                         op, (long long)N, (long long)tpc, (int)g->warp_size);
    int64_t threads = pssm_tune("SCAN_BWD_THREADS", SCAN_BWD_THREADS);
    if (threads < g->warp_size || threads > PSSM_SCAN_MAX_THREADS || threads % g->warp_size ||
        threads < tpc)
        threads = SCAN_BWD_THREADS < g->warp_size ? g->warp_size : SCAN_BWD_THREADS;
    /* Shared memory: the tile of 8 steps of B and C (two buffers, or one for large N) and the
     * stage of one group of every lane's contributions, rows of npad floats plus 4 (so that the
     * reducers' 16-byte reads of neighbouring channels fall in different banks).  Blocks
     * shrink (down to a warp), then a channel's states spread over twice the lanes, until it
     * fits. */
    int tile_buffers = 2;
    for (;;) {
        const int64_t npad = tpc * ns, row = npad + 4, tile_floats = 2 * PSSM_SCAN_GROUP * npad;
        const int64_t cbt = threads / tpc;
        const int64_t stage = PSSM_SCAN_GROUP * 2 * cbt * row;
        if (2 * tile_floats + stage <= PSSM_SCAN_BWD_SMEM_FLOATS) {
            tile_buffers = 2;
            break;
        }
        if (tile_floats + stage <= PSSM_SCAN_BWD_SMEM_FLOATS) {
            tile_buffers = 1;
            break;
        }
        if (threads / 2 >= g->warp_size && threads / 2 >= tpc) {
            threads /= 2;
        } else if (ns == 8 && tpc * 2 <= g->warp_size) {
            ns = 4;
            tpc *= 2;
        } else {
            return pssm_fail(c, PORTSSM_ERR_INTERNAL,
                             "%s: plan for N = %lld (%lld lanes x %d states) needs more than %d "
                             "floats of shared memory",
                             op, (long long)N, (long long)tpc, ns, PSSM_SCAN_BWD_SMEM_FLOATS);
        }
    }
    const int64_t row = tpc * ns + 4;
    const int64_t cb = threads / tpc;
    pl->threads = (int)threads;
    const int form = vb && vc;
    pl->kernel = bwd_kernels[pssm_plan_dtype_index(act)][form][ns == 4 ? 0 : 1];
    p->stage_row = (int32_t)row;
    p->tile_buffers = tile_buffers;
    p->tpc = (int32_t)tpc;
    p->log2_tpc = pssm_plan_ilog2(tpc);
    p->ck_interval = PSSM_SCAN_CHECKPOINT_INTERVAL;

    /* Tiles of channels that never straddle a group of a variable B or C (as the forward). */
    p->tile_dpg = pssm_plan_gcd(p->B_dpg, p->C_dpg);
    p->tiles = D / p->tile_dpg;
    p->blocks_per_tile = pssm_plan_cdiv(p->tile_dpg, cb);
    pl->blocks = batch * p->tiles * p->blocks_per_tile;
    if (pl->blocks > INT32_MAX)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "%s: %lld blocks exceed the grid limit (B = %lld, channels = %lld)", op,
                         (long long)pl->blocks, (long long)batch, (long long)D);
    pl->kbB = (p->B_dpg / p->tile_dpg) * p->blocks_per_tile;
    pl->kbC = (p->C_dpg / p->tile_dpg) * p->blocks_per_tile;

    /* windows: as many checkpoint intervals as the per-step partials' budget allows */
    const int64_t ci = p->ck_interval;
    const int64_t per_step = (vb ? pl->kbB * batch * p->B_groups * N : 0) +
                             (vc ? pl->kbC * batch * p->C_groups * N : 0);
    const int64_t budget = pssm_tune("SCAN_BWD_WINDOW_MB", SCAN_BWD_WINDOW_MB) << 20;
    int64_t chunks = per_step > 0 ? budget / ((int64_t)sizeof(float) * per_step * ci) : L;
    chunks = chunks < 1 ? 1 : chunks;
    const int64_t Lp = pssm_plan_cdiv(L, PSSM_SCAN_GROUP) * PSSM_SCAN_GROUP;
    pl->window = chunks >= pssm_plan_cdiv(L, ci) ? L : chunks * ci;
    p->win_pad = pl->window == L ? Lp : pl->window;
    const int windows = pl->window < L;

    /* workspace */
    pl->nck = pssm_scan_checkpoints(L);
    pl->need_ck = pl->nck > 0 && !p->ck;
    const size_t ck_off = pssm_ws_take(w, pl->need_ck ? batch * D * pl->nck * N : 0, sizeof(float));
    const size_t gs_off =
        pssm_ws_take(w, pl->blocks * (ci / PSSM_SCAN_GROUP) * ns * threads, sizeof(float));
    const size_t a_off = pssm_ws_take(w, batch * D * N, sizeof(float));
    const int64_t pb = vb ? pl->kbB * batch * p->B_groups * N * p->win_pad : batch * D * N;
    const int64_t pc = vc ? pl->kbC * batch * p->C_groups * N * p->win_pad : batch * D * N;
    const size_t b_off = pssm_ws_take(w, pb, sizeof(float));
    const size_t c_off = pssm_ws_take(w, pc, sizeof(float));
    const size_t d_off = pssm_ws_take(w, want_dD ? batch * D : 0, sizeof(float));
    const size_t bias_off = pssm_ws_take(w, want_dbias ? batch * D : 0, sizeof(float));
    const size_t h_off = pssm_ws_take(w, windows ? batch * D * N : 0, sizeof(float));
    if (w->overflow)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "%s: its workspace would exceed the address space", op);

    if (pl->need_ck) { /* contiguous (B,D,K,N) */
        p->ck = (const float *)pssm_ws_at(base, ck_off);
        p->ck_s[3] = 1;
        p->ck_s[2] = N;
        p->ck_s[1] = pl->nck * N;
        p->ck_s[0] = D * pl->nck * N;
    }
    p->gs = (float *)pssm_ws_at(base, gs_off);
    p->part_A = (float *)pssm_ws_at(base, a_off);
    p->part_B = (float *)pssm_ws_at(base, b_off);
    p->part_C = (float *)pssm_ws_at(base, c_off);
    p->part_D = want_dD ? (float *)pssm_ws_at(base, d_off) : NULL;
    p->part_bias = want_dbias ? (float *)pssm_ws_at(base, bias_off) : NULL;
    p->carry_h = windows ? (float *)pssm_ws_at(base, h_off) : NULL;
    return PORTSSM_OK;
}

portssm_tensor pssm_scan_bwd_view(const portssm_tensor *t, const int *perm, int n)
{
    portssm_tensor v = *t;
    for (int i = 0; i < n; i++) {
        v.shape[i] = t->shape[perm[i]];
        v.stride[i] = t->stride[perm[i]];
    }
    v.ndim = n;
    return v;
}

/* The steps [lo, hi) of a view whose last dim is time. */
static portssm_tensor time_window(const portssm_tensor *v, int64_t lo, int64_t hi)
{
    portssm_tensor w = *v;
    const int last = v->ndim - 1;
    const size_t elem = pssm_plan_act_size(v->dtype);
    w.data = (char *)v->data + (size_t)(lo * v->stride[last]) * elem;
    w.shape[last] = hi - lo;
    return w;
}

portssm_status pssm_gpu_scan_bwd_launch(pssm_gpu *g, pssm_scan_bwd_plan *pl,
                                        const portssm_tensor *dB_v, const portssm_tensor *dC_v)
{
    pssm_scan_bwd_params *p = &pl->p;
    const int64_t L = p->seqlen, batch = p->batch, N = p->dstate, Wp = p->win_pad;
    const pssm_dim3 grid = {(uint32_t)pl->blocks, 1, 1}, block = {(uint32_t)pl->threads, 1, 1};
    const int64_t nwin = pssm_plan_cdiv(L, pl->window);
    for (int64_t k = nwin - 1; k >= 0; --k) {
        p->win_lo = k * pl->window;
        p->win_hi = p->win_lo + pl->window < L ? p->win_lo + pl->window : L;
        PSSM_LAUNCH(g, pl->kernel, grid, block, *p);

        pssm_reduce_batch r;
        memset(&r, 0, sizeof r);
        const float *parts[2] = {p->part_B, p->part_C};
        const portssm_tensor *views[2] = {dB_v, dC_v};
        const int64_t groups[2] = {p->B_groups, p->C_groups}, kbs[2] = {pl->kbB, pl->kbC};
        portssm_tensor win[2];
        for (int i = 0; i < 2; i++) {
            if (!views[i])
                continue;
            const int64_t G = groups[i];
            const int64_t v_s[4] = {G * N * Wp, N * Wp, Wp, 1};
            win[i] = time_window(views[i], p->win_lo, p->win_hi);
            pssm_reduce_add(&r, parts[i], kbs[i], batch * G * N * Wp, v_s, &win[i]);
        }
        PSSM_TRY_STATUS(pssm_reduce_launch(g, &r));
    }
    return PORTSSM_OK;
}
