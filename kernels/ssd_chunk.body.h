/*
 * ssd_chunk.body.h - the SSD forward and backward by chunks, stamped once per activation dtype
 * by ssd_kernels.h.  Expects PSSM_SSDC_ACT (storage type), _LD / _ST (storage <-> float), _SMEM
 * (the products' operand type in shared memory), _TO_SMEM (float -> operand), _MMA (the
 * dialect's 16x16 multiply for that operand), _TILE (the tile edge, a multiple of 16) and _DT
 * (the name suffix), _THREADS (the block's threads); leaves none of them defined.
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
 *    state entering that chunk: the sequence's final state.  Its gradient form (grad_state)
 *    gives the backward's G_c = sum_{seg_j == -1} exp(cs_j) dy_j C_j^T.
 * 2. pssm_ssd_state_pass (ssd_kernels.h): per (b, h, p, n), sequentially over the chunks,
 *    S_in(c+1) = decay_c S_in(c) + S_c, S_in(0) = the initial state; S_in(c) replaces S_c.
 *    pssm_ssd_state_pass_bwd runs it backwards over the G_c: the gradient at each chunk's end.
 * 3. chunk_prod: rows t of one tile of a chunk, columns p of one tile, in the forward:
 *        y_t[p] = [seg_t == -1] exp(cs_t) sum_n C_t[n] S_in[p][n]
 *               + sum_{s reaches t} (C_t . B_s) exp(cs_t - cs_s) dt'_s x_s[p]   (M = C Bᵀ masked,
 *               + D x_t[p],   out = z ? y silu(z) : y                            then M X)
 *    and the backward's products of the same form (dz, dx, dB, dC, and dcs's parts; the table
 *    at the kernel).
 * 4. dt_bwd: the backward's ddt from dcs (the gradient of cs), and the per-chunk partial sums of
 *    dA, ddt_bias and dD, which the reduce kernel adds in a fixed order.
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

/* The same transposed: dst[c][r] = src[r * rs + c]. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_tile_f32_t_)(PSSM_SSDC_SMEM *dst, const float *src,
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
                dst[(c + k) * SSDC_LDS + r] = PSSM_SSDC_TO_SMEM(pssm_as_float(w[it].w[k]));
        }
        return;
    }
    for (int i = tid; i < SSDC_T * SSDC_T; i += PSSM_SSDC_THREADS) {
        const int r = i / SSDC_T, c = i % SSDC_T;
        dst[c * SSDC_LDS + r] = PSSM_SSDC_TO_SMEM(r < rows && c < cols ? src[r * rs + c] : 0.0f);
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
        if (!p.grad_state) /* the chunk's own state at e */
            w[j] = j <= e && seg[j] == seg[e] ? pssm_expf(cs[e] - cs[j]) * dtp[j] : 0.0f;
        else /* the tokens the entering state reaches: d S_in += exp(cs_j) dy_j C_j^T */
            w[j] = j < q && seg[j] == -1 ? pssm_expf(cs[j]) : 0.0f;
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
    if (!p.cu && !p.grad_state && tid == 0 && PSSM_BLOCK_Y == 0)
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

/* ---------------------------------------------------------------- 3. chunk products
 * One kernel for the forward's outputs and the backward's four products, which all have the
 * form (rows r: tokens of one tile of a chunk; columns: one tile of `width`, P or N)
 *     out[r][col] = scale_r sum_i U_r[i] S[col][i] + sum_k w(r, k) (U_r . V_k) W_k[col]
 * with k over the chunk's tokens that r reaches (causal: k <= r, the same segment) or that reach
 * r (anticausal: k >= r), i over `inner` (N or P), S a per-chunk f32 state (P,N) (s_trans: read
 * as (N,P)).  The weights and scales (seg_e: the segment of the chunk's last token e):
 *     causal:     w = exp(cs_r - cs_k) dt'_k,  scale = [seg_r == -1] exp(cs_r)
 *     anticausal: w = exp(cs_k - cs_r),        scale = [seg_r == seg_e] exp(cs_e - cs_r)
 *   mode  U  V  W   S      causal  the result                     the epilogue
 *   FWD   C  B  x   S_in   yes     y                              + D x, gate: out
 *   Y     C  B  x   S_in   yes     y without D x (y_o)            dz, dy, sum_p dy y_o
 *   DX    B  C  dy  dS_e   no      dx / dt' without D dy          dx, sum_p x (dx / dt')
 *   DB    x  dy C   dS_e^T no      dB / dt' of this head          dB of the head
 *   DC    dy x  B   S_in^T yes     dC of this head                dC of the head
 * (S_in: the state entering the chunk, dS_e: the gradient of the state at its end.)  The row
 * sums of Y and DX are per-tile partials of the tokens' dcs and ddt' (pssm_ssd_dt_bwd_). */
/* Each row's sum over the T columns of rowbuf (T x T floats), in a fixed order, into
 * part[at + r] for r < rows.  Every thread of the block calls it; barriers before and after. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_row_sums_)(const float *rowbuf, int rows, float *part,
                                                   int64_t at)
{
    PSSM_SYNC();
    for (int r = PSSM_TID; r < rows; r += PSSM_SSDC_THREADS) {
        float s = 0.0f;
        for (int cc = 0; cc < SSDC_T; cc++)
            s += rowbuf[r * SSDC_T + cc];
        part[at + r] = s;
    }
    PSSM_SYNC();
}

#define SSDC_OPND(o, hh, gg)                                                                     \
    ((const PSSM_SSDC_ACT *)(o).ptr + b * (o).s[0] + ((o).grouped ? (gg) : (hh)) * (o).s[2])

/* Two blocks of 256 threads (four of 128) per SM: at most 128 registers (the head loop of dB and
 * dC took it to 174 and one block per SM, which doubled every mode's time, run 21). */
#define PSSM_SSDC_PROD_MIN_BLOCKS (512 / PSSM_SSDC_THREADS)
PSSM_KERNEL_BOUNDED_MIN(PSSM_SSDC_FN(pssm_ssd_chunk_prod_), pssm_ssd_chunk_params, p,
                        PSSM_SSDC_THREADS, PSSM_SSDC_PROD_MIN_BLOCKS)
{
    PSSM_SHARED(float, dtp, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, cs, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(int, seg, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, wsum, SSDC_NWARPS);
    PSSM_SHARED(float, wmax, SSDC_NWARPS);
    PSSM_SHARED(pssm_vec16, tiles_w, 4 * SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const ut = (PSSM_SSDC_SMEM *)tiles_w; /* ut[r][i] = U_r[i]               */
    PSSM_SSDC_SMEM *const vt = (PSSM_SSDC_SMEM *)(tiles_w + SSDC_TILE_VECS); /* V_k[i], S[col][i] */
    PSSM_SSDC_SMEM *const ms = (PSSM_SSDC_SMEM *)(tiles_w + 2 * SSDC_TILE_VECS); /* w (U_r.V_k) */
    PSSM_SSDC_SMEM *const wt = (PSSM_SSDC_SMEM *)(tiles_w + 3 * SSDC_TILE_VECS); /* W_k[col]  */
    float *const rowbuf = (float *)tiles_w; /* the epilogue's row sums, T x T over ut and vt  */
    typedef char pssm_ssdc_rowbuf_fits[2 * SSDC_TILE_VECS * 16 >= SSDC_T * SSDC_T * 4 ? 1 : -1];
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    /* block x = (b, slice of hpb heads, c, row tile); dB and dC sum over the heads of a group,
     * so their blocks take hpb heads each (the rest one) and leave one partial per slice */
    const int by_heads = p.mode == PSSM_SSD_PROD_DB || p.mode == PSSM_SSD_PROD_DC;
    const int64_t hpb = by_heads ? p.hpb : 1, slices = H / hpb;
    const int qt = (int)(PSSM_BLOCK_X % p.qtiles);
    const int64_t rest = PSSM_BLOCK_X / p.qtiles;
    const int64_t c = rest % p.nchunks, bs = rest / p.nchunks, b = bs / slices;
    const int64_t slice = bs % slices, h = slice * hpb, bh = b * H + h; /* the first head */
    const int64_t c0 = c * Q, col0 = PSSM_BLOCK_Y * SSDC_T;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), r0 = qt * SSDC_T, e = q - 1;
    if (r0 >= q)
        return; /* a row tile past the end of the last chunk (the whole block) */
    (void)sizeof(pssm_ssdc_rowbuf_fits);
    const int rrows = q - r0 < SSDC_T ? q - r0 : SSDC_T; /* rows r of this tile       */
    float acc[SSDC_TPW][PSSM_MMA_ACC], mk[SSDC_TPW][PSSM_MMA_ACC];

    if (p.mode == PSSM_SSD_PROD_W) {
        const int64_t g = h / p.hpg;
        PSSM_SSDC_FN(pssm_ssdc_prep_)(p, b, h, c0, q, dtp, cs, seg, wsum, wmax);
        /* W_ts = (C_t . B_s) exp(cs_t - cs_s) dt'_s (dy_t . x_s) for s < t reaching t, in f32
         * from the two products' accumulators (never rounded to the operand type: dcs is a
         * difference of these sums, and one rounding of M costs it most of its digits).  Its
         * row sums into part_row, its column sums over this tile of t into part_col. */
        float *const wbuf = (float *)(tiles_w + 2 * SSDC_TILE_VECS); /* over ms and wt */
        const PSSM_SSDC_ACT *Cr = SSDC_OPND(p.u, h, g), *Bk = SSDC_OPND(p.v, h, g);
        const PSSM_SSDC_ACT *dyr = SSDC_OPND(p.w, h, g), *xk = SSDC_OPND(p.xo, h, g);
        float rsum = 0.0f;
        for (int k0 = 0; k0 <= r0; k0 += SSDC_T) {
            const int krows = q - k0 < SSDC_T ? q - k0 : SSDC_T;
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++)
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    acc[ti][i] = mk[ti][i] = 0.0f;
            for (int pass = 0; pass < 2; pass++) { /* C B^T over n, then dy x^T over p */
                const PSSM_SSDC_ACT *R = pass ? dyr : Cr, *K = pass ? xk : Bk;
                const pssm_ssd_opnd *ro = pass ? &p.w : &p.u, *ko = pass ? &p.xo : &p.v;
                const int64_t inner = pass ? P : N;
                for (int64_t i0 = 0; i0 < inner; i0 += SSDC_T) {
                    const int icols = (int)(inner - i0 < SSDC_T ? inner - i0 : SSDC_T);
                    PSSM_SSDC_FN(pssm_ssdc_tile_)(ut, R + (c0 + r0) * ro->s[1] + i0 * ro->s[3],
                                                  ro->s[1], ro->s[3], rrows, icols, ro->vec);
                    PSSM_SSDC_FN(pssm_ssdc_tile_)(vt, K + (c0 + k0) * ko->s[1] + i0 * ko->s[3],
                                                  ko->s[1], ko->s[3], krows, icols, ko->vec);
                    PSSM_SYNC();
                    PSSM_UNROLL
                    for (int ti = 0; ti < SSDC_TPW; ti++) {
                        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB;
                        const int tn = tile % SSDC_SUB;
                        PSSM_UNROLL
                        for (int kk = 0; kk < SSDC_T; kk += 16) {
                            if (pass)
                                PSSM_SSDC_MMA(acc[ti], ut + tm * 16 * SSDC_LDS + kk, SSDC_LDS,
                                              vt + tn * 16 * SSDC_LDS + kk, SSDC_LDS);
                            else
                                PSSM_SSDC_MMA(mk[ti], ut + tm * 16 * SSDC_LDS + kk, SSDC_LDS,
                                              vt + tn * 16 * SSDC_LDS + kk, SSDC_LDS);
                        }
                    }
                    PSSM_SYNC();
                }
            }
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int rr = tm * 16 + pssm_mma_row(lane, i);
                    const int kk = tn * 16 + pssm_mma_col(lane, i), r = r0 + rr, k = k0 + kk;
                    const float wv = k < r && r < q && seg[k] == seg[r]
                                         ? mk[ti][i] * acc[ti][i] * pssm_expf(cs[r] - cs[k]) *
                                               dtp[k]
                                         : 0.0f;
                    wbuf[rr * SSDC_T + kk] = wv;
                }
            }
            PSSM_SYNC();
            if (tid < rrows)
                for (int kk = 0; kk < SSDC_T; kk++)
                    rsum += wbuf[tid * SSDC_T + kk];
            for (int kk = tid; kk < krows; kk += PSSM_SSDC_THREADS) {
                float cs_sum = 0.0f;
                for (int rr = 0; rr < rrows; rr++)
                    cs_sum += wbuf[rr * SSDC_T + kk];
                p.part_col[(bh * p.qtiles + qt) * L + c0 + k0 + kk] = cs_sum;
            }
            PSSM_SYNC();
        }
        if (tid < rrows)
            p.part_row[bh * L + c0 + r0 + tid] = rsum;
        return;
    }

    const int causal = p.mode == PSSM_SSD_PROD_FWD || p.mode == PSSM_SSD_PROD_Y ||
                       p.mode == PSSM_SSD_PROD_DC;
    const int dt_rows = p.mode == PSSM_SSD_PROD_DB; /* dB's dt'_r in its weights, per head */
    /* one slab of U (inner <= T: dB, dC) is the same for every slab of k: loaded once per head,
     * where no row sum reuses its shared tile */
    const int u_once = p.inner <= SSDC_T && p.mode != PSSM_SSD_PROD_Y && p.mode != PSSM_SSD_PROD_DX;
    const int ccols = (int)(p.width - col0 < SSDC_T ? p.width - col0 : SSDC_T);
    const PSSM_SSDC_ACT *x = (const PSSM_SSDC_ACT *)p.x + b * p.x_s[0] + h * p.x_s[2];
    const PSSM_SSDC_ACT *z = (const PSSM_SSDC_ACT *)p.z;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++)
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            acc[ti][i] = 0.0f;

    for (int64_t hh = h; hh < h + hpb; hh++) { /* acc sums over the block's heads */
        const int64_t g = hh / p.hpg, bhh = b * H + hh;
        PSSM_SSDC_FN(pssm_ssdc_prep_)(p, b, hh, c0, q, dtp, cs, seg, wsum, wmax);
        const PSSM_SSDC_ACT *U = SSDC_OPND(p.u, hh, g), *V = SSDC_OPND(p.v, hh, g);
        const PSSM_SSDC_ACT *W = SSDC_OPND(p.w, hh, g);
        const float *S = p.sprod + (bhh * p.nchunks + c) * P * N;
        if (u_once)
            PSSM_SSDC_FN(pssm_ssdc_tile_)(ut, U + (c0 + r0) * p.u.s[1], p.u.s[1], p.u.s[3], rrows,
                                          (int)p.inner, p.u.vec);

        /* U_r . S over slabs of i (nothing enters the first chunk without an initial state), into
         * mk, then scaled into acc */
        if (!causal || c > 0 || p.x0) {
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++)
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    mk[ti][i] = 0.0f;
            for (int64_t i0 = 0; i0 < p.inner; i0 += SSDC_T) {
                const int icols = (int)(p.inner - i0 < SSDC_T ? p.inner - i0 : SSDC_T);
                if (!u_once)
                    PSSM_SSDC_FN(pssm_ssdc_tile_)(ut, U + (c0 + r0) * p.u.s[1] + i0 * p.u.s[3],
                                                  p.u.s[1], p.u.s[3], rrows, icols, p.u.vec);
                if (!p.s_trans)
                    PSSM_SSDC_FN(pssm_ssdc_tile_f32_)(vt, S + col0 * N + i0, N, ccols, icols,
                                                      p.vec);
                else
                    PSSM_SSDC_FN(pssm_ssdc_tile_f32_t_)(vt, S + i0 * N + col0, N, icols, ccols,
                                                        p.vec);
                PSSM_SYNC();
                PSSM_UNROLL
                for (int ti = 0; ti < SSDC_TPW; ti++) {
                    const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB;
                    const int tn = tile % SSDC_SUB;
                    PSSM_UNROLL
                    for (int k0 = 0; k0 < SSDC_T; k0 += 16)
                        PSSM_SSDC_MMA(mk[ti], ut + tm * 16 * SSDC_LDS + k0, SSDC_LDS,
                                      vt + tn * 16 * SSDC_LDS + k0, SSDC_LDS);
                }
                PSSM_SYNC();
            }
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tm = (warp * SSDC_TPW + ti) / SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int r = r0 + tm * 16 + pssm_mma_row(lane, i);
                    float sc = 0.0f;
                    if (r < q)
                        sc = causal ? (seg[r] == -1 ? pssm_expf(cs[r]) : 0.0f)
                                    : (seg[r] == seg[e] ? pssm_expf(cs[e] - cs[r]) : 0.0f);
                    if (dt_rows && r < q)
                        sc *= dtp[r];
                    acc[ti][i] += sc * mk[ti][i];
                }
            }
        }

        if (p.mode == PSSM_SSD_PROD_Y || p.mode == PSSM_SSD_PROD_DX) {
            /* the state's share of dcs apart (Y: sum_p dy y_inter; DX: sum_p x dx_inter / dt'),
             * so that no sum of the backward's dt is the difference of two rounded ones */
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int rr = tm * 16 + pssm_mma_row(lane, i);
                    const int cc = tn * 16 + pssm_mma_col(lane, i);
                    const int64_t t = c0 + r0 + rr, col = col0 + cc;
                    float f = 0.0f;
                    if (rr < rrows && cc < ccols) {
                        if (p.mode == PSSM_SSD_PROD_DX) {
                            f = PSSM_SSDC_LD(x[t * p.x_s[1] + col * p.x_s[3]]);
                        } else {
                            f = PSSM_SSDC_LD(((const PSSM_SSDC_ACT *)p.dout)[
                                b * p.dout_s[0] + t * p.dout_s[1] + h * p.dout_s[2] +
                                col * p.dout_s[3]]);
                            if (z) {
                                const float zv = PSSM_SSDC_LD(z[b * p.z_s[0] + t * p.z_s[1] +
                                                                h * p.z_s[2] + col * p.z_s[3]]);
                                f *= zv * pssm_sigmoid_fast(zv);
                            }
                        }
                        f *= acc[ti][i];
                    }
                    rowbuf[rr * SSDC_T + cc] = f;
                }
            }
            PSSM_SSDC_FN(pssm_ssdc_row_sums_)(rowbuf, rrows,
                                              p.mode == PSSM_SSD_PROD_Y ? p.part_y : p.part_v,
                                              (bh * p.coltiles + PSSM_BLOCK_Y) * L + c0 + r0);
        }

        /* the chunk's own tokens: slabs of k up to the diagonal (causal) or from it (anticausal) */
        const int kfirst = causal ? 0 : r0, klast = causal ? r0 : e;
        for (int k0 = kfirst; k0 <= klast; k0 += SSDC_T) {
            const int krows = q - k0 < SSDC_T ? q - k0 : SSDC_T; /* rows k of this slab */
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++)
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    mk[ti][i] = 0.0f;
            for (int64_t i0 = 0; i0 < p.inner; i0 += SSDC_T) {
                const int icols = (int)(p.inner - i0 < SSDC_T ? p.inner - i0 : SSDC_T);
                if (!u_once)
                    PSSM_SSDC_FN(pssm_ssdc_tile_)(ut, U + (c0 + r0) * p.u.s[1] + i0 * p.u.s[3],
                                                  p.u.s[1], p.u.s[3], rrows, icols, p.u.vec);
                PSSM_SSDC_FN(pssm_ssdc_tile_)(vt, V + (c0 + k0) * p.v.s[1] + i0 * p.v.s[3],
                                              p.v.s[1], p.v.s[3], krows, icols, p.v.vec);
                PSSM_SYNC();
                PSSM_UNROLL
                for (int ti = 0; ti < SSDC_TPW; ti++) {
                    const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB;
                    const int tn = tile % SSDC_SUB;
                    PSSM_UNROLL
                    for (int kk = 0; kk < SSDC_T; kk += 16)
                        PSSM_SSDC_MMA(mk[ti], ut + tm * 16 * SSDC_LDS + kk, SSDC_LDS,
                                      vt + tn * 16 * SSDC_LDS + kk, SSDC_LDS);
                }
                PSSM_SYNC();
            }
            /* the weights and the reach mask (a select: exp of a masked pair may overflow) */
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int rr = tm * 16 + pssm_mma_row(lane, i);
                    const int kk = tn * 16 + pssm_mma_col(lane, i);
                    const int r = r0 + rr, k = k0 + kk;
                    float m = 0.0f;
                    if (causal) {
                        if (k <= r && r < q && seg[k] == seg[r])
                            m = mk[ti][i] * pssm_expf(cs[r] - cs[k]) * dtp[k];
                    } else if (r <= k && k < q && seg[k] == seg[r]) {
                        m = mk[ti][i] * pssm_expf(cs[k] - cs[r]) * (dt_rows ? dtp[r] : 1.0f);
                    }
                    ms[rr * SSDC_LDS + kk] = PSSM_SSDC_TO_SMEM(m);
                }
            }
            PSSM_SSDC_FN(pssm_ssdc_tile_t_)(wt, W + (c0 + k0) * p.w.s[1] + col0 * p.w.s[3],
                                            p.w.s[1], p.w.s[3], krows, ccols, p.w.vec);
            PSSM_SYNC();
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int kk = 0; kk < SSDC_T; kk += 16)
                    PSSM_SSDC_MMA(acc[ti], ms + tm * 16 * SSDC_LDS + kk, SSDC_LDS,
                                  wt + tn * 16 * SSDC_LDS + kk, SSDC_LDS);
            }
            PSSM_SYNC();
        }

        PSSM_SYNC(); /* the next head's prep rewrites dtp, cs, seg */
    } /* the heads */

    /* the epilogue of the mode; DX leaves a value per element for the row sums */
    const int rows_summed = p.mode == PSSM_SSD_PROD_DX;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++) {
        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++) {
            const int rr = tm * 16 + pssm_mma_row(lane, i), cc = tn * 16 + pssm_mma_col(lane, i);
            const int64_t t = c0 + r0 + rr, col = col0 + cc;
            const int in = rr < rrows && cc < ccols;
            const float v = acc[ti][i];
            float rowv = 0.0f;
            if (in) {
                const int by_p = p.mode <= PSSM_SSD_PROD_DX; /* the columns are p, not n */
                const float Dv = p.D && by_p ? p.D[h * p.D_s[0] + col * p.D_s[1]] : 0.0f;
                const int64_t zo = b * p.z_s[0] + t * p.z_s[1] + h * p.z_s[2] + col * p.z_s[3];
                if (p.mode == PSSM_SSD_PROD_FWD) {
                    float o = v;
                    if (p.D)
                        o += Dv * PSSM_SSDC_LD(x[t * p.x_s[1] + col * p.x_s[3]]);
                    if (z)
                        o *= pssm_silu_fast(PSSM_SSDC_LD(z[zo]));
                    ((PSSM_SSDC_ACT *)p.out)[b * p.out_s[0] + t * p.out_s[1] + h * p.out_s[2] +
                                             col * p.out_s[3]] = PSSM_SSDC_ST(o);
                } else if (p.mode == PSSM_SSD_PROD_Y) {
                    const float dout = PSSM_SSDC_LD(((const PSSM_SSDC_ACT *)p.dout)[
                        b * p.dout_s[0] + t * p.dout_s[1] + h * p.dout_s[2] + col * p.dout_s[3]]);
                    float dy = dout;
                    if (z) {
                        const float y = v + (p.D ? Dv * PSSM_SSDC_LD(x[t * p.x_s[1] +
                                                                      col * p.x_s[3]])
                                                 : 0.0f);
                        const float zv = PSSM_SSDC_LD(z[zo]), sg = pssm_sigmoid_fast(zv);
                        dy = dout * zv * sg;
                        ((PSSM_SSDC_ACT *)p.dz)[b * p.dz_s[0] + t * p.dz_s[1] + h * p.dz_s[2] +
                                                col * p.dz_s[3]] =
                            PSSM_SSDC_ST(dout * y * sg * (1.0f + zv * (1.0f - sg)));
                        ((PSSM_SSDC_ACT *)p.dy)[b * p.dy_s[0] + t * p.dy_s[1] + h * p.dy_s[2] +
                                                col * p.dy_s[3]] = PSSM_SSDC_ST(dy);
                    }
                } else if (p.mode == PSSM_SSD_PROD_DX) {
                    const float dy = PSSM_SSDC_LD(((const PSSM_SSDC_ACT *)p.dy)[
                        b * p.dy_s[0] + t * p.dy_s[1] + h * p.dy_s[2] + col * p.dy_s[3]]);
                    ((PSSM_SSDC_ACT *)p.dx)[b * p.dx_s[0] + t * p.dx_s[1] + h * p.dx_s[2] +
                                            col * p.dx_s[3]] =
                        PSSM_SSDC_ST(dtp[r0 + rr] * v + Dv * dy);
                    rowv = PSSM_SSDC_LD(x[t * p.x_s[1] + col * p.x_s[3]]) * v;
                } else { /* this slice's heads' share of dB or dC */
                    float *dst = p.mode == PSSM_SSD_PROD_DB ? p.dBh : p.dCh;
                    dst[((b * L + t) * slices + slice) * N + col] = v;
                }
            }
            if (rows_summed)
                rowbuf[rr * SSDC_T + cc] = rowv;
        }
    }
    if (rows_summed)
        PSSM_SSDC_FN(pssm_ssdc_row_sums_)(rowbuf, rrows, p.part_x,
                                          (bh * p.coltiles + PSSM_BLOCK_Y) * L + c0 + r0);
}
#undef SSDC_OPND

/* ---------------------------------------------------------------- 4. the backward's dt
 * Block x = (b, h, c).  Per token j of the chunk, from the partials of the products and the
 * reverse state pass (e: the chunk's last token; W, V as the W and DX products define them):
 *     dcs_j  = sum_p dy_j y_inter,j + sum_s W_js - sum_t W_tj - V_j
 *              (+ sum_i V_i + decay sum_{p,n} dS_e S_in at j = e)
 *     ddt'_j = ddt'_j,direct + A sum_{t >= j} dcs_t   (cs_t = A sum_{i <= t} dt'_i)
 * then through the clamp and the softplus: ddt.  Per chunk: dA's partial sum_j dt'_j
 * sum_{t >= j} dcs_t, ddt_bias's sum_j ddt_j and dD's sum_j dy_j[p] x_j[p]. */
PSSM_KERNEL_BOUNDED(PSSM_SSDC_FN(pssm_ssd_dt_bwd_), pssm_ssd_chunk_params, p, PSSM_SSDC_THREADS)
{
    PSSM_SHARED(float, dtp, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, cs, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(int, seg, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, dcs, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, direct, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, wsum, SSDC_NWARPS);
    PSSM_SHARED(float, wmax, SSDC_NWARPS);
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim;
    const int64_t c = PSSM_BLOCK_X % p.nchunks, bh = PSSM_BLOCK_X / p.nchunks;
    const int64_t b = bh / H, h = bh % H, c0 = c * Q;
    const int q = (int)(L - c0 < Q ? L - c0 : Q);
    PSSM_SSDC_FN(pssm_ssdc_prep_)(p, b, h, c0, q, dtp, cs, seg, wsum, wmax);
    /* V_j = dt'_j sum_p x_j dx_inter,j / dt'_j: the state's pull through exp(cs_e - cs_j) */
    float vsum = 0.0f;
    const int qlast = (q - 1) / (int)SSDC_T; /* the last row tile with blocks of the products */
    for (int j = tid; j < PSSM_SSD_CHUNK_MAX; j += PSSM_SSDC_THREADS) {
        float own = 0.0f, dir = 0.0f, v = 0.0f;
        if (j < q) {
            const int64_t t = c0 + j;
            for (int64_t pt = 0; pt < p.ptiles; pt++) {
                own += p.part_y[(bh * p.ptiles + pt) * L + t];
                v += p.part_v[(bh * p.ptiles + pt) * L + t];
                dir += p.part_x[(bh * p.ptiles + pt) * L + t];
            }
            v *= dtp[j];
            own += p.part_row[bh * L + t] - v;
            for (int tt = j / (int)SSDC_T; tt <= qlast; tt++)
                own -= p.part_col[(bh * p.qtiles + tt) * L + t];
        }
        dcs[j] = own;
        direct[j] = dir;
        vsum += v;
    }
    vsum = pssm_ssd_block_sum(vsum, wsum, SSDC_NWARPS);
    if (tid == 0) { /* the chunk's end: sum_j V_j and the decay's pull */
        float end = vsum;
        for (int64_t k = 0; k < p.eblocks * PSSM_SSD_EWARPS; k++)
            if (k % PSSM_SSD_EWARPS < PSSM_SSD_BLOCK / PSSM_WARP_SIZE) /* warps of 64: fewer */
                end += p.part_e[(bh * p.eblocks * PSSM_SSD_EWARPS + k) * p.nchunks + c];
        dcs[q - 1] += end;
    }
    PSSM_SYNC();
    if (warp == 0) { /* dcs[j] <- sum_{t >= j} dcs[t], by the first warp from the end */
        float carry = 0.0f;
        for (int base = PSSM_SSD_CHUNK_MAX - PSSM_WARP_SIZE; base >= 0; base -= PSSM_WARP_SIZE) {
            const int j = base + PSSM_WARP_SIZE - 1 - lane;
            const float incl = pssm_warp_scan_sum(dcs[j]) + carry;
            dcs[j] = incl;
            carry = PSSM_SHFL_IDX_F32(incl, PSSM_WARP_SIZE - 1);
        }
    }
    PSSM_SYNC();
    const float a = p.A[h * p.A_s];
    const float bias = p.dt_bias ? p.dt_bias[h * p.bias_s] : 0.0f;
    const PSSM_SSDC_ACT *dt = (const PSSM_SSDC_ACT *)p.dt;
    float sum_a = 0.0f, sum_b = 0.0f;
    for (int j = tid; j < q; j += PSSM_SSDC_THREADS) {
        const int64_t t = c0 + j;
        float v = PSSM_SSDC_LD(dt[b * p.dt_s[0] + t * p.dt_s[1] + h * p.dt_s[2]]) + bias;
        float grad = 1.0f;
        if (p.softplus)
            v = pssm_softplus_grad_fast(v, &grad);
        if (p.dt_limit && (v < p.dt_min || v > p.dt_max))
            grad = 0.0f;
        const float d = (direct[j] + a * dcs[j]) * grad;
        ((PSSM_SSDC_ACT *)p.ddt)[b * p.ddt_s[0] + t * p.ddt_s[1] + h * p.ddt_s[2]] =
            PSSM_SSDC_ST(d);
        sum_a += dtp[j] * dcs[j];
        sum_b += d;
    }
    const int64_t at = bh * p.nchunks + c;
    sum_a = pssm_ssd_block_sum(sum_a, wsum, SSDC_NWARPS);
    sum_b = pssm_ssd_block_sum(sum_b, wsum, SSDC_NWARPS);
    if (tid == 0) {
        p.part_A[at] = sum_a;
        p.part_bias[at] = sum_b;
    }
    if (p.part_D) {
        const PSSM_SSDC_ACT *x = (const PSSM_SSDC_ACT *)p.x + b * p.x_s[0] + h * p.x_s[2];
        const PSSM_SSDC_ACT *dy = (const PSSM_SSDC_ACT *)p.dy + b * p.dy_s[0] + h * p.dy_s[2];
        for (int64_t pp = tid; pp < P; pp += PSSM_SSDC_THREADS) {
            float s = 0.0f;
            for (int j = 0; j < q; j++)
                s += PSSM_SSDC_LD(dy[(c0 + j) * p.dy_s[1] + pp * p.dy_s[3]]) *
                     PSSM_SSDC_LD(x[(c0 + j) * p.x_s[1] + pp * p.x_s[3]]);
            p.part_D[at * P + pp] = s;
        }
    }
}

#undef PSSM_SSDC_PROD_MIN_BLOCKS
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
