/*
 * ops_ssd_fwd.c - ssd_chunk_scan_fwd by chunks (kernels/ssd_chunk.body.h says the algorithm),
 * shared by the cuda, hip and sim backends.
 *
 * Launches: each chunk's C B^T per group (where a group has several heads), chunk states (each
 * chunk's own state at its end, and its decay), the state pass (the state entering every chunk,
 * the final state), chunk outputs (the chunk products' FWD mode), and for packed rows the
 * final state of every sequence.  The outputs' kernels also write y (out before the gate)
 * where the caller gives it; the state pass writes S_in into the caller's checkpoints where
 * given (in place of the workspace's copy in the activation dtype, or of its f32 states).
 * Workspace: the packed row's per-token sequences, then per (b, h, chunk) the chunk's decay
 * and its (P, N) state in f32, each chunk's dt', cs and seg, the state entering each chunk in
 * the activation dtype (16-bit dtypes), then the C B^T per (b, g, chunk).
 */
#include "gpu.h"
#include "ops_ssd.h"
#include "plan_util.h"

#include "../../kernels/params.h"

/* The chunk products' forward stamp (its mode fixed: only the FWD code and registers), and the
 * 16-bit dtypes' outputs with M in registers where PSSM_SSD_OUTR holds (sact: a 16-bit dtype). */
static const pssm_kernel_id chunk_out_kernels[3] = {PSSM_KID_pssm_ssd_chunk_out_f32,
                                                    PSSM_KID_pssm_ssd_chunk_out_f16,
                                                    PSSM_KID_pssm_ssd_chunk_out_bf16};
static const pssm_kernel_id chunk_outr_kernels[2] = {PSSM_KID_pssm_ssd_chunk_outr_f16,
                                                     PSSM_KID_pssm_ssd_chunk_outr_bf16};

typedef struct ssd_fwd_plan {
    ssd_ws ws;
    ssd_chunking k;
    size_t states_off, decay_off, cb_off, prep_off, sact_off;
    int has_cb, has_sact;
} ssd_fwd_plan;

static void plan_fwd(const portssm_ssd_chunk_scan_fwd_args *a, ssd_fwd_plan *pl)
{
    const ssd_common s = SSD_COMMON_OF(a);
    ssd_ws_begin(&s, &pl->ws);
    pl->k = pssm_gpu_ssd_chunking(&s);
    const int64_t B = a->x.shape[0], H = a->x.shape[2], P = a->x.shape[3], N = a->B.shape[3];
    const int64_t chunks = B * H * pl->k.nchunks;
    pl->decay_off = pssm_ws_take(&pl->ws.w, chunks, sizeof(float));
    pl->states_off =
        pssm_ws_take(&pl->ws.w, chunks * P * N > chunks ? chunks * P * N : chunks, sizeof(float));
    pl->prep_off = pssm_gpu_ssd_take_prep(&s, &pl->k, &pl->ws.w);
    /* S_in in the activation dtype for the output kernel: 16-bit dtypes, rows of N whole
     * 16-byte vectors */
    pl->has_sact = a->x.dtype != PORTSSM_F32 && N % 8 == 0;
    pl->sact_off = pl->has_sact ? pssm_ws_take(&pl->ws.w, chunks * P * N, 2) : 0;
    pl->cb_off = 0;
    pl->has_cb = pssm_gpu_ssd_take_cb(&s, &pl->k, &pl->ws.w, &pl->cb_off);
}

portssm_status pssm_gpu_ssd_chunk_scan_fwd_workspace(pssm_bctx *c,
                                                     const portssm_ssd_chunk_scan_fwd_args *a,
                                                     size_t *bytes)
{
    ssd_fwd_plan pl;
    plan_fwd(a, &pl);
    return pssm_gpu_ssd_ws_bytes(c, &pl.ws, "ssd_chunk_scan_fwd", bytes);
}

static void fill_params(const portssm_ssd_chunk_scan_fwd_args *a, const ssd_fwd_plan *pl,
                        pssm_ssd_chunk_params *p)
{
    void *base = a->workspace.data;
    const ssd_common s = SSD_COMMON_OF(a);
    pssm_gpu_ssd_fill(&s, &pl->k, base, &pl->ws, p);
    p->out = a->out.data;
    pssm_plan_strides(p->out_s, &a->out, 4);
    p->states = (float *)pssm_ws_at(base, pl->states_off);
    p->decay = (float *)pssm_ws_at(base, pl->decay_off);
    p->final_states = a->final_states.data;
    if (p->final_states)
        pssm_plan_strides(p->fs_s, &a->final_states, 4);
    p->state_dt = pssm_gpu_ssd_state_dt(&a->initial_states, &a->final_states, &a->varlen_states);
    /* the outputs' products: y from C, B, x and the state entering each chunk */
    p->mode = PSSM_SSD_PROD_FWD;
    p->u = pssm_gpu_ssd_opnd(&a->C, 1, p->dstate);
    p->v = pssm_gpu_ssd_opnd(&a->B, 1, p->dstate);
    p->w = pssm_gpu_ssd_opnd(&a->x, 0, p->hdim);
    if (a->z.data)
        p->zo = pssm_gpu_ssd_opnd(&a->z, 0, p->hdim);
    p->oo = pssm_gpu_ssd_opnd(&a->out, 0, p->hdim);
    if (a->y.data) /* y before the gate, for the caller's backward (needs z) */
        p->ys = pssm_gpu_ssd_opnd(&a->y, 0, p->hdim);
    p->inner = p->dstate, p->width = p->hdim, p->coltiles = p->ptiles;
    p->sprod = p->states;
    p->prep = (float *)pssm_ws_at(base, pl->prep_off);
    if (pl->has_cb)
        p->cb = (float *)pssm_ws_at(base, pl->cb_off);
    if (pl->has_sact) { /* the varlen pass reads S_in in f32 */
        /* (the caller's checkpoints are S_in in the activation dtype, laid out as sact) */
        p->sact = a->checkpoints.data ? a->checkpoints.data : pssm_ws_at(base, pl->sact_off);
        p->sact_bf16 = a->x.dtype == PORTSSM_BF16;
        p->act_only = a->varlen_states.data == NULL;
    } else if (a->checkpoints.data && a->x.dtype == PORTSSM_F32) {
        /* S_c, then S_in in place: the same layout (and the outputs' product reads them) */
        p->states = (float *)a->checkpoints.data;
        p->sprod = p->states;
    }
}

portssm_status pssm_gpu_ssd_chunk_scan_fwd(pssm_bctx *c, const portssm_ssd_chunk_scan_fwd_args *a)
{
    static const char op[] = "ssd_chunk_scan_fwd";
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
    pssm_dim3 varlen_grid = {1, 1, 1}, cb_grid;
    const int64_t state_tiles = p.ptiles; /* each block walks the tiles of N */
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, BH * p.nchunks * state_tiles, X_MAX, &state_grid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, pssm_gpu_ssd_pass_blocks(&p), X_MAX, &pass_grid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, BH * p.nchunks * p.qtiles, X_MAX, &out_grid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, p.coltiles, Y_MAX, &out_grid.y));
    if (a->varlen_states.data)
        PSSM_TRY_STATUS(
            pssm_gpu_ssd_grid(g, op, p.nseq * p.heads * state_tiles, X_MAX, &varlen_grid.x));
    PSSM_TRY_STATUS(pssm_gpu_ssd_cb_grid(g, op, &p, &cb_grid));

    const ssd_common s = SSD_COMMON_OF(a);
    PSSM_TRY_STATUS(pssm_gpu_ssd_launch_seq(g, &s, (int32_t *)p.seq, &a->varlen_states));
    const int di = pssm_plan_dtype_index(a->x.dtype);
    PSSM_TRY_STATUS(pssm_gpu_ssd_launch_cb(g, &p, cb_grid, block, di));
    PSSM_LAUNCH(g, pssm_ssd_chunk_state_kernels[di], state_grid, block, p);
    if (a->checkpoints.data && !pl.has_sact && a->x.dtype != PORTSSM_F32) {
        /* 16-bit checkpoints where the output kernel reads f32 states: the pass writes both */
        pssm_ssd_chunk_params pc = p;
        pc.sact = a->checkpoints.data;
        pc.sact_bf16 = a->x.dtype == PORTSSM_BF16;
        pc.act_only = 0;
        PSSM_LAUNCH(g, PSSM_KID_pssm_ssd_state_pass, pass_grid, pass_block, pc);
    } else {
        PSSM_LAUNCH(g, PSSM_KID_pssm_ssd_state_pass, pass_grid, pass_block, p);
    }
    if (PSSM_SSD_OUTR(p) && di > 0) {
        const pssm_dim3 outr_block = {(uint32_t)(PSSM_SSD_OUTR_WARPS * g->warp_size), 1, 1};
        PSSM_LAUNCH(g, chunk_outr_kernels[di - 1], out_grid, outr_block, p);
    } else {
        PSSM_LAUNCH(g, chunk_out_kernels[di], out_grid, block, p);
    }
    if (a->varlen_states.data) { /* the chunk-state kernel's varlen pass */
        p.cu = (const int32_t *)a->cu_seqlens.data;
        p.varlen = a->varlen_states.data;
        pssm_plan_strides(p.varlen_s, &a->varlen_states, 4);
        PSSM_LAUNCH(g, pssm_ssd_chunk_state_kernels[di], varlen_grid, block, p);
    }
    return PORTSSM_OK;
}
