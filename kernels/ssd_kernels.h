/*
 * ssd_kernels.h - the kernels of the Mamba-2 SSD (ssd_params.h): the chunked forward and
 * backward (ssd_chunk.body.h, stamped per activation dtype, and the state passes between chunks)
 * and the helpers for packed sequences (cu_seqlens).
 */
#include "pssm_dialect.h"
#include "kernel_parts.h"
#include "pssm_mma.h"
#include "ssd_params.h"

/* Offset k of a packed row, clamped to [0, L]: bad offsets give wrong sequences, never a bad
 * address. */
PSSM_DEVICE int64_t pssm_ssd_offset_of(const int32_t *cu, int64_t cu_s, int64_t k, int64_t L)
{
    const int64_t v = cu[k * cu_s];
    return v < 0 ? 0 : v > L ? L : v;
}

PSSM_DEVICE int64_t pssm_ssd_offset(const pssm_ssd_seq_params p, int64_t k)
{
    return pssm_ssd_offset_of(p.cu, p.cu_s, k, p.seqlen);
}

/* Inclusive prefix maximum over the warp. */
PSSM_DEVICE float pssm_ssdc_warp_scan_max(float v)
{
    const int lane = PSSM_LANE;
    for (int o = 1; o < PSSM_WARP_SIZE; o <<= 1) {
        const float w = PSSM_SHFL_UP_F32(v, o);
        if (lane >= o && w > v)
            v = w;
    }
    return v;
}

/* The sum of v over the block's nwarps warps, in a fixed order, in thread 0 (red: shared
 * scratch of nwarps floats).  Every thread of the block calls it; it ends with a barrier, so
 * red may be reused at once. */
PSSM_DEVICE float pssm_ssd_block_sum(float v, float *red, int nwarps)
{
    v = pssm_warp_sum(v);
    if (PSSM_LANE == 0)
        red[PSSM_WARP_ID] = v;
    PSSM_SYNC();
    float s = 0.0f;
    if (PSSM_TID == 0)
        for (int w = 0; w < nwarps; w++)
            s += red[w];
    PSSM_SYNC();
    return s;
}

/* ---------------------------------------------------------------- the chunked forward and backward
 */

/* f32 activations multiply in f32 (the FMA form) on tiles of 32: four f32 tiles fit the
 * block's shared memory; 16-bit ones on the target's tensor instructions, tiles of 64, with 256
 * threads (two 16x16 sub-tiles of a product per warp: with 128 threads the four per warp took
 * 255 registers and spilled, run 16). */
#if PSSM_IN_PART(ssd_f32)
#define PSSM_SSDC_ACT float
#define PSSM_SSDC_LD(v) pssm_load_f32(v)
#define PSSM_SSDC_ST(f) pssm_store_f32(f)
#define PSSM_SSDC_SMEM float
#define PSSM_SSDC_TO_SMEM(f) (f)
#define PSSM_SSDC_TO_SMEM2(a, b) 0u /* f32 operands move as floats (pssm_ssdc_put2_) */
#define PSSM_SSDC_MMA pssm_mma16t_f32
#define PSSM_SSDC_MMAS pssm_mma16s_f32
#define PSSM_SSDC_TILE 32
#define PSSM_SSDC_DT f32
#define PSSM_SSDC_THREADS PSSM_SSD_CHUNK_THREADS_F32
#include "ssd_chunk.body.h"
#endif

#if PSSM_IN_PART(ssd_f16)
#define PSSM_SSDC_ACT pssm_f16
#define PSSM_SSDC_LD(v) pssm_load_f16(v)
#define PSSM_SSDC_ST(f) pssm_store_f16(f)
#define PSSM_SSDC_SMEM pssm_f16
#define PSSM_SSDC_TO_SMEM(f) pssm_store_f16(f)
#define PSSM_SSDC_TO_SMEM2(a, b) ((uint32_t)pssm_store_f16(a) | (uint32_t)pssm_store_f16(b) << 16)
#define PSSM_SSDC_MMA pssm_mma16t_f16
#define PSSM_SSDC_MMAS pssm_mma16s_f16
#define PSSM_SSDC_TILE 64
#define PSSM_SSDC_DT f16
#define PSSM_SSDC_THREADS PSSM_SSD_CHUNK_THREADS_16
#include "ssd_chunk.body.h"
#endif

#if PSSM_IN_PART(ssd_bf16)
#define PSSM_SSDC_ACT pssm_bf16
#define PSSM_SSDC_LD(v) pssm_load_bf16(v)
#define PSSM_SSDC_ST(f) pssm_store_bf16(f)
#define PSSM_SSDC_SMEM pssm_bf16
#define PSSM_SSDC_TO_SMEM(f) pssm_store_bf16(f)
#define PSSM_SSDC_TO_SMEM2(a, b) pssm_store_bf16x2(a, b)
#define PSSM_SSDC_MMA pssm_mma16t_bf16
#define PSSM_SSDC_MMAS pssm_mma16s_bf16
#define PSSM_SSDC_TILE 64
#define PSSM_SSDC_DT bf16
#define PSSM_SSDC_THREADS PSSM_SSD_CHUNK_THREADS_16
#include "ssd_chunk.body.h"
#endif

/* The dtype-free SSD kernels are compiled in part base (kernel_parts.h). */
#if PSSM_IN_PART(base)

/* vw (1 or 4) f32 values of a state at `at`, the four by one 16-byte load. */
PSSM_DEVICE void pssm_ssd_pass_load(float *v, const float *at, int vw)
{
    if (vw == 4) {
        const pssm_vec16 v4 = *(const pssm_vec16 *)at;
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            v[k] = pssm_as_float(v4.w[k]);
    } else {
        v[0] = *at;
    }
}

/* The state passes' states also in the activation dtype (sact): vw (1 or 4) values of v at
 * act, bf16 or f16, the four as one 8-byte store. */
PSSM_DEVICE void pssm_ssd_pass_store_act(uint16_t *act, const float *v, int vw, int bf16)
{
    const int dtype = bf16 ? PSSM_DT_BF16 : PSSM_DT_F16;
    if (vw == 4)
        pssm_store_any4(act, 0, dtype, v);
    else
        pssm_store_any(act, 0, dtype, v[0]);
}

/* ... and back: vw values of a state in the activation dtype as floats, the four by one 8-byte
 * load. */
PSSM_DEVICE void pssm_ssd_pass_load_act(const uint16_t *act, float *v, int vw, int bf16)
{
    uint16_t e[4] = {0, 0, 0, 0};
    if (vw == 4) {
        const pssm_vec8 h = *(const pssm_vec8 *)act;
        e[0] = (uint16_t)(h.w[0] & 0xffffu), e[1] = (uint16_t)(h.w[0] >> 16);
        e[2] = (uint16_t)(h.w[1] & 0xffffu), e[3] = (uint16_t)(h.w[1] >> 16);
    } else {
        e[0] = act[0];
    }
    PSSM_UNROLL
    for (int k = 0; k < 4; k++)
        if (k < vw)
            v[k] = bf16 ? pssm_load_bf16(e[k]) : pssm_load_f16(e[k]);
}

/* 2. The state pass: one thread per (b, h, p, n) - four adjacent n where p.vec (N a multiple
 * of 4: 16-byte loads and stores, four times the bytes in flight per thread; the pass waits on
 * its loads, run 43: 52 us for 126 MB) - sequentially over the chunks; block x = (b, h, a block
 * of P*N / width).  The next chunk's state is loaded before this one's is replaced, so the
 * loop's latency is one load, not a load after a store.  (Loading eight chunks ahead instead
 * made the pass 50% slower on the H200, run 34.)  S_in goes back into states in f32 and/or
 * into sact in the activation dtype (ssd_params.h).  Its grid: pssm_gpu_ssd_pass_blocks. */
PSSM_KERNEL_BOUNDED(pssm_ssd_state_pass, pssm_ssd_chunk_params, p, PSSM_SSD_BLOCK)
{
    const int vw = p.vec ? 4 : 1; /* elements per thread */
    const int64_t PN = p.hdim * p.dstate, units = PN / vw;
    const int64_t per = (units + PSSM_SSD_BLOCK - 1) / PSSM_SSD_BLOCK;
    const int64_t bh = PSSM_BLOCK_X / per,
                  u = (PSSM_BLOCK_X % per) * PSSM_SSD_BLOCK + PSSM_THREAD_X;
    if (u >= units)
        return;
    const int64_t e = u * vw, b = bh / p.heads, h = bh % p.heads;
    const int64_t pp = e / p.dstate, nn = e % p.dstate; /* the vw elements: n = nn .. nn+vw-1 */
    float S[4] = {0.0f, 0.0f, 0.0f, 0.0f}, own[4], next[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    PSSM_UNROLL
    for (int k = 0; k < 4; k++)
        if (k < vw && p.x0)
            S[k] = pssm_load_any(p.x0,
                                 b * p.x0_s[0] + h * p.x0_s[1] + pp * p.x0_s[2] + (nn + k) * p.x0_s[3],
                                 p.state_dt);
    float *st = p.states + bh * p.nchunks * PN + e;
    uint16_t *act = p.sact ? (uint16_t *)p.sact + bh * p.nchunks * PN + e : 0;
    const float *decay = p.decay + bh * p.nchunks;
    pssm_ssd_pass_load(next, st, vw);
    for (int64_t c = 0; c < p.nchunks; c++) {
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            own[k] = next[k];
        if (c + 1 < p.nchunks)
            pssm_ssd_pass_load(next, st + (c + 1) * PN, vw);
        if (!p.act_only) {
            if (vw == 4) {
                pssm_vec16 v4;
                PSSM_UNROLL
                for (int k = 0; k < 4; k++)
                    v4.w[k] = pssm_as_uint(S[k]);
                *(pssm_vec16 *)(st + c * PN) = v4;
            } else {
                st[c * PN] = S[0];
            }
        }
        if (act)
            pssm_ssd_pass_store_act(act + c * PN, S, vw, p.sact_bf16);
        const float dc = decay[c];
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            S[k] = dc * S[k] + own[k];
    }
    if (p.final_states)
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            if (k < vw)
                pssm_store_any(p.final_states,
                               b * p.fs_s[0] + h * p.fs_s[1] + pp * p.fs_s[2] + (nn + k) * p.fs_s[3],
                               p.state_dt, S[k]);
}

/* 2'. The backward's state pass, the same threads in reverse: dstates holds each chunk's
 * G_c = sum_{seg_j == -1} exp(cs_j) dy_j C_j^T (its tokens' pull on the state entering it) and
 * becomes dS_e(c), the gradient of the state at the chunk's end:
 *     dS_e(last) = dfinal,  dS_e(c-1) = G_c + decay_c dS_e(c),  dinit = G_0 + decay_0 dS_e(0).
 * Per chunk, each warp's share of decay_c sum_{p,n} dS_e(c) S_in(c) (the pull of the chunk
 * end's cumulative decay) into part_e; dS_e also into sact where given (and only there with
 * act_only).  S_in from sin_act, in the activation dtype, where given: it may be sact itself,
 * since each thread reads its elements of a chunk before it writes them. */
PSSM_KERNEL_BOUNDED(pssm_ssd_state_pass_bwd, pssm_ssd_chunk_params, p, PSSM_SSD_BLOCK)
{
    /* four adjacent n per thread where p.vec, as in the forward pass (p.eblocks: its blocks
     * per (b, h)) */
    const int vw = p.vec ? 4 : 1;
    const int64_t PN = p.hdim * p.dstate, units = PN / vw, per = p.eblocks;
    const int64_t bh = PSSM_BLOCK_X / per, blk = PSSM_BLOCK_X % per;
    const int64_t u = blk * PSSM_SSD_BLOCK + PSSM_THREAD_X;
    const int on = u < units; /* no early return: every thread takes part in the warp sums */
    const int64_t e = on ? u * vw : 0, b = bh / p.heads, h = bh % p.heads;
    const int64_t pp = e / p.dstate, nn = e % p.dstate; /* n = nn .. nn + vw - 1 */
    float R[4] = {0.0f, 0.0f, 0.0f, 0.0f}, own[4], entering[4];
    float own_next[4] = {0.0f, 0.0f, 0.0f, 0.0f}, entering_next[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    PSSM_UNROLL
    for (int k = 0; k < 4; k++)
        if (k < vw && on && p.dfinal)
            R[k] = pssm_load_any(p.dfinal,
                                 b * p.df_s[0] + h * p.df_s[1] + pp * p.df_s[2] + (nn + k) * p.df_s[3],
                                 p.state_dt);
    float *ds = p.dstates + bh * p.nchunks * PN + e;
    /* (no f32 S_in where sin_act is given: states may be NULL then, a backward given the
     * forward's checkpoints, which plans none) */
    const uint16_t *sin16 = p.sin_act ? (const uint16_t *)p.sin_act + bh * p.nchunks * PN + e : 0;
    const float *sin = sin16 ? 0 : p.states + bh * p.nchunks * PN + e;
    /* dS_e also in the activation dtype where sact is given (the DX kernel with M in registers) */
    uint16_t *act = p.sact ? (uint16_t *)p.sact + bh * p.nchunks * PN + e : 0;
    const float *decay = p.decay + bh * p.nchunks;
    /* one partial per warp and chunk: a block-wide sum would put two barriers in every step */
    float *part = p.part_e + ((bh * p.eblocks + blk) * PSSM_SSD_EWARPS + PSSM_WARP_ID) * p.nchunks;
    /* the previous chunk's loads are issued before this one's store (as in the forward pass) */
    const int64_t last = p.nchunks - 1;
#define PSSM_SSD_PASS_LOAD_SIN(dst, c)                                                             \
    do {                                                                                           \
        if (sin16)                                                                                 \
            pssm_ssd_pass_load_act(sin16 + (c)*PN, dst, vw, p.sact_bf16);                          \
        else                                                                                       \
            pssm_ssd_pass_load(dst, sin + (c)*PN, vw);                                             \
    } while (0)
    if (on) {
        pssm_ssd_pass_load(own_next, ds + last * PN, vw);
        PSSM_SSD_PASS_LOAD_SIN(entering_next, last);
    }
    for (int64_t c = last; c >= 0; c--) {
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            own[k] = own_next[k], entering[k] = entering_next[k];
        if (on && c > 0) {
            pssm_ssd_pass_load(own_next, ds + (c - 1) * PN, vw);
            PSSM_SSD_PASS_LOAD_SIN(entering_next, c - 1);
        }
        if (on && !p.act_only) {
            if (vw == 4) {
                pssm_vec16 v4;
                PSSM_UNROLL
                for (int k = 0; k < 4; k++)
                    v4.w[k] = pssm_as_uint(R[k]);
                *(pssm_vec16 *)(ds + c * PN) = v4;
            } else {
                ds[c * PN] = R[0];
            }
        }
        if (on && act)
            pssm_ssd_pass_store_act(act + c * PN, R, vw, p.sact_bf16);
        float re = 0.0f; /* zero where off, and in the unused k of vw = 1 */
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            re += R[k] * entering[k];
        const float s = pssm_warp_sum(re);
        const float dc = decay[c];
        if (PSSM_LANE == 0)
            part[c] = dc * s;
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            R[k] = own[k] + dc * R[k];
    }
#undef PSSM_SSD_PASS_LOAD_SIN
    if (on && p.dinit)
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            if (k < vw)
                pssm_store_any(p.dinit,
                               b * p.di_s[0] + h * p.di_s[1] + pp * p.di_s[2] + (nn + k) * p.di_s[3],
                               p.state_dt, R[k]);
}

PSSM_KERNEL_BOUNDED(pssm_ssd_seq_from_cu, pssm_ssd_seq_params, p, PSSM_SSD_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    for (int64_t t = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; t < p.seqlen; t += threads) {
        int64_t lo = 0, hi = p.nseq - 1; /* the last k in [0, nseq) with cu[k] <= t */
        while (lo < hi) {
            const int64_t mid = (lo + hi + 1) / 2;
            if (pssm_ssd_offset(p, mid) <= t)
                lo = mid;
            else
                hi = mid - 1;
        }
        p.seq[t] = (int32_t)lo;
    }
}

PSSM_KERNEL_BOUNDED(pssm_ssd_varlen_empty, pssm_ssd_seq_params, p, PSSM_SSD_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    const int64_t per_seq = p.heads * p.hdim * p.dstate;
    for (int64_t i = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; i < p.nseq * per_seq;
         i += threads) {
        const int64_t k = i / per_seq, r = i - k * per_seq;
        if (pssm_ssd_offset(p, k + 1) > pssm_ssd_offset(p, k))
            continue; /* written by the scan at the sequence's last token */
        const int64_t h = r / (p.hdim * p.dstate), q = (r / p.dstate) % p.hdim, n = r % p.dstate;
        const float v = k == 0 && p.x0 ? pssm_load_any(p.x0,
                                                       h * p.x0_s[0] + q * p.x0_s[1] + n * p.x0_s[2],
                                                       p.state_dt)
                                       : 0.0f;
        pssm_store_any(p.varlen,
                       k * p.varlen_s[0] + h * p.varlen_s[1] + q * p.varlen_s[2] + n * p.varlen_s[3],
                       p.state_dt, v);
    }
}

#endif /* PSSM_IN_PART(base) */
