/* ops_reduce.c - planning of the reduce kernel (ops_reduce.h). */
#include "ops_reduce.h"

#include <string.h>

void pssm_reduce_add(pssm_reduce_batch *r, const float *part, int64_t count, int64_t k_stride,
                     const int64_t *p_s, const portssm_tensor *out)
{
    pssm_reduce_add2(r, part, count, k_stride, 1, 0, p_s, out);
}

void pssm_reduce_add2(pssm_reduce_batch *r, const float *part, int64_t count, int64_t k_stride,
                      int64_t count2, int64_t k_stride2, const int64_t *p_s,
                      const portssm_tensor *out)
{
    if (r->p.njobs >= PSSM_REDUCE_MAX_JOBS) /* the ops add at most PSSM_REDUCE_MAX_JOBS */
        return;
    pssm_reduce_job *j = &r->p.job[r->p.njobs++];
    memset(j, 0, sizeof *j);
    j->part = part;
    j->out = out->data;
    j->count = count;
    j->k_stride = k_stride;
    j->count2 = count2;
    j->k_stride2 = k_stride2;
    j->numel = 1;
    const int pad = 4 - out->ndim; /* the output's dims are the last ones of four */
    for (int d = 0; d < 4; d++) {
        const int i = d - pad;
        j->shape[d] = i >= 0 ? out->shape[i] : 1;
        j->p_s[d] = i >= 0 ? p_s[i] : 0;
        j->o_s[d] = i >= 0 ? out->stride[i] : 0;
        j->numel *= j->shape[d];
    }
    j->out_dtype = (int32_t)out->dtype; /* the dialect's PSSM_DT_* are portssm_dtype's values */
}

portssm_status pssm_reduce_launch(pssm_gpu *g, pssm_reduce_batch *r)
{
    if (r->p.njobs == 0)
        return PORTSSM_OK;
    int64_t most = 1;
    for (int i = 0; i < r->p.njobs; i++)
        most = r->p.job[i].numel > most ? r->p.job[i].numel : most;
    int64_t blocks = (most + PSSM_REDUCE_BLOCK - 1) / PSSM_REDUCE_BLOCK;
    const int64_t cap = (int64_t)(g->multiprocessors > 0 ? g->multiprocessors : 1) * 16;
    if (blocks > cap)
        blocks = cap; /* the grid-stride loop takes the rest */
    pssm_dim3 grid = {(uint32_t)blocks, (uint32_t)r->p.njobs, 1};
    pssm_dim3 block = {PSSM_REDUCE_BLOCK, 1, 1};
    PSSM_LAUNCH(g, PSSM_KID_pssm_reduce_partials, grid, block, r->p);
    return PORTSSM_OK;
}
