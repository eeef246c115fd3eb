/*
 * ssd_params.h - the SSD's kernels: the chunked forward and backward (kernels/ssd_chunk.body.h)
 * and their helpers (kernels/ssd_kernels.h).
 */
#ifndef PSSM_SSD_PARAMS_H
#define PSSM_SSD_PARAMS_H
#include <stdint.h>

#define PSSM_SSD_BLOCK 256
#define PSSM_SSD_EWARPS (PSSM_SSD_BLOCK / 32) /* part_e's slots per block: warps of 32 or 64 */

/* seq[t] = the sequence k of token t of a packed row, cu[k] <= t < cu[k+1] (the last such k;
 * offsets past [0, L] clamp, so that bad values give wrong sequences, never a bad address);
 * varlen[k,h,p,n] of every empty sequence k = its start state (x0 for k = 0 if given, else 0).
 * One thread per token, then one per element of varlen. */
typedef struct pssm_ssd_seq_params {
    const int32_t *cu; /* (nseq+1)                              */
    int32_t *seq;      /* (L), workspace                        */
    void *varlen;      /* (nseq,H,P,N) state_dt, or NULL        */
    const void *x0;    /* (1,H,P,N) state_dt, or NULL           */
    int64_t seqlen, nseq, heads, hdim, dstate;
    int64_t cu_s, varlen_s[4], x0_s[3]; /* k, h, p, n; h, p, n          */
    int32_t state_dt;                   /* PSSM_DT_* of varlen and x0   */
} pssm_ssd_seq_params;

/* The chunked forward and backward, one struct for all their kernels (ssd_chunk.body.h says
 * what each does).  Chunks of `chunk` tokens (a multiple of the stamp's tile, at most
 * PSSM_SSD_CHUNK_MAX); the workspace holds per (b, h, c) the chunk's decay and its (P,N) state,
 * contiguous.  The chunk states read their operands from the products' W (x, or dy for the
 * gradient form) and V (B, or C). */
#define PSSM_SSD_CHUNK_MAX 256
#define PSSM_SSD_CHUNK_THREADS_F32 128 /* the chunk kernels' blocks: f32 activations */
#define PSSM_SSD_CHUNK_THREADS_16 256  /* f16, bf16 */

/* What the chunk-product kernel computes (ssd_chunk.body.h, 3.): the forward's outputs, or one
 * of the backward's four products; and the operands of the backward's dCB kernel. */
#define PSSM_SSD_PROD_FWD 0 /* out                                           */
#define PSSM_SSD_PROD_Y 1   /* y again: dz, dy = dout silu(z), the state in dcs */
#define PSSM_SSD_PROD_DX 2  /* dx, ddt.s direct part, the state in dcs      */
#define PSSM_SSD_PROD_DB 3  /* dB per slice of heads                         */
#define PSSM_SSD_PROD_DC 4  /* dC per slice of heads                         */
#define PSSM_SSD_PROD_DCB 5 /* dCB per slice, the intra-chunk share of dcs   */

/* An activation operand of the chunk products: a (B,L,H,.) or (B,L,G,.) tensor (grouped: indexed
 * by the head's group); vec: 16-byte loads along its last dimension are valid. */
typedef struct pssm_ssd_opnd {
    const void *ptr;
    int64_t s[4];
    int32_t grouped, vec;
} pssm_ssd_opnd;

typedef struct pssm_ssd_chunk_params {
    const void *x, *dt, *Bm, *Cm, *z; /* activations: (B,L,H,P), (B,L,H), (B,L,G,N) x2, (B,L,H,P) */
    const float *A, *D, *dt_bias;      /* (H), (H[,P]), (H)                                       */
    const void *x0;                    /* (B,H,P,N) state_dt, or NULL (the initial states)        */
    const int32_t *seq;                /* (B,L) sequence ids or NULL                             */
    const int32_t *cu;                 /* (nseq+1) packed offsets (varlen pass) or NULL          */
    void *out;                         /* (B,L,H,P)                                             */
    float *states;                     /* workspace (B,H,nchunks,P,N); NULL: bwd given ckpts     */
    float *decay;                      /* workspace (B,H,nchunks)                                */
    void *final_states;                /* (B,H,P,N) state_dt, or NULL                            */
    void *varlen;                      /* (nseq,H,P,N) state_dt, or NULL                         */
    /* PSSM_DT_* of the call's states (x0, final_states, varlen; dfinal, dinit): f32 or 16-bit,
     * read into f32 and each rounded once where stored */
    int32_t state_dt;
    int64_t batch, seqlen, heads, hdim, dstate, hpg, chunk, nchunks, nseq;
    int64_t x_s[4], dt_s[3], B_s[4], C_s[4], z_s[4], out_s[4], D_s[2], A_s, bias_s;
    int64_t x0_s[4], seq_s[2], cu_s, fs_s[4], varlen_s[4];
    int32_t softplus, dt_limit, ptiles, ntiles, qtiles;
    int32_t vec; /* the f32 state tiles: N a multiple of 4 (16-byte loads along n)             */
    float dt_min, dt_max;
    /* chunk states: grad_state = the backward's form (the state's gradient flowing back into
     * the chunk's start from its tokens: x is dy there, B is C) */
    int32_t grad_state;
    /* chunk products: M[r][k] = U_r . V_k over `inner` columns, out[r][col] = (M W)[r][col] plus
     * the part of the state S = sprod (per chunk, (P,N); s_trans: S's rows are n) */
    int32_t mode, s_trans;
    int32_t coltiles; /* the grid's y: tiles of `width` columns                                */
    int64_t hpb;      /* dB and dC: heads per block (a divisor of hpg); a partial per slice     */
    int64_t inner, width;
    pssm_ssd_opnd u, v, w, xo; /* xo: x, for the dCB kernel's product and DX's epilogue        */
    /* the vector epilogues' operands: zo z (FWD, Y); oo the mode's output (FWD out, Y dz,
     * DX dx); go dout and yo dy (Y, which writes dy where z is given) */
    pssm_ssd_opnd zo, oo, go, yo;
    /* ys: y before the gate (z given; ptr NULL: none), which the forward writes where its
     * caller asks and the backward's Y kernel with M in registers reads for dz instead of
     * forming y again (the generic stamps form it) */
    pssm_ssd_opnd ys;
    /* (PSSM_SSD_VEC_EPILOGUE below says when Y and DX take their vector stamps) */
    const float *sprod;
    /* the state pass's S_in (the forward): also in the activation dtype into sact (16-bit
     * dtypes, N a multiple of 8: the output kernel copies its tiles as they lie, half the bytes
     * of the f32 ones and no conversion), sact_bf16: bf16, else f16; act_only: sact alone (no
     * f32 S_in back into states: nothing else reads it) */
    void *sact;
    int32_t sact_bf16, act_only;
    /* the backward's reverse pass: S_in in the activation dtype (the forward's checkpoints, or
     * the backward's own state pass's sact; NULL: the f32 states), and act_only there: dS_e
     * into sact alone, not back into dstates (nothing after it reads the f32 form) */
    const void *sin_act;
    /* the chunk states' kernel: each chunk's prep and decay alone (the backward, where the
     * forward's checkpoints give the states entering the chunks) */
    int32_t prep_only;
    /* the chunks' C B^T per group, (B, G, nchunks, Q, Q) f32 in the workspace, written by the
     * chunk_cb kernel (U = C, V = B) and read by the FWD, Y, DX products and dCB; NULL: each
     * forms its own */
    float *cb;
    /* the backward's dCB (ssd_dcb.body.h): per slice of hpb heads into dcbp, (B, G, hpg/hpb,
     * nchunks, Q, Q), added over a group's slices into dcb, (B, G, nchunks, Q, Q) (dcbp is dcb
     * where a group is one slice); f32, in the workspace; read by DB and DC */
    float *dcb, *dcbp;
    /* each chunk's dt', cs and seg (ssd_chunk.body.h), (B, H, nchunks, 3, Q) in the workspace:
     * written by the chunk states' forward form (the first tile's block), read by the products
     * and the backward's dt instead of forming them again (seg as int32 bits) */
    float *prep;
    /* the backward */
    const void *dout;    /* (B,L,H,P)                                                         */
    void *dy;            /* (B,L,H,P): dout silu(z), into the workspace (z given), or dout      */
    void *dz, *dx;       /* (B,L,H,P)                                                         */
    void *ddt;           /* (B,L,H)                                                           */
    float *dstates;      /* workspace (B,H,nchunks,P,N): the gradient at each chunk's end        */
    const void *dfinal;  /* (B,H,P,N) state_dt, or NULL                                       */
    void *dinit;         /* (B,H,P,N) state_dt, or NULL                                       */
    float *dBh, *dCh;    /* workspace (B,L,H/hpb,N): dB and dC of each slice of hpb heads         */
    /* per-token partial sums of the backward's dt (pssm_ssd_dt_bwd_ says what each is) */
    float *part_y, *part_v, *part_x; /* workspace (B,H,ptiles,L): sums over a tile of p        */
    float *part_row; /* workspace (B,H,qtiles,L): sum_s W_ts over one tile of s             */
    float *part_col; /* workspace (B,H,qtiles,L): sum_t W_ts over one tile of t             */
    float *part_e;   /* workspace (B,H,eblocks,EWARPS,nchunks): decay_c sum dS_e S_in, by warp */
    float *part_A, *part_bias, *part_D; /* workspace (B,H,nchunks[,P])                       */
    int64_t dout_s[4], dy_s[4], dz_s[4], dx_s[4], ddt_s[3], df_s[4], di_s[4], eblocks;
} pssm_ssd_chunk_params;

/* The backward's Y and DX products run their vector stamps (pssm_ssd_chunk_yv_*, _dxv_*: W
 * one slab ahead, the epilogue's operands as whole tiles, the outputs by 16-byte stores) where
 * C B^T is in the workspace and every tile they copy may move by 16-byte vectors; the host
 * picks the stamp by this test and the stamp checks it again before it writes anything. */
#define PSSM_SSD_VEC_EPILOGUE(p)                                                                  \
    ((p).cb && (p).w.vec &&                                                                       \
     ((p).mode == PSSM_SSD_PROD_Y                                                                 \
          ? (p).go.vec && (!(p).z || ((p).zo.vec && (p).yo.vec && (!(p).dz || (p).oo.vec)))    \
          : (p).mode == PSSM_SSD_PROD_DX && (p).xo.vec && (p).oo.vec))


/* The forward's outputs take pssm_ssd_chunk_outr_* (ssd_out.body.h: M in registers; 16-bit
 * dtypes, whose state pass leaves S_in in sact) where C B^T is in the workspace and every tile
 * it copies may move by 16-byte vectors; elsewhere pssm_ssd_chunk_out_*.  Its block: four warps
 * (PSSM_SSD_OUTR_WARPS) of the device's size. */
#define PSSM_SSD_OUTR_WARPS 4
#define PSSM_SSD_OUTR(p)                                                                          \
    ((p).mode == PSSM_SSD_PROD_FWD && (p).cb && (p).sact && !(p).s_trans && (p).u.vec &&         \
     (p).w.vec && (p).oo.vec && (!(p).z || (p).zo.vec) && (!(p).ys.ptr || (p).ys.vec))

/* The backward's Y product takes pssm_ssd_chunk_ybr_* (ssd_out.body.h, the same kernel's
 * backward stamp) on the same terms: C B^T in the workspace, S_in in sact (the backward's state
 * pass writes it there, or the forward's checkpoints hold it; the dC kernel with the heads
 * pipelined reads it too), and every tile it copies by 16-byte vectors. */
#define PSSM_SSD_YR(p)                                                                            \
    ((p).mode == PSSM_SSD_PROD_Y && (p).cb && (p).sact && !(p).s_trans && (p).u.vec &&           \
     (p).w.vec && (p).go.vec && (!(p).z || ((p).zo.vec && (p).yo.vec && (!(p).dz || (p).oo.vec))) && \
     (!(p).ys.ptr || (p).ys.vec))

/* ... and the backward's DX takes pssm_ssd_chunk_dxr_* (ssd_dxr.body.h) likewise, with the
 * gradients at the chunks' ends in sact (the backward's reverse state pass writes them there,
 * over S_in, which the Y and dC kernels have read by then, unless S_in is the forward's
 * checkpoints). */
#define PSSM_SSD_DXR(p)                                                                           \
    ((p).mode == PSSM_SSD_PROD_DX && (p).cb && (p).sact && !(p).s_trans && (p).u.vec &&          \
     (p).w.vec && (p).xo.vec && (p).oo.vec)

#endif
