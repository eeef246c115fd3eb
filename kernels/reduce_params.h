/*
 * reduce_params.h - the parameters of the reduce kernel (kernels/reduce_kernels.h): the second,
 * fixed-order half of every reduction of the backward passes.  A backward kernel writes one F32
 * partial sum per block (or per batch row) into the workspace; this kernel adds the partials of
 * each output element in a fixed order (the order of their index; for long sums, each lane of
 * a warp its share in that order, then the warp's tree) and stores the sum, rounded once, in the
 * output's dtype.  No floating-point atomics anywhere: the result is the same bits every run.
 */
#ifndef PSSM_REDUCE_PARAMS_H
#define PSSM_REDUCE_PARAMS_H
#include <stdint.h>

#define PSSM_REDUCE_MAX_JOBS 6
#define PSSM_REDUCE_BLOCK 256
/* Terms per output element from which a warp, not a thread, sums one element */
#define PSSM_REDUCE_WIDE 128
#define PSSM_REDUCE_WIDE_MAX 1024 /* ... when the job has at most this many elements */

/* Output element i (row-major over shape) = sum_{k < count} sum_{k2 < count2}
 * part[k*k_stride + k2*k_stride2 + off(i, p_s)] (in that order below PSSM_REDUCE_WIDE terms),
 * stored at out + off(i, o_s);
 * off(i, s) = sum_j idx_j(i) * s[j]. */
typedef struct pssm_reduce_job {
    const float *part;
    void *out;
    int64_t count, k_stride, count2, k_stride2, numel;
    int64_t shape[4]; /* unused dims 1 */
    int64_t p_s[4], o_s[4];
    int32_t out_dtype; /* PSSM_DT_F32 / F16 / BF16 */
    /* quads: a thread sums four adjacent elements by 16-byte loads of every term and stores
     * them at once (the host checked: the last dim contiguous in partials and output, a
     * multiple of 4, every other stride and the bases aligned to whole quads); the same sums
     * in the same order as one element a thread */
    int32_t quads;
    /* split (quads jobs, count2 == 1): k cut into `split` slices (a power of two dividing the
     * block), each summed by its own threads in order, the slices' sums then added in slice
     * order through shared memory: a fixed order, for few output elements of many terms
     * (the norm backward's dweight: 2560 elements of 512 terms, 640 threads one by one) */
    int32_t split, pad_;
} pssm_reduce_job;

/* Grid: x over the elements (a grid-stride loop), y over the jobs. */
typedef struct pssm_reduce_params {
    pssm_reduce_job job[PSSM_REDUCE_MAX_JOBS];
    int32_t njobs, pad_;
} pssm_reduce_params;

#endif
