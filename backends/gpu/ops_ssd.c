/*
 * ops_ssd.c - what the SSD's forward (ops_ssd_fwd.c) and backward (ops_ssd_bwd.c) share: the
 * chunking, the kernels' common parameters, the chunk products' operands, the packed-row
 * helpers.  Shared by the cuda, hip and sim backends.
 */
#include "gpu.h"
#include "ops_ssd.h"
#include "plan_util.h"

#include <string.h>

_Static_assert(PSSM_SSD_CHUNK_MAX == PSSM_SSD_CHUNK_LIMIT,
               "one chunk limit for the kernels and the host");

const pssm_kernel_id pssm_ssd_chunk_state_kernels[3] = {PSSM_KID_pssm_ssd_chunk_state_f32,
                                                        PSSM_KID_pssm_ssd_chunk_state_f16,
                                                        PSSM_KID_pssm_ssd_chunk_state_bf16};
/* the backward's chunk products, one stamp per mode (PSSM_SSD_PROD_Y .. _DC) and dtype */
#define SSD_PROD_KIDS(m)                                                                           \
    {PSSM_KID_pssm_ssd_chunk_##m##_f32, PSSM_KID_pssm_ssd_chunk_##m##_f16,                         \
     PSSM_KID_pssm_ssd_chunk_##m##_bf16}
static const pssm_kernel_id prod_kernels[PSSM_SSD_PROD_DC][3] = {
    SSD_PROD_KIDS(y), SSD_PROD_KIDS(dx), SSD_PROD_KIDS(db), SSD_PROD_KIDS(dc)};
/* Y and DX with their vector epilogues (PSSM_SSD_VEC_EPILOGUE) */
static const pssm_kernel_id prod_vec_kernels[2][3] = {SSD_PROD_KIDS(yv), SSD_PROD_KIDS(dxv)};

pssm_kernel_id pssm_gpu_ssd_prod_kernel(const pssm_ssd_chunk_params *p, int dtype_index)
{
    if (PSSM_SSD_VEC_EPILOGUE(*p))
        return prod_vec_kernels[p->mode - PSSM_SSD_PROD_Y][dtype_index];
    return prod_kernels[p->mode - PSSM_SSD_PROD_Y][dtype_index];
}
static const pssm_kernel_id chunk_cb_kernels[3] = {PSSM_KID_pssm_ssd_chunk_cb_f32,
                                                   PSSM_KID_pssm_ssd_chunk_cb_f16,
                                                   PSSM_KID_pssm_ssd_chunk_cb_bf16};

int64_t pssm_gpu_ssd_pass_blocks(const pssm_ssd_chunk_params *p)
{
    const int64_t units = p->hdim * p->dstate / (p->vec ? 4 : 1);
    return p->batch * p->heads * pssm_plan_cdiv(units, PSSM_SSD_BLOCK);
}

size_t pssm_gpu_ssd_take_prep(const ssd_common *s, const ssd_chunking *k, pssm_ws_plan *w)
{
    const int64_t chunks = s->x->shape[0] * s->x->shape[2] * k->nchunks;
    return pssm_ws_take(w, chunks * 3 * k->chunk, sizeof(float));
}

int pssm_gpu_ssd_take_cb(const ssd_common *s, const ssd_chunking *k, pssm_ws_plan *w,
                         size_t *off)
{
    const int64_t B = s->x->shape[0], H = s->x->shape[2], G = s->B->shape[2];
    /* a group of one head forms its C B^T where it uses it: stored, it would be 8x the bytes
     * of the head's x (Q = 256, P = 64) for nothing shared */
    if (H / G < 2)
        return 0;
    *off = pssm_ws_take(w, B * G * k->nchunks * k->chunk * k->chunk, sizeof(float));
    return 1;
}

portssm_status pssm_gpu_ssd_cb_grid(pssm_gpu *g, const char *op, const pssm_ssd_chunk_params *p,
                                    pssm_dim3 *grid)
{
    grid->x = grid->y = grid->z = 1;
    if (!p->cb)
        return PORTSSM_OK;
    const int64_t G = p->heads / p->hpg;
    PSSM_TRY_STATUS(pssm_gpu_ssd_grid(g, op, p->batch * G * p->nchunks * p->qtiles, INT32_MAX,
                                      &grid->x));
    return pssm_gpu_ssd_grid(g, op, p->qtiles, 65535, &grid->y);
}

portssm_status pssm_gpu_ssd_launch_cb(pssm_gpu *g, const pssm_ssd_chunk_params *p,
                                      pssm_dim3 grid, pssm_dim3 block, int dtype_index)
{
    if (!p->cb)
        return PORTSSM_OK;
    PSSM_LAUNCH(g, chunk_cb_kernels[dtype_index], grid, block, *p);
    return PORTSSM_OK;
}

portssm_status pssm_gpu_ssd_ws_bytes(pssm_bctx *c, const ssd_ws *ws, const char *op,
                                     size_t *bytes)
{
    if (ws->w.overflow)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY,
                         "%s: the workspace's size does not fit size_t", op);
    *bytes = ws->w.used;
    return PORTSSM_OK;
}

ssd_chunking pssm_gpu_ssd_chunking(const ssd_common *s)
{
    ssd_chunking k;
    k.tile = s->x->dtype == PORTSSM_F32 ? 32 : 64;
    k.chunk = pssm_ssd_chunk(s->chunk_size, s->x->dtype); /* a multiple of the tile */
    k.nchunks = pssm_plan_cdiv(s->x->shape[1], k.chunk);
    return k;
}

int32_t pssm_gpu_ssd_state_dt(const portssm_tensor *a, const portssm_tensor *b,
                              const portssm_tensor *c)
{
    const portssm_tensor *t = a->data ? a : b->data ? b : c;
    return t->data ? (int32_t)t->dtype : (int32_t)PORTSSM_F32;
}

void pssm_gpu_ssd_fill(const ssd_common *s, const ssd_chunking *k, void *base, const ssd_ws *ws,
                       pssm_ssd_chunk_params *p)
{
    memset(p, 0, sizeof *p);
    p->x = s->x->data, p->dt = s->dt->data, p->Bm = s->B->data, p->Cm = s->C->data;
    p->z = s->z->data;
    p->A = (const float *)s->A->data;
    p->D = (const float *)s->D->data;
    p->dt_bias = (const float *)s->dt_bias->data;
    p->x0 = s->init->data;
    p->batch = s->x->shape[0], p->seqlen = s->x->shape[1], p->heads = s->x->shape[2];
    p->hdim = s->x->shape[3], p->dstate = s->B->shape[3];
    p->hpg = p->heads / s->B->shape[2];
    p->chunk = k->chunk, p->nchunks = k->nchunks;
    pssm_plan_strides(p->x_s, s->x, 4);
    pssm_plan_strides(p->dt_s, s->dt, 3);
    pssm_plan_strides(p->B_s, s->B, 4);
    pssm_plan_strides(p->C_s, s->C, 4);
    if (p->z)
        pssm_plan_strides(p->z_s, s->z, 4);
    if (p->D) {
        p->D_s[0] = s->D->stride[0];
        p->D_s[1] = s->D->ndim == 2 ? s->D->stride[1] : 0;
    }
    p->A_s = s->A->stride[0];
    if (p->dt_bias)
        p->bias_s = s->dt_bias->stride[0];
    if (p->x0)
        pssm_plan_strides(p->x0_s, s->init, 4);
    if (s->cu->data) { /* the sequences derived from cu_seqlens (one row) */
        p->seq = (const int32_t *)pssm_ws_at(base, ws->seq_off);
        p->seq_s[0] = 0, p->seq_s[1] = 1;
        p->nseq = s->cu->shape[0] - 1;
        p->cu_s = s->cu->stride[0];
    } else if (s->seq_idx->data) {
        p->seq = (const int32_t *)s->seq_idx->data;
        pssm_plan_strides(p->seq_s, s->seq_idx, 2);
    }
    p->softplus = s->softplus != 0;
    p->dt_limit = s->dt_limit != 0;
    p->dt_min = s->dt_min, p->dt_max = s->dt_max;
    p->vec = p->dstate % 4 == 0; /* the f32 state tiles (the workspace's, 256-byte aligned) */
    p->ptiles = (int32_t)pssm_plan_cdiv(p->hdim, k->tile);
    p->ntiles = (int32_t)pssm_plan_cdiv(p->dstate, k->tile);
    p->qtiles = (int32_t)(k->chunk / k->tile);
}

pssm_ssd_opnd pssm_gpu_ssd_opnd(const portssm_tensor *t, int grouped, int64_t extent)
{
    pssm_ssd_opnd o;
    memset(&o, 0, sizeof o);
    o.ptr = t->data;
    pssm_plan_strides(o.s, t, 4);
    o.grouped = grouped;
    const int64_t per = 16 / (int64_t)pssm_plan_act_size(t->dtype);
    o.vec = t->stride[3] == 1 && ((uintptr_t)t->data & 15u) == 0 && extent % per == 0;
    for (int d = 0; d < 3 && o.vec; d++)
        o.vec = t->stride[d] % per == 0;
    return o;
}

portssm_status pssm_gpu_ssd_grid(pssm_gpu *g, const char *op, int64_t n, int64_t max, uint32_t *dim)
{
    if (n > max)
        return pssm_fail(g->ctx, PORTSSM_ERR_UNSUPPORTED,
                         "%s: %lld blocks along one grid dimension (at most %lld)", op,
                         (long long)n, (long long)max);
    *dim = (uint32_t)n;
    return PORTSSM_OK;
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
        q.varlen = varlen->data;
        q.state_dt = (int32_t)varlen->dtype; /* (x0's too: validate_ssd.c) */
        pssm_plan_strides(q.varlen_s, varlen, 4);
        if (s->init->data) {
            q.x0 = s->init->data;
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
