/*
 * reduce_kernels.h - pssm_reduce_partials: the fixed-order sum of partials (reduce_params.h).
 * One thread per output element, partials in order of k: consecutive threads read consecutive
 * partials of one k, so the loads of a warp stay together.
 */
#include "pssm_dialect.h"
#include "reduce_params.h"

PSSM_KERNEL_BOUNDED(pssm_reduce_partials, pssm_reduce_params, p, PSSM_REDUCE_BLOCK)
{
    const pssm_reduce_job *j = &p.job[PSSM_BLOCK_Y];
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    for (int64_t i = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; i < j->numel;
         i += threads) {
        int64_t r = i, po = 0, oo = 0;
        for (int d = 3; d >= 0; d--) {
            const int64_t n = j->shape[d], q = r / n, x = r - q * n;
            po += x * j->p_s[d];
            oo += x * j->o_s[d];
            r = q;
        }
        const float *src = j->part + po;
        float acc = 0.0f;
        for (int64_t k = 0; k < j->count; k++)
            for (int64_t k2 = 0; k2 < j->count2; k2++)
                acc += src[k * j->k_stride + k2 * j->k_stride2];
        pssm_store_any(j->out, oo, j->out_dtype, acc);
    }
}
