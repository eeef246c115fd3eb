/*
 * ops_norm.c - launch planning of norm_fwd and norm_bwd (kernels/norm_kernels.h), shared by the
 * cuda, hip and sim backends.
 *
 * A segment (one row's group of n channels) is normalised by a team of threads that holds it
 * in registers, PSSM_NM_NV groups of E channels a thread (E = a 16-byte vector of the
 * activation dtype): teams of a power of two of lanes within a warp for short segments (many a
 * block); for longer ones teams of exactly the threads needed, several a block where that makes
 * whole warps within PSSM_NM_MAX_TEAM threads, else a whole block (a multiple of the warp);
 * and tiles read again per pass past what the largest team holds.  16-byte vector accesses
 * where every row tensor has unit channel stride, 16-byte aligned rows and n a multiple of E;
 * element accesses (any strides) otherwise.
 *
 * The backward gives each team a unit of rows_per rows of one group and sums dweight / dbias
 * over them in registers, then the reduce kernel (ops_reduce.c) adds the units' partial rows
 * (workspace, F32) in a fixed order: deterministic, no atomics.  rows_per trades the partials'
 * traffic (2 x 4 bytes per channel per unit, written and read) against the teams in flight.
 */
#include "gpu.h"
#include "ops_reduce.h"
#include "plan_util.h"
#include "tuning.h"
#include "workspace_plan.h"

#include "../../kernels/params.h"

#include <string.h>

/* The threads a multiprocessor holds that the backward assumes where the driver cannot say
 * (pssm_gpu_resident_blocks), and the fewest rows a unit sums (its partials' traffic against
 * its rows': 1 / NORM_BWD_MIN_ROWS of it at most). */
#define NORM_BWD_THREADS_PER_SM 1024
#define NORM_BWD_MIN_ROWS 16
/* The forward's grid: at most this many blocks a launch (its loop takes the rest). */
#define NORM_MAX_BLOCKS (1 << 22)

/* [element path, vector path][dtype] */
static const int fwd_kernels[2][3] = {
    {PSSM_KID_pssm_norm_fwd_any_f32, PSSM_KID_pssm_norm_fwd_any_f16,
     PSSM_KID_pssm_norm_fwd_any_bf16},
    {PSSM_KID_pssm_norm_fwd_f32, PSSM_KID_pssm_norm_fwd_f16, PSSM_KID_pssm_norm_fwd_bf16}};
/* the vector path's forms (norm_params.h): [gate before, gate after, prenorm][dtype] */
enum { FORM_GB, FORM_GA, FORM_PR, FORMS };
static const int form_fwd_kernels[FORMS][3] = {
    {PSSM_KID_pssm_norm_fwd_gb_f32, PSSM_KID_pssm_norm_fwd_gb_f16, PSSM_KID_pssm_norm_fwd_gb_bf16},
    {PSSM_KID_pssm_norm_fwd_ga_f32, PSSM_KID_pssm_norm_fwd_ga_f16, PSSM_KID_pssm_norm_fwd_ga_bf16},
    {PSSM_KID_pssm_norm_fwd_pr_f32, PSSM_KID_pssm_norm_fwd_pr_f16, PSSM_KID_pssm_norm_fwd_pr_bf16}};
static const int form_bwd_kernels[FORMS][3] = {
    {PSSM_KID_pssm_norm_bwd_gb_f32, PSSM_KID_pssm_norm_bwd_gb_f16, PSSM_KID_pssm_norm_bwd_gb_bf16},
    {PSSM_KID_pssm_norm_bwd_ga_f32, PSSM_KID_pssm_norm_bwd_ga_f16, PSSM_KID_pssm_norm_bwd_ga_bf16},
    {PSSM_KID_pssm_norm_bwd_pr_f32, PSSM_KID_pssm_norm_bwd_pr_f16, PSSM_KID_pssm_norm_bwd_pr_bf16}};
static const int bwd_kernels[2][3] = {
    {PSSM_KID_pssm_norm_bwd_any_f32, PSSM_KID_pssm_norm_bwd_any_f16,
     PSSM_KID_pssm_norm_bwd_any_bf16},
    {PSSM_KID_pssm_norm_bwd_f32, PSSM_KID_pssm_norm_bwd_f16, PSSM_KID_pssm_norm_bwd_bf16}};

/* The kernels' run-time dtype codes (the dialect's PSSM_DT_F32/F16/BF16) are portssm_dtype's
 * pinned values. */
_Static_assert(PORTSSM_F32 == 0 && PORTSSM_F16 == 1 && PORTSSM_BF16 == 2,
               "pssm_load_any's dtype codes");

typedef struct norm_plan {
    pssm_norm_params p;
    pssm_dim3 block;
    uint32_t shared;  /* backward: dynamic shared memory of the row prefetch (bytes)        */
    int vec;        /* the 16-byte vector kernels                                      */
    int64_t chunks; /* backward: units of rows per group (partial rows of the reduction) */
    size_t bytes;   /* backward: workspace                                              */
} norm_plan;

/* A row tensor (R,H) that 16-byte vectors of e channels may walk: channel stride 1, data and
 * every row 16-byte aligned (absent: no constraint). */
static int rows_vec_ok(const portssm_tensor *t)
{
    if (!t->data)
        return 1;
    const uint64_t es = t->dtype == PORTSSM_F32 ? 4 : 2;
    if (t->stride[1] != 1 || ((uintptr_t)t->data & 15u) != 0)
        return 0;
    return t->shape[0] == 1 || (pssm_plan_stride_mag(t->stride[0]) * es) % 16 == 0;
}

/* A channel vector (H): stride 1, aligned. */
static int chan_vec_ok(const portssm_tensor *t)
{
    return !t->data || (t->stride[0] == 1 && ((uintptr_t)t->data & 15u) == 0);
}

static void rows_strides(int64_t *sr, int64_t *sh, const portssm_tensor *t)
{
    *sr = t->data ? t->stride[0] : 0;
    *sh = t->data ? t->stride[1] : 0;
}

/* What the forward and the backward share: the shape, groups, team, tiles, weights. */
static void plan_common(pssm_gpu *g, norm_plan *pl, portssm_dtype act, const portssm_tensor *x,
                        const portssm_tensor *z, const portssm_tensor *weight,
                        const portssm_tensor *bias, const portssm_tensor *mean,
                        const portssm_tensor *rstd, portssm_norm_kind kind,
                        int32_t norm_before_gate, int64_t group_size)
{
    pssm_norm_params *p = &pl->p;
    p->rows = x->shape[0];
    p->hidden = x->shape[1];
    p->n = group_size > 0 ? group_size : p->hidden;
    p->groups = p->hidden / p->n;
    p->z = z->data;
    p->weight = weight->data;
    p->bias = bias->data;
    p->mean = (float *)mean->data;
    p->rstd = (float *)rstd->data;
    rows_strides(&p->z_sr, &p->z_sh, z);
    p->w_sh = weight->stride[0];
    p->b_sh = bias->data ? bias->stride[0] : 0;
    rows_strides(&p->mean_sr, &p->mean_sg, mean);
    rows_strides(&p->rstd_sr, &p->rstd_sg, rstd);
    p->w_dt = (int32_t)weight->dtype;
    p->rms = kind == PORTSSM_NORM_RMS;
    p->gate = !z->data           ? PSSM_NM_GATE_NONE
              : norm_before_gate ? PSSM_NM_GATE_AFTER
                                 : PSSM_NM_GATE_BEFORE;

    const int64_t E = act == PORTSSM_F32 ? PSSM_NM_E_F32 : PSSM_NM_E_16;
    const int64_t warp = g->warp_size > 0 ? g->warp_size : 32;
    const int64_t need = pssm_plan_cdiv(pssm_plan_cdiv(p->n, E), PSSM_NM_NV);
    const int64_t most = PSSM_NM_MAX_TEAM / warp * warp;
    int64_t team;
    if (need <= warp) {
        team = pssm_plan_pow2_ceil(need);
        pl->block.x = PSSM_NM_TEAM_BLOCK;
    } else {
        /* a team of exactly `need` threads where a few of them make whole warps within
         * PSSM_NM_MAX_TEAM (a group of 640 bf16 channels: 40 threads, 4 teams a block of 160;
         * rounded up to 64 lanes, 24 of them sat idle); else whole warps, the last part idle */
        const int64_t k = warp / pssm_plan_gcd(need, warp);
        if (need * k <= most) {
            team = need;
            pl->block.x = (uint32_t)(need * k);
        } else {
            team = pssm_plan_cdiv(need, warp) * warp;
            team = team < most ? team : most;
            pl->block.x = (uint32_t)team;
        }
    }
    pl->block.y = pl->block.z = 1;
    p->team = (int32_t)team;
    p->team_mode = team <= warp                   ? PSSM_NM_TEAMS_IN_WARP
                   : team == (int64_t)pl->block.x ? PSSM_NM_TEAM_IS_BLOCK
                                                  : PSSM_NM_TEAMS_MIXED;
    while (((int64_t)1 << p->team_log2) < team)
        p->team_log2++;
    p->tiles = (int32_t)pssm_plan_cdiv(pssm_plan_cdiv(p->n, E), team * PSSM_NM_NV);
    pl->vec = p->n % E == 0 && rows_vec_ok(x) && rows_vec_ok(z) && chan_vec_ok(weight) &&
              chan_vec_ok(bias);
}

/* The vector path's form for a plan (norm_params.h), or -1: the generic kernels.  Fields the
 * direction lacks are NULL (the forward has no dresidual_out, the backward no residual). */
static int form_of(const norm_plan *pl)
{
    const pssm_norm_params *p = &pl->p;
    if (!pl->vec || p->bias)
        return -1;
    if (p->gate != PSSM_NM_GATE_NONE)
        return p->res || p->res_out || p->dres_out ? -1
               : p->gate == PSSM_NM_GATE_AFTER     ? FORM_GA
                                                   : FORM_GB;
    const int f32 = (!p->res || p->res_dt == PORTSSM_F32) &&
                    (!p->res_out || p->ro_dt == PORTSSM_F32) &&
                    (!p->dres_out || p->gro_dt == PORTSSM_F32);
    return f32 ? FORM_PR : -1;
}

/* The kernel of a planned launch: its form's, else `generic`'s for the plan's path. */
static int kernel_for(const norm_plan *pl, const int generic[2][3], const int forms[FORMS][3],
                      portssm_dtype act)
{
    const int dt = pssm_plan_dtype_index(act), form = form_of(pl);
    return form >= 0 ? forms[form][dt] : generic[pl->vec][dt];
}

static pssm_dim3 grid_for(const norm_plan *pl, int64_t work)
{
    int64_t blocks = pssm_plan_cdiv(work, pl->block.x / pl->p.team);
    blocks = blocks < NORM_MAX_BLOCKS ? blocks : NORM_MAX_BLOCKS;
    const pssm_dim3 grid = {(uint32_t)blocks, 1, 1};
    return grid;
}

portssm_status pssm_gpu_norm_fwd(pssm_bctx *c, const portssm_norm_fwd_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    norm_plan pl;
    memset(&pl, 0, sizeof pl);
    pssm_norm_params *p = &pl.p;
    plan_common(g, &pl, a->x.dtype, &a->x, &a->z, &a->weight, &a->bias, &a->mean, &a->rstd, a->kind,
                a->norm_before_gate, a->group_size);
    p->x = a->x.data;
    p->res = a->residual.data;
    p->out = a->out.data;
    p->res_out = a->residual_out.data;
    rows_strides(&p->x_sr, &p->x_sh, &a->x);
    rows_strides(&p->res_sr, &p->res_sh, &a->residual);
    rows_strides(&p->out_sr, &p->out_sh, &a->out);
    rows_strides(&p->ro_sr, &p->ro_sh, &a->residual_out);
    p->x_dt = (int32_t)a->x.dtype;
    p->res_dt = a->residual.data ? (int32_t)a->residual.dtype : (int32_t)PORTSSM_F32;
    p->ro_dt = a->residual_out.data ? (int32_t)a->residual_out.dtype : (int32_t)PORTSSM_F32;
    p->eps = a->eps;
    pl.vec = pl.vec && rows_vec_ok(&a->residual) && rows_vec_ok(&a->out) &&
             rows_vec_ok(&a->residual_out);
    p->work = p->rows * p->groups;
    PSSM_LAUNCH(g, kernel_for(&pl, fwd_kernels, form_fwd_kernels, a->x.dtype),
                grid_for(&pl, p->work), pl.block, *p);
    return PORTSSM_OK;
}

/* The backward's row prefetch (norm_params.h) where it pays and fits: a gated form's kernel
 * (the kernels of the others have none, norm.body.h), one tile, asynchronous copies, every
 * prefetched tensor in whole 16-byte vectors, its two row buffers within the block's shared
 * memory. */
static void plan_prefetch(const pssm_gpu *g, norm_plan *pl, portssm_dtype act)
{
    pssm_norm_params *p = &pl->p;
    const int form = form_of(pl);
    if (pssm_tune("NORM_BWD_PREFETCH", 1) == 0 || (form != FORM_GA && form != FORM_GB) ||
        p->tiles != 1 || !g->async_copies)
        return;
    const int64_t e = act == PORTSSM_F32 ? PSSM_NM_E_F32 : PSSM_NM_E_16;
    const int64_t sb = p->x_dt == PORTSSM_F32 ? 4 : 2, ab = act == PORTSSM_F32 ? 4 : 2;
    if ((e * sb) % 16 || (e * ab) % 16)
        return;
    const int64_t bytes = 2 * PSSM_NM_PREFETCH_VECS(e, sb, ab, ab) * 16 * (int64_t)pl->block.x;
    if (bytes + (int64_t)sizeof(float) * PSSM_NM_RED > (int64_t)g->max_shared_per_block)
        return;
    p->prefetch = 1;
    pl->shared = (uint32_t)bytes;
}

/* The backward's plan for validated args; the workspace pointers are set when `ws` is given. */
static portssm_status plan_bwd(pssm_gpu *g, const portssm_norm_bwd_args *a, void *ws, norm_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pssm_norm_params *p = &pl->p;
    const portssm_dtype act = a->dout.dtype;
    plan_common(g, pl, act, &a->x, &a->z, &a->weight, &a->bias, &a->mean, &a->rstd, a->kind,
                a->norm_before_gate, a->group_size);
    p->x = a->x.data;
    p->dout = a->dout.data;
    p->dres_out = a->dresidual_out.data;
    p->out = a->dx.data;
    p->res_out = a->dresidual.data;
    p->dz = a->dz.data;
    p->y = a->out.data;
    rows_strides(&p->x_sr, &p->x_sh, &a->x);
    rows_strides(&p->g_sr, &p->g_sh, &a->dout);
    rows_strides(&p->gro_sr, &p->gro_sh, &a->dresidual_out);
    rows_strides(&p->out_sr, &p->out_sh, &a->dx);
    rows_strides(&p->ro_sr, &p->ro_sh, &a->dresidual);
    rows_strides(&p->dz_sr, &p->dz_sh, &a->dz);
    rows_strides(&p->y_sr, &p->y_sh, &a->out);
    p->x_dt = (int32_t)a->x.dtype;
    p->gro_dt = a->dresidual_out.data ? (int32_t)a->dresidual_out.dtype : (int32_t)PORTSSM_F32;
    p->ro_dt = a->dresidual.data ? (int32_t)a->dresidual.dtype : (int32_t)PORTSSM_F32;
    pl->vec = pl->vec && rows_vec_ok(&a->dout) && rows_vec_ok(&a->dresidual_out) &&
              rows_vec_ok(&a->dx) && rows_vec_ok(&a->dresidual) && rows_vec_ok(&a->dz) &&
              rows_vec_ok(&a->out);

    plan_prefetch(g, pl, act);

    /* units: rows_per rows of one group each, as many as the device holds teams at once (one
     * wave: a unit's rows run one after another, so a second, partial wave of units would add
     * a whole unit's time for the few teams left; run 122: 512 units in 396 places, 59% of
     * the copy bandwidth) */
    const int64_t sms = g->multiprocessors > 0 ? g->multiprocessors : 1;
    int64_t rows_per = pssm_tune("NORM_BWD_ROWS", 0);
    if (rows_per <= 0) {
        const int64_t assumed =
            pssm_tune("NORM_BWD_THREADS_PER_SM", NORM_BWD_THREADS_PER_SM) / pl->block.x;
        const int64_t blocks_per_sm = pssm_gpu_resident_blocks(
            g, kernel_for(pl, bwd_kernels, form_bwd_kernels, act), pl->block.x, pl->shared,
            (int32_t)(assumed > 0 ? assumed : 1));
        const int64_t teams = sms * blocks_per_sm * (pl->block.x / p->team);
        const int64_t chunks = teams / p->groups > 0 ? teams / p->groups : 1;
        rows_per = pssm_plan_cdiv(p->rows, chunks);
        rows_per = rows_per > NORM_BWD_MIN_ROWS ? rows_per : NORM_BWD_MIN_ROWS;
        if (g->is_simulator) /* small test shapes: still several units of several rows */
            rows_per = 3;
    }
    rows_per = rows_per < p->rows ? rows_per : p->rows;
    p->rows_per = rows_per;
    pl->chunks = pssm_plan_cdiv(p->rows, rows_per);
    p->work = pl->chunks * p->groups;

    pssm_ws_plan w = {0, 0};
    const int64_t part = a->dweight.data || a->dbias.data ? pl->chunks * p->hidden : 0;
    const size_t w_off = pssm_ws_take(&w, part, sizeof(float));
    const size_t b_off = pssm_ws_take(&w, a->dbias.data ? part : 0, sizeof(float));
    if (w.overflow)
        return pssm_fail(g->ctx, PORTSSM_ERR_UNSUPPORTED,
                         "norm_bwd: its workspace would exceed the address space");
    pl->bytes = w.used;
    if (part > 0)
        p->part_w = (float *)pssm_ws_at(ws, w_off);
    if (a->dbias.data)
        p->part_b = (float *)pssm_ws_at(ws, b_off);
    return PORTSSM_OK;
}

portssm_status pssm_gpu_norm_bwd_workspace(pssm_bctx *c, const portssm_norm_bwd_args *a,
                                           size_t *bytes)
{
    norm_plan pl;
    PSSM_TRY_STATUS(plan_bwd(pssm_gpu_of(c), a, NULL, &pl));
    *bytes = pl.bytes;
    return PORTSSM_OK;
}

portssm_status pssm_gpu_norm_bwd(pssm_bctx *c, const portssm_norm_bwd_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    norm_plan pl;
    PSSM_TRY_STATUS(plan_bwd(g, a, a->workspace.data, &pl));
    pssm_norm_params *p = &pl.p;
    PSSM_LAUNCH_SHARED(g, kernel_for(&pl, bwd_kernels, form_bwd_kernels, a->dout.dtype),
                       grid_for(&pl, p->work), pl.block, pl.shared, *p);
    pssm_reduce_batch r;
    memset(&r, 0, sizeof r);
    const int64_t p_s[1] = {1};
    if (a->dweight.data)
        pssm_reduce_add(&r, p->part_w, pl.chunks, p->hidden, p_s, &a->dweight);
    if (a->dbias.data)
        pssm_reduce_add(&r, p->part_b, pl.chunks, p->hidden, p_s, &a->dbias);
    return pssm_reduce_launch(g, &r);
}
