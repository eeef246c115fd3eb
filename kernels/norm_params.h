/*
 * norm_params.h - the parameters of the row-norm kernels (kernels/norm_kernels.h), filled by
 * backends/gpu/ops_norm.c.  Strides count elements (any sign); an absent optional tensor is a
 * NULL pointer; every size and offset is int64_t.
 *
 * Work is cut into segments: one (row, group) pair of n = hidden / groups channels, normalised
 * by one team of `team` threads.  A team is either a power of two of lanes inside one warp
 * (several teams a block, PSSM_NM_TEAM_BLOCK threads) or longer than a warp: exactly the
 * threads its vectors need where a few such teams make whole warps within PSSM_NM_MAX_TEAM
 * threads (several a block, one after another), else a whole block of whole warps.  A thread holds
 * PSSM_NM_NV groups of E channels of the segment (E: the elements of one 16-byte vector of the
 * activation dtype, 8 or 4); a segment longer than team * NV * E channels is walked in `tiles` and
 * read again for each pass. The kernels pssm_norm_*_<dt> access every row tensor by 16-byte vectors
 * (the planner checked: channel stride 1, rows 16-byte aligned, n a multiple of E);
 * pssm_norm_*_any_<dt> element by element, any strides.
 */
#ifndef PSSM_NORM_PARAMS_H
#define PSSM_NORM_PARAMS_H
#include <stdint.h>

#define PSSM_NM_NV 2           /* E-element groups a thread holds per tile                 */
#define PSSM_NM_TEAM_BLOCK 256 /* threads of a block of teams within a warp                */
#define PSSM_NM_MAX_TEAM 512   /* threads of a team that is a whole block, at most          */
#define PSSM_NM_E_F32 4        /* channels of a 16-byte vector: f32, and 16-bit activations */
#define PSSM_NM_E_16 8
/* the reduction slots of a block (norm_kernels.h: pssm_nm_sum2): four floats per warp of 32 */
#define PSSM_NM_RED (4 * PSSM_NM_MAX_TEAM / 32)

/* team_mode: how teams sit in a block (the reductions of norm_kernels.h follow it) */
#define PSSM_NM_TEAMS_IN_WARP 0 /* a power of two of lanes, several teams a warp            */
#define PSSM_NM_TEAM_IS_BLOCK 1 /* one team of the block's whole warps                       */
#define PSSM_NM_TEAMS_MIXED 2   /* teams longer than a warp, several a block (warps shared)  */

/* gate */
#define PSSM_NM_GATE_NONE 0
#define PSSM_NM_GATE_BEFORE 1 /* norm(s * silu(z)) */
#define PSSM_NM_GATE_AFTER 2  /* norm(s) * silu(z) */

/* The gated forms, with kernels of their own on the vector path: a gate, and no residual (nor
 * its gradients) and no bias: the gated RMSNorm of Mamba-2, whose kernels' registers then hold
 * no other option's values (the generic forward, capped at its register budget, kept 2 blocks
 * of 256 threads a multiprocessor: too few loads in flight for the bandwidth; Nsight, run
 * 121).  The values are the gate's. */
#define PSSM_NM_FORM_GATE_BEFORE PSSM_NM_GATE_BEFORE
#define PSSM_NM_FORM_GATE_AFTER PSSM_NM_GATE_AFTER
/* The prenorm form, likewise: no gate and no bias, the residual path (residual, residual_out,
 * their gradients: each present or not) in F32, the weight in either dtype: the block's
 * RMSNorm / LayerNorm with residual_in_fp32. */
#define PSSM_NM_FORM_PRENORM_F32 3

/*
 * Forward: work = rows * groups segments, each its team's once (a grid-stride loop over them).
 * Backward: work = units = chunks * groups; unit u takes group u % groups of rows
 * [c * rows_per, (c+1) * rows_per), c = u / groups, and writes its sums of dweight and dbias
 * (each channel of the group over its rows) to part_w / part_b[c * hidden + channel], which
 * the reduce kernel (reduce_params.h) adds over c in a fixed order.
 */
/*
 * The backward's row prefetch (p.prefetch, the gated forms' kernels, one tile, devices whose
 * copies to shared memory are asynchronous): each thread copies its 16-byte vectors of the next
 * row of its unit (s, g, z) into dynamic shared memory while it
 * computes this row, two row buffers in turn, so that a row's DRAM round trip overlaps the
 * previous row's reductions and stores instead of following them.  Buffer b, vector v of thread
 * t: vector (b * vecs + v) * threads + t, vecs = PSSM_NM_PREFETCH_VECS(...) with each tensor's
 * bytes per channel (0: absent); a thread reads back only its own vectors (no barrier).  Every
 * tensor's E channels must make whole 16-byte vectors.
 */
#define PSSM_NM_PREFETCH_VECS(e, s_bytes, g_bytes, z_bytes)                                        \
    (PSSM_NM_NV * (e) * ((s_bytes) + (g_bytes) + (z_bytes)) / 16)

typedef struct pssm_norm_params {
    const void *x;          /* (R,H): fwd x (act); bwd s, the saved input (x_dt)              */
    const void *res;        /* (R,H) fwd residual (res_dt), or NULL                           */
    const void *z;          /* (R,H) act, or NULL                                             */
    const void *weight;     /* (H) w_dt                                                       */
    const void *bias;       /* (H) w_dt, or NULL                                              */
    void *out;              /* (R,H) fwd out (act); bwd dx (act)                              */
    void *res_out;          /* (R,H) fwd residual_out; bwd dresidual (ro_dt), or NULL         */
    float *mean, *rstd;     /* (R,G) fwd outputs (NULL: not wanted), bwd inputs (mean: LN)    */
    const void *dout;       /* (R,H) bwd, act                                                 */
    const void *dres_out;   /* (R,H) bwd dresidual_out (gro_dt), or NULL                      */
    void *dz;               /* (R,H) bwd, act, or NULL                                        */
    void *y;                /* (R,H) bwd: the forward's out again (act), or NULL              */
    float *part_w, *part_b; /* bwd workspace (chunks, H) each; NULL: not wanted             */
    int64_t rows, hidden, n, groups;
    int64_t x_sr, x_sh, res_sr, res_sh, z_sr, z_sh;
    int64_t out_sr, out_sh, ro_sr, ro_sh;
    int64_t g_sr, g_sh, gro_sr, gro_sh, dz_sr, dz_sh, y_sr, y_sh;
    int64_t w_sh, b_sh;
    int64_t mean_sr, mean_sg, rstd_sr, rstd_sg;
    int64_t work;     /* fwd: segments; bwd: units                                          */
    int64_t rows_per; /* bwd: rows of a unit                                                */
    int32_t team;     /* threads of a segment's team                                        */
    int32_t tiles;    /* tiles of a segment (1: it stays in registers between passes)       */
    int32_t x_dt, res_dt, ro_dt, w_dt, gro_dt; /* PSSM_DT_* of those tensors               */
    int32_t rms;       /* RMSNorm; else LayerNorm                                            */
    int32_t gate;      /* PSSM_NM_GATE_*                                                     */
    int32_t team_mode; /* PSSM_NM_TEAM*: the first two need no integer division by team  */
    int32_t team_log2; /* PSSM_NM_TEAMS_IN_WARP: team == 1 << team_log2                  */
    int32_t prefetch;  /* bwd, the gated forms' kernels, one tile: rows copied ahead (below) */
    float eps;
} pssm_norm_params;

#endif
