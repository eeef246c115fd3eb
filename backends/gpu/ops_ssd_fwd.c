/*
 * ops_ssd_fwd.c - ssd_chunk_scan_fwd by chunks (kernels/ssd_chunk.body.h says the algorithm),
 * shared by the cuda, hip and sim backends.
 *
 * Four launches: chunk states (each chunk's own state at its end, and its decay), the state pass
 * (the state entering every chunk, the final state), chunk outputs, and for packed rows the final
 * state of every sequence.  Workspace: the packed row's per-token sequences, then per (b, h,
 * chunk) the chunk's decay and its (P, N) state in f32.
 *
 * chunk_size is a performance choice (DESIGN.md): it is rounded up to a multiple of the dtype's
 * tile (64 for 16-bit activations, 32 for f32) and capped at PSSM_SSD_CHUNK_MAX; 0 takes 256.
 */
#include "gpu.h"
#include "ops_ssd.h"
#include "plan_util.h"

#include "../../kernels/params.h"

#define SSD_DEFAULT_CHUNK 256

typedef struct ssd_fwd_plan {
    ssd_ws ws;
    size_t states_off, decay_off;
    int64_t tile, chunk, nchunks;
} ssd_fwd_plan;

static ssd_common fwd_common(const portssm_ssd_chunk_scan_fwd_args *a)
{
    const ssd_common s = {&a->x, &a->dt, &a->A, &a->B, &a->C, &a->D, &a->z, &a->dt_bias,
                          &a->initial_states, &a->seq_idx, &a->cu_seqlens, a->dt_softplus,
                          a->dt_limit, a->dt_min, a->dt_max};
    return s;
}

static void plan_fwd(const portssm_ssd_chunk_scan_fwd_args *a, ssd_fwd_plan *pl)
{
    const ssd_common s = fwd_common(a);
    ssd_ws_begin(&s, &pl->ws);
    const int64_t B = a->x.shape[0], L = a->x.shape[1], H = a->x.shape[2], P = a->x.shape[3];
    const int64_t N = a->B.shape[3];
    pl->tile = a->x.dtype == PORTSSM_F32 ? 32 : 64;
    int64_t q = a->chunk_size > 0 ? a->chunk_size : SSD_DEFAULT_CHUNK;
    q = pssm_plan_cdiv(q, pl->tile) * pl->tile;
    pl->chunk = q < PSSM_SSD_CHUNK_MAX ? q : PSSM_SSD_CHUNK_MAX;
    pl->nchunks = pssm_plan_cdiv(L, pl->chunk);
    const int64_t chunks = B * H * pl->nchunks;
    pl->decay_off = pssm_ws_take(&pl->ws.w, chunks, sizeof(float));
    pl->states_off = pssm_ws_take(&pl->ws.w, chunks * P * N > chunks ? chunks * P * N : chunks,
                                  sizeof(float));
}

portssm_status pssm_gpu_ssd_chunk_scan_fwd_workspace(pssm_bctx *c,
                                                     const portssm_ssd_chunk_scan_fwd_args *a,
                                                     size_t *bytes)
{
    (void)c;
    ssd_fwd_plan pl;
    plan_fwd(a, &pl);
    if (pl.ws.w.overflow)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY,
                         "ssd_chunk_scan_fwd: the workspace's size does not fit size_t");
    *bytes = pl.ws.w.used;
    return PORTSSM_OK;
}

static void fill_params(const portssm_ssd_chunk_scan_fwd_args *a, const ssd_fwd_plan *pl,
                        pssm_ssd_chunk_params *p)
{
    void *base = a->workspace.data;
    memset(p, 0, sizeof *p);
    p->x = a->x.data, p->dt = a->dt.data, p->Bm = a->B.data, p->Cm = a->C.data, p->z = a->z.data;
    p->A = (const float *)a->A.data;
    p->D = (const float *)a->D.data;
    p->dt_bias = (const float *)a->dt_bias.data;
    p->x0 = (const float *)a->initial_states.data;
    p->out = a->out.data;
    p->states = (float *)pssm_ws_at(base, pl->states_off);
    p->decay = (float *)pssm_ws_at(base, pl->decay_off);
    p->final_states = (float *)a->final_states.data;
    p->batch = a->x.shape[0], p->seqlen = a->x.shape[1], p->heads = a->x.shape[2];
    p->hdim = a->x.shape[3], p->dstate = a->B.shape[3];
    p->hpg = p->heads / a->B.shape[2];
    p->chunk = pl->chunk, p->nchunks = pl->nchunks;
    pssm_plan_strides(p->x_s, &a->x, 4);
    pssm_plan_strides(p->dt_s, &a->dt, 3);
    pssm_plan_strides(p->B_s, &a->B, 4);
    pssm_plan_strides(p->C_s, &a->C, 4);
    pssm_plan_strides(p->out_s, &a->out, 4);
    if (p->z)
        pssm_plan_strides(p->z_s, &a->z, 4);
    if (p->D) {
        p->D_s[0] = a->D.stride[0];
        p->D_s[1] = a->D.ndim == 2 ? a->D.stride[1] : 0;
    }
    p->A_s = a->A.stride[0];
    if (p->dt_bias)
        p->bias_s = a->dt_bias.stride[0];
    if (p->x0)
        pssm_plan_strides(p->x0_s, &a->initial_states, 4);
    if (p->final_states)
        pssm_plan_strides(p->fs_s, &a->final_states, 4);
    if (a->cu_seqlens.data) { /* the sequences derived from cu_seqlens (one row) */
        p->seq = (const int32_t *)pssm_ws_at(base, pl->ws.seq_off);
        p->seq_s[0] = 0, p->seq_s[1] = 1;
        p->nseq = a->cu_seqlens.shape[0] - 1;
        p->cu_s = a->cu_seqlens.stride[0];
    } else if (a->seq_idx.data) {
        p->seq = (const int32_t *)a->seq_idx.data;
        pssm_plan_strides(p->seq_s, &a->seq_idx, 2);
    }
    p->softplus = a->dt_softplus != 0;
    p->dt_limit = a->dt_limit != 0;
    p->dt_min = a->dt_min, p->dt_max = a->dt_max;
    /* 16-byte tile loads in the output kernel: x, B and C contiguous along p / n with every
     * other stride and the base aligned to 16 bytes, P and N whole vectors (states: N) */
    const int64_t per = a->x.dtype == PORTSSM_F32 ? 4 : 8;
    p->vec = p->hdim % per == 0 && p->dstate % per == 0;
    const portssm_tensor *vt[3] = {&a->x, &a->B, &a->C};
    for (int k = 0; k < 3 && p->vec; k++) {
        const portssm_tensor *t = vt[k];
        p->vec = t->stride[3] == 1 && ((uintptr_t)t->data & 15u) == 0;
        for (int d = 0; d < 3 && p->vec; d++)
            p->vec = t->stride[d] % per == 0;
    }
    p->ptiles = (int32_t)pssm_plan_cdiv(p->hdim, pl->tile);
    p->ntiles = (int32_t)pssm_plan_cdiv(p->dstate, pl->tile);
    p->qtiles = (int32_t)(pl->chunk / pl->tile);
}

static const pssm_kernel_id chunk_state_kernels[3] = {PSSM_KID_pssm_ssd_chunk_state_f32,
                                                      PSSM_KID_pssm_ssd_chunk_state_f16,
                                                      PSSM_KID_pssm_ssd_chunk_state_bf16};
static const pssm_kernel_id chunk_out_kernels[3] = {PSSM_KID_pssm_ssd_chunk_out_f32,
                                                    PSSM_KID_pssm_ssd_chunk_out_f16,
                                                    PSSM_KID_pssm_ssd_chunk_out_bf16};

/* A grid extent, or a clear failure where it passes the targets' 2^31 - 1 (x) or 65535 (y). */
static portssm_status grid_dim(pssm_gpu *g, int64_t n, int64_t max, uint32_t *dim)
{
    if (n > max)
        return pssm_fail(g->ctx, PORTSSM_ERR_UNSUPPORTED,
                         "ssd_chunk_scan_fwd: %lld blocks along one grid dimension (at most %lld)",
                         (long long)n, (long long)max);
    *dim = (uint32_t)n;
    return PORTSSM_OK;
}

portssm_status pssm_gpu_ssd_chunk_scan_fwd(pssm_bctx *c, const portssm_ssd_chunk_scan_fwd_args *a)
{
    pssm_gpu *g = pssm_gpu_of(c);
    ssd_fwd_plan pl;
    plan_fwd(a, &pl);
    pssm_ssd_chunk_params p;
    fill_params(a, &pl, &p);
    /* every grid first: a case too large fails before anything is written */
    const int64_t BH = p.batch * p.heads, X_MAX = INT32_MAX, Y_MAX = 65535;
    const uint32_t threads =
        a->x.dtype == PORTSSM_F32 ? PSSM_SSD_CHUNK_THREADS_F32 : PSSM_SSD_CHUNK_THREADS_16;
    const pssm_dim3 block = {threads, 1, 1}, pass_block = {PSSM_SSD_BLOCK, 1, 1};
    pssm_dim3 state_grid = {1, 1, 1}, pass_grid = {1, 1, 1}, out_grid = {1, 1, 1};
    pssm_dim3 varlen_grid = {1, 1, 1};
    PSSM_TRY_STATUS(grid_dim(g, BH * p.nchunks, X_MAX, &state_grid.x));
    PSSM_TRY_STATUS(grid_dim(g, (int64_t)p.ptiles * p.ntiles, Y_MAX, &state_grid.y));
    PSSM_TRY_STATUS(
        grid_dim(g, BH * pssm_plan_cdiv(p.hdim * p.dstate, PSSM_SSD_BLOCK), X_MAX, &pass_grid.x));
    PSSM_TRY_STATUS(grid_dim(g, BH * p.nchunks * p.qtiles, X_MAX, &out_grid.x));
    PSSM_TRY_STATUS(grid_dim(g, p.ptiles, Y_MAX, &out_grid.y));
    if (a->varlen_states.data) {
        PSSM_TRY_STATUS(grid_dim(g, p.nseq * p.heads, X_MAX, &varlen_grid.x));
        varlen_grid.y = state_grid.y;
    }

    const ssd_common s = fwd_common(a);
    PSSM_TRY_STATUS(pssm_gpu_ssd_launch_seq(g, &s, (int32_t *)p.seq, &a->varlen_states));
    const int di = pssm_plan_dtype_index(a->x.dtype);
    PSSM_LAUNCH(g, chunk_state_kernels[di], state_grid, block, p);
    PSSM_LAUNCH(g, PSSM_KID_pssm_ssd_state_pass, pass_grid, pass_block, p);
    PSSM_LAUNCH(g, chunk_out_kernels[di], out_grid, block, p);
    if (a->varlen_states.data) { /* the chunk-state kernel's varlen pass */
        p.cu = (const int32_t *)a->cu_seqlens.data;
        p.varlen = (float *)a->varlen_states.data;
        pssm_plan_strides(p.varlen_s, &a->varlen_states, 4);
        PSSM_LAUNCH(g, chunk_state_kernels[di], varlen_grid, block, p);
    }
    return PORTSSM_OK;
}
