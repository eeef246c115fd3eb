/*
 * ops_reduce.h - the second half of the backward passes' reductions: jobs for the reduce
 * kernel (kernels/reduce_params.h), collected by an op and launched together.
 */
#ifndef PSSM_GPU_OPS_REDUCE_H
#define PSSM_GPU_OPS_REDUCE_H

#include "gpu.h"
#include "../../kernels/reduce_params.h"

typedef struct pssm_reduce_batch {
    pssm_reduce_params p;
} pssm_reduce_batch;

/* Output `out` (ndim 1..4, the shape and strides of an op's tensor) = the sum over k < count of
 * partials at part + k * k_stride, laid out with strides p_s (one per dim of out). */
void pssm_reduce_add(pssm_reduce_batch *r, const float *part, int64_t count, int64_t k_stride,
                     const int64_t *p_s, const portssm_tensor *out);
/* The same with a second, inner sum: over k < count, then k2 < count2 at part + k * k_stride +
 * k2 * k_stride2. */
void pssm_reduce_add2(pssm_reduce_batch *r, const float *part, int64_t count, int64_t k_stride,
                      int64_t count2, int64_t k_stride2, const int64_t *p_s,
                      const portssm_tensor *out);
/* Launches the collected jobs (none: nothing). */
portssm_status pssm_reduce_launch(pssm_gpu *g, pssm_reduce_batch *r);

#endif
