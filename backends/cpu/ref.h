/*
 * ref.h - the math of every portssm op, in double, on typed strided views (ref_view.h).
 *
 * This is the correctness oracle: loops that follow the definitions of include/portssm.h,
 * deterministic (fixed loop and summation order, no threads here: the cpu backend spreads the
 * independent rows of an op over threads, cpu_threads.h), no float below double inside.  The
 * cpu backend points the views at the caller's tensors (no copies); the tests point them at
 * double arrays and call it directly to check gradients by finite differences in double.
 *
 * Layouts: inputs and outputs are views (ref_view.h) indexed in the shape written beside them;
 * an optional one has data NULL when absent / not wanted.  Each output view element is written
 * once, from its final double value.  The gradients a backward sums over several loops (written
 * `double *`) are contiguous row-major double arrays instead, which the caller stores when the
 * call is done; optional ones are NULL.  Shapes are >= 1 in every dimension.  Functions never
 * fail and never allocate: the ones that need scratch take a `work` array whose length the
 * matching *_work() gives.
 */
#ifndef PSSM_CPU_REF_H
#define PSSM_CPU_REF_H

#include "ref_view.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- pointwise helpers */

double pssm_ref_silu(double v);  /* v / (1 + exp(-v)) */
double pssm_ref_dsilu(double v); /* d silu / dv */
/* The scan's softplus: v <= 20 ? log1p(exp(v)) : v, and its derivative (sigmoid(v) or 1). */
double pssm_ref_softplus(double v);
double pssm_ref_dsoftplus(double v);
/* v[0..n) = 0 (v NULL: nothing), for the gradients the backward passes accumulate into. */
void pssm_ref_zero(double *v, int64_t n);

/* ---------------------------------------------------------------- causal conv1d */

typedef struct pssm_ref_conv1d {
    int64_t B, D, L, W;
    pssm_ref_in x;              /* (B,D,L)                          */
    pssm_ref_in weight;         /* (D,W)                            */
    pssm_ref_in bias;           /* (D) or NULL                      */
    pssm_ref_in seq_idx;        /* (B,L) or NULL                    */
    pssm_ref_in initial_states; /* (B,D,W-1) or NULL (zeros)        */
    int silu;                   /* non-zero: activation SILU        */
} pssm_ref_conv1d;

/* work: pssm_ref_conv1d_work() doubles, one row's scratch (the row as doubles, its dpre). */
int64_t pssm_ref_conv1d_work(const pssm_ref_conv1d *p);

/* out (B,D,L); final_states (B,D,W-1) or NULL (needs W >= 2).  _fwd is _fwd_row for every
 * (b,d); a row writes only its own elements. */
void pssm_ref_conv1d_fwd(const pssm_ref_conv1d *p, const pssm_ref_out *out,
                         const pssm_ref_out *final_states, double *work);
void pssm_ref_conv1d_fwd_row(const pssm_ref_conv1d *p, int64_t b, int64_t d,
                             const pssm_ref_out *out, const pssm_ref_out *final_states,
                             double *work);

/*
 * dout (B,D,L); dfinal_states (B,D,W-1) or NULL.  Outputs dx (B,D,L), dweight (D,W),
 * dbias (D) or NULL, dinitial_states (B,D,W-1) or NULL (the gradient at the given initial
 * states, or at zeros when p->initial_states is NULL).  _bwd is _bwd_channel for every d,
 * which writes channel d's elements of every output (dweight[d], dbias[d] summed over its
 * rows in order of b).
 */
void pssm_ref_conv1d_bwd(const pssm_ref_conv1d *p, const pssm_ref_in *dout,
                         const pssm_ref_in *dfinal_states, const pssm_ref_out *dx,
                         double *dweight, double *dbias, const pssm_ref_out *dinitial_states,
                         double *work);
void pssm_ref_conv1d_bwd_channel(const pssm_ref_conv1d *p, const pssm_ref_in *dout,
                                 const pssm_ref_in *dfinal_states, const pssm_ref_out *dx,
                                 double *dweight, double *dbias,
                                 const pssm_ref_out *dinitial_states, int64_t d, double *work);

/*
 * Decode with T tokens against conv_state (Bp,D,S), S >= W-1, updated in place.
 * Without cache_seqlens the state is a shift register (the conv reads its last W-1 columns; it
 * becomes the last S columns of [state | x]).  With cache_seqlens[b] = c it is a ring buffer:
 * the conv reads the W-1 entries ending (exclusive) at c mod S (Euclidean), then x[i] is written
 * at (c + i) mod S in order of i.  Sequence b uses state row state_indices[b] (b without
 * indices); a row outside [0, Bp) gives out = 0 and no write.  Sequences are processed in order
 * of b, so a row shared by two sequences is seen updated by the later one.
 */
typedef struct pssm_ref_conv1d_update {
    int64_t B, D, T, W, S, Bp;
    pssm_ref_in x;             /* (B,D,T)          */
    pssm_ref_in weight;        /* (D,W)            */
    pssm_ref_in bias;          /* (D) or NULL      */
    pssm_ref_in cache_seqlens; /* (B) or NULL      */
    pssm_ref_in state_indices; /* (B) or NULL      */
    int silu;
} pssm_ref_conv1d_update;

/* conv_state (Bp,D,S) in/out; out (B,D,T). */
void pssm_ref_conv1d_update_run(const pssm_ref_conv1d_update *p, double *conv_state,
                                const pssm_ref_out *out);

/* ---------------------------------------------------------------- selective scan (Mamba-1) */

typedef struct pssm_ref_scan {
    int64_t B, D, L, N;
    pssm_ref_in u, delta; /* (B,D,L)                                            */
    pssm_ref_in A;        /* (D,N)                                              */
    /* Bm / Cm: constant (D,N) when GB / GC == 0, else variable (B,G,N,L) with G = GB / GC,
     * D % G == 0, channel d using group d / (D/G). */
    pssm_ref_in Bm, Cm;
    int64_t GB, GC;
    pssm_ref_in Dv;            /* (D) or NULL                                    */
    pssm_ref_in z;             /* (B,D,L) or NULL                                */
    pssm_ref_in delta_bias;    /* (D) or NULL                                    */
    pssm_ref_in initial_state; /* (B,D,N) or NULL (zeros)                        */
    int softplus;
} pssm_ref_scan;

/* Length of the `work` array of the scan functions. */
int64_t pssm_ref_scan_fwd_work(const pssm_ref_scan *p);
int64_t pssm_ref_scan_bwd_work(const pssm_ref_scan *p);

/* out (B,D,L); final_state (B,D,N) or NULL; checkpoints (B,D,K,N) or NULL, K = (L-1) / T:
 * the states after steps T-1, 2T-1, ... (T = interval > 0; ignored without checkpoints). */
void pssm_ref_scan_fwd(const pssm_ref_scan *p, const pssm_ref_out *out,
                       const pssm_ref_out *final_state, const pssm_ref_out *checkpoints,
                       int64_t interval, double *work);
/* _fwd is this for every (b,d) row; a row writes only its own elements (work: _fwd_work()). */
void pssm_ref_scan_fwd_row(const pssm_ref_scan *p, int64_t b, int64_t d, const pssm_ref_out *out,
                           const pssm_ref_out *final_state, const pssm_ref_out *checkpoints,
                           int64_t interval, double *work);

/* Gradients of pssm_ref_scan_fwd; the optional ones are NULL when not wanted.  dB / dC have the
 * layout of Bm / Cm.  ddelta_bias is the gradient for delta_bias (at zero when it is NULL). */
typedef struct pssm_ref_scan_grads {
    pssm_ref_out du, ddelta;     /* (B,D,L)        */
    double *dA;                  /* (D,N)             */
    double *dB, *dC;             /* like Bm, Cm       */
    double *dD;                  /* (D) or NULL       */
    pssm_ref_out dz;             /* (B,D,L) or NULL   */
    double *ddelta_bias;         /* (D) or NULL       */
    pssm_ref_out dinitial_state; /* (B,D,N) or NULL */
} pssm_ref_scan_grads;

/* dout (B,D,L); dfinal_state (B,D,N) or NULL. */
void pssm_ref_scan_bwd(const pssm_ref_scan *p, const pssm_ref_in *dout,
                       const pssm_ref_in *dfinal_state,
                       const pssm_ref_scan_grads *g, double *work);

/* ---------------------------------------------------------------- selective state update */

/*
 * One decode token, heads form; the Mamba-1 form (B',D,N) is H = 1, P = D, G = 1.
 * Sequence b uses state row state_indices[b] (b without indices); a row outside [0, Bp) gives
 * out = 0 and no write.  Sequences are processed in order of b.
 */
typedef struct pssm_ref_state_update {
    int64_t B, Bp, H, P, N, G;
    pssm_ref_in x, dt;         /* (B,H,P)          */
    pssm_ref_in A;             /* (H,P,N)          */
    pssm_ref_in Bm, Cm;        /* (B,G,N)          */
    pssm_ref_in Dv;            /* (H,P) or NULL    */
    pssm_ref_in z;             /* (B,H,P) or NULL  */
    pssm_ref_in dt_bias;       /* (H,P) or NULL    */
    pssm_ref_in state_indices; /* (B) or NULL      */
    int softplus;
} pssm_ref_state_update;

/* state (Bp,H,P,N) in/out, in double (the caller reads a 16-bit state into it exactly and rounds
 * each new element once when it stores it back: cpu_scan.c); out (B,H,P). */
void pssm_ref_state_update_run(const pssm_ref_state_update *p, double *state,
                               const pssm_ref_out *out);

/* ---------------------------------------------------------------- Mamba-2 SSD */

/* mamba_chunk_scan_combined by its recurrence (portssm.h, ssd_chunk_scan_fwd): B rows of L
 * tokens, H heads of P channels, G groups of B/C, N states. */
typedef struct pssm_ref_ssd {
    int64_t B, L, H, P, G, N;
    pssm_ref_in x;      /* (B,L,H,P)                                   */
    pssm_ref_in dt;     /* (B,L,H)                                     */
    pssm_ref_in A;      /* (H)                                         */
    pssm_ref_in Bm, Cm; /* (B,L,G,N)                                   */
    pssm_ref_in Dv;     /* (H,P), or (H) when D_per_head; NULL: absent */
    int D_per_head;
    pssm_ref_in z;              /* (B,L,H,P) or NULL                           */
    pssm_ref_in dt_bias;        /* (H) or NULL                                 */
    pssm_ref_in initial_states; /* (B,H,P,N) or NULL (zeros)                   */
    pssm_ref_in seq_idx;        /* (B,L) or NULL                               */
    pssm_ref_in cu_seqlens;     /* (nseq+1) or NULL (B = 1)                    */
    int64_t nseq;
    int softplus, limit;
    double dt_min, dt_max;
} pssm_ref_ssd;

/*
 * The SSD works row by row: row (b,h) writes only its own elements of every output (out, y,
 * final/varlen states, checkpoints; dx, ddt, dz, dinitial_states), so the cpu backend runs rows
 * on several threads (cpu_threads.h).  The gradients summed over rows (dA, dB, dC, dD,
 * ddt_bias) a row computes as partials in `part` (_bwd_part() doubles), which _bwd_commit adds
 * in; commits in order of b*H + h make the sums the same however the rows were spread.
 * work: one row's scratch, _fwd_work() / _bwd_work() doubles (-1: does not fit int64).
 */
int64_t pssm_ref_ssd_fwd_work(const pssm_ref_ssd *p);
int64_t pssm_ref_ssd_bwd_work(const pssm_ref_ssd *p); /* _bwd's: a row's scratch and part */
int64_t pssm_ref_ssd_bwd_scratch(const pssm_ref_ssd *p); /* _bwd_row's work               */
int64_t pssm_ref_ssd_bwd_part(const pssm_ref_ssd *p);    /* a row's partials              */
/* out (B,L,H,P); final_states (B,H,P,N), varlen_states (nseq,H,P,N), y (B,L,H,P: out before
 * the gate) and checkpoints (B,H,K,P*N: s_{kT-1}, T = ckpt_interval) may have no data.
 * _fwd is _fwd_prepare (the varlen slots of empty sequences) then every _fwd_row. */
void pssm_ref_ssd_fwd(const pssm_ref_ssd *p, const pssm_ref_out *out,
                      const pssm_ref_out *final_states, const pssm_ref_out *varlen_states,
                      const pssm_ref_out *y, const pssm_ref_out *checkpoints,
                      int64_t ckpt_interval, double *work);
void pssm_ref_ssd_fwd_prepare(const pssm_ref_ssd *p, const pssm_ref_out *varlen_states);
void pssm_ref_ssd_fwd_row(const pssm_ref_ssd *p, int64_t b, int64_t h, const pssm_ref_out *out,
                          const pssm_ref_out *final_states, const pssm_ref_out *varlen_states,
                          const pssm_ref_out *y, const pssm_ref_out *checkpoints,
                          int64_t ckpt_interval, double *work);

typedef struct pssm_ref_ssd_grads {
    pssm_ref_out dx;              /* (B,L,H,P)        */
    pssm_ref_out ddt;             /* (B,L,H)          */
    double *dA;                   /* (H)              */
    double *dB, *dC;              /* (B,L,G,N)        */
    double *dD;                   /* D's shape or NULL */
    pssm_ref_out dz;              /* (B,L,H,P) or NULL */
    double *ddt_bias;             /* (H) or NULL      */
    pssm_ref_out dinitial_states; /* (B,H,P,N) or NULL */
} pssm_ref_ssd_grads;

/* dout (B,L,H,P); dfinal (B,H,P,N) or NULL.  _bwd is _bwd_zero (the sums), then for every
 * row in order _bwd_row (its own outputs; its partials into part) and _bwd_commit (the
 * partials into the sums). */
void pssm_ref_ssd_bwd(const pssm_ref_ssd *p, const pssm_ref_in *dout, const pssm_ref_in *dfinal,
                      const pssm_ref_ssd_grads *g, double *work);
void pssm_ref_ssd_bwd_zero(const pssm_ref_ssd *p, const pssm_ref_ssd_grads *g);
void pssm_ref_ssd_bwd_row(const pssm_ref_ssd *p, const pssm_ref_in *dout,
                          const pssm_ref_in *dfinal, const pssm_ref_ssd_grads *g, int64_t b,
                          int64_t h, double *work, double *part);
void pssm_ref_ssd_bwd_commit(const pssm_ref_ssd *p, const pssm_ref_ssd_grads *g, int64_t b,
                             int64_t h, const double *part);

/* ---------------------------------------------------------------- row norms */

/* norm_fwd / norm_bwd of portssm.h over R rows of H channels in G groups (H % G == 0). */
typedef struct pssm_ref_norm {
    int64_t R, H, G;
    pssm_ref_in x;        /* (R,H): the forward's x; the backward's s (the saved input)    */
    pssm_ref_in residual; /* (R,H) or NULL (forward only)                                  */
    pssm_ref_in z;        /* (R,H) or NULL                                                 */
    pssm_ref_in weight;   /* (H)                                                           */
    pssm_ref_in bias;     /* (H) or NULL                                                   */
    int rms;              /* RMSNorm; else LayerNorm                                       */
    int norm_before_gate;
    double eps;
} pssm_ref_norm;

/* out (R,H); residual_out (R,H), mean (R,G) (LayerNorm), rstd (R,G) may have no data. */
void pssm_ref_norm_fwd(const pssm_ref_norm *p, const pssm_ref_out *out,
                       const pssm_ref_out *residual_out, const pssm_ref_out *mean,
                       const pssm_ref_out *rstd);

/* mean (R,G) (LayerNorm; ignored for RMSNorm) and rstd (R,G): the forward's; dout (R,H);
 * dresidual_out (R,H) or NULL.  dx (R,H); dresidual (R,H), dz (R,H) and out (R,H: the
 * forward's out from these statistics) may have no data; dweight, dbias (H) doubles or NULL. */
void pssm_ref_norm_bwd(const pssm_ref_norm *p, const pssm_ref_in *mean, const pssm_ref_in *rstd,
                       const pssm_ref_in *dout, const pssm_ref_in *dresidual_out,
                       const pssm_ref_out *dx, const pssm_ref_out *dresidual,
                       const pssm_ref_out *dz, const pssm_ref_out *out, double *dweight,
                       double *dbias);

#ifdef __cplusplus
}
#endif

#endif /* PSSM_CPU_REF_H */
