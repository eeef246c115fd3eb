/*
 * conv1d_kernels.h - the causal conv1d forward and decode-update kernels.
 *
 * Stamping: this file defines the dtype-independent helpers, then includes conv1d_dtype.body.h
 * once per activation dtype (f32, f16, bf16); that file includes conv1d_fwd.body.h,
 * conv1d_update.body.h and conv1d_bwd.body.h once per width W = 2..4 (PSSM_C1_MIN_WIDTH ..
 * PSSM_C1_MAX_WIDTH), and the runtime-width forms once.  The entry
 * points are listed in conv1d_list.h, the parameter structs live in conv1d_params.h, and the
 * launch planning is backends/gpu/ops_conv1d.c.
 *
 * Kernel kinds (see each body for the details):
 *   fwd_cf_w<W>  x channel-first: a warp owns a stretch of one (b,d) row, 16-byte vectors,
 *                the W-1 element halo of each vector comes from the lane before it by shuffle;
 *   fwd_cl_w<W>  x channel-last: a thread owns a few adjacent channels over a stretch of time
 *                and slides its W-row window along time in registers;
 *   fwd_any      any W (1 and W > 4), any layout: one thread per output, taps read directly;
 *   update_w<W>, update_any  decode: one thread per (b,d) channel.
 */
#ifndef PSSM_CONV1D_KERNELS_H
#define PSSM_CONV1D_KERNELS_H

#include "pssm_dialect.h"
#include "kernel_parts.h"

#define PSSM_C1_CAT2_(a, b) a##b
#define PSSM_C1_CAT2(a, b) PSSM_C1_CAT2_(a, b)
#define PSSM_C1_CAT4_(a, b, c, d) a##b##c##d
#define PSSM_C1_CAT4(a, b, c, d) PSSM_C1_CAT4_(a, b, c, d)

/* The dialect's kernel macros paste onto the name, so a stamped name is expanded first. */
#define PSSM_C1_KERNEL(name, type, p) PSSM_KERNEL(name, type, p)
#define PSSM_C1_KERNEL_BOUNDED(name, type, p, n) PSSM_KERNEL_BOUNDED(name, type, p, n)
/* The channel-first forward, with a register budget for PSSM_C1_CF_MIN_BLOCKS blocks an SM
 * where a build sets it (to compare plans side by side on a GPU). */
#ifdef PSSM_C1_CF_MIN_BLOCKS
#define PSSM_C1_CF_KERNEL(name, type, p)                                                        \
    PSSM_KERNEL_BOUNDED_MIN(name, type, p, PSSM_C1_BLOCK, PSSM_C1_CF_MIN_BLOCKS)
#else
#define PSSM_C1_CF_KERNEL(name, type, p) PSSM_KERNEL_BOUNDED(name, type, p, PSSM_C1_BLOCK)
#endif
/* The channel-first backward, likewise (PSSM_C1_CF_BWD_MIN_BLOCKS). */
#ifdef PSSM_C1_CF_BWD_MIN_BLOCKS
#define PSSM_C1_CF_BWD_KERNEL(name, type, p)                                                    \
    PSSM_KERNEL_BOUNDED_MIN(name, type, p, PSSM_C1_BLOCK, PSSM_C1_CF_BWD_MIN_BLOCKS)
#else
#define PSSM_C1_CF_BWD_KERNEL(name, type, p) PSSM_KERNEL_BOUNDED(name, type, p, PSSM_C1_BLOCK)
#endif


#define PSSM_C1_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Euclidean a mod m (m > 0), for misalignments and ring-buffer slots of any sign. */
PSSM_DEVICE int64_t pssm_c1_emod(int64_t a, int64_t m)
{
    int64_t r = a % m;
    return r < 0 ? r + m : r;
}

/* a / b for a >= 0, b > 0: 32-bit when both fit, as they do but for giant tensors (a 64-bit
 * division is a subroutine call, whose live registers the compiler spills around it). */
PSSM_DEVICE int64_t pssm_c1_div(int64_t a, int64_t b)
{
    if (((uint64_t)a | (uint64_t)b) >> 32 == 0)
        return (int64_t)((uint32_t)a / (uint32_t)b);
    return a / b;
}

/* seq_idx of token t of a row, with the positions before t = 0 belonging to token 0. */
PSSM_DEVICE int32_t pssm_c1_seq(const int32_t *row, int64_t sl, int64_t len, int64_t t)
{
    t = t < 0 ? 0 : (t >= len ? len - 1 : t);
    return row[t * sl];
}

/* Whether the n tokens from t0 on span more than one sequence (all loads at once). */
PSSM_DEVICE int pssm_c1_seq_mixed(const int32_t *row, int64_t sl, int64_t len, int64_t t0, int n)
{
    const int32_t first = pssm_c1_seq(row, sl, len, t0);
    int mixed = 0;
    PSSM_UNROLL
    for (int i = 1; i < n; i++)
        mixed |= pssm_c1_seq(row, sl, len, t0 + i) != first;
    return mixed;
}

PSSM_DEVICE void pssm_c1_activate(float *y, int n, int32_t silu)
{
    if (silu) {
        PSSM_UNROLL
        for (int i = 0; i < n; i++)
            y[i] = pssm_silu_fast(y[i]);
    }
}

/* A 16-byte vector of activations (the pointer must be 16-byte aligned) as four words: four
 * f32, or eight 16-bit elements in pairs (element 2j in the low half of word j).  Words, not
 * 16-bit elements: per-element moves made the H200's cf forward spend about 20 instructions a
 * vector on byte permutes (zero fill, packing) beside its 70 of arithmetic. */
typedef struct PSSM_ALIGN(16) pssm_c1_vec {
    uint32_t w[4];
} pssm_c1_vec;

/* PSSM_C1_ST2(lo, hi), where defined, rounds two elements at once into lo | hi << 16. */

/* ---------------------------------------------------------------- f32 */
#if PSSM_IN_PART(conv1d_f32)
#define PSSM_C1_T float
#define PSSM_C1_DT f32
#define PSSM_C1_VT pssm_c1_vec
#define PSSM_C1_VEC PSSM_C1_VEC_F32
#define PSSM_C1_NV PSSM_C1_NV_F32
#define PSSM_C1_LD(v) pssm_load_f32(v)
#define PSSM_C1_ST(f) pssm_store_f32(f)
#include "conv1d_dtype.body.h"
#endif

/* ---------------------------------------------------------------- f16 */
#if PSSM_IN_PART(conv1d_f16)
#define PSSM_C1_T pssm_f16
#define PSSM_C1_DT f16
#define PSSM_C1_VT pssm_c1_vec
#define PSSM_C1_VEC PSSM_C1_VEC_16
#define PSSM_C1_NV PSSM_C1_NV_16
#define PSSM_C1_LD(v) pssm_load_f16(v)
#define PSSM_C1_ST(f) pssm_store_f16(f)
#include "conv1d_dtype.body.h"
#endif

/* ---------------------------------------------------------------- bf16 */
#if PSSM_IN_PART(conv1d_bf16)
#define PSSM_C1_T pssm_bf16
#define PSSM_C1_DT bf16
#define PSSM_C1_VT pssm_c1_vec
#define PSSM_C1_VEC PSSM_C1_VEC_16
#define PSSM_C1_NV PSSM_C1_NV_16
#define PSSM_C1_LD(v) pssm_load_bf16(v)
#define PSSM_C1_ST(f) pssm_store_bf16(f)
#define PSSM_C1_ST2(lo, hi) pssm_store_bf16x2(lo, hi)
#include "conv1d_dtype.body.h"
#endif

#endif /* PSSM_CONV1D_KERNELS_H */
