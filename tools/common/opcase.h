/*
 * opcase.h - one op at one shape with a set of options, as both `portssm doctor` and the
 * benchmark run it: the tensors it takes (a pssm_tset, random contents) and the call.
 *
 * The fwd+bwd ops are the forward then the backward on the same inputs (what one training step
 * of the layer costs); their traffic counts both passes.
 */
#ifndef PSSM_CLI_OPCASE_H
#define PSSM_CLI_OPCASE_H

#include <stddef.h>
#include <stdint.h>

#include "portssm.h"
#include "tset.h"

typedef enum pssm_op {
    PSSM_OP_CONV1D_FWD,
    PSSM_OP_CONV1D_BWD,
    PSSM_OP_CONV1D_FWDBWD,
    PSSM_OP_CONV1D_UPDATE,
    PSSM_OP_SCAN_FWD,
    PSSM_OP_SCAN_BWD,
    PSSM_OP_SCAN_FWDBWD,
    PSSM_OP_STATE_UPDATE,
    PSSM_OP_SSD_FWD,
    PSSM_OP_SSD_BWD,
    PSSM_OP_SSD_FWDBWD,
    PSSM_OP_NORM_FWD,
    PSSM_OP_NORM_BWD,
    PSSM_OP_NORM_FWDBWD,
    PSSM_OP_COUNT
} pssm_op;

/* Options (pssm_opcase.opts). */
enum {
    PSSM_O_BIAS = 1u << 0,         /* conv bias                                           */
    PSSM_O_SILU = 1u << 1,         /* conv activation                                     */
    PSSM_O_SEQ_IDX = 1u << 2,      /* conv seq_idx (several sequences per row)            */
    PSSM_O_STATES = 1u << 3,       /* initial + final state(s), and their gradients        */
    PSSM_O_CHANNEL_LAST = 1u << 4, /* conv x/out/dx/dout and states with stride[1] == 1     */
    PSSM_O_W_F32 = 1u << 5,        /* conv weight (and bias) in F32 instead of act          */
    PSSM_O_RING = 1u << 6,         /* conv update: cache_seqlens                          */
    PSSM_O_INDICES = 1u << 7,      /* update ops: a state pool with indices, one negative   */
    PSSM_O_VAR_BC = 1u << 8,       /* scan: variable B and C (B,G,N,L) instead of (D,N)    */
    PSSM_O_DSKIP = 1u << 9,        /* scan / state update: D                              */
    PSSM_O_Z = 1u << 10,           /* scan / state update: z gate                         */
    PSSM_O_DELTA_BIAS = 1u << 11,  /* scan delta_bias / state update dt_bias              */
    PSSM_O_SOFTPLUS = 1u << 12,    /* scan delta_softplus / state update dt_softplus      */
    PSSM_O_HEADS = 1u << 13,       /* state update in the (B,H,P) form                     */
    PSSM_O_TIED = 1u << 14,        /* heads: A, dt, D, dt_bias tied over P and N (stride 0) */
    PSSM_O_D_PER_HEAD = 1u << 15,  /* SSD: D (H) instead of (H,P)                         */
    PSSM_O_RMS = 1u << 16,         /* norm: RMSNorm (else LayerNorm, with PSSM_O_BIAS a bias) */
    PSSM_O_RESIDUAL = 1u << 17,    /* norm: residual added, residual_out (prenorm) and their
                                      gradients; the backward's x is residual_out            */
    PSSM_O_RES_F32 = 1u << 18,     /* norm: the residual path in F32 (residual_in_fp32)     */
    PSSM_O_NORM_BEFORE_GATE = 1u << 19 /* norm with z: y * silu(z) (else norm(x * silu(z))) */
};

typedef struct pssm_opcase {
    pssm_op op;
    portssm_dtype dtype; /* activation dtype of the call                                   */
    /* The dims the op uses (others ignored): conv B D L W; conv update B D W T S;
     * scan B D L N G; state update B D N (Mamba-1) or B H P N G (heads); SSD B L H P N G;
     * norms B*L rows of D channels in G groups (the norm's options: bias, z, w-f32 and the
     * norm ones above).
     * The SSD's options: D, z, delta_bias (dt_bias), softplus, states, seq_idx. */
    int64_t B, D, L, W, N, G, T, S, H, P;
    uint32_t opts;
    /* state update: the state's dtype (F32, F16 or BF16, any activation dtype); F32 is 0, so
     * a case that names none keeps the F32 state.  Shown in the options string when not F32. */
    portssm_dtype state_dtype;
} pssm_opcase;

/* "causal_conv1d_fwd", ... */
const char *pssm_op_name(pssm_op op);
/* "B4 D4096 L2048 W4" */
void pssm_opcase_shape(const pssm_opcase *c, char *buf, size_t n);
/* "bias silu states" (and "state-f16" / "state-bf16" for a 16-bit state), "" for none */
void pssm_opcase_options(const pssm_opcase *c, char *buf, size_t n);

/* Describes the case's tensors into s (which must be zeroed) and fills the inputs from r.
 * 0, or -1 when host memory ran out. */
int pssm_opcase_build(const pssm_opcase *c, pssm_tset *s, pssm_rng *r);

/* Runs the case on d's context.  fwd+bwd ops stop at the first failing pass. */
portssm_status pssm_opcase_run(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d);

/* exp evaluations the op cannot avoid: one per (b,d,t,n) per scan pass, one per (b,t,h) per SSD
 * pass (A tied over the head's states); 0 for other ops. */
double pssm_opcase_exps(const pssm_opcase *c);

#endif /* PSSM_CLI_OPCASE_H */
