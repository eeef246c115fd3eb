/* selftest_params.h - parameter struct of the dialect self-test kernels (kernels/selftest.h). */
#ifndef PSSM_SELFTEST_PARAMS_H
#define PSSM_SELFTEST_PARAMS_H
#include <stdint.h>

/* Threads per block of every self-test kernel: a multiple of both warp widths, and 2-D blocks
 * are 8 x 16 so that a warp spans several rows. */
#define PSSM_SELFTEST_BLOCK 128
#define PSSM_SELFTEST_BLOCK_X 8
#define PSSM_SELFTEST_BLOCK_Y 16

/* Results per thread of each kernel: out_f / out_i / out_h hold `outputs` planes of n values. */
#define PSSM_SELFTEST_SHUFFLE_OUTPUTS 8 /* per dtype: f32 in out_f, i32 in out_i          */
#define PSSM_SELFTEST_REDUCE_OUTPUTS 6
#define PSSM_SELFTEST_BLOCK_F_OUTPUTS 4
#define PSSM_SELFTEST_BLOCK_I_OUTPUTS 8
#define PSSM_SELFTEST_F16_STORES 2 /* out_h: f16, bf16 of in_f[i], i < n                 */
#define PSSM_SELFTEST_F16_LOADS 4  /* out_f: f16, bf16, any(f16), any(bf16) of in_h[i], i < n2 */
#define PSSM_SELFTEST_MATH_OUTPUTS 4

/* Deliberate misuses (pssm_selftest_misuse), which the sim must report, never hang on. */
#define PSSM_SELFTEST_MISUSE_SHUFFLE_HALF_WARP 1  /* half the lanes shuffle, the rest finish  */
#define PSSM_SELFTEST_MISUSE_BARRIER_HALF_BLOCK 2 /* half the block at another barrier       */
#define PSSM_SELFTEST_MISUSE_SHUFFLE_SITES 3      /* odd and even lanes at different shuffles */
#define PSSM_SELFTEST_MISUSE_BARRIER_FINISHED 4   /* half the block returns before a barrier  */
#define PSSM_SELFTEST_MISUSE_MODES 4

/* One struct for every self-test kernel; each uses the fields it needs. */
typedef struct pssm_selftest_params {
    const float *in_f;
    const int32_t *in_i;
    const uint16_t *in_h;
    float *out_f;
    int32_t *out_i;
    uint16_t *out_h;
    int64_t n;  /* threads with an element (stores: elements of in_f)   */
    int64_t n2; /* pssm_selftest_f16: elements of in_h                   */
    int32_t mode;
    int32_t reserved;
} pssm_selftest_params;

#endif
