/*
 * ops_ssd_bwd.c - ssd_chunk_scan_bwd by chunks (kernels/ssd_chunk.body.h says the algorithm),
 * shared by the cuda, hip and sim backends.
 *
 * The forward's chunk states and state pass again (the state entering every chunk; where the
 * forward's checkpoints give it, each chunk's prep alone: ssd_bwd_route), then:
 *   Y        the chunk products' Y mode: y again for dz (or the forward's y where the caller
 *            gives it and the kernel with M in registers runs), dy = dout silu(z), sum_p dy y_inter;
 *   dCB      the gradient of each chunk's C B^T per slice of a group's heads, added over the
 *            slices by the reduce kernel, and the intra-chunk share of dcs, in f32;
 *   DC       the product of dC per slice of a group's heads (the states' share, and dCB's in the
 *            group's first slice), before the reverse pass writes over S_in's 16-bit copy;
 *   states   the chunk-state kernel's gradient form: each chunk's pull on the state entering it;
 *   reverse  the reverse state pass: the gradient at every chunk's end, dinitial_states, and the
 *            chunk ends' share of dcs;
 *   DX, DB   the products of dx and dB (DB as DC, from the gradients at the chunks' ends);
 *   dt       ddt per token, and per chunk the partial sums of dA, ddt_bias and dD;
 *   reduce   the fixed-order sums: dB and dC over the heads of a group, dA, dD, ddt_bias.
 * No atomics: the result is the same bits every run.  Workspace: the packed row's sequences,
 * the chunks' decays and gradients at their ends (f32, (P,N) per chunk), dy (with z), dCB per
 * group and chunk (and per slice where a group has several), dB and dC per slice of heads (f32),
 * the partial sums, and the states entering the chunks (f32, (P,N) per chunk) unless the
 * forward's checkpoints stand in for them (ssd_bwd_route).
 */
#include "gpu.h"
#include "ops_reduce.h"
#include "ops_ssd.h"
#include "plan_util.h"
#include "tuning.h"

#include "../../kernels/params.h"

/* How the backward takes S_in, the state entering every chunk: which kernels read it, in
 * which dtype, and whether the chunk states and the forward's state pass run again.  plan_bwd
 * decides it from the operands the launches take (route_bwd), so that the workspace holds the
 * f32 states only where a launch reads or writes them; the launches follow the plan's. */
typedef struct ssd_bwd_route {
    int yr;      /* Y by the kernel with M in registers (ybr): S_in in the activation dtype  */
    int dbc_act; /* dB and dC with the heads pipelined copy 16-bit state tiles (sact)       */
    int s16;     /* every kernel that reads S_in takes it in the activation dtype           */
    int ck;      /* the forward's checkpoints are S_in: chunk states and pass not run again */
    pssm_kernel_id dc_kernel;
} ssd_bwd_route;

typedef struct ssd_bwd_plan {
    ssd_ws ws;
    ssd_chunking k;
    int64_t eblocks, ptiles, hpb;
    size_t decay_off, states_off, dstates_off, dy_off, dBh_off, dCh_off, dcb_off, dcbp_off;
    size_t part_y_off, part_v_off, part_x_off, part_row_off, part_col_off, part_e_off;
    size_t part_A_off, part_bias_off, part_D_off, cb_off, prep_off, sact_off;
    int has_cb, has_sact, has_states;
    ssd_bwd_route route;
} ssd_bwd_plan;

/* A contiguous (B,L,H,P) tensor of the activations' dtype in the workspace (dy). */
static portssm_tensor ws_rows(const portssm_tensor *like, void *data)
{
    portssm_tensor t = *like;
    t.data = data;
    t.stride[3] = 1;
    for (int d = 2; d >= 0; d--)
        t.stride[d] = t.stride[d + 1] * t.shape[d + 1];
    return t;
}

/* base: the workspace's (plan_bwd: its stand-in while sizing). */
static void fill_params(const portssm_ssd_chunk_scan_bwd_args *a, const ssd_bwd_plan *pl,
                        void *base, portssm_tensor *dy, pssm_ssd_chunk_params *p)
{
    const ssd_common s = SSD_COMMON_OF(a);
    pssm_gpu_ssd_fill(&s, &pl->k, base, &pl->ws, p);
    /* NULL where the checkpoints are S_in: a launch that reads or writes it then faults */
    p->states = pl->has_states ? (float *)pssm_ws_at(base, pl->states_off) : NULL;
    p->decay = (float *)pssm_ws_at(base, pl->decay_off);
    p->dstates = (float *)pssm_ws_at(base, pl->dstates_off);
    p->dout = a->dout.data;
    pssm_plan_strides(p->dout_s, &a->dout, 4);
    *dy = a->z.data ? ws_rows(&a->dout, pssm_ws_at(base, pl->dy_off)) : a->dout;
    p->dy = dy->data;
    pssm_plan_strides(p->dy_s, dy, 4);
    p->dz = a->dz.data;
    if (p->dz)
        pssm_plan_strides(p->dz_s, &a->dz, 4);
    p->dx = a->dx.data;
    pssm_plan_strides(p->dx_s, &a->dx, 4);
    p->ddt = a->ddt.data;
    pssm_plan_strides(p->ddt_s, &a->ddt, 3);
    p->dfinal = a->dfinal_states.data;
    if (p->dfinal)
        pssm_plan_strides(p->df_s, &a->dfinal_states, 4);
    p->dinit = a->dinitial_states.data;
    if (p->dinit)
        pssm_plan_strides(p->di_s, &a->dinitial_states, 4);
    p->state_dt =
        pssm_gpu_ssd_state_dt(&a->initial_states, &a->dfinal_states, &a->dinitial_states);
    p->dBh = (float *)pssm_ws_at(base, pl->dBh_off);
    p->dCh = (float *)pssm_ws_at(base, pl->dCh_off);
    p->dcb = (float *)pssm_ws_at(base, pl->dcb_off);
    p->dcbp = p->hpg / pl->hpb > 1 ? (float *)pssm_ws_at(base, pl->dcbp_off) : p->dcb;
    p->part_y = (float *)pssm_ws_at(base, pl->part_y_off);
    p->part_v = (float *)pssm_ws_at(base, pl->part_v_off);
    p->part_x = (float *)pssm_ws_at(base, pl->part_x_off);
    p->part_row = (float *)pssm_ws_at(base, pl->part_row_off);
    p->part_col = (float *)pssm_ws_at(base, pl->part_col_off);
    p->part_e = (float *)pssm_ws_at(base, pl->part_e_off);
    p->part_A = (float *)pssm_ws_at(base, pl->part_A_off);
    p->part_bias = (float *)pssm_ws_at(base, pl->part_bias_off);
    p->part_D = a->dD.data ? (float *)pssm_ws_at(base, pl->part_D_off) : NULL;
    p->eblocks = pl->eblocks;
    p->hpb = pl->hpb;
    p->prep = (float *)pssm_ws_at(base, pl->prep_off);
    if (pl->has_cb)
        p->cb = (float *)pssm_ws_at(base, pl->cb_off);
}

/* The chunk products' operands of one backward mode (the table in ssd_chunk.body.h). */
static void set_prod(pssm_ssd_chunk_params *p, int mode, const portssm_ssd_chunk_scan_bwd_args *a,
                     const portssm_tensor *dy)
{
    const int64_t P = p->hdim, N = p->dstate;
    p->mode = mode;
    switch (mode) {
    case PSSM_SSD_PROD_Y:
        p->u = pssm_gpu_ssd_opnd(&a->C, 1, N), p->v = pssm_gpu_ssd_opnd(&a->B, 1, N);
        p->w = pssm_gpu_ssd_opnd(&a->x, 0, P);
        p->inner = N, p->width = P, p->sprod = p->states, p->s_trans = 0;
        /* the epilogue's tiles: dout and z in, dy and dz out (vec: by 16-byte copies) */
        p->go = pssm_gpu_ssd_opnd(&a->dout, 0, P);
        p->zo = a->z.data ? pssm_gpu_ssd_opnd(&a->z, 0, P) : p->go;
        p->yo = pssm_gpu_ssd_opnd(dy, 0, P);
        p->oo = a->dz.data ? pssm_gpu_ssd_opnd(&a->dz, 0, P) : p->yo;
        break;
    case PSSM_SSD_PROD_DX:
        p->u = pssm_gpu_ssd_opnd(&a->B, 1, N), p->v = pssm_gpu_ssd_opnd(&a->C, 1, N);
        p->w = pssm_gpu_ssd_opnd(dy, 0, P);
        p->inner = N, p->width = P, p->sprod = p->dstates, p->s_trans = 0;
        /* the epilogue's tiles: x in (dy is the diagonal slab's W), dx out */
        p->xo = pssm_gpu_ssd_opnd(&a->x, 0, P), p->oo = pssm_gpu_ssd_opnd(&a->dx, 0, P);
        break;
    case PSSM_SSD_PROD_DB: /* (V unused: M is dCB) */
        p->u = pssm_gpu_ssd_opnd(&a->x, 0, P), p->v = p->u;
        p->w = pssm_gpu_ssd_opnd(&a->C, 1, N);
        p->inner = P, p->width = N, p->sprod = p->dstates, p->s_trans = 1;
        break;
    case PSSM_SSD_PROD_DCB: /* C B^T (where the workspace has none) and dy x^T */
        p->u = pssm_gpu_ssd_opnd(&a->C, 1, N), p->v = pssm_gpu_ssd_opnd(&a->B, 1, N);
        p->w = pssm_gpu_ssd_opnd(dy, 0, P), p->xo = pssm_gpu_ssd_opnd(&a->x, 0, P);
        p->inner = N, p->width = P, p->sprod = NULL, p->s_trans = 0;
        break;
    default: /* DC */
        p->u = pssm_gpu_ssd_opnd(dy, 0, P), p->v = p->u;
        p->w = pssm_gpu_ssd_opnd(&a->B, 1, N);
        p->inner = P, p->width = N, p->sprod = p->states, p->s_trans = 1;
        break;
    }
    p->coltiles = p->width == P ? p->ptiles : p->ntiles;
}

static const pssm_kernel_id dcb_kernels[3] = {
    PSSM_KID_pssm_ssd_chunk_dcb_f32, PSSM_KID_pssm_ssd_chunk_dcb_f16, PSSM_KID_pssm_ssd_chunk_dcb_bf16};
/* dB and dC with the heads pipelined, where one slab of U covers P and U and the states move by
 * 16-byte vectors (ssd_dbc.body.h); elsewhere the products' DB and DC stamps */
static const pssm_kernel_id dbc_kernels[3] = {
    PSSM_KID_pssm_ssd_chunk_dbc_f32, PSSM_KID_pssm_ssd_chunk_dbc_f16, PSSM_KID_pssm_ssd_chunk_dbc_bf16};
static pssm_kernel_id dbc_kernel(const pssm_ssd_chunk_params *p, int64_t tile, int di)
{
    return p->u.vec && p->vec && p->hdim <= tile ? dbc_kernels[di] : pssm_gpu_ssd_prod_kernel(p, di);
}
static const pssm_kernel_id ybr_kernels[2] = {PSSM_KID_pssm_ssd_chunk_ybr_f16,
                                              PSSM_KID_pssm_ssd_chunk_ybr_bf16};
static const pssm_kernel_id dxr_kernels[2] = {PSSM_KID_pssm_ssd_chunk_dxr_f16,
                                              PSSM_KID_pssm_ssd_chunk_dxr_bf16};
static const pssm_kernel_id dt_bwd_kernels[3] = {
    PSSM_KID_pssm_ssd_dt_bwd_f32, PSSM_KID_pssm_ssd_dt_bwd_f16, PSSM_KID_pssm_ssd_dt_bwd_bf16};

/* Y's parameters (p: fill_params' with Y's operands) for the kernel with M in registers: S_in's
 * 16-bit copy (sact, where planned), and the forward's y, which it reads (by vectors) instead of
 * forming y again, where the caller gives it; the generic stamps form it. */
static pssm_ssd_chunk_params y_params(const portssm_ssd_chunk_scan_bwd_args *a,
                                      const pssm_ssd_chunk_params *p, void *sact)
{
    pssm_ssd_chunk_params py = *p;
    py.sact = sact;
    py.sact_bf16 = a->x.dtype == PORTSSM_BF16;
    if (a->y.data) {
        const pssm_ssd_opnd ys = pssm_gpu_ssd_opnd(&a->y, 0, p->hdim);
        if (ys.vec && pssm_tune("SSD_YSAVED", 1))
            py.ys = ys;
    }
    return py;
}

/* The route (p: fill_params' with Y's operands; sact as y_params takes it).  Where every kernel
 * that reads S_in takes it in the activation dtype (Y with M in registers, dC from the pipelined
 * kernel's 16-bit tiles, and the reverse pass), no f32 S_in is written (s16); the forward's
 * checkpoints then are S_in as they need it (ck), and the chunk states and the state pass are
 * not run again: the chunk-state kernel's prep alone.  f32 activations take f32 checkpoints as
 * the f32 states. */
static ssd_bwd_route route_bwd(const portssm_ssd_chunk_scan_bwd_args *a,
                               const pssm_ssd_chunk_params *p, const portssm_tensor *dy, void *sact,
                               int64_t tile)
{
    const int di = pssm_plan_dtype_index(a->x.dtype);
    const pssm_ssd_chunk_params py = y_params(a, p, sact);
    pssm_ssd_chunk_params pc = *p;
    set_prod(&pc, PSSM_SSD_PROD_DC, a, dy);
    ssd_bwd_route r;
    r.yr = PSSM_SSD_YR(py) && di > 0 && pssm_tune("SSD_YR", 1);
    r.dc_kernel = dbc_kernel(&pc, tile, di);
    r.dbc_act = di > 0 && pssm_tune("SSD_DBC_ACT", 1);
    r.s16 = r.yr && r.dbc_act && r.dc_kernel == dbc_kernels[di] && pssm_tune("SSD_S16", 1);
    r.ck = a->checkpoints.data && (r.s16 || di == 0) && pssm_tune("SSD_CKPT", 1);
    return r;
}

static void plan_bwd(const portssm_ssd_chunk_scan_bwd_args *a, ssd_bwd_plan *pl)
{
    const ssd_common s = SSD_COMMON_OF(a);
    ssd_ws_begin(&s, &pl->ws);
    pl->k = pssm_gpu_ssd_chunking(&s);
    pssm_ws_plan *w = &pl->ws.w;
    const int64_t B = a->x.shape[0], L = a->x.shape[1], H = a->x.shape[2], P = a->x.shape[3];
    const int64_t N = a->B.shape[3], chunks = B * H * pl->k.nchunks;
    /* the backward's state pass: four adjacent n per thread where N % 4 == 0 (p.vec) */
    pl->eblocks = pssm_plan_cdiv(P * N / (N % 4 == 0 ? 4 : 1), PSSM_SSD_BLOCK);
    pl->ptiles = pssm_plan_cdiv(P, pl->k.tile);
    pl->decay_off = pssm_ws_take(w, chunks, sizeof(float));
    pl->dstates_off = pssm_ws_take(w, chunks * P * N, sizeof(float));
    pl->dy_off = pssm_ws_take(w, a->z.data ? B * L * H * P : 0, pssm_plan_act_size(a->x.dtype));
    /* dCB, dB and dC: a block sums hpb heads of a group (the largest divisor of H/G up to 8:
     * fewer partials to write and add, 8x fewer at G = 1, against blocks 8x longer) */
    const int64_t hpg = H / a->B.shape[2];
    pl->hpb = 1;
    for (int64_t d = 8; d > 1; d--)
        if (hpg % d == 0) {
            pl->hpb = d;
            break;
        }
    pl->dBh_off = pssm_ws_take(w, B * L * (H / pl->hpb) * N, sizeof(float));
    pl->dCh_off = pssm_ws_take(w, B * L * (H / pl->hpb) * N, sizeof(float));
    const int64_t G = a->B.shape[2], QQ = pl->k.chunk * pl->k.chunk, spg = hpg / pl->hpb;
    pl->dcb_off = pssm_ws_take(w, B * G * pl->k.nchunks * QQ, sizeof(float));
    pl->dcbp_off = pssm_ws_take(w, spg > 1 ? B * G * spg * pl->k.nchunks * QQ : 0, sizeof(float));
    pl->part_y_off = pssm_ws_take(w, B * H * pl->ptiles * L, sizeof(float));
    pl->part_v_off = pssm_ws_take(w, B * H * pl->ptiles * L, sizeof(float));
    pl->part_x_off = pssm_ws_take(w, B * H * pl->ptiles * L, sizeof(float));
    pl->part_row_off = pssm_ws_take(w, B * H * (pl->k.chunk / pl->k.tile) * L, sizeof(float));
    pl->part_col_off = pssm_ws_take(w, B * H * (pl->k.chunk / pl->k.tile) * L, sizeof(float));
    pl->part_e_off =
        pssm_ws_take(w, B * H * pl->eblocks * PSSM_SSD_EWARPS * pl->k.nchunks, sizeof(float));
    pl->part_A_off = pssm_ws_take(w, chunks, sizeof(float));
    pl->part_bias_off = pssm_ws_take(w, chunks, sizeof(float));
    pl->part_D_off = pssm_ws_take(w, a->dD.data ? chunks * P : 0, sizeof(float));
    pl->prep_off = pssm_gpu_ssd_take_prep(&s, &pl->k, w);
    pl->cb_off = 0;
    pl->has_cb = pssm_gpu_ssd_take_cb(&s, &pl->k, w, &pl->cb_off);
    /* S_in in the activation dtype for the Y kernel with M in registers (as the forward's) */
    pl->has_sact = a->x.dtype != PORTSSM_F32 && N % 8 == 0 && pl->has_cb;
    pl->sact_off = pl->has_sact ? pssm_ws_take(w, chunks * P * N, 2) : 0;
    /* The route, from the operands the launches take (fill_params, set_prod's Y): it asks
     * whether the sub-buffers are there and 16-byte aligned, never where they lie, so the size
     * query (no workspace) plans at a stand-in base of the workspace's alignment, never
     * dereferenced.  (It reads no state: the f32 states come last.) */
    void *const base = a->workspace.data ? a->workspace.data : (void *)(uintptr_t)PSSM_WS_ALIGN;
    pl->has_states = 0, pl->states_off = 0;
    pssm_ssd_chunk_params p;
    portssm_tensor dy;
    fill_params(a, pl, base, &dy, &p);
    set_prod(&p, PSSM_SSD_PROD_Y, a, &dy);
    pl->route =
        route_bwd(a, &p, &dy, pl->has_sact ? pssm_ws_at(base, pl->sact_off) : NULL, pl->k.tile);
    /* S_in in f32: the chunk states and the forward's state pass write it, Y, dC and the
     * reverse pass read it; where the checkpoints are S_in (ck) none of them does (f32
     * activations read the checkpoints in its place, 16-bit ones take S_in in their dtype from
     * them: s16) */
    pl->has_states = !pl->route.ck;
    pl->states_off = pl->has_states ? pssm_ws_take(w, chunks * P * N, sizeof(float)) : 0;
}

portssm_status pssm_gpu_ssd_chunk_scan_bwd_workspace(pssm_bctx *c,
                                                     const portssm_ssd_chunk_scan_bwd_args *a,
                                                     size_t *bytes)
{
    ssd_bwd_plan pl;
    plan_bwd(a, &pl);
    return pssm_gpu_ssd_ws_bytes(c, &pl.ws, "ssd_chunk_scan_bwd", bytes);
}

portssm_status pssm_gpu_ssd_chunk_scan_bwd(pssm_bctx *c, const portssm_ssd_chunk_scan_bwd_args *a)
{
    static const char op[] = "ssd_chunk_scan_bwd";
    pssm_gpu *g = pssm_gpu_of(c);
    ssd_bwd_plan pl;
    plan_bwd(a, &pl);
    pssm_ssd_chunk_params p;
    portssm_tensor dy;
    fill_params(a, &pl, a->workspace.data, &dy, &p);
    const int64_t BH = p.batch * p.heads, X_MAX = INT32_MAX, Y_MAX = 65535;
    const int64_t L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate, nc = p.nchunks;
    const uint32_t threads =
        a->x.dtype == PORTSSM_F32 ? PSSM_SSD_CHUNK_THREADS_F32 : PSSM_SSD_CHUNK_THREADS_16;
    const pssm_dim3 block = {threads, 1, 1}, pass_block = {PSSM_SSD_BLOCK, 1, 1};
    pssm_dim3 state_grid = {1, 1, 1}, pass_grid = {1, 1, 1}, pgrid = {1, 1, 1}, ngrid;
    pssm_dim3 fwd_pass_grid = {1, 1, 1};
    pssm_dim3 dt_grid = {1, 1, 1}, cb_grid, dcb_grid = {1, 1, 1};
    const int64_t npairs = (int64_t)p.qtiles * (p.qtiles + 1) / 2, spg = p.hpg / pl.hpb;
    /* every grid first: a case too large fails before anything is written */
    PSSM_TRY_STATUS(
        pssm_gpu_ssd_grid(g, op, BH * nc * p.ptiles, X_MAX, &state_grid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, BH * nc, X_MAX, &dt_grid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_cb_grid(g, op, &p, &cb_grid));
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, BH * pl.eblocks, X_MAX, &pass_grid.x));
    PSSM_TRY_STATUS(
        pssm_gpu_ssd_grid(g, op, pssm_gpu_ssd_pass_blocks(&p), X_MAX, &fwd_pass_grid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, BH * nc * p.qtiles, X_MAX, &pgrid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, p.ptiles, Y_MAX, &pgrid.y));
    ngrid = pgrid;
    PSSM_TRY_STATUS(
        pssm_gpu_ssd_grid(g, op, BH / pl.hpb * nc * p.qtiles, X_MAX, &ngrid.x)); /* by slices */
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, BH / pl.hpb * nc * npairs, X_MAX, &dcb_grid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, p.ntiles, Y_MAX, &ngrid.y));

    const ssd_common s = SSD_COMMON_OF(a);
    PSSM_TRY_STATUS(pssm_gpu_ssd_launch_seq(g, &s, (int32_t *)p.seq, NULL));
    const int di = pssm_plan_dtype_index(a->x.dtype);
    /* Y's operands: C B^T per group (U = C, V = B) and the chunk states (W = x, V = B) read
     * them too */
    set_prod(&p, PSSM_SSD_PROD_Y, a, &dy);
    PSSM_TRY_STATUS(pssm_gpu_ssd_launch_cb(g, &p, cb_grid, block, di));
    /* the forward's states entering every chunk (no final state: nothing reads it), also in
     * the activation dtype where the Y kernel with M in registers runs (py; dC's parameters
     * take the same sact below; the other products' sact, where set, is dS_e) */
    void *const sact = pl.has_sact ? pssm_ws_at(a->workspace.data, pl.sact_off) : NULL;
    pssm_ssd_chunk_params py = y_params(a, &p, sact);
    /* the plan's route (route_bwd: from these same operands), which sized the workspace */
    const int yr = pl.route.yr, dbc_act = pl.route.dbc_act, s16 = pl.route.s16;
    const int ck = pl.route.ck;
    const pssm_kernel_id dc_kernel = pl.route.dc_kernel;
    if (!yr)
        py.sact = NULL;
    const void *sin_act = s16 ? (ck ? a->checkpoints.data : sact) : NULL;
    if (ck && di == 0) { /* every copy of p below reads them as its states (Y's: sprod) */
        p.states = (float *)a->checkpoints.data;
        p.sprod = p.states;
        py.states = p.states, py.sprod = p.states;
    }
    if (s16) {
        py.sact = (void *)sin_act; /* (Y and dC only read it) */
        py.act_only = 1;
    }
    if (ck) {
        pssm_ssd_chunk_params pp = p;
        pp.prep_only = 1, pp.ptiles = 1; /* a block per chunk */
        PSSM_LAUNCH(g, pssm_ssd_chunk_state_kernels[di], dt_grid, block, pp);
    } else {
        PSSM_LAUNCH(g, pssm_ssd_chunk_state_kernels[di], state_grid, block, p);
        PSSM_LAUNCH(g, PSSM_KID_pssm_ssd_state_pass, fwd_pass_grid, pass_block, py);
    }
    /* y again: dz, dy, and the state's share of dcs */
    if (yr) {
        const pssm_dim3 yr_block = {(uint32_t)(PSSM_SSD_OUTR_WARPS * g->warp_size), 1, 1};
        PSSM_LAUNCH(g, ybr_kernels[di - 1], pgrid, yr_block, py);
    } else {
        PSSM_LAUNCH(g, pssm_gpu_ssd_prod_kernel(&p, di), pgrid, block, p);
    }
    /* Y's parameters: the chunk states' gradient form, the passes and DX start from them */
    const pssm_ssd_chunk_params py0 = p;
    /* dCB per slice and the intra-chunk share of dcs; dCB per group (neither reads the
     * gradients at the chunks' ends: they run first, so that dC can take S_in in the activation
     * dtype while the workspace still holds it) */
    set_prod(&p, PSSM_SSD_PROD_DCB, a, &dy);
    PSSM_LAUNCH(g, dcb_kernels[di], dcb_grid, block, p);
    if (spg > 1) { /* dcb[b, g] = sum over the group's slices of dcbp[b, g, slice] */
        const int64_t per = nc * p.chunk * p.chunk, dcb_shape[2] = {p.batch * (H / p.hpg), per};
        const int64_t dcbp_s[2] = {spg * per, 1};
        portssm_tensor dcb; /* (the backend modules link no core symbol: built here) */
        memset(&dcb, 0, sizeof dcb);
        dcb.data = p.dcb, dcb.dtype = PORTSSM_F32, dcb.ndim = 2;
        dcb.shape[0] = dcb_shape[0], dcb.shape[1] = dcb_shape[1];
        dcb.stride[0] = per, dcb.stride[1] = 1;
        pssm_reduce_batch rd;
        memset(&rd, 0, sizeof rd);
        pssm_reduce_add(&rd, p.dcbp, spg, per, dcbp_s, &dcb);
        PSSM_TRY_STATUS(pssm_reduce_launch(g, &rd));
    }
    /* dC per slice of heads: the pipelined kernel copies S_in's tiles as they lie where the
     * state pass left them in the activation dtype (sact, for Y: yr), instead of its f32 tiles
     * and a conversion pass */
    set_prod(&p, PSSM_SSD_PROD_DC, a, &dy);
    pssm_ssd_chunk_params pdc = p;
    pdc.sact = yr && dbc_act && dc_kernel == dbc_kernels[di] ? py.sact : NULL;
    PSSM_LAUNCH(g, dc_kernel, ngrid, block, pdc);
    /* the gradients of the chunks' states, from their tokens (W = dy, V = C), then passed
     * back */
    pssm_ssd_chunk_params gs = py0;
    gs.grad_state = 1;
    gs.w = pssm_gpu_ssd_opnd(&dy, 0, P);
    gs.v = pssm_gpu_ssd_opnd(&a->C, 1, N);
    gs.states = p.dstates;
    PSSM_LAUNCH(g, pssm_ssd_chunk_state_kernels[di], state_grid, block, gs);
    /* (dS_e also in the activation dtype, over S_in, where DX runs with M in registers: pdx's
     * sact; dB reads it there too) */
    pssm_ssd_chunk_params pdx = py0;
    set_prod(&pdx, PSSM_SSD_PROD_DX, a, &dy);
    pdx.sact = sact;
    pdx.sact_bf16 = py.sact_bf16;
    const int dxr = PSSM_SSD_DXR(pdx) && di > 0 && pssm_tune("SSD_DXR", 1);
    pssm_ssd_chunk_params pq = p;
    set_prod(&pq, PSSM_SSD_PROD_DB, a, &dy);
    const pssm_kernel_id db_kernel = dbc_kernel(&pq, pl.k.tile, di);
    const int db_act = dxr && dbc_act && db_kernel == dbc_kernels[di];
    /* (S_in in the activation dtype where s16; dS_e into sact alone where DX and dB read it
     * from there) */
    pssm_ssd_chunk_params pb = py0;
    pb.sact = dxr ? sact : NULL;
    pb.sact_bf16 = py.sact_bf16;
    pb.sin_act = sin_act;
    pb.act_only = db_act && pssm_tune("SSD_DSE16", 1);
    PSSM_LAUNCH(g, PSSM_KID_pssm_ssd_state_pass_bwd, pass_grid, pass_block, pb);
    /* dx; dB per slice of heads */
    set_prod(&p, PSSM_SSD_PROD_DX, a, &dy);
    if (dxr) {
        const pssm_dim3 dxr_block = {(uint32_t)(PSSM_SSD_OUTR_WARPS * g->warp_size), 1, 1};
        PSSM_LAUNCH(g, dxr_kernels[di - 1], pgrid, dxr_block, pdx);
    } else {
        PSSM_LAUNCH(g, pssm_gpu_ssd_prod_kernel(&p, di), pgrid, block, p);
    }
    set_prod(&p, PSSM_SSD_PROD_DB, a, &dy);
    pssm_ssd_chunk_params pdb = p;
    pdb.sact = db_act ? sact : NULL;
    PSSM_LAUNCH(g, db_kernel, ngrid, block, pdb);
    /* ddt, and the per-chunk partials of dA, ddt_bias, dD (dD's x and dy: xo, yo) */
    p.xo = pssm_gpu_ssd_opnd(&a->x, 0, P), p.yo = pssm_gpu_ssd_opnd(&dy, 0, P);
    PSSM_LAUNCH(g, dt_bwd_kernels[di], dt_grid, block, p);

    /* the fixed-order sums: over the heads of a group, over (b, c) [and p] */
    const int64_t per_group = p.hpg / pl.hpb, slices = H / pl.hpb; /* slices of a group */
    const int64_t grp_s[4] = {L * slices * N, slices * N, per_group * N, 1}, c_s[1] = {nc};
    pssm_reduce_batch r;
    memset(&r, 0, sizeof r);
    pssm_reduce_add(&r, p.dBh, per_group, N, grp_s, &a->dB);
    pssm_reduce_add(&r, p.dCh, per_group, N, grp_s, &a->dC);
    pssm_reduce_add2(&r, p.part_A, p.batch, H * nc, nc, 1, c_s, &a->dA);
    if (a->ddt_bias.data)
        pssm_reduce_add2(&r, p.part_bias, p.batch, H * nc, nc, 1, c_s, &a->ddt_bias);
    if (a->dD.data) {
        const int64_t dhp_s[2] = {nc * P, 1}, dh_s[1] = {nc * P};
        if (a->dD.ndim == 2)
            pssm_reduce_add2(&r, p.part_D, p.batch, H * nc * P, nc, P, dhp_s, &a->dD);
        else
            pssm_reduce_add2(&r, p.part_D, p.batch, H * nc * P, nc * P, 1, dh_s, &a->dD);
    }
    return pssm_reduce_launch(g, &r);
}
