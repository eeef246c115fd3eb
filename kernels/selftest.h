/*
 * selftest.h - self-check kernels of the dialect, run by portssm_device_selftest().
 *
 * Each kernel exercises one part of pssm_dialect.h at the device's own warp width and writes
 * its raw results; backends/gpu/ops_selftest.c computes the expected values on the host and
 * names the first check that differs.  Inputs of the reductions are small integers stored as
 * floats, so every summation order gives the same, exact result and the comparison is exact;
 * the matrix multiply-accumulate is compared with a double product within f32 rounding.
 *
 * pssm_selftest_misuse holds deliberate mistakes (a shuffle or barrier reached by only part of
 * the warp or block); only the sim backend runs it, and must report each one as an error.
 */
#ifndef PSSM_SELFTEST_H
#define PSSM_SELFTEST_H

#include "pssm_mma.h"

/* Global index of a thread of a 1-D launch. */
#define PSSM_SELFTEST_GID (PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_TID)

/* Every lane runs every shuffle: 8 forms per dtype, plane k of out_f / out_i. */
PSSM_KERNEL_BOUNDED(pssm_selftest_shuffle, pssm_selftest_params, p, PSSM_SELFTEST_BLOCK)
{
    const int64_t n = p.n, i = PSSM_SELFTEST_GID;
    const int half = PSSM_WARP_SIZE / 2;
    const int src = PSSM_LANE * 7 + 3; /* past the warp for most lanes: taken modulo the warp */
    const float v = p.in_f[i];
    const int w = p.in_i[i];

    p.out_f[0 * n + i] = PSSM_SHFL_XOR_F32(v, 1);
    p.out_f[1 * n + i] = PSSM_SHFL_XOR_F32(v, half);
    p.out_f[2 * n + i] = PSSM_SHFL_UP_F32(v, 1);
    p.out_f[3 * n + i] = PSSM_SHFL_UP_F32(v, 3);
    p.out_f[4 * n + i] = PSSM_SHFL_DOWN_F32(v, 1);
    p.out_f[5 * n + i] = PSSM_SHFL_DOWN_F32(v, half + 1);
    p.out_f[6 * n + i] = PSSM_SHFL_IDX_F32(v, src);
    p.out_f[7 * n + i] = PSSM_SHFL_IDX_F32(v, 0);

    p.out_i[0 * n + i] = PSSM_SHFL_XOR_I32(w, 1);
    p.out_i[1 * n + i] = PSSM_SHFL_XOR_I32(w, half);
    p.out_i[2 * n + i] = PSSM_SHFL_UP_I32(w, 1);
    p.out_i[3 * n + i] = PSSM_SHFL_UP_I32(w, 3);
    p.out_i[4 * n + i] = PSSM_SHFL_DOWN_I32(w, 1);
    p.out_i[5 * n + i] = PSSM_SHFL_DOWN_I32(w, half + 1);
    p.out_i[6 * n + i] = PSSM_SHFL_IDX_I32(w, src);
    p.out_i[7 * n + i] = PSSM_SHFL_IDX_I32(w, 0);
}

/* The warp collectives of the dialect. */
PSSM_KERNEL_BOUNDED(pssm_selftest_reduce, pssm_selftest_params, p, PSSM_SELFTEST_BLOCK)
{
    const int64_t n = p.n, i = PSSM_SELFTEST_GID;
    const float v = p.in_f[i];

    p.out_f[0 * n + i] = pssm_warp_sum(v);
    p.out_f[1 * n + i] = pssm_warp_max(v);
    p.out_f[2 * n + i] = pssm_warp_scan_sum(v);
    p.out_f[3 * n + i] = pssm_team_sum(v, 1);
    p.out_f[4 * n + i] = pssm_team_sum(v, 4);
    p.out_f[5 * n + i] = pssm_team_sum(v, 16);
}

/*
 * 2-D blocks (PSSM_SELFTEST_BLOCK_X x _Y) on a 2-D grid: shared memory and barriers.
 * out_f planes: 0 block-wide reversal through a shared line, 1 a shifted read of a 2-D shared
 * tile, 2 three rounds of "add a neighbour" separated by barriers, 3 block sum (warp sums
 * combined through shared memory).  out_i planes: thread x, y, block x, y, lane, warp, warp
 * width, and the block and grid dimensions packed as bx*10^6 + by*10^4 + gx*100 + gy.
 */
PSSM_KERNEL_BOUNDED(pssm_selftest_block, pssm_selftest_params, p, PSSM_SELFTEST_BLOCK)
{
    PSSM_SHARED(float, line, PSSM_SELFTEST_BLOCK);
    PSSM_SHARED_2D(float, tile, PSSM_SELFTEST_BLOCK_Y, PSSM_SELFTEST_BLOCK_X + 1);
    PSSM_SHARED(float, partial, PSSM_SELFTEST_BLOCK / PSSM_WARP_SIZE);
    const int tx = PSSM_THREAD_X, ty = PSSM_THREAD_Y, tid = PSSM_TID;
    const int bdx = PSSM_BLOCKDIM_X, bdy = PSSM_BLOCKDIM_Y, threads = bdx * bdy;
    const int64_t n = p.n;
    const int64_t i = (PSSM_BLOCK_Y * PSSM_GRIDDIM_X + PSSM_BLOCK_X) * threads + tid;
    const float v = p.in_f[i];

    line[tid] = v;
    tile[ty][tx] = 2.0f * v;
    PSSM_SYNC();
    p.out_f[0 * n + i] = line[threads - 1 - tid];
    p.out_f[1 * n + i] = tile[(ty + 5) % bdy][(tx + 3) % bdx];

    /* The same two barriers again and again: every read of a round precedes every write. */
    for (int r = 1; r <= 3; r++) {
        const float next = line[(tid + r) % threads];
        PSSM_SYNC();
        line[tid] += next;
        PSSM_SYNC();
    }
    p.out_f[2 * n + i] = line[tid];

    const float warp_total = pssm_warp_sum(v);
    if (PSSM_LANE == 0)
        partial[PSSM_WARP_ID] = warp_total;
    PSSM_SYNC();
    float total = 0.0f;
    for (int k = 0; k < threads / PSSM_WARP_SIZE; k++)
        total += partial[k];
    p.out_f[3 * n + i] = total;

    p.out_i[0 * n + i] = tx;
    p.out_i[1 * n + i] = ty;
    p.out_i[2 * n + i] = (int)PSSM_BLOCK_X;
    p.out_i[3 * n + i] = (int)PSSM_BLOCK_Y;
    p.out_i[4 * n + i] = PSSM_LANE;
    p.out_i[5 * n + i] = PSSM_WARP_ID;
    p.out_i[6 * n + i] = PSSM_WARP_SIZE;
    p.out_i[7 * n + i] =
        (int)(bdx * 1000000 + bdy * 10000 + PSSM_GRIDDIM_X * 100 + PSSM_GRIDDIM_Y);
}

/* 16-bit floats: stores of in_f[i < n] into out_h planes (f16, bf16); loads of in_h[i < n2]
 * into out_f planes (f16, bf16, and both again through pssm_load_any). */
PSSM_KERNEL_BOUNDED(pssm_selftest_f16, pssm_selftest_params, p, PSSM_SELFTEST_BLOCK)
{
    const int64_t n = p.n, n2 = p.n2, i = PSSM_SELFTEST_GID;
    if (i < n) {
        const float f = p.in_f[i];
        p.out_h[0 * n + i] = pssm_store_f16(f);
        p.out_h[1 * n + i] = pssm_store_bf16(f);
    }
    if (i < n2) {
        const uint16_t h = p.in_h[i];
        p.out_f[0 * n2 + i] = pssm_load_f16(h);
        p.out_f[1 * n2 + i] = pssm_load_bf16(h);
        p.out_f[2 * n2 + i] = pssm_load_any(p.in_h, i, PSSM_DT_F16);
        p.out_f[3 * n2 + i] = pssm_load_any(p.in_h, i, PSSM_DT_BF16);
    }
}

/* Math: planes exp2, exp, softplus, silu, exp2 by polynomial of in_f[i < n]. */
PSSM_KERNEL_BOUNDED(pssm_selftest_math, pssm_selftest_params, p, PSSM_SELFTEST_BLOCK)
{
    const int64_t n = p.n, i = PSSM_SELFTEST_GID;
    if (i < n) {
        const float x = p.in_f[i];
        p.out_f[0 * n + i] = pssm_exp2f(x);
        p.out_f[1 * n + i] = pssm_expf(x);
        p.out_f[2 * n + i] = pssm_softplusf(x);
        p.out_f[3 * n + i] = pssm_siluf(x);
        p.out_f[4 * n + i] = pssm_exp2f_poly(x);
    }
}

/* The warp matrix multiply-accumulate (pssm_mma.h): one tile per warp, the form by the tile
 * (warp-uniform), operands staged in shared memory (see selftest_params.h).  The accumulator
 * is initialised, scaled and stored only through pssm_mma_row / pssm_mma_col, as kernels do. */
#define PSSM_ST_MMA_WARPS (PSSM_SELFTEST_BLOCK / PSSM_WARP_SIZE)
#define PSSM_ST_MMA_TILE (2 * PSSM_SELFTEST_MMA_K * PSSM_SELFTEST_MMA_LDTT) /* the largest */
/* one staged step at k0 through the tile's interface: fn (pssm_mma16_*), fnt (pssm_mma16t_*)
 * or fns (pssm_mma16s_*, a strip of one tile: step 0 alone, then steps 1 and 2 in one call,
 * whose second step's fragments load under the first's multiplies) */
#define PSSM_ST_MMA_STRIP(fns, ty, ks, ld, t)                                                   \
    fns((float(*)[PSSM_MMA_ACC])acc, 1, ks, (const ty *)sa + (t ? k0 * ld : k0), ld, t,          \
        (const ty *)sb + (t ? k0 * ld : k0), ld, t)
/* the register form: A's values of the step from in_f (exact in the operand type), B staged
 * transposed (bt = 1, as the SSD's output kernel reads x), A's staging area as the scratch */
#define PSSM_ST_MMA_REGS(ty)                                                                    \
    do {                                                                                        \
        float am[PSSM_MMA_ACC];                                                                 \
        PSSM_UNROLL                                                                             \
        for (int i = 0; i < PSSM_MMA_ACC; i++)                                                  \
            am[i] = in_f[pssm_mma_row(lane, i) * K + k0 + pssm_mma_col(lane, i)];               \
        if (dtype == 1)                                                                         \
            pssm_mma16rs_bf16((float(*)[PSSM_MMA_ACC])acc, 1, pssm_mma_a16_bf16(am),            \
                              (const pssm_bf16 *)sb + k0 * LDTT, LDTT, 1, (pssm_bf16 *)ha);     \
        else                                                                                    \
            pssm_mma16rs_f16((float(*)[PSSM_MMA_ACC])acc, 1, pssm_mma_a16_f16(am),              \
                             (const pssm_f16 *)sb + k0 * LDTT, LDTT, 1, (pssm_f16 *)ha);        \
    } while (0)
#define PSSM_ST_MMA_STEP(fn, fnt, fns, ty)                                                      \
    if (iface == 5)                                                                             \
        PSSM_ST_MMA_REGS(ty);                                                                   \
    else if (iface == 0)                                                                        \
        fn(acc, (const ty *)sa + k0, LDA, (const ty *)sb + k0, LDB);                            \
    else if (iface == 1)                                                                        \
        fnt(acc, (const ty *)sa + k0, LDT, 0, (const ty *)sb + k0, LDT, 0);                     \
    else if (iface == 2)                                                                        \
        fnt(acc, (const ty *)sa + k0 * LDTT, LDTT, 1, (const ty *)sb + k0 * LDTT, LDTT, 1);    \
    else if (s == 0 && iface == 3)                                                              \
        PSSM_ST_MMA_STRIP(fns, ty, 1, LDT, 0);                                                  \
    else if (s == 0)                                                                            \
        PSSM_ST_MMA_STRIP(fns, ty, 1, LDTT, 1);                                                 \
    else if (s == 1 && iface == 3)                                                              \
        PSSM_ST_MMA_STRIP(fns, ty, 2, LDT, 0);                                                  \
    else if (s == 1)                                                                            \
        PSSM_ST_MMA_STRIP(fns, ty, 2, LDTT, 1);
PSSM_KERNEL_BOUNDED(pssm_selftest_mma, pssm_selftest_params, p, PSSM_SELFTEST_BLOCK)
{
    /* one staging area per warp, as f32 or 16-bit values by the tile's dtype; 16-byte aligned
     * (the tile form's rows) */
    PSSM_SHARED(pssm_vec16, stage, PSSM_ST_MMA_WARPS * PSSM_ST_MMA_TILE * 4 / 16);
    enum {
        K = PSSM_SELFTEST_MMA_K, LDA = PSSM_SELFTEST_MMA_LDA, LDB = PSSM_SELFTEST_MMA_LDB,
        LDT = PSSM_SELFTEST_MMA_LDT, LDTT = PSSM_SELFTEST_MMA_LDTT
    };
    const int lane = PSSM_LANE, wid = PSSM_WARP_ID;
    const int64_t n = p.n, tile = PSSM_BLOCK_X * PSSM_ST_MMA_WARPS + wid;
    const int form = (int)(tile % PSSM_SELFTEST_MMA_FORMS);
    const int dtype = PSSM_SELFTEST_MMA_DTYPE(form), iface = PSSM_SELFTEST_MMA_IFACE(form);
    /* the strips stage as 1 and 2, the register form as 2 */
    const int lay = iface == 3 ? 1 : iface == 4 || iface == 5 ? 2 : iface;
    float *fa = (float *)stage + wid * PSSM_ST_MMA_TILE;
    uint16_t *ha = (uint16_t *)fa;
    /* B's staging: after A's (16 rows, or K rows transposed) */
    const int a_len = lay == 0 ? 16 * LDA : lay == 1 ? 16 * LDT : K * LDTT;
    float *fb = fa + a_len;
    uint16_t *hb = ha + a_len;
    const float *in_f = p.in_f + tile * PSSM_SELFTEST_MMA_IN_F;
    const uint16_t *in_h = p.in_h + tile * PSSM_SELFTEST_MMA_IN_H;

    if (tile < n)
        for (int e = lane; e < 16 * K; e += PSSM_WARP_SIZE) {
            const int r = e / K, k = e % K;
            const int ia = lay == 0 ? r * LDA + k : lay == 1 ? r * LDT + k : k * LDTT + r;
            const int ib = lay == 0 ? r * LDB + k : lay == 1 ? r * LDT + k : k * LDTT + r;
            if (dtype == 0) {
                fa[ia] = in_f[e];
                fb[ib] = in_f[16 * K + e];
            } else {
                ha[ia] = in_h[e];
                hb[ib] = in_h[16 * K + e];
            }
        }
    PSSM_SYNC();
    if (tile >= n)
        return;

    float acc[PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i++)
        acc[i] = in_f[2 * 16 * K + pssm_mma_row(lane, i) * 16 + pssm_mma_col(lane, i)];
    for (int s = 0; s < PSSM_SELFTEST_MMA_STEPS; s++) {
        const int k0 = 16 * s;
        const void *sa = dtype == 0 ? (const void *)fa : (const void *)ha;
        const void *sb = dtype == 0 ? (const void *)fb : (const void *)hb;
        if (dtype == 0) {
            PSSM_ST_MMA_STEP(pssm_mma16_f32, pssm_mma16t_f32, pssm_mma16s_f32, float)
        } else if (dtype == 1) {
            PSSM_ST_MMA_STEP(pssm_mma16_bf16, pssm_mma16t_bf16, pssm_mma16s_bf16, pssm_bf16)
        } else {
            PSSM_ST_MMA_STEP(pssm_mma16_f16, pssm_mma16t_f16, pssm_mma16s_f16, pssm_f16)
        }
        if (s == 0) {
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i++)
                acc[i] *= PSSM_SELFTEST_MMA_SCALE(pssm_mma_row(lane, i), pssm_mma_col(lane, i));
        }
    }
    PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i++) {
        const int e = pssm_mma_row(lane, i) * 16 + pssm_mma_col(lane, i);
        p.out_f[tile * 256 + e] = acc[i];
        p.out_i[tile * 256 + lane * PSSM_MMA_ACC + i] = e;
    }
    if (tile == 0 && lane == 0) {
        p.out_i[n * 256 + 0] = PSSM_MMA_TENSOR16;
        p.out_i[n * 256 + 1] = PSSM_MMA_TENSOR_BF16;
        p.out_i[n * 256 + 2] = PSSM_MMA_TENSOR_F16;
    }
}
#undef PSSM_ST_MMA_STEP
#undef PSSM_ST_MMA_STRIP
#undef PSSM_ST_MMA_REGS

/* Dynamic shared memory (PSSM_SHARED_DYNAMIC) beside a static array, on a 1-D grid of 1-D
 * blocks: each block stages its p.n2 values there, and reads them back reversed plus its static
 * line, so that the two must hold their own values (kernels/selftest_params.h).  The host
 * gives it more than 48 KB where the device allows it, which on CUDA takes the opt-in. */
PSSM_KERNEL_BOUNDED(pssm_selftest_dynamic, pssm_selftest_params, p, PSSM_SELFTEST_BLOCK)
{
    PSSM_SHARED(float, line, PSSM_SELFTEST_BLOCK);
    PSSM_SHARED_DYNAMIC(float, staged);
    const int tid = PSSM_TID, threads = PSSM_BLOCKDIM_X;
    const int64_t m = p.n2, base = PSSM_BLOCK_X * m;
    line[tid] = -(float)(tid + 1);
    for (int64_t k = tid; k < m; k += threads)
        staged[k] = p.in_f[base + k];
    PSSM_SYNC();
    for (int64_t k = tid; k < m; k += threads)
        p.out_f[base + k] = staged[m - 1 - k] + line[k % threads];
}

/* Deliberate misuse, p.mode = PSSM_SELFTEST_MISUSE_*: undefined behaviour on a GPU, an error
 * report on the sim.  Each collective sits on its own line: the sim tells sites apart by line. */
PSSM_KERNEL_BOUNDED(pssm_selftest_misuse, pssm_selftest_params, p, PSSM_SELFTEST_BLOCK)
{
    PSSM_SHARED_DYNAMIC(float, dynamic); /* PSSM_SELFTEST_MISUSE_DYNAMIC bytes */
    const int tid = PSSM_TID, lane = PSSM_LANE, half_block = PSSM_BLOCKDIM_X / 2;
    float v = (float)tid;
    if (p.mode == PSSM_SELFTEST_MISUSE_SHUFFLE_HALF_WARP) {
        if (lane < PSSM_WARP_SIZE / 2)
            v = PSSM_SHFL_XOR_F32(v, 1);
    } else if (p.mode == PSSM_SELFTEST_MISUSE_BARRIER_HALF_BLOCK) {
        if (tid < half_block)
            PSSM_SYNC();
        PSSM_SYNC();
    } else if (p.mode == PSSM_SELFTEST_MISUSE_SHUFFLE_SITES) {
        if (lane & 1)
            v = PSSM_SHFL_XOR_F32(v, 1);
        else
            v = PSSM_SHFL_DOWN_F32(v, 1);
    } else if (p.mode == PSSM_SELFTEST_MISUSE_BARRIER_FINISHED) {
        if (tid >= half_block)
            return;
        PSSM_SYNC();
    } else if (p.mode == PSSM_SELFTEST_MISUSE_DYNAMIC_PAST_END) {
        if (tid == 0)
            dynamic[PSSM_SELFTEST_MISUSE_DYNAMIC / sizeof(float)] = v; /* one float past it */
        PSSM_SYNC();
    }
    p.out_f[PSSM_SELFTEST_GID] = v;
}

#endif /* PSSM_SELFTEST_H */
