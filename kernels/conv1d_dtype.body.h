/*
 * conv1d_dtype.body.h - the conv1d kernels of one activation dtype.  Included by
 * conv1d_kernels.h once per dtype, with:
 *   PSSM_C1_T    storage type of activations         PSSM_C1_DT  name suffix (f32, f16, bf16)
 *   PSSM_C1_VT   16-byte vector of PSSM_C1_VEC        PSSM_C1_NV  cf vectors per lane per tile
 *   PSSM_C1_LD(v) storage -> float                    PSSM_C1_ST(f) float -> storage (rounds)
 * It defines the dtype's helpers, stamps the width-specialised kernels for W = 2..4 and the
 * runtime-width ones, then undefines every dtype macro.
 */

#define PSSM_C1_FN(name) PSSM_C1_CAT4(pssm_c1_, name, _, PSSM_C1_DT)

/* Element `pos` of a row padded as [initial state (hw entries, or zeros) | x | zeros]. */
PSSM_DEVICE float PSSM_C1_FN(xval)(const PSSM_C1_T *xrow, int64_t sl, const PSSM_C1_T *irow,
                                   int64_t isw, int64_t hw, int64_t len, int64_t pos)
{
    if (pos >= 0)
        return pos < len ? PSSM_C1_LD(xrow[pos * sl]) : 0.0f;
    if (irow && pos >= -hw)
        return PSSM_C1_LD(irow[(hw + pos) * isw]);
    return 0.0f;
}

/* rows x cols parameters base[first + r*srow + c*scol] into dst[r*cols + c], as float: weights
 * and biases are F32 or the activation dtype (one branch for all of them). */
PSSM_DEVICE void PSSM_C1_FN(load_params)(float *dst, int rows, int cols, const void *base,
                                         int64_t first, int64_t srow, int64_t scol,
                                         int32_t dtype)
{
    if (dtype == PSSM_DT_F32) {
        const float *w = (const float *)base + first;
        PSSM_UNROLL
        for (int r = 0; r < rows; r++) {
            PSSM_UNROLL
            for (int c = 0; c < cols; c++)
                dst[r * cols + c] = w[r * srow + c * scol];
        }
    } else {
        const PSSM_C1_T *w = (const PSSM_C1_T *)base + first;
        PSSM_UNROLL
        for (int r = 0; r < rows; r++) {
            PSSM_UNROLL
            for (int c = 0; c < cols; c++)
                dst[r * cols + c] = PSSM_C1_LD(w[r * srow + c * scol]);
        }
    }
}

/* The pre-activation bias + sum_k weight[k] * xp[t-hw+k] of row xr (stride xsl, initial state
 * ir), every tap read through xval; taps of another sequence than token t's skipped (sr). */
PSSM_DEVICE float PSSM_C1_FN(pre_at)(const PSSM_C1_T *xr, int64_t xsl, const PSSM_C1_T *ir,
                                     int64_t isw, const int32_t *sr, int64_t ssl, int64_t len,
                                     const void *w, int64_t wsw, int32_t wdt, float bias,
                                     int64_t t, int64_t hw)
{
    const int32_t st = sr ? pssm_c1_seq(sr, ssl, len, t) : 0;
    float acc = bias;
    PSSM_NOUNROLL
    for (int64_t k = 0; k <= hw; k++) {
        const int64_t pos = t - hw + k;
        if (sr && pssm_c1_seq(sr, ssl, len, pos) != st)
            continue;
        acc += pssm_load_any(w, k * wsw, wdt) * PSSM_C1_FN(xval)(xr, xsl, ir, isw, hw, len, pos);
    }
    return acc;
}

/* out[b,d,t] for any width hw+1: the fwd_any kernel, and the few elements at the edges of the
 * vector grid in the others. */
PSSM_DEVICE void PSSM_C1_FN(out_at)(const pssm_conv1d_fwd_params p, int64_t b, int64_t d,
                                    int64_t t, int64_t hw)
{
    const PSSM_C1_T *xr = (const PSSM_C1_T *)p.x + b * p.x_sb + d * p.x_sd;
    const PSSM_C1_T *ir = p.init ? (const PSSM_C1_T *)p.init + b * p.init_sb + d * p.init_sd : 0;
    const int32_t *sr = p.seq_idx ? p.seq_idx + b * p.seq_sb : 0;
    const float bias = p.bias ? pssm_load_any(p.bias, d * p.bias_sd, p.weight_dtype) : 0.0f;
    float acc = PSSM_C1_FN(pre_at)(xr, p.x_sl, ir, p.init_sw, sr, p.seq_sl, p.len,
                                   pssm_elem_any(p.weight, d * p.w_sd, p.weight_dtype), p.w_sw,
                                   p.weight_dtype, bias, t, hw);
    pssm_c1_activate(&acc, 1, p.silu);
    ((PSSM_C1_T *)p.out)[b * p.o_sb + d * p.o_sd + t * p.o_sl] = PSSM_C1_ST(acc);
}

/* One 16-byte vector of activations (base aligned) as floats, and back, rounded once. */
PSSM_DEVICE void PSSM_C1_FN(unpack)(float *dst, const PSSM_C1_VT v)
{
    PSSM_UNROLL
    for (int j = 0; j < 4; j++) {
#if PSSM_C1_VEC == 4
        dst[j] = pssm_as_float(v.w[j]);
#else
        dst[2 * j] = PSSM_C1_LD((PSSM_C1_T)(v.w[j] & 0xffffu));
        dst[2 * j + 1] = PSSM_C1_LD((PSSM_C1_T)(v.w[j] >> 16));
#endif
    }
}

/* v[i] when i < n, else zeros. */
PSSM_DEVICE void PSSM_C1_FN(load_raw)(PSSM_C1_VT *dst, const PSSM_C1_VT *v, int64_t i, int64_t n)
{
    if (i < n) {
        *dst = v[i];
    } else {
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            dst->w[k] = 0u;
    }
}

PSSM_DEVICE void PSSM_C1_FN(load_vec)(float *dst, const PSSM_C1_T *base)
{
    PSSM_C1_FN(unpack)(dst, *(const PSSM_C1_VT *)base);
}

PSSM_DEVICE PSSM_C1_VT PSSM_C1_FN(pack)(const float *y)
{
    PSSM_C1_VT v;
    PSSM_UNROLL
    for (int j = 0; j < 4; j++) {
#if PSSM_C1_VEC == 4
        v.w[j] = pssm_as_uint(PSSM_C1_ST(y[j]));
#elif defined(PSSM_C1_ST2)
        v.w[j] = PSSM_C1_ST2(y[2 * j], y[2 * j + 1]);
#else
        v.w[j] = (uint32_t)PSSM_C1_ST(y[2 * j]) | (uint32_t)PSSM_C1_ST(y[2 * j + 1]) << 16;
#endif
    }
    return v;
}

PSSM_DEVICE void PSSM_C1_FN(store_vec)(PSSM_C1_T *base, const float *y)
{
    *(PSSM_C1_VT *)base = PSSM_C1_FN(pack)(y);
}

/*
 * The scalar pass of the vector kernels: the outputs at steps t0 .. t1-1 of channels d0 ..
 * d0+nd-1 through out_at, all of them from step tf on, and before tf those whose window
 * [t-hw, t] spans two sequences (the vector paths ignore seq_idx).  A window spans two exactly
 * when seq_idx changes inside (t-hw, t], so one seq_idx load per step suffices.  One call site
 * per kernel keeps the cold path from being inlined many times.
 */
PSSM_DEVICE void PSSM_C1_FN(redo)(const pssm_conv1d_fwd_params p, int64_t b, int64_t d0,
                                  int64_t nd, int64_t t0, int64_t t1, int64_t tf, int64_t hw)
{
    const int32_t *sr = p.seq_idx ? p.seq_idx + b * p.seq_sb : 0;
    const int64_t start = sr ? t0 - hw : (tf > t0 ? tf : t0);
    int32_t prev = sr ? pssm_c1_seq(sr, p.seq_sl, p.len, start - 1) : 0;
    int64_t change = start - 1; /* the latest step whose seq_idx differs from the one before */
    PSSM_NOUNROLL
    for (int64_t t = start; t < t1; t++) {
        const int32_t s = sr ? pssm_c1_seq(sr, p.seq_sl, p.len, t) : 0;
        change = s != prev ? t : change;
        prev = s;
        if (t >= t0 && (t >= tf || change > t - hw)) {
            PSSM_NOUNROLL
            for (int64_t i = 0; i < nd; i++)
                PSSM_C1_FN(out_at)(p, b, d0 + i, t, hw);
        }
    }
}

/* final_states[b,d,h] = entry h of the last hw of [initial state | x]. */
PSSM_DEVICE void PSSM_C1_FN(put_final)(const pssm_conv1d_fwd_params p, int64_t b, int64_t d,
                                       int64_t hw, int64_t h)
{
    const PSSM_C1_T *init = (const PSSM_C1_T *)p.init;
    const float v = PSSM_C1_FN(xval)((const PSSM_C1_T *)p.x + b * p.x_sb + d * p.x_sd, p.x_sl,
                                     init ? init + b * p.init_sb + d * p.init_sd : 0, p.init_sw,
                                     hw, p.len, p.len - hw + h);
    ((PSSM_C1_T *)p.final)[b * p.final_sb + d * p.final_sd + h * p.final_sw] = PSSM_C1_ST(v);
}

/* the backward's scalar helpers and generic kernels (the vector kernels below use the helpers) */
#include "conv1d_bwd_any.body.h"

/* ---------------------------------------------------------------- stamped kernels */

/* widths PSSM_C1_MIN_WIDTH .. PSSM_C1_MAX_WIDTH (conv1d_params.h; conv1d_list.h names them) */
#if PSSM_C1_MIN_WIDTH != 2 || PSSM_C1_MAX_WIDTH != 4
#error "conv1d_dtype.body.h stamps widths 2..4: update it with conv1d_params.h and conv1d_list.h"
#endif
#define PSSM_C1_W 2
#include "conv1d_fwd.body.h"
#include "conv1d_update.body.h"
#include "conv1d_bwd.body.h"
#undef PSSM_C1_W
#define PSSM_C1_W 3
#include "conv1d_fwd.body.h"
#include "conv1d_update.body.h"
#include "conv1d_bwd.body.h"
#undef PSSM_C1_W
#define PSSM_C1_W 4
#include "conv1d_fwd.body.h"
#include "conv1d_update.body.h"
#include "conv1d_bwd.body.h"
#undef PSSM_C1_W
/* W = 0: the width is p.width, at run time. */
#define PSSM_C1_W 0
#include "conv1d_update.body.h"
#undef PSSM_C1_W
#include "conv1d_fwd_any.body.h"

#undef PSSM_C1_FN
#undef PSSM_C1_T
#undef PSSM_C1_DT
#undef PSSM_C1_VT
#undef PSSM_C1_VEC
#undef PSSM_C1_NV
#undef PSSM_C1_LD
#undef PSSM_C1_ST
#undef PSSM_C1_ST2
