/*
 * ssd_chunk.body.h - the SSD forward by chunks, stamped once per activation dtype by
 * ssd_kernels.h.  Expects PSSM_SSDC_ACT (storage type), _LD / _ST (storage <-> float), _SMEM (the
 * products' operand type in shared memory), _TO_SMEM (float -> operand), _MMA (the dialect's
 * 16x16 multiply for that operand), _TILE (the tile edge, a multiple of 16) and _DT (the name
 * suffix), _THREADS (the block's threads); leaves none of them defined.
 *
 * Per row b, head h (group g = h / hpg) and chunk c of Q tokens [c0, c0 + Q):
 *   dt'_j = clamp(softplus?(dt_j + dt_bias)),  cs_j = A sum_{i <= j} dt'_i  (from the chunk start)
 *   seg_j = the last restart (seq_idx change) at or before j inside the chunk, -1 if none:
 *           token i reaches token j iff i <= j and seg_i == seg_j; the state entering the chunk
 *           reaches j iff seg_j == -1.
 * 1. chunk_state: the chunk's own state at its last token e (a (P x Q)(Q x N) product)
 *        S_c[p][n] = sum_{j reaches e} exp(cs_e - cs_j) dt'_j x_j[p] B_j[n]
 *    and decay_c = seg_e == -1 ? exp(cs_e) : 0, into the workspace.  Its varlen pass (p.cu set,
 *    after 2.) does the same at the last token of each packed sequence plus the share of the
 *    state entering that chunk: the sequence's final state.
 * 2. pssm_ssd_state_pass (ssd_kernels.h): per (b, h, p, n), sequentially over the chunks,
 *    S_in(c+1) = decay_c S_in(c) + S_c, S_in(0) = the initial state; S_in(c) replaces S_c.
 * 3. chunk_out: rows t of one tile of a chunk, columns p of one tile:
 *        y_t[p] = [seg_t == -1] exp(cs_t) sum_n C_t[n] S_in[p][n]
 *               + sum_{s reaches t} (C_t . B_s) exp(cs_t - cs_s) dt'_s x_s[p]   (M = C Bᵀ masked,
 *               + D x_t[p],   out = z ? y silu(z) : y                            then M X)
 * Every product runs on the dialect's warp-level multiply (pssm_mma.h) over shared tiles with K
 * contiguous; the tiles of a block's (T x T) result are split evenly over its warps.  Offsets
 * into the tensors are 64-bit; positions inside a chunk are int.
 */
#define PSSM_SSDC_CAT_(a, b) a##b
#define PSSM_SSDC_CAT(a, b) PSSM_SSDC_CAT_(a, b)
#define PSSM_SSDC_FN(name) PSSM_SSDC_CAT(name, PSSM_SSDC_DT)

#define SSDC_T PSSM_SSDC_TILE
#define SSDC_LDS (SSDC_T + 8) /* row pitch of the shared tiles: even, and off the bank period */
#define SSDC_SUB (SSDC_T / 16) /* 16x16 sub-tiles per tile edge */
#define SSDC_NWARPS (PSSM_SSDC_THREADS / PSSM_WARP_SIZE)
#define SSDC_TPW (SSDC_SUB * SSDC_SUB / SSDC_NWARPS) /* sub-tiles per warp */
/* Tile loads: thread tid takes column tid % T of rows it * (threads / T) + tid / T, all the
 * global loads of a tile issued before its shared stores (a load-store loop would wait one
 * memory latency per element row); the operands' type in shared memory is the activations'
 * (copied raw) except where a product is formed first. */
#define SSDC_ITERS (SSDC_T * SSDC_T / PSSM_SSDC_THREADS)
#define SSDC_ROWS_PER_IT (PSSM_SSDC_THREADS / SSDC_T)
/* 32-bit words of one shared tile (declared as words: the 16-bit multiply loads pairs), and
 * its 16-byte vectors (the output kernel's tiles, filled by vector stores) */
#define SSDC_TILE_WORDS (SSDC_T * SSDC_LDS * (int)sizeof(PSSM_SSDC_SMEM) / 4)
#define SSDC_TILE_VECS (SSDC_TILE_WORDS / 4)
/* Vector tile loads (p.vec): 16 bytes = SSDC_VEC activations or 4 floats along the contiguous
 * dimension; the host checked contiguity, alignment and that P and N are multiples of it. */
#define SSDC_VEC (16 / (int)sizeof(PSSM_SSDC_ACT))
#define SSDC_VITERS (SSDC_T * SSDC_T / SSDC_VEC / PSSM_SSDC_THREADS)
#define SSDC_FITERS (SSDC_T * SSDC_T / 4 / PSSM_SSDC_THREADS)

/* dt', cs and seg of the chunk at c0 with q tokens (positions q..Q-1: dt' = 0, cs flat), into
 * shared arrays of PSSM_SSD_CHUNK_MAX; wsum, wmax: shared scratch of a float per warp.  Every
 * thread of the block calls it; it ends with a barrier. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_prep_)(const pssm_ssd_chunk_params p, int64_t b, int64_t h,
                                               int64_t c0, int q, float *dtp, float *cs, int *seg,
                                               float *wsum, float *wmax)
{
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const float a = p.A[h * p.A_s];
    const float bias = p.dt_bias ? p.dt_bias[h * p.bias_s] : 0.0f;
    const PSSM_SSDC_ACT *dt = (const PSSM_SSDC_ACT *)p.dt;
    float d[2], r[2];
    for (int k = 0; k < 2; k++) {
        const int j = 2 * tid + k;
        const int64_t t = c0 + j;
        d[k] = 0.0f;
        r[k] = -1.0f;
        if (j < q) {
            float v = PSSM_SSDC_LD(dt[b * p.dt_s[0] + t * p.dt_s[1] + h * p.dt_s[2]]) + bias;
            if (p.softplus)
                v = pssm_softplus_fast(v);
            if (p.dt_limit)
                v = fminf(fmaxf(v, p.dt_min), p.dt_max);
            d[k] = v;
            if (p.seq && t > 0) {
                const int32_t *sq = p.seq + b * p.seq_s[0];
                if (sq[t * p.seq_s[1]] != sq[(t - 1) * p.seq_s[1]])
                    r[k] = (float)j;
            }
        }
    }
    const float da0 = d[0] * a, pair = da0 + d[1] * a;
    const float rpair = r[1] > r[0] ? r[1] : r[0];
    const float incl = pssm_warp_scan_sum(pair), imax = pssm_ssdc_warp_scan_max(rpair);
    if (lane == PSSM_WARP_SIZE - 1)
        wsum[warp] = incl, wmax[warp] = imax;
    float excl = PSSM_SHFL_UP_F32(incl, 1), emax = PSSM_SHFL_UP_F32(imax, 1);
    if (lane == 0)
        excl = 0.0f, emax = -1.0f;
    PSSM_SYNC();
    for (int w = 0; w < warp; w++) {
        excl += wsum[w];
        emax = wmax[w] > emax ? wmax[w] : emax;
    }
    const int j = 2 * tid;
    if (j < PSSM_SSD_CHUNK_MAX) {
        dtp[j] = d[0], dtp[j + 1] = d[1];
        cs[j] = excl + da0, cs[j + 1] = excl + pair;
        const float s0 = r[0] > emax ? r[0] : emax;
        seg[j] = (int)s0, seg[j + 1] = (int)(r[1] > s0 ? r[1] : s0);
    }
    PSSM_SYNC();
}

/* ---------------------------------------------------------------- tile loads
 * A T x T tile of rows r < rows and columns c < cols (zero elsewhere) of an activation tensor
 * whose element (r, c) is src[r * rs + c * cs]: into dst[r][c] (tile_) or dst[c][r] (tile_t_,
 * transposed), in shared memory of pitch SSDC_LDS.  With vec, 16-byte loads along c (cs = 1):
 * SSDC_VITERS per thread, all issued before the stores; else an element loop (any strides).
 * Every thread of the block calls them. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_tile_)(PSSM_SSDC_SMEM *dst, const PSSM_SSDC_ACT *src,
                                               int64_t rs, int64_t cs, int rows, int cols,
                                               int vec)
{
    const int tid = PSSM_TID;
    if (vec) {
        pssm_vec16 w[SSDC_VITERS];
        PSSM_UNROLL
        for (int it = 0; it < SSDC_VITERS; it++) {
            const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / SSDC_VEC);
            const int c = v % (SSDC_T / SSDC_VEC) * SSDC_VEC;
            w[it].w[0] = w[it].w[1] = w[it].w[2] = w[it].w[3] = 0u;
            if (r < rows && c < cols)
                w[it] = *(const pssm_vec16 *)(src + r * rs + c);
        }
        PSSM_UNROLL
        for (int it = 0; it < SSDC_VITERS; it++) {
            const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / SSDC_VEC);
            const int c = v % (SSDC_T / SSDC_VEC) * SSDC_VEC;
            *(pssm_vec16 *)(dst + r * SSDC_LDS + c) = w[it];
        }
        return;
    }
    for (int i = tid; i < SSDC_T * SSDC_T; i += PSSM_SSDC_THREADS) {
        const int r = i / SSDC_T, c = i % SSDC_T;
        dst[r * SSDC_LDS + c] = r < rows && c < cols ? src[r * rs + c * cs] : (PSSM_SSDC_ACT)0;
    }
}

PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_tile_t_)(PSSM_SSDC_SMEM *dst, const PSSM_SSDC_ACT *src,
                                                 int64_t rs, int64_t cs, int rows, int cols,
                                                 int vec)
{
    const int tid = PSSM_TID;
    if (vec) {
        pssm_vec16 w[SSDC_VITERS];
        PSSM_UNROLL
        for (int it = 0; it < SSDC_VITERS; it++) {
            const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / SSDC_VEC);
            const int c = v % (SSDC_T / SSDC_VEC) * SSDC_VEC;
            w[it].w[0] = w[it].w[1] = w[it].w[2] = w[it].w[3] = 0u;
            if (r < rows && c < cols)
                w[it] = *(const pssm_vec16 *)(src + r * rs + c);
        }
        PSSM_UNROLL
        for (int it = 0; it < SSDC_VITERS; it++) {
            const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / SSDC_VEC);
            const int c = v % (SSDC_T / SSDC_VEC) * SSDC_VEC;
            PSSM_SSDC_ACT e[SSDC_VEC];
            __builtin_memcpy(e, &w[it], 16);
            PSSM_UNROLL
            for (int k = 0; k < SSDC_VEC; k++)
                dst[(c + k) * SSDC_LDS + r] = e[k];
        }
        return;
    }
    for (int i = tid; i < SSDC_T * SSDC_T; i += PSSM_SSDC_THREADS) {
        const int r = i / SSDC_T, c = i % SSDC_T;
        dst[c * SSDC_LDS + r] = r < rows && c < cols ? src[r * rs + c * cs] : (PSSM_SSDC_ACT)0;
    }
}

/* The same for an f32 source with unit column stride (a state in the workspace), converted to
 * the operand type. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_tile_f32_)(PSSM_SSDC_SMEM *dst, const float *src,
                                                   int64_t rs, int rows, int cols, int vec)
{
    const int tid = PSSM_TID;
    if (vec) {
        pssm_vec16 w[SSDC_FITERS];
        PSSM_UNROLL
        for (int it = 0; it < SSDC_FITERS; it++) {
            const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / 4);
            const int c = v % (SSDC_T / 4) * 4;
            w[it].w[0] = w[it].w[1] = w[it].w[2] = w[it].w[3] = 0u;
            if (r < rows && c < cols)
                w[it] = *(const pssm_vec16 *)(src + r * rs + c);
        }
        PSSM_UNROLL
        for (int it = 0; it < SSDC_FITERS; it++) {
            const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / 4);
            const int c = v % (SSDC_T / 4) * 4;
            PSSM_UNROLL
            for (int k = 0; k < 4; k++)
                dst[r * SSDC_LDS + c + k] = PSSM_SSDC_TO_SMEM(pssm_as_float(w[it].w[k]));
        }
        return;
    }
    for (int i = tid; i < SSDC_T * SSDC_T; i += PSSM_SSDC_THREADS) {
        const int r = i / SSDC_T, c = i % SSDC_T;
        dst[r * SSDC_LDS + c] = PSSM_SSDC_TO_SMEM(r < rows && c < cols ? src[r * rs + c] : 0.0f);
    }
}

/* ---------------------------------------------------------------- 1. chunk states */

PSSM_KERNEL_BOUNDED(PSSM_SSDC_FN(pssm_ssd_chunk_state_), pssm_ssd_chunk_params, p,
                    PSSM_SSDC_THREADS)
{
    PSSM_SHARED(float, dtp, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, cs, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, w, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(int, seg, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, wsum, SSDC_NWARPS);
    PSSM_SHARED(float, wmax, SSDC_NWARPS);
    PSSM_SHARED(uint32_t, xs_w, SSDC_TILE_WORDS);
    PSSM_SHARED(uint32_t, bs_w, SSDC_TILE_WORDS);
    PSSM_SSDC_SMEM *const xs = (PSSM_SSDC_SMEM *)xs_w; /* xs[p][j] = w_j x_j[p]  */
    PSSM_SSDC_SMEM *const bs = (PSSM_SSDC_SMEM *)bs_w; /* bs[n][j] = B_j[n]      */
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    int64_t b, h, c, last, k = -1;
    if (!p.cu) { /* block x = (b, h, c) */
        c = PSSM_BLOCK_X % p.nchunks;
        const int64_t bh = PSSM_BLOCK_X / p.nchunks;
        b = bh / H, h = bh % H;
        last = (c + 1) * Q < L ? (c + 1) * Q - 1 : L - 1;
    } else { /* the varlen pass: block x = (sequence k, h) of the one packed row */
        k = PSSM_BLOCK_X / H, h = PSSM_BLOCK_X % H, b = 0;
        const int64_t lo = pssm_ssd_offset_of(p.cu, p.cu_s, k, L);
        const int64_t hi = pssm_ssd_offset_of(p.cu, p.cu_s, k + 1, L);
        if (hi <= lo)
            return; /* empty: pssm_ssd_varlen_empty wrote its start state */
        last = hi - 1;
        c = last / Q;
    }
    const int64_t c0 = c * Q, g = h / p.hpg;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), e = (int)(last - c0);
    const int64_t p0 = (PSSM_BLOCK_Y % p.ptiles) * SSDC_T, n0 = (PSSM_BLOCK_Y / p.ptiles) * SSDC_T;
    PSSM_SSDC_FN(pssm_ssdc_prep_)(p, b, h, c0, q, dtp, cs, seg, wsum, wmax);
    for (int j = tid; j < PSSM_SSD_CHUNK_MAX; j += PSSM_SSDC_THREADS)
        w[j] = j <= e && seg[j] == seg[e] ? pssm_expf(cs[e] - cs[j]) * dtp[j] : 0.0f;
    PSSM_SYNC();

    float acc[SSDC_TPW][PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++)
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            acc[ti][i] = 0.0f;
    const PSSM_SSDC_ACT *x = (const PSSM_SSDC_ACT *)p.x + b * p.x_s[0] + h * p.x_s[2];
    const PSSM_SSDC_ACT *Bm = (const PSSM_SSDC_ACT *)p.Bm + b * p.B_s[0] + g * p.B_s[2];
    const int cc = tid % SSDC_T, r0 = tid / SSDC_T; /* cc: p, then n */
    const int p_in = p0 + cc < P, n_in = n0 + cc < N;
    for (int j0 = 0; j0 <= e; j0 += SSDC_T) {
        PSSM_SSDC_ACT xv[SSDC_ITERS], bv[SSDC_ITERS];
        PSSM_UNROLL
        for (int it = 0; it < SSDC_ITERS; it++) {
            const int j = j0 + it * SSDC_ROWS_PER_IT + r0;
            const int64_t t = c0 + j;
            xv[it] = bv[it] = (PSSM_SSDC_ACT)0;
            if (j <= e && p_in)
                xv[it] = x[t * p.x_s[1] + (p0 + cc) * p.x_s[3]];
            if (j <= e && n_in)
                bv[it] = Bm[t * p.B_s[1] + (n0 + cc) * p.B_s[3]];
        }
        PSSM_UNROLL
        for (int it = 0; it < SSDC_ITERS; it++) {
            const int jj = it * SSDC_ROWS_PER_IT + r0;
            xs[cc * SSDC_LDS + jj] = PSSM_SSDC_TO_SMEM(PSSM_SSDC_LD(xv[it]) * w[j0 + jj]);
            bs[cc * SSDC_LDS + jj] = bv[it];
        }
        PSSM_SYNC();
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            PSSM_UNROLL
            for (int k0 = 0; k0 < SSDC_T; k0 += 16)
                PSSM_SSDC_MMA(acc[ti], xs + tm * 16 * SSDC_LDS + k0, SSDC_LDS,
                              bs + tn * 16 * SSDC_LDS + k0, SSDC_LDS);
        }
        PSSM_SYNC();
    }

    const int64_t PN = P * N;
    const float carry = seg[e] == -1 ? pssm_expf(cs[e]) : 0.0f;
    const int64_t chunk_at = (b * H + h) * p.nchunks + c;
    if (!p.cu && tid == 0 && PSSM_BLOCK_Y == 0)
        p.decay[chunk_at] = carry;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++) {
        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++) {
            const int64_t pp = p0 + tm * 16 + pssm_mma_row(lane, i);
            const int64_t nn = n0 + tn * 16 + pssm_mma_col(lane, i);
            if (pp >= P || nn >= N)
                continue;
            float *s = p.states + chunk_at * PN + pp * N + nn;
            if (!p.cu) {
                *s = acc[ti][i];
            } else { /* s holds the state entering the chunk (after the state pass) */
                const float v = acc[ti][i] + (carry != 0.0f ? carry * *s : 0.0f);
                p.varlen[k * p.varlen_s[0] + h * p.varlen_s[1] + pp * p.varlen_s[2] +
                         nn * p.varlen_s[3]] = v;
            }
        }
    }
}

/* ---------------------------------------------------------------- 3. chunk outputs */

PSSM_KERNEL_BOUNDED(PSSM_SSDC_FN(pssm_ssd_chunk_out_), pssm_ssd_chunk_params, p,
                    PSSM_SSDC_THREADS)
{
    PSSM_SHARED(float, dtp, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, cs, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(int, seg, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, wsum, SSDC_NWARPS);
    PSSM_SHARED(float, wmax, SSDC_NWARPS);
    PSSM_SHARED(pssm_vec16, ct_w, SSDC_TILE_VECS);
    PSSM_SHARED(pssm_vec16, bt_w, SSDC_TILE_VECS);
    PSSM_SHARED(pssm_vec16, ms_w, SSDC_TILE_VECS);
    PSSM_SHARED(pssm_vec16, xt_w, SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const ct = (PSSM_SSDC_SMEM *)ct_w; /* ct[t][n] = C_t[n]                  */
    PSSM_SSDC_SMEM *const bt = (PSSM_SSDC_SMEM *)bt_w; /* bt[s][n] = B_s[n], or S_in[p][n]  */
    PSSM_SSDC_SMEM *const ms = (PSSM_SSDC_SMEM *)ms_w; /* ms[t][s] = M_ts                   */
    PSSM_SSDC_SMEM *const xt = (PSSM_SSDC_SMEM *)xt_w; /* xt[p][s] = x_s[p]                 */
    const int lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    const int qt = (int)(PSSM_BLOCK_X % p.qtiles);
    const int64_t rest = PSSM_BLOCK_X / p.qtiles;
    const int64_t c = rest % p.nchunks, bh = rest / p.nchunks, b = bh / H, h = bh % H;
    const int64_t c0 = c * Q, g = h / p.hpg, p0 = PSSM_BLOCK_Y * SSDC_T;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), t0 = qt * SSDC_T;
    if (t0 >= q)
        return; /* a row tile past the end of the last chunk (the whole block) */
    PSSM_SSDC_FN(pssm_ssdc_prep_)(p, b, h, c0, q, dtp, cs, seg, wsum, wmax);

    const PSSM_SSDC_ACT *x = (const PSSM_SSDC_ACT *)p.x + b * p.x_s[0] + h * p.x_s[2];
    const PSSM_SSDC_ACT *Bm = (const PSSM_SSDC_ACT *)p.Bm + b * p.B_s[0] + g * p.B_s[2];
    const PSSM_SSDC_ACT *Cm = (const PSSM_SSDC_ACT *)p.Cm + b * p.C_s[0] + g * p.C_s[2];
    const float *S_in = p.states + (bh * p.nchunks + c) * P * N;
    const int trows = q - t0 < SSDC_T ? q - t0 : SSDC_T; /* rows t of this tile         */
    const int pcols = (int)(P - p0 < SSDC_T ? P - p0 : SSDC_T);
    float y[SSDC_TPW][PSSM_MMA_ACC], cb[SSDC_TPW][PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++)
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            y[ti][i] = 0.0f;

    /* C_t . S_in over slabs of n (nothing enters the first chunk without an initial state) */
    if (c > 0 || p.x0) {
        for (int64_t n0 = 0; n0 < N; n0 += SSDC_T) {
            const int ncols = (int)(N - n0 < SSDC_T ? N - n0 : SSDC_T);
            PSSM_SSDC_FN(pssm_ssdc_tile_)(ct, Cm + (c0 + t0) * p.C_s[1] + n0 * p.C_s[3], p.C_s[1],
                                          p.C_s[3], trows, ncols, p.vec);
            PSSM_SSDC_FN(pssm_ssdc_tile_f32_)(bt, S_in + p0 * N + n0, N, pcols, ncols, p.vec);
            PSSM_SYNC();
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int k0 = 0; k0 < SSDC_T; k0 += 16)
                    PSSM_SSDC_MMA(y[ti], ct + tm * 16 * SSDC_LDS + k0, SSDC_LDS,
                                  bt + tn * 16 * SSDC_LDS + k0, SSDC_LDS);
            }
            PSSM_SYNC();
        }
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tm = (warp * SSDC_TPW + ti) / SSDC_SUB;
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i++) {
                const int t = t0 + tm * 16 + pssm_mma_row(lane, i);
                y[ti][i] = t < q && seg[t] == -1 ? y[ti][i] * pssm_expf(cs[t]) : 0.0f;
            }
        }
    }

    /* the chunk's own tokens s <= t: slabs of s up to the diagonal */
    for (int s0 = 0; s0 <= t0; s0 += SSDC_T) {
        const int srows = q - s0 < SSDC_T ? q - s0 : SSDC_T; /* rows s of this slab */
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++)
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i++)
                cb[ti][i] = 0.0f;
        for (int64_t n0 = 0; n0 < N; n0 += SSDC_T) {
            const int ncols = (int)(N - n0 < SSDC_T ? N - n0 : SSDC_T);
            PSSM_SSDC_FN(pssm_ssdc_tile_)(ct, Cm + (c0 + t0) * p.C_s[1] + n0 * p.C_s[3], p.C_s[1],
                                          p.C_s[3], trows, ncols, p.vec);
            PSSM_SSDC_FN(pssm_ssdc_tile_)(bt, Bm + (c0 + s0) * p.B_s[1] + n0 * p.B_s[3], p.B_s[1],
                                          p.B_s[3], srows, ncols, p.vec);
            PSSM_SYNC();
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int k0 = 0; k0 < SSDC_T; k0 += 16)
                    PSSM_SSDC_MMA(cb[ti], ct + tm * 16 * SSDC_LDS + k0, SSDC_LDS,
                                  bt + tn * 16 * SSDC_LDS + k0, SSDC_LDS);
            }
            PSSM_SYNC();
        }
        /* M under the decay and the reach mask (a select: exp of a masked pair may overflow) */
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i++) {
                const int tt = tm * 16 + pssm_mma_row(lane, i), ss = tn * 16 + pssm_mma_col(lane, i);
                const int t = t0 + tt, s = s0 + ss;
                const float m = s <= t && t < q && seg[s] == seg[t]
                                    ? cb[ti][i] * pssm_expf(cs[t] - cs[s]) * dtp[s]
                                    : 0.0f;
                ms[tt * SSDC_LDS + ss] = PSSM_SSDC_TO_SMEM(m);
            }
        }
        PSSM_SSDC_FN(pssm_ssdc_tile_t_)(xt, x + (c0 + s0) * p.x_s[1] + p0 * p.x_s[3], p.x_s[1],
                                        p.x_s[3], srows, pcols, p.vec);
        PSSM_SYNC();
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            PSSM_UNROLL
            for (int k0 = 0; k0 < SSDC_T; k0 += 16)
                PSSM_SSDC_MMA(y[ti], ms + tm * 16 * SSDC_LDS + k0, SSDC_LDS,
                              xt + tn * 16 * SSDC_LDS + k0, SSDC_LDS);
        }
        PSSM_SYNC();
    }

    /* + D x, gate, store */
    const PSSM_SSDC_ACT *z = (const PSSM_SSDC_ACT *)p.z;
    PSSM_SSDC_ACT *out = (PSSM_SSDC_ACT *)p.out;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++) {
        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++) {
            const int64_t t = c0 + t0 + tm * 16 + pssm_mma_row(lane, i);
            const int64_t pp = p0 + tn * 16 + pssm_mma_col(lane, i);
            if (t - c0 >= q || pp >= P)
                continue;
            float v = y[ti][i];
            if (p.D) {
                const float Dv = p.D[h * p.D_s[0] + pp * p.D_s[1]];
                v += Dv * PSSM_SSDC_LD(x[t * p.x_s[1] + pp * p.x_s[3]]);
            }
            if (z)
                v *= pssm_silu_fast(PSSM_SSDC_LD(
                    z[b * p.z_s[0] + t * p.z_s[1] + h * p.z_s[2] + pp * p.z_s[3]]));
            out[b * p.out_s[0] + t * p.out_s[1] + h * p.out_s[2] + pp * p.out_s[3]] =
                PSSM_SSDC_ST(v);
        }
    }
}

#undef SSDC_T
#undef SSDC_LDS
#undef SSDC_SUB
#undef SSDC_NWARPS
#undef SSDC_TPW
#undef SSDC_TILE_WORDS
#undef SSDC_ITERS
#undef SSDC_ROWS_PER_IT
#undef SSDC_TILE_VECS
#undef SSDC_VEC
#undef SSDC_VITERS
#undef SSDC_FITERS
#undef PSSM_SSDC_ACT
#undef PSSM_SSDC_LD
#undef PSSM_SSDC_ST
#undef PSSM_SSDC_SMEM
#undef PSSM_SSDC_TO_SMEM
#undef PSSM_SSDC_MMA
#undef PSSM_SSDC_TILE
#undef PSSM_SSDC_DT
#undef PSSM_SSDC_THREADS
