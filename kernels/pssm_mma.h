/*
 * pssm_mma.h - the dialect's warp-level matrix multiply-accumulate on 16x16 tiles (the SSD's
 * chunked products).  One interface and one semantics on every target; what runs underneath is
 * the target's business:
 *   tensor-core instructions where the target has them (PSSM_MMA_TENSOR16 is 1 there),
 *   an FMA loop elsewhere (and always for f32 operands, which keep f32 accuracy).
 *
 *   acc (16x16, f32) += A (16x16) . B (16x16)     A[m][k] = a[m * lda + k]
 *                                                 B[k][n] = b[n * ldb + k]
 * Both operands are K-contiguous (B is given as its transpose, N rows of K), normally in shared
 * memory; for the 16-bit forms lda and ldb are even and a, b 4-byte aligned.  Every lane of the
 * warp calls with the same arguments (the tensor instructions are warp-collective).
 *
 * The accumulator is PSSM_MMA_ACC floats per lane in a target-defined arrangement: acc[i] of
 * lane `lane` is element (pssm_mma_row(lane, i), pssm_mma_col(lane, i)) of the tile.  Kernels
 * initialise, scale, mask and store it only through those two functions, never by assuming an
 * arrangement.
 */
#ifndef PSSM_MMA_H
#define PSSM_MMA_H
#include "pssm_dialect.h"

#define PSSM_MMA_ACC (256 / PSSM_WARP_SIZE) /* accumulator elements per lane */

/* ---------------------------------------------------------------- the FMA form
 * Element e = i * warp + lane of the tile, row-major. */

#define PSSM_MMA_TENSOR16 0

PSSM_DEVICE int pssm_mma_row(int lane, int i) { return (i * PSSM_WARP_SIZE + lane) >> 4; }
PSSM_DEVICE int pssm_mma_col(int lane, int i) { return (i * PSSM_WARP_SIZE + lane) & 15; }

#define PSSM_MMA_FMA_BODY(load)                                                                 \
    const int lane = PSSM_LANE;                                                                 \
    PSSM_UNROLL                                                                                 \
    for (int i = 0; i < PSSM_MMA_ACC; i++) {                                                    \
        const int m = pssm_mma_row(lane, i), n = pssm_mma_col(lane, i);                         \
        float s = acc[i];                                                                       \
        PSSM_UNROLL                                                                             \
        for (int k = 0; k < 16; k++)                                                            \
            s += load(a[m * lda + k]) * load(b[n * ldb + k]);                                   \
        acc[i] = s;                                                                             \
    }

PSSM_DEVICE void pssm_mma16_f32(float *acc, const float *a, int lda, const float *b, int ldb)
{
    PSSM_MMA_FMA_BODY(pssm_load_f32)
}

PSSM_DEVICE void pssm_mma16_bf16(float *acc, const pssm_bf16 *a, int lda, const pssm_bf16 *b,
                                 int ldb)
{
    PSSM_MMA_FMA_BODY(pssm_load_bf16)
}

PSSM_DEVICE void pssm_mma16_f16(float *acc, const pssm_f16 *a, int lda, const pssm_f16 *b,
                                int ldb)
{
    PSSM_MMA_FMA_BODY(pssm_load_f16)
}

#endif /* PSSM_MMA_H */
