/*
 * conv1d_params.h - parameter structs of the conv1d kernels (kernels/conv1d_kernels.h).
 *
 * Filled by backends/gpu/ops_conv1d.c, passed by value.  Strides count elements (any sign);
 * an absent optional tensor is a NULL pointer.  Every size and offset is int64_t.
 */
#ifndef PSSM_CONV1D_PARAMS_H
#define PSSM_CONV1D_PARAMS_H
#include <stdint.h>

/* Shared by the kernels and their launch planning. */
#define PSSM_C1_BLOCK 128   /* threads per block of every conv1d kernel (a multiple of 64) */
#define PSSM_C1_VEC_F32 4   /* elements per 16-byte vector */
#define PSSM_C1_VEC_16 8
/* cf: 16-byte vectors per lane per warp tile, in flight while the tile before is computed (the
 * H200 needs about 32 KB in flight per SM to reach its copy bandwidth).  Build-time overridable
 * (the host planner and the kernels must agree: -D in both CMAKE_C_FLAGS and
 * PORTSSM_NVCC_FLAGS).  16-bit: 2, measured on the H200 (bench/RESULTS.md, run 6 notes): bf16 B4
 * D4096 L2048 W4 45.9 us with 2, 50.2 with 4, 62.4 with 8 (fewer registers, more warps). */
#ifndef PSSM_C1_NV_F32
#define PSSM_C1_NV_F32 4
#endif
#ifndef PSSM_C1_NV_16
#define PSSM_C1_NV_16 2
#endif
/* cf: tiles loaded ahead of the one being computed (kernel only; build-time overridable). */
#ifndef PSSM_C1_AHEAD
#define PSSM_C1_AHEAD 1
#endif
/* Widths with kernels of their own (fwd cf/cl, update, bwd cf/cl): 2..4, those of Mamba's
 * models and of causal-conv1d.  Every other width runs the runtime-width kernels (*_any): each
 * stamped width adds about 4% to every GPU target's machine code and compile time (sm_90: 0.34
 * to 0.57 MB per width for the three dtypes), so widths 1 and 5..8 stopped having their own
 * (issue #11, the build's cost). */
#define PSSM_C1_MIN_WIDTH 2
#define PSSM_C1_MAX_WIDTH 4
#define PSSM_C1_WIDTHS (PSSM_C1_MAX_WIDTH - PSSM_C1_MIN_WIDTH + 1)
#define PSSM_C1_STAMPED(w) ((w) >= PSSM_C1_MIN_WIDTH && (w) <= PSSM_C1_MAX_WIDTH)
/* cl: time steps a thread loads ahead (fewer for wide windows, which cost registers); the host
 * makes segments a multiple of it. */
#define PSSM_C1_CL_STEPS(vec, width) ((vec) * (width) > 32 ? 2 : 4)
/* cl backward: time steps of x and dout a thread has in flight while it computes as many
 * (kernel only; build-time overridable). */
#ifndef PSSM_C1_CL_BWD_STEPS
#define PSSM_C1_CL_BWD_STEPS 2
#endif

/* causal_conv1d_fwd.  The three kernel kinds split the work differently:
 *   cf  (x channel-first): one work item per warp = (row b*D+d, segment of seg_len warp tiles);
 *   cl  (x channel-last):  one work item per thread = (b, time segment of seg_len steps, group of
 *                          channels), groups fastest; nvec groups per (b, t) row;
 *   any (runtime width):   one work item per thread = one output element. */
typedef struct pssm_conv1d_fwd_params {
    const void *x;           /* (B,D,L) act                                  */
    const void *weight;      /* (D,W) F32 or act (weight_dtype)              */
    const void *bias;        /* (D) weight's dtype, or NULL                  */
    const int32_t *seq_idx;  /* (B,L), or NULL                               */
    const void *init;        /* (B,D,W-1) act, or NULL                       */
    void *final;             /* (B,D,W-1) act, or NULL                       */
    void *out;               /* (B,D,L) act                                  */
    int64_t batch, dim, len; /* B, D, L                                      */
    int64_t x_sb, x_sd, x_sl;
    int64_t o_sb, o_sd, o_sl;
    int64_t w_sd, w_sw;
    int64_t bias_sd;
    int64_t seq_sb, seq_sl;
    int64_t init_sb, init_sd, init_sw;
    int64_t final_sb, final_sd, final_sw;
    int64_t work;      /* work items (see above)                                   */
    int64_t segs;      /* cf: segments per row; cl: time segments per batch        */
    int64_t seg_len;   /* cf: warp tiles per segment; cl: time steps per segment   */
    int64_t nvec;      /* cl: channel groups per (b, t) row                        */
    int32_t width;     /* W; the width-specialised kernels ignore it               */
    int32_t weight_dtype; /* PSSM_DT_F32 / F16 / BF16 of weight and bias          */
    int32_t silu;      /* activation SILU                                          */
    int32_t misalign;  /* cf/cl: element offset of x (== of out) modulo the vector */
    int32_t chan_fastest; /* any: work items run over channels first (channel-last x) */
    int32_t pad_;
} pssm_conv1d_fwd_params;

/* causal_conv1d_update: one work item per thread = (b, d), d fastest. */
typedef struct pssm_conv1d_update_params {
    const void *x;                /* (B,D,T) act                              */
    void *state;                  /* (B',D,S) act, in place                   */
    const void *weight;           /* (D,W)                                    */
    const void *bias;             /* (D), or NULL                             */
    const int32_t *cache_seqlens; /* (B), or NULL: shift register             */
    const int32_t *state_indices; /* (B), or NULL: row b                      */
    void *out;                    /* (B,D,T) act                              */
    int64_t batch, dim, tokens, state_len, pool; /* B, D, T, S, B'            */
    int64_t x_sb, x_sd, x_st;
    int64_t o_sb, o_sd, o_st;
    int64_t s_sb, s_sd, s_ss;
    int64_t w_sd, w_sw;
    int64_t bias_sd;
    int64_t seqlens_s, indices_s;
    int64_t work; /* B * D */
    int32_t width;
    int32_t weight_dtype;
    int32_t silu;
    int32_t pad_;
} pssm_conv1d_update_params;

/* causal_conv1d_bwd.  The vector kernels (conv1d_bwd.body.h; no seq_idx, W in 2..4) split work like
 * the forward's cf / cl kernels and write partial sums of dweight / dbias per work item to
 * part[((b*segs + seg)*D + d)*(W+1) + k].  The generic path (any width, layout and option;
 * conv1d_bwd_any.body.h) runs three kernels over a workspace:
 *   dpre  one thread per (b,d,t): dpre = dout * act'(pre), F32, to dpre[(b*D+d)*L + t];
 *   dx    one thread per (b,d,s), s in [-(W-1), L): dx (s >= 0) or dinitial_states (s < 0);
 *   dw    one block per (d, segment of seg_len of the (b,t) pairs): the segment's sums for
 *         dweight[d,0..W-1] and dbias[d] (entry W) to part[(seg*D + d)*(W+1) + w], reduced in a
 *         fixed order by the block and across segments by the reduce kernel. */
typedef struct pssm_conv1d_bwd_params {
    const void *x, *weight, *bias, *init, *dout, *dfinal; /* dfinal, init may be NULL    */
    const int32_t *seq_idx;                               /* (B,L) or NULL              */
    void *dx, *dinit;                                     /* dinit may be NULL          */
    float *dpre;                                          /* workspace (B,D,L)          */
    float *part;                                          /* workspace (segs,D,W+1)     */
    int64_t batch, dim, len;
    int64_t x_sb, x_sd, x_sl;
    int64_t g_sb, g_sd, g_sl;    /* dout */
    int64_t dx_sb, dx_sd, dx_sl;
    int64_t w_sd, w_sw;
    int64_t bias_sd;
    int64_t seq_sb, seq_sl;
    int64_t init_sb, init_sd, init_sw;
    int64_t df_sb, df_sd, df_sw;  /* dfinal */
    int64_t di_sb, di_sd, di_sw;  /* dinit */
    int64_t work;      /* dpre, dx: items; dw: blocks (segs * D); cf, cl: work items       */
    int64_t segs;      /* dw: segments of the (b,t) pairs; cf: per row; cl: per batch      */
    int64_t seg_len;   /* dw: pairs; cf: warp tiles; cl: steps                             */
    int64_t nvec;      /* cl: channel vectors per (b, t)                                   */
    int32_t width, weight_dtype, silu, chan_fastest;
    int32_t misalign;  /* cf: element offset of x (== of dout, dx) modulo the vector       */
    int32_t pad_;
} pssm_conv1d_bwd_params;

#endif
