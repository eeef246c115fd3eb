/*
 * bench_cases.c - what the benchmark times: the shapes and reference figures of ANCHORS.md
 * (NVIDIA H200, mamba-ssm 2.3.2 / causal-conv1d 1.6.1 / Triton), with the options the
 * reference layers pass (conv: bias + silu; scan: variable B/C, D, z, delta_bias, softplus).
 */
#include <string.h>

#include "bench.h"

#define CONV_OPTS (PSSM_O_BIAS | PSSM_O_SILU)
#define SCAN_OPTS (PSSM_O_VAR_BC | PSSM_O_DSKIP | PSSM_O_Z | PSSM_O_DELTA_BIAS | PSSM_O_SOFTPLUS)
/* the Mamba-1 decode step of mamba_simple; Mamba-2 ties A/dt and (with rmsnorm) has no z */
#define SSU_OPTS (PSSM_O_DSKIP | PSSM_O_Z | PSSM_O_DELTA_BIAS | PSSM_O_SOFTPLUS)
#define SSU2_OPTS (PSSM_O_HEADS | PSSM_O_TIED | PSSM_O_DSKIP | PSSM_O_DELTA_BIAS | PSSM_O_SOFTPLUS)
/* mamba_chunk_scan_combined as Mamba2 calls it: D per head, dt_bias, softplus, no z (rmsnorm);
 * issue #9's rows and ANCHORS.md's reference figures add z (the gate inside the scan) */
#define SSD_OPTS (PSSM_O_DSKIP | PSSM_O_D_PER_HEAD | PSSM_O_DELTA_BIAS | PSSM_O_SOFTPLUS)
#define SSDZ_OPTS (SSD_OPTS | PSSM_O_Z)
/* the block's prenorm RMSNorm with residual_in_fp32 (f32 weight), and Mamba-2's gated RMSNorm
 * (the gate before the norm): d_ssm 5120 in 8 groups, and 4096 in one (transformers' Mamba-2 at
 * 1.4B size, bench/e2e.py) */
#define NORM_OPTS (PSSM_O_RMS | PSSM_O_RESIDUAL | PSSM_O_RES_F32 | PSSM_O_W_F32)
#define GNORM_OPTS (PSSM_O_RMS | PSSM_O_Z | PSSM_O_W_F32)
/* the block's LayerNorm (mamba-ssm's rms_norm=False): a bias, the residual path in F32 */
#define LNORM_OPTS (PSSM_O_BIAS | PSSM_O_RESIDUAL | PSSM_O_RES_F32 | PSSM_O_W_F32)

#define BF16 PORTSSM_BF16
#define F32 PORTSSM_F32

#define CONV(op_, dt_, L_, ref_, tgt_)                                                           \
    {{.op = op_, .dtype = dt_, .B = 4, .D = 4096, .L = L_, .W = 4, .opts = CONV_OPTS}, ref_, tgt_}
/* transformers' Mamba-2 at 1.4B size (bench/e2e.py): xBC of 4096 + 2 x 128 channels,
 * channel-last as in_proj leaves it, batch 8 x 1024 tokens */
#define CONV_CL(op_)                                                                             \
    {{.op = op_, .dtype = BF16, .B = 8, .D = 4352, .L = 1024, .W = 4,                             \
      .opts = CONV_OPTS | PSSM_O_CHANNEL_LAST},                                                  \
     0, 0}
#define SCAN(op_, dt_, L_, N_, ref_, tgt_)                                                       \
    {{.op = op_, .dtype = dt_, .B = 4, .D = 4096, .L = L_, .N = N_, .G = 1, .opts = SCAN_OPTS},  \
     ref_, tgt_}
#define SSU2(B_, ref_)                                                                           \
    {{.op = PSSM_OP_STATE_UPDATE, .dtype = BF16, .B = B_, .H = 80, .P = 64, .N = 128, .G = 1,     \
      .opts = SSU2_OPTS},                                                                        \
     ref_, 0}

/* issue #43 item 6: the Mamba-2 state update with bf16 inputs and an f16 state at P64 N128 G8
 * (Nemotron-H / Nemotron-3's mixer), the reference figure vLLM's tuned Triton state update on an
 * H100 (ANCHORS.md).  vLLM's tuning script keys its figures on batch x heads and times, for each
 * product, the first (batch, heads) pair of batches 1 8 16 32 ... x heads 8 16 32 64 128 256:
 * 8 = B1 H8, 64 = B1 H64, 512 = B8 H64, 4096 = B16 H256, 8192 = B32 H256.  (It passes A, dt, D
 * and dt_bias untied; these rows tie them over P and N as the Mamba-2 layer does.)  The target
 * is the figure itself (ref / median >= 1) and, from 4096 up, 94% of the copy bandwidth. */
#define SSU2_F16(B_, H_, ref_)                                                                   \
    {{.op = PSSM_OP_STATE_UPDATE, .dtype = BF16, .B = B_, .H = H_, .P = 64, .N = 128, .G = 8,     \
      .opts = SSU2_OPTS, .state_dtype = PORTSSM_F16},                                            \
     ref_, 0}

/* norms: B4 L2048 rows of D channels; no reference figure: the target is 1.2x of the time
 * its minimal bytes take at the copy bandwidth (the % of copy column, >= 83) */
#define NORM(op_, D_, G_, opts_)                                                                 \
    {{.op = op_, .dtype = BF16, .B = 4, .L = 2048, .D = D_, .G = G_, .opts = opts_}, 0, 0}

#define SSD(op_, opts_, L_, H_, ref_, tgt_)                                                      \
    {{.op = op_, .dtype = BF16, .B = 4, .L = L_, .H = H_, .P = 64, .N = 128, .G = 1,              \
      .opts = opts_},                                                                            \
     ref_, tgt_}

static const pssm_bcase anchors[] = {
    CONV(PSSM_OP_CONV1D_FWD, BF16, 2048, 37.6, 34),
    CONV(PSSM_OP_CONV1D_FWD, BF16, 8192, 135.2, 133),
    CONV(PSSM_OP_CONV1D_FWD, F32, 2048, 67.5, 67),
    CONV(PSSM_OP_CONV1D_FWDBWD, BF16, 2048, 106.0, 85),
    CONV(PSSM_OP_CONV1D_FWDBWD, F32, 2048, 167.8, 168),
    {{.op = PSSM_OP_CONV1D_UPDATE, .dtype = BF16, .B = 64, .D = 4096, .W = 4, .opts = CONV_OPTS},
     6.1, 4},
    SCAN(PSSM_OP_SCAN_FWD, BF16, 2048, 16, 587, 200),
    SCAN(PSSM_OP_SCAN_FWD, F32, 2048, 16, 1160, 330),
    SCAN(PSSM_OP_SCAN_FWD, BF16, 512, 16, 144, 50),
    SCAN(PSSM_OP_SCAN_FWD, BF16, 8192, 16, 2630, 800),
    SCAN(PSSM_OP_SCAN_FWD, BF16, 2048, 64, 1978, 700),
    SCAN(PSSM_OP_SCAN_FWD, BF16, 2048, 128, 3834, 1400),
    SCAN(PSSM_OP_SCAN_FWDBWD, BF16, 2048, 16, 2892, 1000),
    SCAN(PSSM_OP_SCAN_FWDBWD, F32, 2048, 16, 3860, 1300),
    {{.op = PSSM_OP_STATE_UPDATE, .dtype = BF16, .B = 64, .D = 4096, .N = 16, .opts = SSU_OPTS},
     12.2, 10},
    SSU2(1, 4.0),
    SSU2(64, 105),
    SSU2(256, 407),
    SSU2_F16(1, 8, 2.16),
    SSU2_F16(1, 64, 3.10),
    SSU2_F16(8, 64, 6.85),
    SSU2_F16(16, 256, 55.48),
    SSU2_F16(32, 256, 104.54),
    /* the reference's figures are ANCHORS.md's, measured with z (its graph time without z and
     * of the fwd+bwd come from bench/side_by_side.py, in the same device run) */
    SSD(PSSM_OP_SSD_FWD, SSDZ_OPTS, 2048, 80, 398.25, 250),
    SSD(PSSM_OP_SSD_FWD, SSDZ_OPTS, 2048, 24, 136.64, 90),
    SSD(PSSM_OP_SSD_FWD, SSDZ_OPTS, 8192, 80, 1647.90, 1000),
    SSD(PSSM_OP_SSD_FWDBWD, SSDZ_OPTS, 2048, 80, 0, 0),
    SSD(PSSM_OP_SSD_FWD, SSD_OPTS, 2048, 80, 0, 0),
    SSD(PSSM_OP_SSD_FWD, SSD_OPTS, 2048, 24, 0, 0),
    SSD(PSSM_OP_SSD_FWDBWD, SSD_OPTS, 2048, 80, 0, 0),
    CONV_CL(PSSM_OP_CONV1D_FWD),
    CONV_CL(PSSM_OP_CONV1D_BWD),
    CONV_CL(PSSM_OP_CONV1D_FWDBWD),
    NORM(PSSM_OP_NORM_FWD, 2560, 1, NORM_OPTS),
    NORM(PSSM_OP_NORM_BWD, 2560, 1, NORM_OPTS),
    NORM(PSSM_OP_NORM_FWDBWD, 2560, 1, NORM_OPTS),
    NORM(PSSM_OP_NORM_FWD, 2560, 1, LNORM_OPTS),
    NORM(PSSM_OP_NORM_BWD, 2560, 1, LNORM_OPTS),
    NORM(PSSM_OP_NORM_FWD, 5120, 8, GNORM_OPTS),
    NORM(PSSM_OP_NORM_BWD, 5120, 8, GNORM_OPTS),
    NORM(PSSM_OP_NORM_FWDBWD, 5120, 8, GNORM_OPTS),
    NORM(PSSM_OP_NORM_FWD, 4096, 1, GNORM_OPTS),
    NORM(PSSM_OP_NORM_BWD, 4096, 1, GNORM_OPTS),
    NORM(PSSM_OP_NORM_FWDBWD, 4096, 1, GNORM_OPTS),
};

/* Lengths the anchors lack, so that bench/plot.py has a curve from 512 to 16k. */
static const pssm_bcase sweep[] = {
    CONV(PSSM_OP_CONV1D_FWD, BF16, 512, 0, 0),   CONV(PSSM_OP_CONV1D_FWD, BF16, 1024, 0, 0),
    CONV(PSSM_OP_CONV1D_FWD, BF16, 4096, 0, 0),  CONV(PSSM_OP_CONV1D_FWD, BF16, 16384, 0, 0),
    SCAN(PSSM_OP_SCAN_FWD, BF16, 1024, 16, 0, 0), SCAN(PSSM_OP_SCAN_FWD, BF16, 4096, 16, 0, 0),
    SCAN(PSSM_OP_SCAN_FWD, BF16, 16384, 16, 0, 0),
};

#define NANCHORS (sizeof anchors / sizeof anchors[0])
#define NSWEEP (sizeof sweep / sizeof sweep[0])

/* The same case small enough for the cpu oracle and the sim backend: D 64, L / 8, decode
 * batches / 16, 4 heads of 16 (in 2 groups where the case has several, as 4 heads cannot hold
 * 8); no reference figure applies. */
static pssm_bcase quick_version(pssm_bcase b)
{
    pssm_opcase *c = &b.c;
    c->B = c->B >= 64 ? c->B / 16 : 1;
    if (c->D)
        c->D = 64;
    if (c->L)
        c->L = c->L / 8 > 32 ? c->L / 8 : 32;
    if (c->H)
        c->H = 4;
    if (c->P)
        c->P = 16;
    if (c->H && c->G > 1)
        c->G = 2;
    b.ref_us = 0;
    b.target_us = 0;
    return b;
}

int pssm_bench_cases(int quick, int with_sweep, const pssm_bcase **out)
{
    static pssm_bcase list[NANCHORS + NSWEEP];
    int n = 0;
    for (size_t i = 0; i < NANCHORS; i++)
        list[n++] = quick ? quick_version(anchors[i]) : anchors[i];
    for (size_t i = 0; with_sweep && i < NSWEEP; i++)
        list[n++] = quick ? quick_version(sweep[i]) : sweep[i];
    *out = list;
    return n;
}
