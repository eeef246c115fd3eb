/*
 * ssd_params.h - the SSD's kernels: the chunked forward (kernels/ssd_chunk.body.h) and its
 * helpers (kernels/ssd_kernels.h); the backward runs on the selective scan's kernels
 * (scan_params.h, `ssd`).
 */
#ifndef PSSM_SSD_PARAMS_H
#define PSSM_SSD_PARAMS_H
#include <stdint.h>

#define PSSM_SSD_BLOCK 256

/* seq[t] = the sequence k of token t of a packed row, cu[k] <= t < cu[k+1] (the last such k;
 * offsets past [0, L] clamp, so that bad values give wrong sequences, never a bad address);
 * varlen[k,h,p,n] of every empty sequence k = its start state (x0 for k = 0 if given, else 0).
 * One thread per token, then one per element of varlen. */
typedef struct pssm_ssd_seq_params {
    const int32_t *cu;         /* (nseq+1)                              */
    int32_t *seq;              /* (L), workspace                        */
    float *varlen;             /* (nseq,H,P,N) or NULL                  */
    const float *x0;           /* (1,H,P,N) or NULL                     */
    int64_t seqlen, nseq, heads, hdim, dstate;
    int64_t cu_s, varlen_s[4], x0_s[3]; /* k, h, p, n; h, p, n          */
} pssm_ssd_seq_params;

/* The chunked forward, one struct for its three kernels (ssd_chunk.body.h says what each does).
 * Chunks of `chunk` tokens (a multiple of the stamp's tile, at most PSSM_SSD_CHUNK_MAX); the
 * workspace holds per (b, h, c) the chunk's decay and its (P,N) state, contiguous. */
#define PSSM_SSD_CHUNK_MAX 256
#define PSSM_SSD_CHUNK_THREADS_F32 128 /* the chunk kernels' blocks: f32 activations */
#define PSSM_SSD_CHUNK_THREADS_16 256  /* f16, bf16 */
typedef struct pssm_ssd_chunk_params {
    const void *x, *dt, *Bm, *Cm, *z; /* activations: (B,L,H,P), (B,L,H), (B,L,G,N) x2, (B,L,H,P) */
    const float *A, *D, *dt_bias, *x0; /* (H), (H[,P]), (H), (B,H,P,N)                          */
    const int32_t *seq;                /* (B,L) sequence ids or NULL                             */
    const int32_t *cu;                 /* (nseq+1) packed offsets (varlen pass) or NULL          */
    void *out;                         /* (B,L,H,P)                                             */
    float *states;                     /* workspace (B,H,nchunks,P,N)                            */
    float *decay;                      /* workspace (B,H,nchunks)                                */
    float *final_states;               /* (B,H,P,N) or NULL                                      */
    float *varlen;                     /* (nseq,H,P,N) or NULL                                   */
    int64_t batch, seqlen, heads, hdim, dstate, hpg, chunk, nchunks, nseq;
    int64_t x_s[4], dt_s[3], B_s[4], C_s[4], z_s[4], out_s[4], D_s[2], A_s, bias_s;
    int64_t x0_s[4], seq_s[2], cu_s, fs_s[4], varlen_s[4];
    int32_t softplus, dt_limit, ptiles, ntiles, qtiles;
    int32_t vec; /* x, B, C contiguous along p / n, 16-byte aligned, P and N whole vectors */
    float dt_min, dt_max;
} pssm_ssd_chunk_params;

#endif
