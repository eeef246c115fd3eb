/*
 * ops_conv1d_bwd.c - launch planning of causal_conv1d_bwd (kernels/conv1d_bwd_any.body.h),
 * shared by the cuda, hip and sim backends.
 *
 * Paths, each ending with the reduce kernel over the partial sums of dweight and dbias
 * (ops_reduce.c), in the order of their work item:
 *   cf, cl   one fused kernel (x and dout read once, dx written once) when there is no seq_idx,
 *            W in 2..4 (PSSM_C1_STAMPED), and x, dout and dx share one 16-byte vector grid
 *            along time (cf; W-1 must fit in a vector) or along channels (cl; whole aligned
 *            vectors);
 *   generic  every width, layout and option in three kernels: dpre = dout * act'(pre) into the
 *            workspace (F32 B x D x L), dx and dinitial_states from it, and blocks of
 *            (segment of the (b,t) pairs, channel) summing dweight and dbias.
 * Deterministic: every sum has a fixed order that depends on the shapes and the device only.
 */
#include "ops_conv1d.h"
#include "ops_reduce.h"
#include "plan_util.h"
#include "workspace_plan.h"

#include "../../kernels/params.h"

#include <string.h>

/* Blocks of the dw kernel a launch should offer per multiprocessor, and the fewest (b,t) pairs
 * a block sums (so that its set-up and tree are a small part of its work). */
#define C1B_DW_BLOCKS_PER_SM 8
#define C1B_DW_MIN_PAIRS (8 * PSSM_C1_BLOCK)
/* Warps the cf kernel should offer per multiprocessor, as the forward (ops_conv1d.c); the cl
 * kernel takes one wave of pssm_c1_cl_slots. */
#define C1B_CF_WARPS_PER_SM 32

/* [dtype][W - PSSM_C1_MIN_WIDTH] */
static const int cf_kernels[3][PSSM_C1_WIDTHS] = PSSM_C1_DTYPE_IDS(bwd_cf);
static const int cl_kernels[3][PSSM_C1_WIDTHS] = PSSM_C1_DTYPE_IDS(bwd_cl);

static const int dpre_kernels[3] = {PSSM_KID_pssm_conv1d_bwd_dpre_any_f32,
                                    PSSM_KID_pssm_conv1d_bwd_dpre_any_f16,
                                    PSSM_KID_pssm_conv1d_bwd_dpre_any_bf16};
static const int dx_kernels[3] = {PSSM_KID_pssm_conv1d_bwd_dx_any_f32,
                                  PSSM_KID_pssm_conv1d_bwd_dx_any_f16,
                                  PSSM_KID_pssm_conv1d_bwd_dx_any_bf16};
static const int dw_kernels[3] = {PSSM_KID_pssm_conv1d_bwd_dw_any_f32,
                                  PSSM_KID_pssm_conv1d_bwd_dw_any_f16,
                                  PSSM_KID_pssm_conv1d_bwd_dw_any_bf16};

typedef enum conv_bwd_path { PATH_CF, PATH_CL, PATH_GENERIC } conv_bwd_path;

typedef struct conv_bwd_plan {
    pssm_conv1d_bwd_params p;
    conv_bwd_path path;
    int64_t parts; /* partials per output element of the reduction */
    size_t bytes;  /* workspace */
} conv_bwd_plan;

/* The fused vector kernels' path for these args, or the generic one. */
static conv_bwd_path choose_path(const portssm_causal_conv1d_bwd_args *a, int32_t *misalign)
{
    const int64_t W = a->weight.shape[1], vec = pssm_c1_vec(a->x.dtype);
    const int64_t B = a->x.shape[0], D = a->x.shape[1], L = a->x.shape[2];
    if (a->seq_idx.data || !PSSM_C1_STAMPED(W))
        return PATH_GENERIC;
    int32_t m1 = 0, m2 = 0;
    if (W - 1 <= vec && L >= vec && pssm_c1_vec_grid(&a->x, &a->dout, 2, vec, &m1) &&
        pssm_c1_vec_grid(&a->x, &a->dx, 2, vec, &m2)) {
        *misalign = m1;
        return PATH_CF;
    }
    /* cl: every (b, t) row of channels whole, aligned vectors */
    if (D % vec == 0 && pssm_c1_vec_grid(&a->x, &a->dout, 1, vec, &m1) &&
        pssm_c1_vec_grid(&a->x, &a->dx, 1, vec, &m2) && m1 == 0 &&
        (B == 1 || a->x.stride[0] % vec == 0)) {
        *misalign = 0;
        return PATH_CL;
    }
    return PATH_GENERIC;
}

static void strides3(int64_t *b, int64_t *d, int64_t *l, const portssm_tensor *t)
{
    *b = t->stride[0];
    *d = t->stride[1];
    *l = t->stride[2];
}

/* The plan for validated args; the workspace pointers are set when `ws` is given. */
static portssm_status plan_bwd(pssm_gpu *g, const portssm_causal_conv1d_bwd_args *a, void *ws,
                               conv_bwd_plan *pl)
{
    pssm_conv1d_bwd_params *p = &pl->p;
    memset(pl, 0, sizeof *pl);
    if (a->weight.shape[1] > PSSM_C1_GPU_MAX_WIDTH)
        return pssm_c1_too_wide(g->ctx, "causal_conv1d_bwd", a->weight.shape[1]);
    p->x = a->x.data;
    p->weight = a->weight.data;
    p->bias = a->bias.data;
    p->init = a->initial_states.data;
    p->dout = a->dout.data;
    p->dfinal = a->dfinal_states.data;
    p->seq_idx = (const int32_t *)a->seq_idx.data;
    p->dx = a->dx.data;
    p->dinit = a->dinitial_states.data;
    p->batch = a->x.shape[0];
    p->dim = a->x.shape[1];
    p->len = a->x.shape[2];
    strides3(&p->x_sb, &p->x_sd, &p->x_sl, &a->x);
    strides3(&p->g_sb, &p->g_sd, &p->g_sl, &a->dout);
    strides3(&p->dx_sb, &p->dx_sd, &p->dx_sl, &a->dx);
    p->w_sd = a->weight.stride[0];
    p->w_sw = a->weight.stride[1];
    if (p->bias)
        p->bias_sd = a->bias.stride[0];
    if (p->seq_idx) {
        p->seq_sb = a->seq_idx.stride[0];
        p->seq_sl = a->seq_idx.stride[1];
    }
    if (p->init)
        strides3(&p->init_sb, &p->init_sd, &p->init_sw, &a->initial_states);
    if (p->dfinal)
        strides3(&p->df_sb, &p->df_sd, &p->df_sw, &a->dfinal_states);
    if (p->dinit)
        strides3(&p->di_sb, &p->di_sd, &p->di_sw, &a->dinitial_states);
    p->width = (int32_t)a->weight.shape[1];
    p->weight_dtype = pssm_c1_kernel_dtype(a->weight.dtype);
    p->silu = a->activation == PORTSSM_ACTIVATION_SILU;
    /* neighbouring threads along the smaller stride of x */
    const uint64_t sd = pssm_plan_stride_mag(p->x_sd), sl = pssm_plan_stride_mag(p->x_sl);
    p->chan_fastest = p->dim > 1 && (p->len == 1 || sd < sl);

    const int64_t sms = g->multiprocessors > 0 ? g->multiprocessors : 1;
    const int64_t vec = pssm_c1_vec(a->x.dtype);
    pl->path = choose_path(a, &p->misalign);
    if (pl->path == PATH_CF) { /* a warp per (row, segment of seg_len tiles of warp vectors) */
        const int64_t rows = p->batch * p->dim;
        const int64_t tiles = pssm_plan_cdiv(p->len / vec > 0 ? p->len / vec : 1, g->warp_size);
        int64_t seg_len = tiles;
        if (g->is_simulator) /* small test shapes: still several segments of several tiles */
            seg_len = tiles < 2 ? tiles : 2;
        else
            while (seg_len > 1 && rows * pssm_plan_cdiv(tiles, seg_len) < sms * C1B_CF_WARPS_PER_SM)
                seg_len = pssm_plan_cdiv(seg_len, 2);
        p->seg_len = seg_len;
        p->segs = pssm_plan_cdiv(tiles, seg_len);
        p->work = rows * p->segs;
        pl->parts = p->batch * p->segs;
    } else if (pl->path == PATH_CL) { /* a thread per (b, segment of steps, channel vector) */
        p->nvec = p->dim / vec;
        const int64_t least = 8 * p->width; /* the hw steps read twice stay a small share */
        /* (the simulator: segments of `least` steps, as the forward's) */
        const int kernel = cl_kernels[pssm_plan_dtype_index(a->x.dtype)]
                                     [p->width - PSSM_C1_MIN_WIDTH];
        p->seg_len = g->is_simulator
                         ? pssm_c1_cl_seg_len(1, p->len, p->len, least, 1)
                         : pssm_c1_cl_seg_len(p->batch * p->nvec, p->len,
                                              pssm_c1_cl_slots(g, kernel), least, 1);
        p->segs = pssm_plan_cdiv(p->len, p->seg_len);
        p->work = p->batch * p->segs * p->nvec;
        pl->parts = p->batch * p->segs;
    } else { /* dw: segments of the B*L pairs of a channel, enough blocks to fill the device */
        const int64_t pairs = p->batch * p->len;
        int64_t segs = pssm_plan_cdiv(sms * C1B_DW_BLOCKS_PER_SM, p->dim);
        const int64_t most = pssm_plan_cdiv(pairs, g->is_simulator ? 64 : C1B_DW_MIN_PAIRS);
        segs = segs > most ? most : segs;
        segs = segs < 1 ? 1 : segs;
        p->seg_len = pssm_plan_cdiv(pairs, segs);
        p->segs = pssm_plan_cdiv(pairs, p->seg_len);
        pl->parts = p->segs;
    }

    pssm_ws_plan w = {0, 0};
    const int generic = pl->path == PATH_GENERIC;
    const size_t dpre_off =
        pssm_ws_take(&w, generic ? p->batch * p->dim * p->len : 0, sizeof(float));
    const size_t part_off = pssm_ws_take(&w, pl->parts * p->dim * (p->width + 1), sizeof(float));
    if (w.overflow)
        return pssm_fail(g->ctx, PORTSSM_ERR_UNSUPPORTED,
                         "causal_conv1d_bwd: its workspace would exceed the address space");
    pl->bytes = w.used;
    p->dpre = (float *)pssm_ws_at(ws, dpre_off);
    p->part = (float *)pssm_ws_at(ws, part_off);
    return PORTSSM_OK;
}

portssm_status pssm_gpu_causal_conv1d_bwd_workspace(pssm_bctx *c,
                                                    const portssm_causal_conv1d_bwd_args *a,
                                                    size_t *bytes)
{
    conv_bwd_plan pl;
    PSSM_TRY_STATUS(plan_bwd(pssm_gpu_of(c), a, NULL, &pl));
    *bytes = pl.bytes;
    return PORTSSM_OK;
}

portssm_status pssm_gpu_causal_conv1d_bwd(pssm_bctx *c, const portssm_causal_conv1d_bwd_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    conv_bwd_plan pl;
    PSSM_TRY_STATUS(plan_bwd(g, a, a->workspace.data, &pl));
    pssm_conv1d_bwd_params *p = &pl.p;
    const int dt = pssm_plan_dtype_index(a->x.dtype);
    const pssm_dim3 block = {PSSM_C1_BLOCK, 1, 1};

    if (pl.path == PATH_CF) {
        const int64_t warps = PSSM_C1_BLOCK / g->warp_size;
        PSSM_LAUNCH(g, cf_kernels[dt][p->width - PSSM_C1_MIN_WIDTH],
                    pssm_c1_grid(pssm_plan_cdiv(p->work, warps)), block, *p);
    } else if (pl.path == PATH_CL) {
        PSSM_LAUNCH(g, cl_kernels[dt][p->width - PSSM_C1_MIN_WIDTH],
                    pssm_c1_grid(pssm_plan_cdiv(p->work, PSSM_C1_BLOCK)), block, *p);
    } else {
        p->work = p->batch * p->dim * p->len;
        PSSM_LAUNCH(g, dpre_kernels[dt], pssm_c1_grid(pssm_plan_cdiv(p->work, PSSM_C1_BLOCK)),
                    block, *p);
        p->work = p->batch * p->dim * (p->len + (p->dinit ? p->width - 1 : 0));
        PSSM_LAUNCH(g, dx_kernels[dt], pssm_c1_grid(pssm_plan_cdiv(p->work, PSSM_C1_BLOCK)),
                    block, *p);
        p->work = p->segs * p->dim;
        PSSM_LAUNCH(g, dw_kernels[dt], pssm_c1_grid(p->work), block, *p);
    }

    pssm_reduce_batch r;
    memset(&r, 0, sizeof r);
    const int64_t row = p->width + 1, k_stride = p->dim * row;
    const int64_t w_s[2] = {row, 1}, b_s[1] = {row};
    pssm_reduce_add(&r, p->part, pl.parts, k_stride, w_s, &a->dweight);
    if (a->dbias.data)
        pssm_reduce_add(&r, p->part + p->width, pl.parts, k_stride, b_s, &a->dbias);
    return pssm_reduce_launch(g, &r);
}
