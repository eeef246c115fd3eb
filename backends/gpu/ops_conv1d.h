/*
 * ops_conv1d.h - what the conv1d planners share: ops_conv1d.c (fwd, update) and
 * ops_conv1d_bwd.c (bwd).
 */
#ifndef PSSM_GPU_OPS_CONV1D_H
#define PSSM_GPU_OPS_CONV1D_H

#include "gpu.h"

#include "../../kernels/params.h"

/* Widths without kernels of their own (outside PSSM_C1_MIN_WIDTH .. PSSM_C1_MAX_WIDTH) run on
 * the generic kernels, whose cost grows with W; past this bound (far beyond any model, and what
 * keeps W an int in the kernels) the GPU says no. */
#define PSSM_C1_GPU_MAX_WIDTH 4096
portssm_status pssm_c1_too_wide(pssm_bctx *c, const char *op, int64_t W);

/* The width-specialised kernels of one kind and dtype, indexed W - PSSM_C1_MIN_WIDTH, from
 * their one list (kernels/conv1d_list.h). */
#define PSSM_C1_KID_(name, part) PSSM_KID_##name,
#define PSSM_C1_WIDTH_IDS(kind, dt) {PSSM_CONV1D_WIDTHS_(PSSM_C1_KID_, kind, dt)}
#define PSSM_C1_DTYPE_IDS(kind)                                                                 \
    {PSSM_C1_WIDTH_IDS(kind, f32), PSSM_C1_WIDTH_IDS(kind, f16), PSSM_C1_WIDTH_IDS(kind, bf16)}
_Static_assert(sizeof((int[])PSSM_C1_WIDTH_IDS(fwd_cf, f32)) == PSSM_C1_WIDTHS * sizeof(int),
               "kernels/conv1d_list.h stamps PSSM_C1_MIN_WIDTH .. PSSM_C1_MAX_WIDTH");

/* The dialect's run-time dtype code (PSSM_DT_F32/F16/BF16) of a weight: portssm_dtype's
 * pinned values. */
_Static_assert(PORTSSM_F32 == 0 && PORTSSM_F16 == 1 && PORTSSM_BF16 == 2,
               "pssm_load_any's dtype codes");
static inline int32_t pssm_c1_kernel_dtype(portssm_dtype t) { return (int32_t)t; }

/* Elements of an activation dtype in a 16-byte vector. */
int64_t pssm_c1_vec(portssm_dtype t);
/* A 1-D grid of `blocks` blocks of PSSM_C1_BLOCK threads, capped for HIP's 2^32 - 1 threads
 * (the kernels' grid-stride loops take the rest). */
pssm_dim3 pssm_c1_grid(int64_t blocks);
/* Can x and o (B,D,L) walk one grid of 16-byte vectors along dim vd (1: channels, 2: time)?
 * *misalign: x's element offset modulo the vector. */
int pssm_c1_vec_grid(const portssm_tensor *x, const portssm_tensor *o, int vd, int64_t vec,
                     int32_t *misalign);

/* Steps per time segment of the channel-last kernels, whose work items are (b, segment,
 * channel vector) threads walking their steps in order: the most segments that still fit
 * `rows` items each (B x channel vectors) in one wave of `slots` threads, no segment shorter
 * than `least`, lengths a multiple of `mult`, at most L rounded up to `mult`.  (One item past
 * the wave is a second wave as long as the first: B8 D4352 L1024 bf16 had 272 blocks for 264
 * places.) */
int64_t pssm_c1_cl_seg_len(int64_t rows, int64_t len, int64_t slots, int64_t least,
                           int64_t mult);
/* The slots of one wave of a channel-last kernel: the threads of the blocks of `kernel` the
 * device holds at once (the driver's count, else 256 threads a multiprocessor). */
int64_t pssm_c1_cl_slots(pssm_gpu *g, int kernel);

#endif
