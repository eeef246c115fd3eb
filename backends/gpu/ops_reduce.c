/* ops_reduce.c - planning of the reduce kernel (ops_reduce.h). */
#include "ops_reduce.h"
#include "tuning.h"

#include <stdint.h>
#include <string.h>

/* Whether j may take its quads path (reduce_params.h): four adjacent elements of the last dim
 * by one 16-byte load of each term and one store of 4 * out_size bytes. */
static int reduce_quads_ok(const pssm_reduce_job *j, int64_t out_size)
{
    if (j->shape[3] % 4 != 0 || j->p_s[3] != 1 || j->o_s[3] != 1 || j->k_stride % 4 != 0 ||
        (j->count2 > 1 && j->k_stride2 % 4 != 0) || (uintptr_t)j->part % 16 != 0 ||
        (uintptr_t)j->out % (uintptr_t)(4 * out_size) != 0)
        return 0;
    for (int d = 0; d < 3; d++)
        if (j->p_s[d] % 4 != 0 || j->o_s[d] % 4 != 0)
            return 0;
    return 1;
}

/* Threads the split path aims for at most, per multiprocessor: past that the plain quads
 * path has threads enough for the device. */
#define REDUCE_SPLIT_THREADS_PER_SM 1024
/* The fewest terms a slice sums (the quads path's loads in flight, PSSM_REDUCE_QUAD_AHEAD). */
#define REDUCE_SPLIT_MIN_TERMS 8

/* The k slices of job j (reduce_params.h: split): doubled, up to 8 (32 quads a block), while
 * the job's threads stay under REDUCE_SPLIT_THREADS_PER_SM an SM and each slice keeps at least
 * REDUCE_SPLIT_MIN_TERMS terms; 1 (no split) for the other paths' jobs. */
static int32_t reduce_split(const pssm_reduce_job *j, int64_t sms)
{
    const int64_t terms = j->count * j->count2;
    const int wide = terms >= PSSM_REDUCE_WIDE && j->numel <= PSSM_REDUCE_WIDE_MAX;
    if (!j->quads || j->count2 != 1 || wide)
        return 1;
    const int64_t most = pssm_tune("REDUCE_SPLIT", 8);
    int32_t split = 1;
    while (2 * split <= most && 2 * split <= 8 &&
           j->numel / 4 * 2 * split <= sms * REDUCE_SPLIT_THREADS_PER_SM &&
           j->count >= 2 * split * REDUCE_SPLIT_MIN_TERMS)
        split *= 2;
    return split;
}

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
    j->quads = reduce_quads_ok(j, out->dtype == PORTSSM_F32 ? 4 : 2) &&
               pssm_tune("REDUCE_QUADS", 1) != 0;
}

portssm_status pssm_reduce_launch(pssm_gpu *g, pssm_reduce_batch *r)
{
    if (r->p.njobs == 0)
        return PORTSSM_OK;
    const int64_t sms = g->multiprocessors > 0 ? g->multiprocessors : 1;
    int64_t most = 1; /* threads the largest job wants */
    for (int i = 0; i < r->p.njobs; i++) {
        pssm_reduce_job *j = &r->p.job[i];
        j->split = reduce_split(j, sms);
        const int64_t want = (j->quads ? j->numel / 4 : j->numel) * j->split;
        most = want > most ? want : most;
    }
    int64_t blocks = (most + PSSM_REDUCE_BLOCK - 1) / PSSM_REDUCE_BLOCK;
    const int64_t cap = sms * 16;
    if (blocks > cap)
        blocks = cap; /* the grid-stride loop takes the rest */
    pssm_dim3 grid = {(uint32_t)blocks, (uint32_t)r->p.njobs, 1};
    pssm_dim3 block = {PSSM_REDUCE_BLOCK, 1, 1};
    PSSM_LAUNCH(g, PSSM_KID_pssm_reduce_partials, grid, block, r->p);
    return PORTSSM_OK;
}
