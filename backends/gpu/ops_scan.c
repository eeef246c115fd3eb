/*
 * ops_scan.c - launch planning of selective_scan_fwd and selective_state_update (kernels of
 * kernels/scan_kernels.h), shared by the cuda, hip and sim backends.
 *
 * Arguments arrive validated (src/validate_scan.c, validate_decode.c): shapes agree, dtypes are
 * as documented, and every size and offset product fits in int64.
 */
#include "gpu.h"
#include "plan_util.h"
#include "tuning.h"

#include "../../kernels/params.h"

#include <stdint.h>
#include <string.h>

/* Lanes per multiprocessor below which the scan splits a channel's states over more lanes.
 * Splitting adds per-step work (team reductions, per-token math on every lane of a team), so it
 * pays only when warps are very few: on an H200, B4 D4096 N16 (124 lanes per SM) ran faster
 * unsplit (16 states per lane) than split over 2 or 4 lanes. */
#define SCAN_LANES_PER_SM 96
/* Most states a scan channel can have: tpc * NS <= 256 (the tile plan needs tpc * NS <= threads
 * per block). */
#define SCAN_MAX_STATES 256
/* The state update's plan (see pssm_gpu_selective_state_update), from the H200 sweep of run 5
 * (bench/tune_plans/run5.txt, bench/RESULTS.md): 4 slots, 128 threads and 32 blocks per SM were
 * within 1% of the best plan for Mamba-2 (B64/B256 H80 P64 N128: 93 / 349 us) and within 7% for
 * Mamba-1 (B64 D4096 N16, where every plan took 19.3-21 us). */
#define UPDATE_THREADS 128
#define UPDATE_BLOCKS_PER_SM 32
#define UPDATE_SLOTS 4
/* The largest N the flat kernel (kernels/state_update_flat.body.h, one quad a lane) takes.  H200
 * runs 67-68: Mamba-1 B64 D4096 N16 19.1 -> 15.4 us, but Mamba-2 N128 B1 / B64 / B256 4.6 ->
 * 5.0, 93 -> 115, 350 -> 443 (with 4 quads a lane: 4.8, 100, 385): long rows keep the pipelined
 * kernels, which carry two batch rows' loads per lane. */
#define UPDATE_FLAT_MAX_N 32

/* ---------------------------------------------------------------- selective_scan_fwd */

static const int scan_kernels[3][3] = {
    {PSSM_KID_pssm_scan_fwd_n4_f32, PSSM_KID_pssm_scan_fwd_n8_f32, PSSM_KID_pssm_scan_fwd_n16_f32},
    {PSSM_KID_pssm_scan_fwd_n4_f16, PSSM_KID_pssm_scan_fwd_n8_f16, PSSM_KID_pssm_scan_fwd_n16_f16},
    {PSSM_KID_pssm_scan_fwd_n4_bf16, PSSM_KID_pssm_scan_fwd_n8_bf16,
     PSSM_KID_pssm_scan_fwd_n16_bf16},
};
/* The states alone (no output: the backward's checkpoints) */
static const int states_kernels[3][3] = {
    {PSSM_KID_pssm_scan_states_n4_f32, PSSM_KID_pssm_scan_states_n8_f32,
     PSSM_KID_pssm_scan_states_n16_f32},
    {PSSM_KID_pssm_scan_states_n4_f16, PSSM_KID_pssm_scan_states_n8_f16,
     PSSM_KID_pssm_scan_states_n16_f16},
    {PSSM_KID_pssm_scan_states_n4_bf16, PSSM_KID_pssm_scan_states_n8_bf16,
     PSSM_KID_pssm_scan_states_n16_bf16},
};
/* States per lane (4, 8 or 16) and lanes per channel for N states and `channels` channels.
 * The simulator plans exactly like a GPU (with its own, small, multiprocessor count), so that
 * the split plans a GPU takes for few channels are the ones the sim suites exercise. */
/* Floats of the double-buffered B/C tile for chunks of `chunk` steps (kernels/scan_fwd.body.h). */
static int64_t scan_tile_floats(int64_t chunk, int tpc, int ns)
{
    return 2 * chunk * tpc * (2 * ns + 4);
}

static void scan_split(const pssm_gpu *g, int64_t N, int64_t channels, int *ns, int *tpc)
{
    *ns = N <= 4 ? 4 : N <= 8 ? 8 : 16;
    *tpc = (int)pssm_plan_pow2_ceil((N + *ns - 1) / *ns);
    const int64_t want = (int64_t)(g->multiprocessors > 0 ? g->multiprocessors : 1) *
                         pssm_tune("SCAN_LANES_PER_SM", SCAN_LANES_PER_SM);
    /* a split must still fit the smallest B/C chunk (one 8-step group) in shared memory */
    while (*ns > 4 && channels * *tpc < want && *tpc * 2 <= g->warp_size &&
           scan_tile_floats(PSSM_SCAN_GROUP, *tpc * 2, *ns / 2) <= PSSM_SCAN_SMEM_FLOATS) {
        *ns /= 2;
        *tpc *= 2;
    }
}

portssm_status pssm_gpu_scan_fwd_launch(pssm_gpu *g, pssm_scan_fwd_params *p, portssm_dtype act,
                                        const char *op)
{
    pssm_bctx *c = g->ctx;
    const int64_t batch = p->batch, D = p->dim, L = p->seqlen, N = p->dstate;
    if (N > SCAN_MAX_STATES)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "%s: N = %lld states, the GPU kernels hold at most %d", op,
                         (long long)N, SCAN_MAX_STATES);
    int ns, tpc;
    scan_split(g, N, batch * D, &ns, &tpc);
    const int npad = tpc * ns;
    if (tpc > g->warp_size)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "%s: N = %lld states need %d lanes per channel, more than the warp "
                         "width %d",
                         op, (long long)N, tpc, (int)g->warp_size);
    int threads = npad > 128 ? 256 : 128;
    const int64_t tuned_threads = pssm_tune("SCAN_THREADS", threads);
    if (tuned_threads >= npad && tuned_threads <= PSSM_SCAN_MAX_THREADS &&
        tuned_threads % g->warp_size == 0)
        threads = (int)tuned_threads;

    /* A block never straddles a group of a variable B or C. */
    p->tile_dpg = pssm_plan_gcd(p->B_dpg, p->C_dpg);
    p->tiles = D / p->tile_dpg;
    const int cb = threads / tpc;
    p->tpc = tpc;
    p->log2_tpc = pssm_plan_ilog2(tpc);
    p->log2_np = pssm_plan_ilog2(npad);
    p->blocks_per_tile = (p->tile_dpg + cb - 1) / cb;
    /* Chunks of B/C tiles: each thread moves at most one 8-step group of one state per tile
     * (chunk * npad <= 8 * threads), two buffers of chunk rows of tpc * (2 ns + 4) floats fit
     * (kernels/scan_fwd.body.h), and no longer than the sequence needs. */
    int64_t chunk = 64;
    while (chunk > PSSM_SCAN_GROUP &&
           (chunk * npad > PSSM_SCAN_GROUP * threads ||
            scan_tile_floats(chunk, tpc, ns) > PSSM_SCAN_SMEM_FLOATS || chunk / 2 >= L))
        chunk >>= 1;
    if (scan_tile_floats(chunk, tpc, ns) > PSSM_SCAN_SMEM_FLOATS)
        return pssm_fail(c, PORTSSM_ERR_INTERNAL,
                         "%s: plan for N = %lld (%d lanes x %d states) needs %lld floats of "
                         "shared memory, the kernel has %d",
                         op, (long long)N, tpc, ns, (long long)scan_tile_floats(chunk, tpc, ns),
                         PSSM_SCAN_SMEM_FLOATS);
    p->chunk = (int32_t)chunk;
    p->ck_interval = PSSM_SCAN_CHECKPOINT_INTERVAL;

    const int64_t blocks = batch * p->tiles * p->blocks_per_tile;
    if (blocks > INT32_MAX)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "%s: %lld blocks exceed the grid limit (B = %lld, D = %lld)", op,
                         (long long)blocks, (long long)batch, (long long)D);
    const int kernel = (p->out ? scan_kernels : states_kernels)[pssm_plan_dtype_index(act)]
                                                               [ns == 4 ? 0 : ns == 8 ? 1 : 2];
    pssm_dim3 grid = {(uint32_t)blocks, 1, 1}, block = {(uint32_t)threads, 1, 1};
    PSSM_LAUNCH(g, kernel, grid, block, *p);
    return PORTSSM_OK;
}

portssm_status pssm_gpu_selective_scan_fwd(pssm_bctx *c, const portssm_selective_scan_fwd_args *a)
{
    const int vb = a->B.ndim == 4, vc = a->C.ndim == 4;
    pssm_scan_fwd_params p;
    memset(&p, 0, sizeof p);
    p.u = a->u.data;
    p.delta = a->delta.data;
    p.z = a->z.data;
    p.out = a->out.data;
    p.Bm = a->B.data;
    p.Cm = a->C.data;
    p.A = (const float *)a->A.data;
    p.D = (const float *)a->D.data;
    p.delta_bias = (const float *)a->delta_bias.data;
    p.x0 = (const float *)a->initial_state.data;
    p.xL = (float *)a->final_state.data;
    p.ck = (float *)a->checkpoints.data;
    if (p.ck)
        pssm_plan_strides(p.ck_s, &a->checkpoints, 4);
    p.batch = a->u.shape[0];
    p.dim = a->u.shape[1];
    p.seqlen = a->u.shape[2];
    p.dstate = a->A.shape[1];
    pssm_plan_strides(p.u_s, &a->u, 3);
    pssm_plan_strides(p.delta_s, &a->delta, 3);
    if (p.z)
        pssm_plan_strides(p.z_s, &a->z, 3);
    if (p.out)
        pssm_plan_strides(p.out_s, &a->out, 3);
    pssm_plan_strides(p.A_s, &a->A, 2);
    pssm_plan_strides(p.B_s, &a->B, vb ? 4 : 2);
    pssm_plan_strides(p.C_s, &a->C, vc ? 4 : 2);
    p.D_s = p.D ? a->D.stride[0] : 0;
    p.bias_s = p.delta_bias ? a->delta_bias.stride[0] : 0;
    if (p.x0)
        pssm_plan_strides(p.x0_s, &a->initial_state, 3);
    if (p.xL)
        pssm_plan_strides(p.xL_s, &a->final_state, 3);
    p.u_vec = pssm_plan_group_vec(&a->u, 2);
    p.delta_vec = pssm_plan_group_vec(&a->delta, 2);
    p.z_vec = pssm_plan_group_vec(&a->z, 2);
    p.out_vec = pssm_plan_group_vec(&a->out, 2);
    p.B_vec = vb && pssm_plan_group_vec(&a->B, 3);
    p.C_vec = vc && pssm_plan_group_vec(&a->C, 3);
    p.B_dpg = vb ? p.dim / a->B.shape[1] : p.dim;
    p.C_dpg = vc ? p.dim / a->C.shape[1] : p.dim;
    p.var_B = vb;
    p.var_C = vc;
    p.softplus = a->delta_softplus != 0;
    return pssm_gpu_scan_fwd_launch(pssm_gpu_of(c), &p, a->u.dtype, "selective_scan_fwd");
}

/* ---------------------------------------------------------------- selective_state_update */

/* [activation dtype][state dtype][fast with 1, 2, 4 slots; any layout
 * (kernels/state_update.body.h); flat, one quad a lane (kernels/state_update_flat.body.h)] */
#define UPDATE_VARIANTS(act, st)                                                                   \
    {PSSM_KID_pssm_state_update_s1_##act##_st##st, PSSM_KID_pssm_state_update_s2_##act##_st##st,   \
     PSSM_KID_pssm_state_update_s4_##act##_st##st, PSSM_KID_pssm_state_update_any_##act##_st##st,   \
     PSSM_KID_pssm_state_update_flat_q1_##act##_st##st}
static const int update_kernels[3][3][5] = {
    {UPDATE_VARIANTS(f32, f32), UPDATE_VARIANTS(f32, f16), UPDATE_VARIANTS(f32, bf16)},
    {UPDATE_VARIANTS(f16, f32), UPDATE_VARIANTS(f16, f16), UPDATE_VARIANTS(f16, bf16)},
    {UPDATE_VARIANTS(bf16, f32), UPDATE_VARIANTS(bf16, f16), UPDATE_VARIANTS(bf16, bf16)},
};
#undef UPDATE_VARIANTS

/* Four consecutive elements along the last of nd dims in one load: stride 1 there, the base
 * aligned to 4 elements and every other stride a multiple of 4 (N % 4 == 0 is the caller's). */
static int32_t quad_ok(const portssm_tensor *t, int nd)
{
    const uintptr_t bytes = 4u * (uintptr_t)(t->dtype == PORTSSM_F32 ? 4 : 2);
    if (t->stride[nd - 1] != 1 || ((uintptr_t)t->data % bytes) != 0)
        return 0;
    for (int i = 0; i < nd - 1; i++)
        if (t->stride[i] % 4 != 0)
            return 0;
    return 1;
}

/* Quads of states in one access (16 bytes of f32, 8 of f16/bf16): states contiguous along n in
 * groups of 4, every row aligned to 4 states. */
static int32_t state_vec(const portssm_tensor *s, int nd, int64_t N)
{
    return N % 4 == 0 && quad_ok(s, nd) ? 4 : 1;
}

portssm_status pssm_gpu_selective_state_update(pssm_bctx *c,
                                               const portssm_selective_state_update_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    const int heads = a->state.ndim == 4;
    const int nd = a->state.ndim;

    pssm_state_update_params p;
    memset(&p, 0, sizeof p);
    p.state = a->state.data; /* f32, f16 or bf16: the kernel's stamp */
    p.x = a->x.data;
    p.dt = a->dt.data;
    p.z = a->z.data;
    p.out = a->out.data;
    p.Bm = a->B.data;
    p.Cm = a->C.data;
    p.A = (const float *)a->A.data;
    p.D = (const float *)a->D.data;
    p.dt_bias = (const float *)a->dt_bias.data;
    p.sbi = (const int32_t *)a->state_batch_indices.data;
    p.batch = a->x.shape[0];
    p.heads = a->x.shape[1];
    p.hdim = heads ? a->x.shape[2] : 1;
    p.dstate = a->state.shape[nd - 1];
    p.state_rows = a->state.shape[0];
    p.sbi_s = p.sbi ? a->state_batch_indices.stride[0] : 0;
    p.softplus = a->dt_softplus != 0;

    /* The Mamba-1 form is the heads form with H = D, P = 1, G = 1: the P dims get stride 0. */
    const portssm_tensor *bhp[4] = {&a->x, &a->dt, &a->z, &a->out};
    int64_t *bhp_s[4] = {p.x_s, p.dt_s, p.z_s, p.out_s};
    for (int i = 0; i < 4; i++) {
        if (!bhp[i]->data)
            continue;
        bhp_s[i][0] = bhp[i]->stride[0];
        bhp_s[i][1] = bhp[i]->stride[1];
        bhp_s[i][2] = heads ? bhp[i]->stride[2] : 0;
    }
    p.state_s[0] = a->state.stride[0];
    p.state_s[1] = a->state.stride[1];
    p.state_s[2] = heads ? a->state.stride[2] : 0;
    p.state_s[3] = a->state.stride[nd - 1];
    p.A_s[0] = a->A.stride[0];
    p.A_s[1] = heads ? a->A.stride[1] : 0;
    p.A_s[2] = a->A.stride[heads ? 2 : 1];
    if (p.dstate == 1)
        p.A_s[2] = 0; /* one state: the tied path is the same computation */
    const portssm_tensor *bc[2] = {&a->B, &a->C};
    int64_t *bc_s[2] = {p.B_s, p.C_s};
    for (int i = 0; i < 2; i++) {
        bc_s[i][0] = bc[i]->stride[0];
        bc_s[i][1] = heads ? bc[i]->stride[1] : 0;
        bc_s[i][2] = bc[i]->stride[heads ? 2 : 1];
    }
    p.hpg = heads ? p.heads / a->B.shape[1] : p.heads;
    const portssm_tensor *hp[2] = {&a->D, &a->dt_bias};
    int64_t *hp_s[2] = {p.D_s, p.bias_s};
    for (int i = 0; i < 2; i++) {
        if (!hp[i]->data)
            continue;
        hp_s[i][0] = hp[i]->stride[0];
        hp_s[i][1] = heads ? hp[i]->stride[1] : 0;
    }

    p.vec = state_vec(&a->state, nd, p.dstate);
    p.a_vec = p.vec == 4 && quad_ok(&a->A, heads ? 3 : 2);
    p.bc_vec = p.vec == 4 && quad_ok(&a->B, heads ? 3 : 2) && quad_ok(&a->C, heads ? 3 : 2);
    /* Plan: `slots` slots of vec states per lane and round, a team of lanes per row wide enough
     * for one round to cover N (at most a warp: then rounds loop); blocks of rows along x, and
     * along y a stride over batch rows sized so that about UPDATE_BLOCKS_PER_SM blocks per
     * multiprocessor exist (a block reuses its rows' A, D, dt_bias and indices for each batch
     * row it walks).  The fast kernels take the layout every model has (quads of contiguous
     * states, A, B and C) when one round covers N; the `any` kernel (4 slots) the rest. */
    int64_t slots = pssm_tune("UPDATE_SLOTS", UPDATE_SLOTS);
    if (slots != 1 && slots != 2 && slots != 4)
        slots = UPDATE_SLOTS;
    int64_t threads = pssm_tune("UPDATE_THREADS", UPDATE_THREADS);
    if (threads < g->warp_size || threads > PSSM_SCAN_MAX_THREADS || threads % g->warp_size)
        threads = UPDATE_THREADS < g->warp_size ? g->warp_size : UPDATE_THREADS;
    const int quads = p.vec == 4 && (p.a_vec || p.A_s[2] == 0) && p.bc_vec;
    int fast = quads && pssm_plan_pow2_ceil((p.dstate + 4 * slots - 1) / (4 * slots)) <= g->warp_size;
    if (!fast)
        slots = 4;
    /* The flat kernel (kernels/state_update_flat.body.h) where every operand takes 32-bit
     * offsets and a team of lanes, one quad each, covers N. */
    const portssm_tensor *opnds[] = {&a->state, &a->x,     &a->dt, &a->z,       &a->out,
                                     &a->B,     &a->C,     &a->A,  &a->D,       &a->dt_bias,
                                     &a->state_batch_indices};
    int flat = quads && pssm_tune("UPDATE_FLAT", 1) != 0 && p.heads * p.hdim <= INT32_MAX &&
               p.dstate <= pssm_tune("UPDATE_FLAT_MAX_N", UPDATE_FLAT_MAX_N) &&
               p.batch <= (int64_t)g->max_grid_y && /* (a block per batch row) */
               pssm_plan_pow2_ceil(pssm_plan_cdiv(p.dstate, 4)) <= g->warp_size;
    for (size_t i = 0; flat && i < sizeof opnds / sizeof opnds[0]; i++)
        flat = pssm_plan_fits_span(opnds[i], g->offset32_span);
    if (flat)
        slots = 1;
    const int64_t per_lane = slots * p.vec;
    int64_t team = pssm_plan_pow2_ceil((p.dstate + per_lane - 1) / per_lane);
    if (team > g->warp_size)
        team = g->warp_size;
    p.team = (int32_t)team;
    p.log2_team = pssm_plan_ilog2(team);

    const int64_t rows_per_block = threads / team;
    const int64_t row_blocks = (p.heads * p.hdim + rows_per_block - 1) / rows_per_block;
    if (row_blocks > INT32_MAX)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "selective_state_update: %lld blocks of rows exceed the grid limit",
                         (long long)row_blocks);
    const int64_t want = (int64_t)(g->multiprocessors > 0 ? g->multiprocessors : 1) *
                         pssm_tune("UPDATE_BLOCKS_PER_SM", UPDATE_BLOCKS_PER_SM);
    /* (flat: no pipeline to feed, every batch row a block of its own) */
    int64_t by = flat ? p.batch : pssm_plan_cdiv(want, row_blocks);
    if (by > p.batch)
        by = p.batch;
    if (by > (int64_t)g->max_grid_y)
        by = g->max_grid_y;
    if (by < 1)
        by = 1;
    /* pointer steps of a block's batch loop (the products fit: validation bounds every offset) */
    p.x_y = by * p.x_s[0];
    p.dt_y = by * p.dt_s[0];
    p.z_y = by * p.z_s[0];
    p.out_y = by * p.out_s[0];
    p.B_y = by * p.B_s[0];
    p.C_y = by * p.C_s[0];
    p.sbi_y = by * p.sbi_s;
    p.state_y = p.sbi ? 0 : by * p.state_s[0];
    pssm_dim3 grid = {(uint32_t)row_blocks, (uint32_t)by, 1};
    pssm_dim3 block = {(uint32_t)threads, 1, 1};
    const int variant = flat ? 4 : !fast ? 3 : slots == 1 ? 0 : slots == 2 ? 1 : 2;
    PSSM_LAUNCH(g,
                update_kernels[pssm_plan_dtype_index(a->x.dtype)]
                              [pssm_plan_dtype_index(a->state.dtype)][variant],
                grid, block, p);
    return PORTSSM_OK;
}
