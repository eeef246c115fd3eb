/*
 * scan_params.h - parameter structs of the scan kernels (selective_scan_fwd and
 * selective_state_update).  Filled by backends/gpu/ops_scan.c, taken by value by the kernels of
 * scan_kernels.h.  Strides are in elements; a stride array lists the dims in the order named.
 */
#ifndef PSSM_SCAN_PARAMS_H
#define PSSM_SCAN_PARAMS_H
#include <stdint.h>

/* Shared memory of one scan block, in floats: two buffers of a chunk of B and C, chunk rows of
 * tpc * (2 NS + 4) floats, where chunk * tpc * NS <= 8 * threads (one 8-step group of one state
 * per thread); the planner sizes the chunk to fit. */
#define PSSM_SCAN_SMEM_FLOATS 9216
/* Most threads per scan block (the kernels are bounded to it). */
#define PSSM_SCAN_MAX_THREADS 256
/* Time steps a lane loads, scans and stores as one group (one 16-byte vector of 16-bit data). */
#define PSSM_SCAN_GROUP 8

/*
 * selective_scan_fwd.  A block owns `cb` = blockDim.x / tpc consecutive channels d of one batch
 * row b and one B/C group; each channel is walked by a team of `tpc` adjacent lanes, each lane
 * holding NS of its states (the kernel's specialisation) in registers.  Every lane reads and
 * writes its own channel's rows (u, delta, z, out) in groups of 8 steps, one group ahead.  A
 * variable B or C is staged through shared memory in chunks of `chunk` steps, shared by the
 * block's channels, one chunk ahead.
 */
typedef struct pssm_scan_fwd_params {
    const void *u, *delta, *z; /* (B,D,L) act; z may be NULL                                   */
    void *out;                 /* (B,D,L) act; NULL: states only (checkpoints for the backward)  */
    const void *Bm, *Cm;       /* variable: (B,G,N,L) act; constant: (D,N) F32                  */
    const float *A;            /* (D,N)                                                         */
    const float *D;            /* (D) or NULL                                                   */
    const float *delta_bias;   /* (D) or NULL                                                   */
    const float *x0;           /* initial state (B,D,N) or NULL                                 */
    float *xL;                 /* final state (B,D,N) or NULL                                   */
    float *ck;                 /* checkpoints (B,D,K,N) or NULL: states every ck_interval steps */
    int64_t batch, dim, seqlen, dstate;
    int64_t ck_s[4], ck_interval; /* b, d, k, n; a multiple of chunk                            */
    int64_t u_s[3], delta_s[3], z_s[3], out_s[3]; /* b, d, t */
    int64_t A_s[2];                               /* d, n    */
    int64_t B_s[4], C_s[4]; /* variable: b, g, n, t; constant: d, n (the rest unused)            */
    int64_t D_s, bias_s;
    int64_t x0_s[3], xL_s[3]; /* b, d, n */
    /* Blocks tile channels per tile group: `tile_dpg` channels (a divisor of every variable
     * operand's channels per group, so a block never straddles a group), `tiles` of them per
     * batch row, `blocks_per_tile` = ceil(tile_dpg / cb) blocks each.  Grid: x only. */
    int64_t tile_dpg, tiles, blocks_per_tile;
    int64_t B_dpg, C_dpg; /* channels per group of a variable B / C */
    int32_t var_B, var_C, softplus;
    int32_t tpc, log2_tpc; /* lanes per channel, a power of two <= the warp width            */
    int32_t log2_np;       /* log2 of the padded state count tpc * NS                        */
    int32_t chunk;         /* steps per B/C tile: a power of two, a multiple of 8           */
    /* 16-byte accesses allowed (time stride 1, rows 16-byte aligned) for each operand */
    int32_t u_vec, delta_vec, z_vec, out_vec, B_vec, C_vec;
} pssm_scan_fwd_params;

/*
 * selective_state_update (kernels/state_update.body.h), both forms as heads: Mamba-1 is H = D,
 * P = 1, G = 1.  A row is one (h, p); a team of `team` = 2^log2_team adjacent lanes walks its
 * N states, slots of `vec` (4 or 1) consecutive states.  Grid x: blocks of blockDim.x / team
 * rows; grid y: a stride over the batch rows.
 */
typedef struct pssm_state_update_params {
    void *state;               /* (B',H,P,N) F32, F16 or BF16 (the kernel's stamp), in place    */
    const void *x, *dt, *z;    /* (B,H,P) act; z may be NULL                                   */
    void *out;                 /* (B,H,P) act                                                  */
    const void *Bm, *Cm;       /* (B,G,N) act                                                  */
    const float *A;            /* (H,P,N)                                                      */
    const float *D, *dt_bias;  /* (H,P) or NULL                                                */
    const int32_t *sbi;        /* state_batch_indices (B) or NULL                              */
    int64_t batch, heads, hdim, dstate, state_rows; /* B, H, P, N, B'                          */
    int64_t hpg;                                    /* heads per group                         */
    int64_t state_s[4];                             /* b', h, p, n */
    int64_t x_s[3], dt_s[3], z_s[3], out_s[3];      /* b, h, p     */
    int64_t A_s[3];                                 /* h, p, n     */
    int64_t B_s[3], C_s[3];                         /* b, g, n     */
    int64_t D_s[2], bias_s[2];                      /* h, p        */
    int64_t sbi_s;
    /* pointer steps from one batch row of a block to its next: gridDim.y * the batch stride
     * (state: 0 with state_batch_indices) */
    int64_t x_y, dt_y, z_y, out_y, B_y, C_y, sbi_y, state_y;
    int32_t team, log2_team, vec, softplus;
    int32_t a_vec, bc_vec; /* A / B and C rows: 4 consecutive states in one load (vec == 4) */
    /* The fast kernels (pssm_state_update_s<slots>_*) need vec, a_vec (or tied A) and bc_vec,
     * and team * slots * 4 >= N. */
} pssm_state_update_params;

/*
 * selective_scan_bwd (kernels/scan_bwd.body.h).  The lanes are mapped as in the forward: a
 * block owns cb = blockDim.x / tpc consecutive channels of one batch row and one tile, a team
 * of tpc lanes a channel, NS states per lane.  A block walks its rows backwards in chunks of
 * ck_interval steps: from the state at the chunk's start (a checkpoint) it runs the chunk
 * forwards, keeping the state at the start of every group of 8 steps in `gs` (workspace), then
 * walks the groups backwards, recomputing each group's 8 states and decays in registers and
 * propagating the state gradient h through them.
 *
 * Sums over channels (a variable dB / dC) are staged through shared memory and added in a fixed
 * order per block, one partial per block into part_B / part_C ([kb][b][g][n][Lp], kb the block
 * of the group); sums over time (dA, constant dB / dC, dD, ddelta_bias) are kept per lane and
 * written as one partial per batch row ([b][d][n] or [b][d]).  The reduce kernel adds the
 * partials in order.
 */
/* Shared memory of one backward block, in floats (48 KB, the most a block may declare
 * statically): tile_buffers buffers of 8 steps of B and C, then the stage, one group (8 steps)
 * of every lane's contributions to a variable dB and dC. */
#define PSSM_SCAN_BWD_SMEM_FLOATS 12288

typedef struct pssm_scan_bwd_params {
    const void *u, *delta, *z, *dout;     /* (B,D,L) act; z may be NULL                       */
    void *du, *ddelta, *dz;               /* (B,D,L) act; dz may be NULL                      */
    const void *Bm, *Cm;                  /* variable (B,G,N,L) act; constant (D,N) F32       */
    const float *A;                       /* (D,N)                                            */
    const float *D, *delta_bias;          /* (D) or NULL                                      */
    const float *x0, *dfinal;             /* (B,D,N) or NULL                                  */
    const float *ck;                      /* (B,D,K,N) states every ck_interval steps         */
    float *dinit;                         /* (B,D,N) or NULL                                  */
    float *gs;                            /* per block: ck_interval/8 groups x NS x threads   */
    float *part_B, *part_C, *part_A;      /* see above                                        */
    float *part_D, *part_bias;            /* [b][d] or NULL                                   */
    float *carry_h;                       /* (B,D,N): h between windows (see win_lo)          */
    int64_t batch, dim, seqlen, dstate;
    /* This launch's window of steps [win_lo, win_hi): the planner walks long rows as several
     * launches, last window first, so that the per-step partials of a variable dB / dC need only a window's worth of workspace: part_B's t index is t - win_lo
     * of win_pad (the window rounded up to 8).  win_lo is a multiple of ck_interval, win_hi
     * L or one.  A window after the first starts from carry_h and the sums over time in the
     * partials (part_A, constant part_B / part_C, part_D, part_bias), which it reads back. */
    int64_t win_lo, win_hi, win_pad;
    int64_t u_s[3], delta_s[3], z_s[3], dout_s[3], du_s[3], ddelta_s[3], dz_s[3]; /* b, d, t */
    int64_t A_s[2];                       /* d, n                                             */
    int64_t B_s[4], C_s[4];               /* variable: b, g, n, t; constant: d, n             */
    int64_t D_s, bias_s;
    int64_t x0_s[3], df_s[3], di_s[3];    /* b, d, n                                          */
    int64_t ck_s[4], ck_interval;         /* b, d, k, n; a multiple of 8                      */
    int64_t tile_dpg, tiles, blocks_per_tile; /* as in the forward                            */
    int64_t B_dpg, C_dpg, B_groups, C_groups; /* channels per group, groups (variable B / C)  */
    int32_t var_B, var_C, softplus, tpc, log2_tpc;
    int32_t tile_buffers;                 /* 2, or 1 for large N (a barrier before each load) */
    int32_t stage_row;                    /* floats of a channel's row in the stage (>= npad) */
    int32_t u_vec, delta_vec, z_vec, dout_vec, du_vec, ddelta_vec, dz_vec, B_vec, C_vec;
} pssm_scan_bwd_params;

#endif
