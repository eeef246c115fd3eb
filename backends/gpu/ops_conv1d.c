/*
 * ops_conv1d.c - launch planning of causal_conv1d_fwd and causal_conv1d_update (kernels of
 * kernels/conv1d_kernels.h), shared by the cuda, hip and sim backends.
 *
 * Arguments arrive validated: shapes agree, dtypes are as documented (weight and bias F32 or
 * the activation dtype), states need W >= 2, and every size and offset product fits in int64.
 *
 * fwd picks one of three kernels:
 *   cf_w<W>  when x and out can share a 16-byte vector grid along time (stride 1 in time),
 *   cl_w<W>  when they can share one across channels (stride 1 in channels),
 *   any      otherwise: for W outside PSSM_C1_MIN_WIDTH .. PSSM_C1_MAX_WIDTH (2..4), or when the
 *            grid would hold no whole vector (L or D < VEC).
 */
#include "gpu.h"
#include "ops_conv1d.h"
#include "plan_util.h"
#include "tuning.h"

#include "../../kernels/params.h"

#include <stdint.h>
#include <string.h>

/* [dtype][W - PSSM_C1_MIN_WIDTH] */
static const int cf_kernels[3][PSSM_C1_WIDTHS] = PSSM_C1_DTYPE_IDS(fwd_cf);
static const int cl_kernels[3][PSSM_C1_WIDTHS] = PSSM_C1_DTYPE_IDS(fwd_cl);
static const int update_kernels[3][PSSM_C1_WIDTHS] = PSSM_C1_DTYPE_IDS(update);
static const int fwd_any_kernels[3] = {PSSM_KID_pssm_conv1d_fwd_any_f32,
                                       PSSM_KID_pssm_conv1d_fwd_any_f16,
                                       PSSM_KID_pssm_conv1d_fwd_any_bf16};
static const int update_any_kernels[3] = {PSSM_KID_pssm_conv1d_update_any_f32,
                                          PSSM_KID_pssm_conv1d_update_any_f16,
                                          PSSM_KID_pssm_conv1d_update_any_bf16};

/* Channel-first work items (warps) a launch should offer per multiprocessor.  A warp prefetches
 * the next tile of its segment, so long segments pay; they are cut only below this many items
 * (H200, bf16 W4 silu: B4 D4096 L8192 whole rows 157 us, 2 tiles 183 us; B1 D1024 L16384
 * 2-4 tiles 31 us, whole rows 38 us). */
#define C1_CF_WARPS_PER_SM 32
/* Channel-last work items per multiprocessor where the driver cannot tell the blocks it holds
 * (pssm_c1_cl_slots): each is a long run of steps (launch_cl). */
#define C1_CL_THREADS_PER_SM 256
/* Grid-stride loops take whatever the grid does not cover; the cap keeps grid.x * block.x within
 * 2^32 - 1 threads, the most HIP launches along x (CUDA allows more). */
#define C1_MAX_BLOCKS ((int64_t)(UINT32_MAX / PSSM_C1_BLOCK))

int64_t pssm_c1_cl_seg_len(int64_t rows, int64_t len, int64_t slots, int64_t least,
                           int64_t mult)
{
    const int64_t segs = rows > 0 && slots / rows > 1 ? slots / rows : 1;
    int64_t seg_len = pssm_plan_cdiv(len, segs);
    seg_len = seg_len < least ? least : seg_len;
    seg_len = pssm_plan_cdiv(seg_len, mult) * mult;
    const int64_t most = pssm_plan_cdiv(len, mult) * mult;
    return seg_len > most ? most : seg_len;
}

int64_t pssm_c1_cl_slots(pssm_gpu *g, int kernel)
{
    const int64_t sms = g->multiprocessors > 0 ? g->multiprocessors : 1;
    return sms * PSSM_C1_BLOCK *
           pssm_gpu_resident_blocks(g, kernel, PSSM_C1_BLOCK, 0,
                                    C1_CL_THREADS_PER_SM / PSSM_C1_BLOCK);
}

/* Elements in a 16-byte vector. */
int64_t pssm_c1_vec(portssm_dtype t)
{
    return t == PORTSSM_F32 ? PSSM_C1_VEC_F32 : PSSM_C1_VEC_16;
}

static int64_t emod(int64_t a, int64_t m)
{
    const int64_t r = a % m;
    return r < 0 ? r + m : r;
}

pssm_dim3 pssm_c1_grid(int64_t blocks)
{
    pssm_dim3 g = {(uint32_t)(blocks < 1 ? 1 : blocks > C1_MAX_BLOCKS ? C1_MAX_BLOCKS : blocks),
                   1, 1};
    return g;
}

static const pssm_dim3 c1_block = {PSSM_C1_BLOCK, 1, 1};

/*
 * Can x and out (B,D,L) walk one grid of 16-byte vectors along dimension `vd` (1: channels,
 * 2: time)?  Stride 1 along vd, and the same misalignment (element offset modulo `vec`) for
 * x and out at every index: bases congruent modulo 16 bytes, and every stride the kernel
 * moves along between vectors congruent modulo vec (cl also keeps its grid across time steps,
 * so there the time strides must be multiples of vec).  *misalign: x's base offset.
 */
int pssm_c1_vec_grid(const portssm_tensor *x, const portssm_tensor *o, int vd, int64_t vec,
                      int32_t *misalign)
{
    const size_t es = pssm_plan_act_size(x->dtype);
    const uintptr_t xa = (uintptr_t)x->data, oa = (uintptr_t)o->data;
    if (x->stride[vd] != 1 || o->stride[vd] != 1 || xa % es || oa % es || xa % 16 != oa % 16)
        return 0;
    for (int i = 0; i < 3; i++) {
        if (i == vd || x->shape[i] == 1)
            continue;
        if (emod(x->stride[i] - o->stride[i], vec) != 0)
            return 0;
        if (vd == 1 && i == 2 && emod(x->stride[i], vec) != 0)
            return 0;
    }
    *misalign = (int32_t)((xa % 16) / es);
    return 1;
}

static void fill_fwd_params(pssm_conv1d_fwd_params *p, const portssm_causal_conv1d_fwd_args *a)
{
    memset(p, 0, sizeof *p);
    p->x = a->x.data;
    p->weight = a->weight.data;
    p->bias = a->bias.data;
    p->seq_idx = (const int32_t *)a->seq_idx.data;
    p->init = a->initial_states.data;
    p->final = a->final_states.data;
    p->out = a->out.data;
    p->batch = a->x.shape[0];
    p->dim = a->x.shape[1];
    p->len = a->x.shape[2];
    p->x_sb = a->x.stride[0];
    p->x_sd = a->x.stride[1];
    p->x_sl = a->x.stride[2];
    p->o_sb = a->out.stride[0];
    p->o_sd = a->out.stride[1];
    p->o_sl = a->out.stride[2];
    p->w_sd = a->weight.stride[0];
    p->w_sw = a->weight.stride[1];
    if (p->bias)
        p->bias_sd = a->bias.stride[0];
    if (p->seq_idx) {
        p->seq_sb = a->seq_idx.stride[0];
        p->seq_sl = a->seq_idx.stride[1];
    }
    if (p->init) {
        p->init_sb = a->initial_states.stride[0];
        p->init_sd = a->initial_states.stride[1];
        p->init_sw = a->initial_states.stride[2];
    }
    if (p->final) {
        p->final_sb = a->final_states.stride[0];
        p->final_sd = a->final_states.stride[1];
        p->final_sw = a->final_states.stride[2];
    }
    p->width = (int32_t)a->weight.shape[1];
    p->weight_dtype = pssm_c1_kernel_dtype(a->weight.dtype);
    p->silu = a->activation == PORTSSM_ACTIVATION_SILU;
}

portssm_status pssm_c1_too_wide(pssm_bctx *c, const char *op, int64_t W)
{
    return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                     "%s: W = %lld; the GPU kernels take widths up to %d (the cpu backend any)",
                     op, (long long)W, PSSM_C1_GPU_MAX_WIDTH);
}

/* Channel-first: a warp per (row, segment of seg_len tiles of warp*NV vectors). */
static portssm_status launch_cf(pssm_gpu *g, pssm_conv1d_fwd_params *p, int kernel, int64_t vec,
                                int64_t nv)
{
    const int64_t rows = p->batch * p->dim;
    const int64_t tile = (int64_t)g->warp_size * nv;
    const int64_t tiles = pssm_plan_cdiv(p->len / vec > 0 ? p->len / vec : 1, tile);
    const int64_t want =
        (int64_t)g->multiprocessors * pssm_tune("C1_CF_WARPS_PER_SM", C1_CF_WARPS_PER_SM);
    int64_t seg_len = tiles;
    if (g->is_simulator) /* small test shapes: still run several segments of several tiles */
        seg_len = tiles < 2 ? tiles : 2;
    else
        while (seg_len > 1 && rows * pssm_plan_cdiv(tiles, seg_len) < want)
            seg_len = pssm_plan_cdiv(seg_len, 2);
    p->seg_len = seg_len;
    p->segs = pssm_plan_cdiv(tiles, seg_len);
    p->work = rows * p->segs;
    const int64_t warps = PSSM_C1_BLOCK / g->warp_size;
    PSSM_LAUNCH(g, kernel, pssm_c1_grid(pssm_plan_cdiv(p->work, warps)), c1_block, *p);
    return PORTSSM_OK;
}

/* Channel-last: a thread per (b, segment of seg_len steps, channel group); groups are the
 * whole vectors of the batch's channel grid and then its edge channels, one each. */
static portssm_status launch_cl(pssm_gpu *g, pssm_conv1d_fwd_params *p, int kernel, int64_t vec,
                                int64_t steps)
{
    /* groups: the most any batch needs, over the misalignments its batches can have */
    const int vary = p->batch > 1 && emod(p->x_sb, vec) != 0;
    int64_t groups = 0;
    for (int64_t m = 0; m < vec; m++) {
        if (!vary && m != p->misalign)
            continue;
        const int64_t head = (vec - m) % vec < p->dim ? (vec - m) % vec : p->dim;
        const int64_t whole = (p->dim - head) / vec;
        const int64_t n = whole + (p->dim - whole * vec);
        groups = n > groups ? n : groups;
    }
    /* Long segments amortise a thread's set-up (VEC*W weights, the W-1 steps read again), and a
     * thread keeps its next U steps in flight, so one wave of long items beats many waves of
     * short ones (H200, B4 D4096 L2048 W4 bf16, steps per segment: 32 -> 103 us, 128 -> 63 us,
     * 256 -> 83 us; 64 -> 158 us, 1.3 waves at 168 registers). */
    const int64_t want = pssm_c1_cl_slots(g, kernel);
    /* the simulator's small test shapes: segments of `least` steps (a slot per step), so that
     * they still run several */
    p->seg_len = g->is_simulator
                     ? pssm_c1_cl_seg_len(1, p->len, p->len, 8 * steps, steps)
                     : pssm_c1_cl_seg_len(p->batch * groups, p->len, want, 8 * steps, steps);
    p->segs = pssm_plan_cdiv(p->len, p->seg_len);
    p->nvec = groups;
    p->work = p->batch * p->segs * groups;
    PSSM_LAUNCH(g, kernel, pssm_c1_grid(pssm_plan_cdiv(p->work, PSSM_C1_BLOCK)), c1_block, *p);
    return PORTSSM_OK;
}

portssm_status pssm_gpu_causal_conv1d_fwd(pssm_bctx *c, const portssm_causal_conv1d_fwd_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    const int dt = pssm_plan_dtype_index(a->x.dtype);
    const int64_t vec = pssm_c1_vec(a->x.dtype);
    const int64_t nv = a->x.dtype == PORTSSM_F32 ? PSSM_C1_NV_F32 : PSSM_C1_NV_16;
    if (a->weight.shape[1] > PSSM_C1_GPU_MAX_WIDTH)
        return pssm_c1_too_wide(c, "causal_conv1d_fwd", a->weight.shape[1]);
    pssm_conv1d_fwd_params p;
    fill_fwd_params(&p, a);
    const int W = p.width;

    if (PSSM_C1_STAMPED(W)) {
        int32_t mcf = 0, mcl = 0;
        const int cf = p.len >= vec && pssm_c1_vec_grid(&a->x, &a->out, 2, vec, &mcf);
        const int cl = p.dim >= vec && pssm_c1_vec_grid(&a->x, &a->out, 1, vec, &mcl);
        if (cf && (p.x_sl == 1 || !cl)) {
            p.misalign = mcf;
            return launch_cf(g, &p, cf_kernels[dt][W - PSSM_C1_MIN_WIDTH], vec, nv);
        }
        if (cl) {
            p.misalign = mcl;
            return launch_cl(g, &p, cl_kernels[dt][W - PSSM_C1_MIN_WIDTH], vec,
                             PSSM_C1_CL_STEPS(vec, W));
        }
    }
    /* One thread per output; neighbouring threads along the smaller stride of x. */
    const uint64_t sd = pssm_plan_stride_mag(p.x_sd), sl = pssm_plan_stride_mag(p.x_sl);
    p.chan_fastest = p.dim > 1 && (p.len == 1 || sd < sl);
    p.work = p.batch * p.dim * p.len;
    PSSM_LAUNCH(g, fwd_any_kernels[dt], pssm_c1_grid(pssm_plan_cdiv(p.work, PSSM_C1_BLOCK)), c1_block, p);
    return PORTSSM_OK;
}

portssm_status pssm_gpu_causal_conv1d_update(pssm_bctx *c,
                                             const portssm_causal_conv1d_update_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    const int dt = pssm_plan_dtype_index(a->x.dtype);
    const int has_t = a->x.ndim == 3;
    pssm_conv1d_update_params p;
    memset(&p, 0, sizeof p);
    p.x = a->x.data;
    p.state = a->conv_state.data;
    p.weight = a->weight.data;
    p.bias = a->bias.data;
    p.cache_seqlens = (const int32_t *)a->cache_seqlens.data;
    p.state_indices = (const int32_t *)a->conv_state_indices.data;
    p.out = a->out.data;
    p.batch = a->x.shape[0];
    p.dim = a->x.shape[1];
    p.tokens = has_t ? a->x.shape[2] : 1;
    p.state_len = a->conv_state.shape[2];
    p.pool = a->conv_state.shape[0];
    p.x_sb = a->x.stride[0];
    p.x_sd = a->x.stride[1];
    p.x_st = has_t ? a->x.stride[2] : 0;
    p.o_sb = a->out.stride[0];
    p.o_sd = a->out.stride[1];
    p.o_st = has_t ? a->out.stride[2] : 0;
    p.s_sb = a->conv_state.stride[0];
    p.s_sd = a->conv_state.stride[1];
    p.s_ss = a->conv_state.stride[2];
    p.w_sd = a->weight.stride[0];
    p.w_sw = a->weight.stride[1];
    if (p.bias)
        p.bias_sd = a->bias.stride[0];
    if (p.cache_seqlens)
        p.seqlens_s = a->cache_seqlens.stride[0];
    if (p.state_indices)
        p.indices_s = a->conv_state_indices.stride[0];
    if (a->weight.shape[1] > PSSM_C1_GPU_MAX_WIDTH)
        return pssm_c1_too_wide(c, "causal_conv1d_update", a->weight.shape[1]);
    p.width = (int32_t)a->weight.shape[1];
    p.weight_dtype = pssm_c1_kernel_dtype(a->weight.dtype);
    p.silu = a->activation == PORTSSM_ACTIVATION_SILU;
    p.work = p.batch * p.dim;
    const int kernel = PSSM_C1_STAMPED(p.width) ? update_kernels[dt][p.width - PSSM_C1_MIN_WIDTH]
                                                : update_any_kernels[dt];
    PSSM_LAUNCH(g, kernel, pssm_c1_grid(pssm_plan_cdiv(p.work, PSSM_C1_BLOCK)), c1_block, p);
    return PORTSSM_OK;
}
