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
#define PSSM_SELFTEST_MATH_OUTPUTS 5
/* pssm_selftest_dynamic: block b stages its n2 values of in_f in n2 floats of dynamic shared
 * memory (the launch's bytes) beside a static array; out_f[b * n2 + k] =
 * in_f[b * n2 + n2 - 1 - k] - (k % PSSM_SELFTEST_BLOCK + 1). */

/* pssm_selftest_mma: one 16x16 tile per warp, n tiles; tile t multiplies in form t % 17: forms
 * below 15 the dtype form % 3 (f32, bf16, f16) through the interface form / 3 (0: pssm_mma16_*,
 * operands staged with leading dimensions LDA, LDB (> 16, even); 1: pssm_mma16t_* with
 * at = bt = 0, staged with LDT (a multiple of 8); 2: pssm_mma16t_* with at = bt = 1, staged
 * transposed, K rows of LDTT; 3 and 4: pssm_mma16s_* (a strip of one tile, the last two steps
 * in one call) staged as 1 and 2); forms 15 and 16 the register form pssm_mma16rs_* (bf16,
 * f16: A from registers in the accumulator's arrangement, B staged as 2), in
 * PSSM_SELFTEST_MMA_STEPS accumulate steps along K.  Per tile:
 *   in_f  A[16][K] (A[m][k] at m * K + k), B as N rows of K (B[k][n] at n * K + k), then the
 *         initial accumulator C[16][16] row-major: the values (16-bit forms: as decoded)
 *   in_h  A and B as above, as 16-bit bits (bf16 or f16 by the tile's form)
 *   out_f the result tile, row-major
 *   out_i 256 entries, lane * (256 / warp) + i: row * 16 + col of the lane's acc[i]
 * and after the n tiles' entries, out_i[256 * n + 0, 1, 2] = PSSM_MMA_TENSOR16,
 * PSSM_MMA_TENSOR_BF16, PSSM_MMA_TENSOR_F16 as the device code was compiled.  After the first step the
 * accumulator is scaled by PSSM_SELFTEST_MMA_SCALE(row, col) (exact powers of two). */
#define PSSM_SELFTEST_MMA_DTYPES 3
#define PSSM_SELFTEST_MMA_FORMS 17
#define PSSM_SELFTEST_MMA_DTYPE(form) ((form) < 15 ? (form) % 3 : (form) - 14)
#define PSSM_SELFTEST_MMA_IFACE(form) ((form) < 15 ? (form) / 3 : 5)
#define PSSM_SELFTEST_MMA_STEPS 3
#define PSSM_SELFTEST_MMA_K (16 * PSSM_SELFTEST_MMA_STEPS)
#define PSSM_SELFTEST_MMA_LDA 52
#define PSSM_SELFTEST_MMA_LDB 50
#define PSSM_SELFTEST_MMA_LDT (PSSM_SELFTEST_MMA_K + 8)
#define PSSM_SELFTEST_MMA_LDTT 24
#define PSSM_SELFTEST_MMA_IN_F (2 * 16 * PSSM_SELFTEST_MMA_K + 256) /* per tile */
#define PSSM_SELFTEST_MMA_IN_H (2 * 16 * PSSM_SELFTEST_MMA_K)       /* per tile */
#define PSSM_SELFTEST_MMA_FLAGS 3
#define PSSM_SELFTEST_MMA_SCALE(row, col)                                                       \
    (((row) + 2 * (col)) % 3 == 0 ? 0.5f : ((row) + 2 * (col)) % 3 == 1 ? 1.0f : 2.0f)

/* Deliberate misuses (pssm_selftest_misuse), which the sim must report, never hang on. */
#define PSSM_SELFTEST_MISUSE_SHUFFLE_HALF_WARP 1  /* half the lanes shuffle, the rest finish  */
#define PSSM_SELFTEST_MISUSE_BARRIER_HALF_BLOCK 2 /* half the block at another barrier       */
#define PSSM_SELFTEST_MISUSE_SHUFFLE_SITES 3      /* odd and even lanes at different shuffles */
#define PSSM_SELFTEST_MISUSE_BARRIER_FINISHED 4   /* half the block returns before a barrier  */
#define PSSM_SELFTEST_MISUSE_DYNAMIC_PAST_END 5   /* a write just past the dynamic shared memory */
#define PSSM_SELFTEST_MISUSE_MODES 5
/* The dynamic shared memory of the misuse launches (bytes). */
#define PSSM_SELFTEST_MISUSE_DYNAMIC 256

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
