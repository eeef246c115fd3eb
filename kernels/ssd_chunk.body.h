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
 *    and decay_c = seg_e == -1 ? exp(cs_e) : 0, into the workspace, and the chunk's dt', cs and
 *    seg (p.prep), which every later kernel reads instead of forming them.  Its varlen pass (p.cu
 * set, after 2.) does the same at the last token of each packed sequence plus the share of the
 *    state entering that chunk: the sequence's final state.  Its gradient form (grad_state)
 *    gives the backward's G_c = sum_{seg_j == -1} exp(cs_j) dy_j C_j^T; its prep_only form
 *    the prep and decay alone (a backward given the forward's checkpoints).
 * 2. pssm_ssd_state_pass (ssd_kernels.h): per (b, h, p, n), sequentially over the chunks,
 *    S_in(c+1) = decay_c S_in(c) + S_c, S_in(0) = the initial state; S_in(c) replaces S_c.
 *    pssm_ssd_state_pass_bwd runs it backwards over the G_c: the gradient at each chunk's end.
 * 1'. chunk_cb: M = C Bᵀ of each chunk, per row and group, in f32 (p.cb, where a group has
 *    several heads; B Cᵀ mirrored above the diagonal), which the products of every head of the
 *    group read.
 * 3. chunk_prod (ssd_prod.body.h): rows t of one tile of a chunk, columns p of one tile, in the
 *    forward (its own stamp, chunk_out):
 *        y_t[p] = [seg_t == -1] exp(cs_t) sum_n C_t[n] S_in[p][n]
 *               + sum_{s reaches t} (C_t . B_s) exp(cs_t - cs_s) dt'_s x_s[p]   (M = C Bᵀ masked,
 *               + D x_t[p],   out = z ? y silu(z) : y                            then M X)
 *    and the backward's products of the same form (dz, dx, dB, dC, and dcs's parts; the table
 *    at the kernel); the forward's outputs with M in registers (ssd_out.body.h); dB and dC with
 *    the heads pipelined (ssd_dbc.body.h).
 * 3'. chunk_dcb (ssd_dcb.body.h): the backward's gradient of C Bᵀ per slice of a group's heads
 *    and the intra-chunk share of dcs, from dy xᵀ per head.
 * 4. dt_bwd: the backward's ddt from dcs (the gradient of cs), and the per-chunk partial sums of
 *    dA, ddt_bias and dD, which the reduce kernel adds in a fixed order.
 * Every product runs on the dialect's warp-level multiply (pssm_mma.h, the tile form: either
 * operand in either orientation) over shared tiles copied as the tensors lie; the tiles of a
 * block's (T x T) result are split evenly over its warps.  Offsets into the tensors are 64-bit;
 * positions inside a chunk are int.
 */
#define PSSM_SSDC_CAT_(a, b) a##b
#define PSSM_SSDC_CAT(a, b) PSSM_SSDC_CAT_(a, b)
#define PSSM_SSDC_FN(name) PSSM_SSDC_CAT(name, PSSM_SSDC_DT)

#define SSDC_T PSSM_SSDC_TILE
#define SSDC_LDS (SSDC_T + 8)  /* row pitch of the shared tiles: even, and off the bank period */
#define SSDC_SUB (SSDC_T / 16) /* 16x16 sub-tiles per tile edge */
#define SSDC_NWARPS (PSSM_SSDC_THREADS / PSSM_WARP_SIZE)
#define SSDC_TPW (SSDC_SUB * SSDC_SUB / SSDC_NWARPS) /* sub-tiles per warp */
/* 32-bit words of one shared tile (declared as words: the 16-bit multiply loads pairs), and
 * its 16-byte vectors (the output kernel's tiles, filled by vector stores) */
#define SSDC_TILE_WORDS (SSDC_T * SSDC_LDS * (int)sizeof(PSSM_SSDC_SMEM) / 4)
#define SSDC_TILE_VECS (SSDC_TILE_WORDS / 4)
/* Vector tile loads (p.vec): 16 bytes = SSDC_VEC activations or 4 floats along the contiguous
 * dimension; the host checked contiguity, alignment and that P and N are multiples of it. */
#define SSDC_VEC (16 / (int)sizeof(PSSM_SSDC_ACT))
#define SSDC_VITERS (SSDC_T * SSDC_T / SSDC_VEC / PSSM_SSDC_THREADS)
#define SSDC_FITERS (SSDC_T * SSDC_T / 4 / PSSM_SSDC_THREADS)
/* The products' row sums (pssm_ssdc_row_sums_): the row buffer's pitch in floats (odd: a
 * column of it spans the banks) and the threads that share a row */
#define SSDC_RBP (SSDC_T + 1)
#define SSDC_RQ (PSSM_SSDC_THREADS / SSDC_T)

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

/* The chunk's dt', cs and seg as the chunk states' forward form left them in p.prep (the
 * values pssm_ssdc_prep_ computes, for positions below Q; the rest are never read): 16-byte
 * loads of the three rows, cs times cs_scale (1, or log2(e) for exp2 of differences).  _by_: a
 * block of nthreads, no barrier; prep_load_: the products' blocks, ending with a barrier. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_prep_load_by_)(const pssm_ssd_chunk_params p, int64_t bh,
                                                       int64_t c, float *dtp, float *cs, int *seg,
                                                       float cs_scale, int nthreads)
{
    const int Q = (int)p.chunk;
    const pssm_vec16 *src = (const pssm_vec16 *)(p.prep + (bh * p.nchunks + c) * 3 * Q);
    for (int v = PSSM_TID; v < Q / 4; v += nthreads) {
        const pssm_vec16 a = src[v], d = src[Q / 4 + v], g = src[Q / 2 + v];
        PSSM_UNROLL
        for (int k = 0; k < 4; k++) {
            dtp[4 * v + k] = pssm_as_float(a.w[k]);
            cs[4 * v + k] = pssm_as_float(d.w[k]) * cs_scale;
            seg[4 * v + k] = (int)g.w[k];
        }
    }
}

PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_prep_load_)(const pssm_ssd_chunk_params p, int64_t bh,
                                                    int64_t c, float *dtp, float *cs, int *seg)
{
    PSSM_SSDC_FN(pssm_ssdc_prep_load_by_)(p, bh, c, dtp, cs, seg, 1.0f, PSSM_SSDC_THREADS);
    PSSM_SYNC();
}

/* ---------------------------------------------------------------- tile loads
 * A T x T tile of rows r < rows and columns c < cols (zero elsewhere) of an activation tensor
 * whose element (r, c) is src[r * rs + c * cs], copied as it lies into dst[r][c] (pitch
 * SSDC_LDS: the products read either orientation, pssm_mma16t_*), each row scaled by rw[r]
 * where rw is given (NULL: copied raw).  With vec, 16-byte loads along c (cs = 1): fetch_
 * issues a thread's SSDC_VITERS loads into registers and put_ stores them, so that a kernel can
 * issue the next tile's loads before the current tile's products; else tile_'s element loop.
 * Every thread of the block calls them. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_fetch_)(pssm_vec16 *w, const PSSM_SSDC_ACT *src, int64_t rs,
                                                int rows, int cols)
{
    const int tid = PSSM_TID;
    PSSM_UNROLL
    for (int it = 0; it < SSDC_VITERS; it++) {
        const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / SSDC_VEC);
        const int c = v % (SSDC_T / SSDC_VEC) * SSDC_VEC;
        w[it].w[0] = w[it].w[1] = w[it].w[2] = w[it].w[3] = 0u;
        if (r < rows && c < cols)
            w[it] = *(const pssm_vec16 *)(src + r * rs + c);
    }
}

PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_put_)(PSSM_SSDC_SMEM *dst, const pssm_vec16 *w,
                                              const float *rw)
{
    const int tid = PSSM_TID;
    PSSM_UNROLL
    for (int it = 0; it < SSDC_VITERS; it++) {
        const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / SSDC_VEC);
        const int c = v % (SSDC_T / SSDC_VEC) * SSDC_VEC;
        pssm_vec16 o = w[it];
        if (rw) {
            PSSM_SSDC_ACT e[SSDC_VEC];
            __builtin_memcpy(e, &o, 16);
            const float sc = rw[r];
            PSSM_UNROLL
            for (int k = 0; k < SSDC_VEC; k++)
                e[k] = PSSM_SSDC_TO_SMEM(PSSM_SSDC_LD(e[k]) * sc);
            __builtin_memcpy(&o, e, 16);
        }
        *(pssm_vec16 *)(dst + r * SSDC_LDS + c) = o;
    }
}

/* Each row r of a shared tile (pitch SSDC_LDS, vector-wide columns) times rw[r], in place,
 * rounded once to the operand type as put_ does it.  Every thread of the block calls it. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_weigh_rows_)(PSSM_SSDC_SMEM *dst, const float *rw)
{
    const int tid = PSSM_TID;
    PSSM_UNROLL
    for (int it = 0; it < SSDC_VITERS; it++) {
        const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / SSDC_VEC);
        const int c = v % (SSDC_T / SSDC_VEC) * SSDC_VEC;
        pssm_vec16 *const at = (pssm_vec16 *)(dst + r * SSDC_LDS + c);
        pssm_vec16 o = *at;
        PSSM_SSDC_ACT e[SSDC_VEC];
        __builtin_memcpy(e, &o, 16);
        const float sc = rw[r];
        PSSM_UNROLL
        for (int k = 0; k < SSDC_VEC; k++)
            e[k] = PSSM_SSDC_TO_SMEM(PSSM_SSDC_LD(e[k]) * sc);
        __builtin_memcpy(&o, e, 16);
        *at = o;
    }
}

/* The same as fetch_ then put_ (no row weights) by asynchronous copies (pssm_copy_async16): no
 * registers hold the tile while it loads; PSSM_COPY_WAIT_ALL() and a barrier before it is read.
 * _by_: by a block of nthreads (a constant) instead of PSSM_SSDC_THREADS; whole (a constant):
 * a whole tile by its own loop, without the predicates.  That loop paid only in the forward's
 * output kernel (228 -> 214 us, its spills 64 -> 16 bytes); the chunk states and the backward's
 * products were 2-8% slower with it (H200 run 64: their copies, behind a branch, no longer
 * interleave with the products' code). */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(PSSM_SSDC_SMEM *dst,
                                                        const PSSM_SSDC_ACT *src, int64_t rs,
                                                        int rows, int cols, int nthreads,
                                                        int whole)
{
    /* the thread's first row and its column, then a row step per iteration: one 64-bit add
     * per copy (the index form multiplied 64-bit per copy: 19% of the output kernel's
     * instructions, run 54), the destination a shared address plus a constant (converted per
     * copy, with the predicates and selects, ~13 instructions a copy, run 61) */
    const int r0 = PSSM_TID / (SSDC_T / SSDC_VEC), c = PSSM_TID % (SSDC_T / SSDC_VEC) * SSDC_VEC;
    const int rstep = nthreads / (SSDC_T / SSDC_VEC);
    const PSSM_SSDC_ACT *at = src + r0 * rs + c;
    const int64_t step = rstep * rs;
    const pssm_saddr d = pssm_saddr_of(dst + r0 * SSDC_LDS + c);
    const int dstep = rstep * SSDC_LDS * (int)sizeof(PSSM_SSDC_SMEM);
    if (whole && rows >= SSDC_T && cols >= SSDC_T) {
        PSSM_UNROLL
        for (int it = 0; it < SSDC_T * SSDC_T / SSDC_VEC / nthreads; it++, at += step)
            pssm_copy_async16_full(PSSM_SADDR_ADD(d, it * dstep), at);
        return;
    }
    const int cin = c < cols;
    PSSM_UNROLL
    for (int it = 0; it < SSDC_T * SSDC_T / SSDC_VEC / nthreads; it++, at += step) {
        const int full = cin & (r0 + it * rstep < rows);
        pssm_copy_async16_at(PSSM_SADDR_ADD(d, it * dstep), full ? at : src, full);
    }
}

PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_copy_async_)(PSSM_SSDC_SMEM *dst, const PSSM_SSDC_ACT *src,
                                                     int64_t rs, int rows, int cols)
{
    PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(dst, src, rs, rows, cols, PSSM_SSDC_THREADS, 0);
}

PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_tile_)(PSSM_SSDC_SMEM *dst, const PSSM_SSDC_ACT *src,
                                               int64_t rs, int64_t cs, int rows, int cols, int vec,
                                               const float *rw)
{
    const int tid = PSSM_TID;
    if (vec) {
        pssm_vec16 w[SSDC_VITERS];
        PSSM_SSDC_FN(pssm_ssdc_fetch_)(w, src, rs, rows, cols);
        PSSM_SSDC_FN(pssm_ssdc_put_)(dst, w, rw);
        return;
    }
    for (int i = tid; i < SSDC_T * SSDC_T; i += PSSM_SSDC_THREADS) {
        const int r = i / SSDC_T, c = i % SSDC_T;
        PSSM_SSDC_ACT v = r < rows && c < cols ? src[r * rs + c * cs] : (PSSM_SSDC_ACT)0;
        if (rw)
            v = PSSM_SSDC_TO_SMEM(PSSM_SSDC_LD(v) * rw[r]);
        dst[r * SSDC_LDS + c] = v;
    }
}

/* The reverse of tile_ with vec: rows r < rows, columns c < cols of a shared tile (pitch
 * SSDC_LDS) into dst[r * rs + c] by 16-byte stores (cs = 1, 16-byte aligned rows, cols whole
 * vectors); _by_: by a block of nthreads. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_store_by_)(PSSM_SSDC_ACT *dst, int64_t rs,
                                                   const PSSM_SSDC_SMEM *src, int rows, int cols,
                                                   int nthreads)
{
    const int r0 = PSSM_TID / (SSDC_T / SSDC_VEC), c = PSSM_TID % (SSDC_T / SSDC_VEC) * SSDC_VEC;
    const int rstep = nthreads / (SSDC_T / SSDC_VEC);
    PSSM_SSDC_ACT *at = dst + r0 * rs + c; /* (as copy_async_by_) */
    const int64_t step = rstep * rs;
    PSSM_UNROLL
    for (int it = 0; it < SSDC_T * SSDC_T / SSDC_VEC / nthreads; it++, at += step) {
        const int r = r0 + it * rstep;
        if (r < rows && c < cols)
            *(pssm_vec16 *)at = *(const pssm_vec16 *)(src + r * SSDC_LDS + c);
    }
}

PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_store_)(PSSM_SSDC_ACT *dst, int64_t rs,
                                                const PSSM_SSDC_SMEM *src, int rows, int cols)
{
    PSSM_SSDC_FN(pssm_ssdc_store_by_)(dst, rs, src, rows, cols, PSSM_SSDC_THREADS);
}

/* Two adjacent operands of a shared tile (dst 4-byte aligned: an even column of a tile with
 * an even pitch) stored, or loaded, at once: where the accumulator holds pairs of adjacent
 * columns (PSSM_MMA_PAIRS), one 32-bit access instead of two 16-bit ones. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_put2_)(PSSM_SSDC_SMEM *dst, float a, float b)
{
    if (sizeof(PSSM_SSDC_SMEM) == 4) {
        dst[0] = PSSM_SSDC_TO_SMEM(a), dst[1] = PSSM_SSDC_TO_SMEM(b);
    } else {
        *(pssm_u32a *)dst = PSSM_SSDC_TO_SMEM2(a, b);
    }
}

PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_get2_)(const PSSM_SSDC_SMEM *src, float *a, float *b)
{
    if (sizeof(PSSM_SSDC_SMEM) == 4) {
        *a = PSSM_SSDC_LD(src[0]), *b = PSSM_SSDC_LD(src[1]);
    } else {
        const uint32_t u = *(const pssm_u32a *)src;
        *a = PSSM_SSDC_LD((PSSM_SSDC_ACT)(u & 0xffffu));
        *b = PSSM_SSDC_LD((PSSM_SSDC_ACT)(u >> 16));
    }
}

/* The forward's outputs of one accumulator pair (o0, o1: columns cc, cc + 1 where the
 * arrangement pairs them, else o0 alone) at offset `at` of the shared tiles: + D x (x from xt,
 * dcol: D of the tile's columns, 0 past them), rounded into yt where has_y (y before the gate),
 * times silu(z) (z from zt where has_z), rounded into ot (which may be zt: each pair is read
 * and written by one thread).  The options are flags, not null pointers, so that a caller
 * passing constants gets a branch-free pair (nvcc cannot prove a shared pointer non-null). */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_out_pair_)(float o0, float o1, int at, int cc,
                                                   const PSSM_SSDC_SMEM *xt, const float *dcol,
                                                   int has_d, int has_z, const PSSM_SSDC_SMEM *zt,
                                                   PSSM_SSDC_SMEM *ot, int has_y,
                                                   PSSM_SSDC_SMEM *yt)
{
    float x0, x1, z0, z1;
    if (PSSM_MMA_PAIRS)
        PSSM_SSDC_FN(pssm_ssdc_get2_)(xt + at, &x0, &x1);
    else
        x0 = x1 = PSSM_SSDC_LD(xt[at]);
    if (has_d) {
        o0 += dcol[cc] * x0;
        if (PSSM_MMA_PAIRS)
            o1 += dcol[cc + 1] * x1;
    }
    if (has_y) {
        if (PSSM_MMA_PAIRS)
            PSSM_SSDC_FN(pssm_ssdc_put2_)(yt + at, o0, o1);
        else
            yt[at] = PSSM_SSDC_TO_SMEM(o0);
    }
    if (has_z) {
        if (PSSM_MMA_PAIRS)
            PSSM_SSDC_FN(pssm_ssdc_get2_)(zt + at, &z0, &z1);
        else
            z0 = z1 = PSSM_SSDC_LD(zt[at]);
        o0 *= pssm_silu_fast(z0);
        o1 *= pssm_silu_fast(z1);
    }
    if (PSSM_MMA_PAIRS)
        PSSM_SSDC_FN(pssm_ssdc_put2_)(ot + at, o0, o1);
    else
        ot[at] = PSSM_SSDC_TO_SMEM(o0);
}

/* The backward's Y epilogue of one accumulator pair (as pssm_ssdc_out_pair_): y = acc + D x,
 * dout from dt and z from zt at offset `at`; dy = dout z sigmoid(z) over dout, dz = dout y
 * sigmoid(z) (1 + z (1 - sigmoid(z))) into dzt (which may be zt: each pair is read and written
 * by one thread). */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_dz_pair_)(float y0, float y1, int at, int cc,
                                                  const PSSM_SSDC_SMEM *xt, const float *dcol,
                                                  int has_d, PSSM_SSDC_SMEM *dt,
                                                  const PSSM_SSDC_SMEM *zt, PSSM_SSDC_SMEM *dzt)
{
    float y[2] = {y0, y1}, xv[2], dv[2], zv[2], dy[2], dz[2];
    if (PSSM_MMA_PAIRS) {
        PSSM_SSDC_FN(pssm_ssdc_get2_)(xt + at, &xv[0], &xv[1]);
        PSSM_SSDC_FN(pssm_ssdc_get2_)(dt + at, &dv[0], &dv[1]);
        PSSM_SSDC_FN(pssm_ssdc_get2_)(zt + at, &zv[0], &zv[1]);
    } else {
        xv[0] = xv[1] = PSSM_SSDC_LD(xt[at]);
        dv[0] = dv[1] = PSSM_SSDC_LD(dt[at]);
        zv[0] = zv[1] = PSSM_SSDC_LD(zt[at]);
    }
    PSSM_UNROLL
    for (int k = 0; k < 2; k++) {
        if (has_d) /* (dcol is 0 past the tile's columns) */
            y[k] += dcol[cc + (PSSM_MMA_PAIRS ? k : 0)] * xv[k];
        const float sg = pssm_sigmoid_fast(zv[k]);
        dy[k] = dv[k] * zv[k] * sg;
        dz[k] = dv[k] * y[k] * sg * (1.0f + zv[k] * (1.0f - sg));
    }
    if (PSSM_MMA_PAIRS) {
        PSSM_SSDC_FN(pssm_ssdc_put2_)(dt + at, dy[0], dy[1]);
        PSSM_SSDC_FN(pssm_ssdc_put2_)(dzt + at, dz[0], dz[1]);
    } else {
        dt[at] = PSSM_SSDC_TO_SMEM(dy[0]);
        dzt[at] = PSSM_SSDC_TO_SMEM(dz[0]);
    }
}

/* The kernels with M in registers (ssd_out.body.h, ssd_dxr.body.h), by blocks of nthreads:
 * slab `slab` of n of their state product in flight, U's rows (rows x the slab's columns of
 * u, row stride urs) into ut and the state's rows p (cols rows of s, stride n) into st, as they
 * lie, then a commit. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdr_state_copy_)(PSSM_SSDC_SMEM *ut, PSSM_SSDC_SMEM *st,
                                                     const PSSM_SSDC_ACT *u, int64_t urs,
                                                     const PSSM_SSDC_ACT *s, int64_t n, int slab,
                                                     int rows, int cols, int nthreads)
{
    const int64_t i0 = (int64_t)slab * SSDC_T;
    const int icols = (int)(n - i0 < SSDC_T ? n - i0 : SSDC_T);
    PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(ut, u + i0, urs, rows, icols, nthreads, 1);
    PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(st, s + i0, n, cols, icols, nthreads, 1);
    PSSM_COPY_COMMIT();
}

/* ... and one 16 x 16 step of the chunk's f32 C B^T (pitch qi) at columns kb.. of a warp's rows
 * (mrows: the first), into mbj in the accumulator's arrangement (pairs by 8-byte loads). */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdr_cb_load_)(float *mbj, const float *mrows, int qi, int kb)
{
    const int lane = PSSM_LANE;
    PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {
        const float *const at = mrows + (pssm_mma_row(lane, i) * qi + kb + pssm_mma_col(lane, i));
        if (PSSM_MMA_PAIRS) {
            const pssm_f32x2 v = *(const pssm_f32x2 *)at;
            mbj[i] = v.v[0], mbj[i + PSSM_MMA_PAIRS] = v.v[1];
        } else {
            mbj[i] = *at;
        }
    }
}

/* The row sums of a warp's 16 rows (the kernels with M in registers: a warp holds whole rows),
 * from part[i], each lane's sum over its columns of value i's row: through rs, a warp-private
 * 16 x 17 float scratch in shared memory (a bijection of (lane, i) onto the 16 x 16 positions,
 * whatever the arrangement), then lane r < rows adds row r's 16 in a fixed order into dst[r].
 * Every lane of the warp calls it. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_warp_row_sums_)(const float *part, float *rs, int rows,
                                                        float *dst)
{
    const int lane = PSSM_LANE;
    PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i++)
        rs[pssm_mma_row(lane, i) * 17 + pssm_mma_col(lane, i)] = part[i];
    PSSM_SYNC_WARP();
    if (lane < 16 && lane < rows) {
        float t = 0.0f;
        for (int cc = 0; cc < 16; cc++)
            t += rs[lane * 17 + cc];
        dst[lane] = t;
    }
}

/* An f32 tile of rows r < rows, columns c < cols (whole 4-float vectors) of src[r * rs + c]
 * copied asynchronously into dst[r][c] (pitch SSDC_T + 4 floats; zeros elsewhere), and such a
 * staged tile converted into an operand tile (pitch SSDC_LDS) as tile_f32_ converts: the
 * state's tile in flight with other loads instead of after them. */
#define SSDC_F32P (SSDC_T + 4)
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_copy_f32_async_)(float *dst, const float *src, int64_t rs,
                                                         int rows, int cols)
{
    /* (as copy_async_by_: a row step per copy, the destination converted once) */
    const int r0 = PSSM_TID / (SSDC_T / 4), c = PSSM_TID % (SSDC_T / 4) * 4;
    const int rstep = PSSM_SSDC_THREADS / (SSDC_T / 4), cin = c < cols;
    const float *at = src + r0 * rs + c;
    const int64_t step = rstep * rs;
    const pssm_saddr d = pssm_saddr_of(dst + r0 * SSDC_F32P + c);
    PSSM_UNROLL
    for (int it = 0; it < SSDC_FITERS; it++, at += step) {
        const int full = cin & (r0 + it * rstep < rows);
        pssm_copy_async16_at(PSSM_SADDR_ADD(d, it * rstep * SSDC_F32P * 4), full ? at : src, full);
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
        for (int it = 0; it < SSDC_FITERS; it++) { /* 4 operands: 8 bytes (16-bit), 16 (f32) */
            const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / 4);
            const int c = v % (SSDC_T / 4) * 4;
            PSSM_SSDC_SMEM *const at = dst + r * SSDC_LDS + c;
            if (sizeof(PSSM_SSDC_SMEM) == 4) {
                *(pssm_vec16 *)at = w[it];
            } else {
                pssm_f32x2 two;
                const uint32_t lo =
                    PSSM_SSDC_TO_SMEM2(pssm_as_float(w[it].w[0]), pssm_as_float(w[it].w[1]));
                const uint32_t hi =
                    PSSM_SSDC_TO_SMEM2(pssm_as_float(w[it].w[2]), pssm_as_float(w[it].w[3]));
                __builtin_memcpy(&two.v[0], &lo, 4);
                __builtin_memcpy(&two.v[1], &hi, 4);
                *(pssm_f32x2 *)at = two;
            }
        }
        return;
    }
    for (int i = tid; i < SSDC_T * SSDC_T; i += PSSM_SSDC_THREADS) {
        const int r = i / SSDC_T, c = i % SSDC_T;
        dst[r * SSDC_LDS + c] = PSSM_SSDC_TO_SMEM(r < rows && c < cols ? src[r * rs + c] : 0.0f);
    }
}

PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_f32_put_)(PSSM_SSDC_SMEM *dst, const float *src)
{
    const int tid = PSSM_TID;
    PSSM_UNROLL
    for (int it = 0; it < SSDC_FITERS; it++) { /* 4 operands: 8 bytes (16-bit), 16 (f32) */
        const int v = it * PSSM_SSDC_THREADS + tid, r = v / (SSDC_T / 4);
        const int c = v % (SSDC_T / 4) * 4;
        const pssm_vec16 w = *(const pssm_vec16 *)(src + r * SSDC_F32P + c);
        PSSM_SSDC_SMEM *const at = dst + r * SSDC_LDS + c;
        if (sizeof(PSSM_SSDC_SMEM) == 4) {
            *(pssm_vec16 *)at = w;
        } else {
            pssm_f32x2 two;
            const uint32_t lo = PSSM_SSDC_TO_SMEM2(pssm_as_float(w.w[0]), pssm_as_float(w.w[1]));
            const uint32_t hi = PSSM_SSDC_TO_SMEM2(pssm_as_float(w.w[2]), pssm_as_float(w.w[3]));
            __builtin_memcpy(&two.v[0], &lo, 4);
            __builtin_memcpy(&two.v[1], &hi, 4);
            *(pssm_f32x2 *)at = two;
        }
    }
}

/* acc += A B over one slab of T along k, each warp on its SSDC_TPW sub-tiles (tm, tn) of the
 * block's T x T result: A's rows are the result's rows, stored a[m][k] (at = 0) or a[k][m]
 * (at = 1); B's columns are its columns, stored b[n][k] (bt = 0) or b[k][n] (bt = 1), both
 * shared tiles of pitch SSDC_LDS. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(float (*acc)[PSSM_MMA_ACC],
                                                   const PSSM_SSDC_SMEM *a, int at,
                                                   const PSSM_SSDC_SMEM *b, int bt)
{
    const int warp = PSSM_WARP_ID;
    if (SSDC_SUB % SSDC_TPW == 0) { /* the warp's sub-tiles in one row: one strip */
        const int tile = warp * SSDC_TPW, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        PSSM_SSDC_MMAS(acc, SSDC_TPW, SSDC_T / 16, at ? a + tm * 16 : a + tm * 16 * SSDC_LDS,
                       SSDC_LDS, at, bt ? b + tn * 16 : b + tn * 16 * SSDC_LDS, SSDC_LDS, bt);
    } else {
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            const PSSM_SSDC_SMEM *const ar = at ? a + tm * 16 : a + tm * 16 * SSDC_LDS;
            const PSSM_SSDC_SMEM *const bc = bt ? b + tn * 16 : b + tn * 16 * SSDC_LDS;
            PSSM_UNROLL
            for (int kk = 0; kk < SSDC_T; kk += 16)
                PSSM_SSDC_MMA(acc[ti], at ? ar + kk * SSDC_LDS : ar + kk, SSDC_LDS, at,
                              bt ? bc + kk * SSDC_LDS : bc + kk, SSDC_LDS, bt);
        }
    }
}

/* An activation operand's base at row b and head hh (its group gg where grouped). */
#define SSDC_OPND(o, hh, gg)                                                                       \
    ((const PSSM_SSDC_ACT *)(o).ptr + b * (o).s[0] + ((o).grouped ? (gg) : (hh)) * (o).s[2])

/* ---------------------------------------------------------------- 1. chunk states
 * Block x = ((b, h, c), tile of P) with the tiles innermost (the blocks that read one chunk's
 * x run together); the varlen pass: ((sequence k, h), tile of P).  Each block walks the tiles
 * of N with the chunk's prep and weights made once (they were half of a block's instructions
 * with one tile of N per block, run 35).  The operands
 * are the products' W (x, or dy in the gradient form) and V (B, or C), both copied as they lie
 * (token-major) and multiplied transposed; each slab's loads are issued before the previous
 * slab's products. */
/* Two blocks of 256 threads (four of 128) per SM, at most 128 registers: the accumulators of
 * two tiles of N (SSDC_SNG) do not fit the 85 of three blocks (112 bytes of spills).  (Three
 * blocks had paid while each block weighed x once per tile of N.) */
#define PSSM_SSDC_STATE_MIN_BLOCKS (768 / PSSM_SSDC_THREADS)
#ifndef PSSM_SSDC_STATE_SNG /* (a build may set it, to compare) */
#define PSSM_SSDC_STATE_SNG 2
#endif
#define SSDC_SNG PSSM_SSDC_STATE_SNG /* tiles of N per pass over the chunk's slabs */
PSSM_KERNEL_BOUNDED_MIN(PSSM_SSDC_FN(pssm_ssd_chunk_state_), pssm_ssd_chunk_params, p,
                        PSSM_SSDC_THREADS, PSSM_SSDC_STATE_MIN_BLOCKS)
{
    PSSM_SHARED(float, dtp, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, cs, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, w, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(int, seg, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, wsum, SSDC_NWARPS);
    PSSM_SHARED(float, wmax, SSDC_NWARPS);
    PSSM_SHARED(pssm_vec16, tiles_w, 4 * SSDC_TILE_VECS);
    /* xs[j][p] = w_j x_j[p], bs[j][n] = B_j[n]; with vec, two of each, slabs alternating */
    PSSM_SSDC_SMEM *xs = (PSSM_SSDC_SMEM *)tiles_w;
    PSSM_SSDC_SMEM *bs = (PSSM_SSDC_SMEM *)(tiles_w + SSDC_TILE_VECS);
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    /* 32-bit division: the grid's x is below 2^31 (a 64-bit division is a subroutine; run 35:
     * 2.4% fewer instructions, 3% less time) */
    const uint32_t bx = (uint32_t)PSSM_BLOCK_X, tiles = (uint32_t)p.ptiles;
    const uint32_t stile = bx % tiles, unit = bx / tiles, H32 = (uint32_t)H;
    int64_t b, h, c, last, k = -1;
    if (!p.cu) { /* unit = (b, h, c) */
        c = unit % (uint32_t)p.nchunks;
        const uint32_t bh = unit / (uint32_t)p.nchunks;
        b = bh / H32, h = bh % H32;
        last = (c + 1) * Q < L ? (c + 1) * Q - 1 : L - 1;
    } else { /* the varlen pass: unit = (sequence k, h) of the one packed row */
        k = unit / H32, h = unit % H32, b = 0;
        const int64_t lo = pssm_ssd_offset_of(p.cu, p.cu_s, k, L);
        const int64_t hi = pssm_ssd_offset_of(p.cu, p.cu_s, k + 1, L);
        if (hi <= lo)
            return; /* empty: pssm_ssd_varlen_empty wrote its start state */
        last = hi - 1;
        c = last / Q;
    }
    const int64_t c0 = c * Q, g = (uint32_t)h / (uint32_t)p.hpg;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), e = (int)(last - c0);
    const int64_t p0 = (int64_t)stile * SSDC_T;
    const int64_t xrs = p.w.s[1], brs = p.v.s[1];
    const PSSM_SSDC_ACT *x = SSDC_OPND(p.w, h, g) + c0 * xrs + p0 * p.w.s[3];
    const PSSM_SSDC_ACT *B0 = SSDC_OPND(p.v, h, g) + c0 * brs; /* tile nt: + nt T columns */
    const int pcols = (int)(P - p0 < SSDC_T ? P - p0 : SSDC_T);
    const int vec = p.w.vec && p.v.vec;
    /* vec: the slabs' tiles by asynchronous copies, the stream's next (this slab's next tile of N,
     * or the next slab's x and first tile) in flight during this tile's weights and product, in the
     * other buffer of each pair; x's rows weighted in shared memory once they land (through
     * registers, with the next slab fetched during the product only, each slab waited ~1000 cycles,
     * and the kernel spilled: run 46, 138 us a launch).  The first slab's copies fly during the
     * prep. */
    PSSM_SSDC_SMEM *xo = (PSSM_SSDC_SMEM *)(tiles_w + 2 * SSDC_TILE_VECS); /* the other two */
    PSSM_SSDC_SMEM *bo = (PSSM_SSDC_SMEM *)(tiles_w + 3 * SSDC_TILE_VECS);
    if (vec && !p.prep_only) {
        PSSM_SSDC_FN(pssm_ssdc_copy_async_)(xs, x, xrs, e + 1, pcols);
        PSSM_SSDC_FN(pssm_ssdc_copy_async_)(bs, B0, brs, e + 1, (int)(N < SSDC_T ? N : SSDC_T));
        PSSM_COPY_COMMIT();
    }
    PSSM_SSDC_FN(pssm_ssdc_prep_)(p, b, h, c0, q, dtp, cs, seg, wsum, wmax);
    if (!p.cu && !p.grad_state && stile == 0) { /* for the products and the backward's dt */
        float *dst = p.prep + (int64_t)unit * 3 * Q;
        for (int j = tid; j < Q; j += PSSM_SSDC_THREADS) {
            dst[j] = dtp[j];
            dst[Q + j] = cs[j];
            ((int32_t *)dst)[2 * Q + j] = seg[j];
        }
    }
    for (int j = tid; j < PSSM_SSD_CHUNK_MAX; j += PSSM_SSDC_THREADS)
        if (!p.grad_state) /* the chunk's own state at e */
            w[j] = j <= e && seg[j] == seg[e] ? pssm_expf(cs[e] - cs[j]) * dtp[j] : 0.0f;
        else /* the tokens the entering state reaches: d S_in += exp(cs_j) dy_j C_j^T */
            w[j] = j < q && seg[j] == -1 ? pssm_expf(cs[j]) : 0.0f;
    PSSM_SYNC();

    const int64_t PN = P * N;
    const float carry = seg[e] == -1 ? pssm_expf(cs[e]) : 0.0f;
    const int64_t chunk_at = (b * H + h) * p.nchunks + c;
    if (!p.cu && !p.grad_state && tid == 0 && stile == 0)
        p.decay[chunk_at] = carry;
    if (p.prep_only) /* (uniform: every thread leaves) */
        return;
    /* The tiles of N in groups of SSDC_SNG, each group's slabs in turn, each slab's x weighted
     * once for the group's tiles: the copies stream as (slab, tile of the group), x with the
     * group's first tile (one tile of N at a time weighed and copied x once per tile: 16% of
     * the kernel's instructions were the weights, run 61). */
    for (int ng = 0; ng < p.ntiles; ng += SSDC_SNG) {
        const int nin = p.ntiles - ng < SSDC_SNG ? p.ntiles - ng : SSDC_SNG;
        float acc[SSDC_SNG][SSDC_TPW][PSSM_MMA_ACC];
        PSSM_UNROLL
        for (int t = 0; t < SSDC_SNG; t++)
            PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++)
            PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            acc[t][ti][i] = 0.0f;
        for (int j0 = 0; j0 <= e; j0 += SSDC_T) {
            const int jlast = j0 + SSDC_T > e;
            PSSM_UNROLL
            for (int t = 0; t < SSDC_SNG; t++) {
                if (t >= nin)
                    break;
                const int64_t n0 = (int64_t)(ng + t) * SSDC_T;
                if (!vec) { /* the generic loads: x with its weights once per slab */
                    if (t == 0)
                        PSSM_SSDC_FN(pssm_ssdc_tile_)
                    (xs, x + j0 * xrs, xrs, p.w.s[3], e + 1 - j0, pcols, 0, w + j0);
                    PSSM_SSDC_FN(pssm_ssdc_tile_)
                    (bs, B0 + n0 * p.v.s[3] + j0 * brs, brs, p.v.s[3], e + 1 - j0,
                     (int)(N - n0 < SSDC_T ? N - n0 : SSDC_T), 0, 0);
                    PSSM_SYNC();
                    /* A[p][j] = xs[j][p], B[j][n] = bs[j][n] */
                    PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(acc[t], xs, 1, bs, 1);
                    PSSM_SYNC();
                    continue;
                }
                PSSM_COPY_WAIT(0); /* this slab's x (t = 0) and this tile's B */
                PSSM_SYNC();       /* (and every warp is done with the other buffers) */
                if (t == 0)
                    PSSM_SSDC_FN(pssm_ssdc_weigh_rows_)(xs, w + j0);
                /* the stream's next copies: this slab's next tile, or the next slab's x and
                 * first tile; none past the group (its states are staged over the tiles) */
                if (t + 1 < nin) {
                    const int64_t nn0 = n0 + SSDC_T;
                    PSSM_SSDC_FN(pssm_ssdc_copy_async_)(bo, B0 + nn0 * p.v.s[3] + j0 * brs, brs,
                                                        e + 1 - j0,
                                                        (int)(N - nn0 < SSDC_T ? N - nn0 : SSDC_T));
                } else if (!jlast) {
                    const int jn = j0 + SSDC_T;
                    const int64_t gn0 = (int64_t)ng * SSDC_T;
                    PSSM_SSDC_FN(pssm_ssdc_copy_async_)(xo, x + jn * xrs, xrs, e + 1 - jn, pcols);
                    PSSM_SSDC_FN(pssm_ssdc_copy_async_)(bo, B0 + gn0 * p.v.s[3] + jn * brs, brs,
                                                        e + 1 - jn,
                                                        (int)(N - gn0 < SSDC_T ? N - gn0 : SSDC_T));
                }
                PSSM_COPY_COMMIT();
                if (t == 0)
                    PSSM_SYNC(); /* the weighted rows */
                PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(acc[t], xs, 1, bs, 1);
                { /* the buffers trade places (pointer compares to pick the other were 10% of
                   * the instructions, run 62) */
                    PSSM_SSDC_SMEM *const b1 = bs;
                    bs = bo, bo = b1;
                    if (t + 1 == nin) {
                        PSSM_SSDC_SMEM *const x1 = xs;
                        xs = xo, xo = x1;
                    }
                }
            }
        }
        if (vec)
            PSSM_SYNC(); /* every product read its tiles: the states' staging goes over them */

        if (!p.cu && p.vec) { /* the states by 16-byte stores of whole rows, staged over the
                               * tiles (SSDC_SNG x T rows of SP floats) */
            float *const st = (float *)tiles_w;
            enum { SP = SSDC_T + 4 }; /* pitch: rows 16-byte aligned, stores 2-way at most */
            typedef char pssm_ssdc_state_fits[4 * SSDC_TILE_VECS * 16 >= SSDC_SNG * SSDC_T * SP * 4
                                                  ? 1
                                                  : -1];
            (void)sizeof(pssm_ssdc_state_fits);
            PSSM_UNROLL
            for (int t = 0; t < SSDC_SNG; t++)
                PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    st[(t * SSDC_T + tm * 16 + pssm_mma_row(lane, i)) * SP + tn * 16 +
                       pssm_mma_col(lane, i)] = acc[t][ti][i];
            }
            PSSM_SYNC();
            /* a thread's rows r0 + it rstep, its column cc, a row step per store (the index
             * form's divisions and 64-bit products were 10% of the instructions, run 62) */
            const int r0 = tid / (SSDC_T / 4), cc = tid % (SSDC_T / 4) * 4;
            enum { RSTEP = PSSM_SSDC_THREADS / (SSDC_T / 4) };
            PSSM_UNROLL
            for (int t = 0; t < SSDC_SNG; t++) {
                if (t >= nin)
                    break;
                const int ncols = (int)(N - (int64_t)(ng + t) * SSDC_T);
                float *o = p.states + chunk_at * PN + (p0 + r0) * N + (ng + t) * SSDC_T + cc;
                const int64_t ostep = RSTEP * N;
                PSSM_UNROLL
                for (int it = 0; it < SSDC_T / RSTEP; it++, o += ostep)
                    if (r0 + it * RSTEP < pcols && cc < ncols)
                        *(pssm_vec16 *)o =
                            *(const pssm_vec16 *)(st + (t * SSDC_T + r0 + it * RSTEP) * SP + cc);
            }
            PSSM_SYNC(); /* the next group's copies overwrite st */
        } else {
            PSSM_UNROLL
            for (int t = 0; t < SSDC_SNG; t++) {
                if (t >= nin)
                    break;
                PSSM_UNROLL
                for (int ti = 0; ti < SSDC_TPW; ti++) {
                    const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB;
                    const int tn = tile % SSDC_SUB;
                    PSSM_UNROLL
                    for (int i = 0; i < PSSM_MMA_ACC; i++) {
                        const int64_t pp = p0 + tm * 16 + pssm_mma_row(lane, i);
                        const int64_t nn =
                            (int64_t)(ng + t) * SSDC_T + tn * 16 + pssm_mma_col(lane, i);
                        if (pp >= P || nn >= N)
                            continue;
                        float *s = p.states + chunk_at * PN + pp * N + nn;
                        if (!p.cu) {
                            *s = acc[t][ti][i];
                        } else { /* s holds the state entering the chunk (after the pass) */
                            const float v = acc[t][ti][i] + (carry != 0.0f ? carry * *s : 0.0f);
                            pssm_store_any(p.varlen,
                                           k * p.varlen_s[0] + h * p.varlen_s[1] +
                                               pp * p.varlen_s[2] + nn * p.varlen_s[3],
                                           p.state_dt, v);
                        }
                    }
                }
            }
        }
        if (vec && ng + SSDC_SNG < p.ntiles) { /* the next group's first slab */
            const int64_t gn0 = (int64_t)(ng + SSDC_SNG) * SSDC_T;
            PSSM_SSDC_FN(pssm_ssdc_copy_async_)(xs, x, xrs, e + 1, pcols);
            PSSM_SSDC_FN(pssm_ssdc_copy_async_)(bs, B0 + gn0 * p.v.s[3], brs, e + 1,
                                                (int)(N - gn0 < SSDC_T ? N - gn0 : SSDC_T));
            PSSM_COPY_COMMIT();
        }
    } /* the groups of tiles of N */
}

/* ---------------------------------------------------------------- 3. chunk products
 * One kernel for the forward's outputs and the backward's four products, which all have the
 * form (rows r: tokens of one tile of a chunk; columns: one tile of `width`, P or N)
 *     out[r][col] = scale_r sum_i U_r[i] S[col][i] + sum_k w(r, k) (U_r . V_k) W_k[col]
 * with k over the chunk's tokens that r reaches (causal: k <= r, the same segment) or that reach
 * r (anticausal: k >= r), i over `inner` (N or P), S a per-chunk state (P,N), f32 or its
 * 16-bit copy (sact) (s_trans: read as (N,P)).  The weights and scales (seg_e: the segment of the chunk's last token e):
 *     causal:     w = exp(cs_r - cs_k) dt'_k,  scale = [seg_r == -1] exp(cs_r)
 *     anticausal: w = exp(cs_k - cs_r),        scale = [seg_r == seg_e] exp(cs_e - cs_r)
 *   mode  U  V  W   S      causal  the result                     the epilogue
 *   FWD   C  B  x   S_in   yes     y                              + D x, gate: out
 *   Y     C  B  x   S_in   yes     y without D x (y_o; given: ys) dz, dy, sum_p dy y_o
 *   DX    B  C  dy  dS_e   no      dx / dt' without D dy          dx, sum_p x (dx / dt')
 *   DB    x  -  C   dS_e^T no      dB of the slice's heads        (partial per slice)
 *   DC    dy -  B   S_in^T yes     dC of the slice's heads        (partial per slice)
 * (S_in: the state entering the chunk, dS_e: the gradient of the state at its end.)  DB and DC
 * sum U S over the slice's heads (DB's scale times dt'_r) and take M from the group's dCB
 * (ssd_dcb.body.h: weighted and masked already; DB reads it transposed), in the group's first
 * slice only.  The row sums of Y and DX are per-tile partials of the tokens' dcs and ddt'
 * (pssm_ssd_dt_bwd_). */
/* Each row's sum over the T columns of rowbuf (T rows of pitch SSDC_RBP floats), in a fixed
 * order, into part[at + r] for r < rows: SSDC_RQ threads per row each sum a span of columns,
 * then one thread per row adds the spans (one thread per row summing all T columns was a chain
 * of 64 dependent loads: 6% of DX's stall samples, run 47).  The odd pitch keeps a warp's 32
 * rows on 32 banks.  rowbuf is followed by SSDC_RQ * T floats of scratch.  Every thread of the
 * block calls it; barriers before and after. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_row_sums_)(float *rowbuf, int rows, float *part,
                                                   int64_t at)
{
    typedef char pssm_ssdc_rq_even[PSSM_SSDC_THREADS % SSDC_T == 0 && SSDC_T % SSDC_RQ == 0 ? 1
                                                                                           : -1];
    (void)sizeof(pssm_ssdc_rq_even);
    float *const red = rowbuf + SSDC_T * SSDC_RBP;
    const int r = PSSM_TID % SSDC_T, span = PSSM_TID / SSDC_T;
    PSSM_SYNC();
    float s = 0.0f;
    for (int cc = span * (SSDC_T / SSDC_RQ); cc < (span + 1) * (SSDC_T / SSDC_RQ); cc++)
        s += rowbuf[r * SSDC_RBP + cc];
    red[span * SSDC_T + r] = s;
    PSSM_SYNC();
    if (PSSM_TID < rows) {
        float t = 0.0f;
        for (int k = 0; k < SSDC_RQ; k++)
            t += red[k * SSDC_T + PSSM_TID];
        part[at + PSSM_TID] = t;
    }
    PSSM_SYNC();
}

/* mk = a chunk's (Q x Q) f32 matrix M at the chunk's rows r0.. and columns k0.., in the
 * accumulator arrangement: C B^T (p.cb, ssd_chunk_cb_: B C^T above the diagonal) or dCB
 * (p.dcb); trans: M's transpose (dB's dCB^T).  Every position of a tile on or below the
 * diagonal was written (of C B^T, every tile), so masked positions read defined values. */
PSSM_DEVICE void PSSM_SSDC_FN(pssm_ssdc_cb_load_)(float (*mk)[PSSM_MMA_ACC], const float *M,
                                                  int64_t Q, int r0, int k0, int trans)
{
    const int lane = PSSM_LANE, warp = PSSM_WARP_ID;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++) {
        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        if (PSSM_MMA_PAIRS && !trans) { /* adjacent columns: 8-byte loads */
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i += 2) {
                const int r = r0 + tm * 16 + pssm_mma_row(lane, i);
                const int k = k0 + tn * 16 + pssm_mma_col(lane, i);
                const pssm_f32x2 v = *(const pssm_f32x2 *)(M + (int64_t)r * Q + k);
                mk[ti][i] = v.v[0], mk[ti][i + 1] = v.v[1];
            }
            continue;
        }
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++) {
            const int r = r0 + tm * 16 + pssm_mma_row(lane, i);
            const int k = k0 + tn * 16 + pssm_mma_col(lane, i);
            mk[ti][i] = trans ? M[(int64_t)k * Q + r] : M[(int64_t)r * Q + k];
        }
    }
}

/* ---------------------------------------------------------------- 2'. C B^T per chunk and group
 * Block x = ((b, g, c), row tile), y = column tile: M[r][k] = C_r . B_k of the chunk's tokens
 * (the products' U = C and V = B; zero past the chunk's end) in f32, for the tiles on or below
 * the diagonal, into p.cb ((B, G, nchunks, Q, Q)), and mirrored above it: M[k][r] = C_r . B_k
 * for k < r, so that row r holds (B C^T)[r][k] = C_k . B_r for k >= r, what DX reads (by
 * 8-byte loads along the row: the transposed read was a 4-byte load per value, a sector
 * each).  The products of every head of the group read it (FWD, Y, DX, dCB) instead of forming
 * it again per head: at G = 1 the one product of the chunk instead of H; the same bits, since
 * it is the same multiply in the same order. */
PSSM_KERNEL_BOUNDED(PSSM_SSDC_FN(pssm_ssd_chunk_cb_), pssm_ssd_chunk_params, p, PSSM_SSDC_THREADS)
{
    PSSM_SHARED(pssm_vec16, tiles_w, 2 * SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const ut = (PSSM_SSDC_SMEM *)tiles_w;                    /* ut[r][n] = C_r[n] */
    PSSM_SSDC_SMEM *const vt = (PSSM_SSDC_SMEM *)(tiles_w + SSDC_TILE_VECS); /* vt[k][n] = B_k[n] */
    const int lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, G = p.heads / p.hpg, N = p.dstate;
    const uint32_t bx = (uint32_t)PSSM_BLOCK_X, unit = bx / (uint32_t)p.qtiles; /* 32-bit */
    const int qt = (int)(bx % (uint32_t)p.qtiles), kt = (int)PSSM_BLOCK_Y;
    const int64_t c = unit % (uint32_t)p.nchunks, bg = unit / (uint32_t)p.nchunks;
    const int64_t b = (uint32_t)bg / (uint32_t)G, g = (uint32_t)bg % (uint32_t)G, c0 = c * Q;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), r0 = qt * SSDC_T, k0 = kt * SSDC_T;
    if (kt > qt || r0 >= q)
        return; /* above the diagonal, or past the last chunk's end: never read */
    const PSSM_SSDC_ACT *U = SSDC_OPND(p.u, 0, g) + (c0 + r0) * p.u.s[1];
    const PSSM_SSDC_ACT *V = SSDC_OPND(p.v, 0, g) + (c0 + k0) * p.v.s[1];
    float acc[SSDC_TPW][PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++)
        PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i++)
        acc[ti][i] = 0.0f;
    for (int64_t i0 = 0; i0 < N; i0 += SSDC_T) {
        const int icols = (int)(N - i0 < SSDC_T ? N - i0 : SSDC_T);
        PSSM_SSDC_FN(pssm_ssdc_tile_)
        (ut, U + i0 * p.u.s[3], p.u.s[1], p.u.s[3], q - r0, icols, p.u.vec, 0);
        PSSM_SSDC_FN(pssm_ssdc_tile_)
        (vt, V + i0 * p.v.s[3], p.v.s[1], p.v.s[3], q - k0, icols, p.v.vec, 0);
        PSSM_SYNC();
        PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(acc, ut, 0, vt, 0);
        PSSM_SYNC();
    }
    float *M = p.cb + (bg * p.nchunks + c) * Q * Q;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++) {
        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++) {
            const int r = r0 + tm * 16 + pssm_mma_row(lane, i);
            const int k = k0 + tn * 16 + pssm_mma_col(lane, i);
            if (k <= r) /* (above the diagonal of the diagonal tile: the mirror's place) */
                M[(int64_t)r * Q + k] = acc[ti][i];
            if (k < r)
                M[(int64_t)k * Q + r] = acc[ti][i];
        }
    }
}

/* Two blocks of 256 threads (four of 128) per SM: at most 128 registers (the head loop of dB and
 * dC took it to 174 and one block per SM, which doubled every mode's time, run 21). */
#define PSSM_SSDC_PROD_MIN_BLOCKS (512 / PSSM_SSDC_THREADS)
/* One stamp per mode, the mode a constant: each keeps only its own code and registers (the
 * one stamp of every mode, p.mode at run time, spilled 120 bytes at 128 registers; one per mode
 * spills 0 to 128, run 43).  The forward's outputs with loads ahead (the generic stamp
 * spilled 0.9 KB with them); Y and DX twice: as they were, and with loads ahead and the vector
 * epilogues alone (yv, dxv: PSSM_SSD_VEC_EPILOGUE; with both epilogues in one stamp, Y spilled
 * 160 bytes and DX 184); DB and DC read their M from dCB once per block. */
#define PSSM_SSDC_PROD_NAME pssm_ssd_chunk_y_
#define PSSM_SSDC_PROD_MODE PSSM_SSD_PROD_Y
#define PSSM_SSDC_PROD_AHEAD 0
#include "ssd_prod.body.h"
#define PSSM_SSDC_PROD_NAME pssm_ssd_chunk_dx_
#define PSSM_SSDC_PROD_MODE PSSM_SSD_PROD_DX
#define PSSM_SSDC_PROD_AHEAD 0
#include "ssd_prod.body.h"
#define PSSM_SSDC_PROD_NAME pssm_ssd_chunk_yv_
#define PSSM_SSDC_PROD_MODE PSSM_SSD_PROD_Y
#define PSSM_SSDC_PROD_AHEAD 1
#include "ssd_prod.body.h"
#define PSSM_SSDC_PROD_NAME pssm_ssd_chunk_dxv_
#define PSSM_SSDC_PROD_MODE PSSM_SSD_PROD_DX
#define PSSM_SSDC_PROD_AHEAD 1
#include "ssd_prod.body.h"
#define PSSM_SSDC_PROD_NAME pssm_ssd_chunk_db_
#define PSSM_SSDC_PROD_MODE PSSM_SSD_PROD_DB
#define PSSM_SSDC_PROD_AHEAD 0
#include "ssd_prod.body.h"
#define PSSM_SSDC_PROD_NAME pssm_ssd_chunk_dc_
#define PSSM_SSDC_PROD_MODE PSSM_SSD_PROD_DC
#define PSSM_SSDC_PROD_AHEAD 0
#include "ssd_prod.body.h"
#define PSSM_SSDC_PROD_NAME pssm_ssd_chunk_out_
#define PSSM_SSDC_PROD_MODE PSSM_SSD_PROD_FWD
#define PSSM_SSDC_PROD_AHEAD 1
#include "ssd_prod.body.h"
#include "ssd_dcb.body.h" /* dCB and W, per slice of a group's heads */
#include "ssd_dbc.body.h" /* dB and dC with the heads pipelined */
#if PSSM_SSDC_TILE == 64 /* the 16-bit stamps: the forward's outputs, and the backward's Y,
                          * with M in registers */
#define PSSM_SSDO_NAME pssm_ssd_chunk_outr_
#define PSSM_SSDO_BWD 0
#include "ssd_out.body.h"
#define PSSM_SSDO_NAME pssm_ssd_chunk_ybr_
#define PSSM_SSDO_BWD 1
#include "ssd_out.body.h"
#include "ssd_dxr.body.h" /* the backward's DX, likewise */
#endif

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
    PSSM_SHARED(float, dred, PSSM_SSDC_THREADS * SSDC_VEC); /* dD's vector path: row groups */
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim;
    const uint32_t bx = (uint32_t)PSSM_BLOCK_X; /* 32-bit division (grid x < 2^31) */
    const int64_t c = bx % (uint32_t)p.nchunks, bh = bx / (uint32_t)p.nchunks;
    const int64_t b = (uint32_t)bh / (uint32_t)H, h = (uint32_t)bh % (uint32_t)H, c0 = c * Q;
    const int q = (int)(L - c0 < Q ? L - c0 : Q);
    PSSM_SSDC_FN(pssm_ssdc_prep_load_)(p, bh, c, dtp, cs, seg);
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
            own -= v;
            for (int tt = 0; tt <= j / (int)SSDC_T; tt++) /* W's rows: over tiles of s <= j */
                own += p.part_row[(bh * p.qtiles + tt) * L + t];
            for (int tt = j / (int)SSDC_T; tt <= qlast; tt++) /* its columns: tiles of t >= j */
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
    const int dvec = P / SSDC_VEC; /* dD's vector path: 16-byte vectors of a row */
    if (p.part_D && p.xo.vec && p.yo.vec && dvec > 0 && PSSM_SSDC_THREADS % dvec == 0) {
        /* A thread takes one vector of p and every rstep-th token, four tokens' loads in
         * flight; then the row groups' sums in order per p (the lanes over p, one 2-byte load
         * each, moved 64 of the 168 MB of x and dy at B4 L2048 H80 in 113 us, run 79) */
        const int rstep = PSSM_SSDC_THREADS / dvec, r0 = tid / dvec, pv = tid % dvec * SSDC_VEC;
        const PSSM_SSDC_ACT *x = (const PSSM_SSDC_ACT *)p.xo.ptr + b * p.xo.s[0] +
                                 c0 * p.xo.s[1] + h * p.xo.s[2] + pv;
        const PSSM_SSDC_ACT *dy = (const PSSM_SSDC_ACT *)p.yo.ptr + b * p.yo.s[0] +
                                  c0 * p.yo.s[1] + h * p.yo.s[2] + pv;
        float acc[SSDC_VEC];
        PSSM_UNROLL
        for (int k = 0; k < SSDC_VEC; k++)
            acc[k] = 0.0f;
        for (int j0 = r0; j0 < q; j0 += 4 * rstep) {
            pssm_vec16 xv[4], yv[4];
            PSSM_UNROLL
            for (int u = 0; u < 4; u++) {
                const int j = j0 + u * rstep;
                if (j < q) {
                    xv[u] = *(const pssm_vec16 *)(x + j * p.xo.s[1]);
                    yv[u] = *(const pssm_vec16 *)(dy + j * p.yo.s[1]);
                } else {
                    xv[u].w[0] = xv[u].w[1] = xv[u].w[2] = xv[u].w[3] = 0u;
                    yv[u] = xv[u];
                }
            }
            PSSM_UNROLL
            for (int u = 0; u < 4; u++) {
                PSSM_SSDC_ACT xa[SSDC_VEC], ya[SSDC_VEC];
                __builtin_memcpy(xa, &xv[u], 16);
                __builtin_memcpy(ya, &yv[u], 16);
                PSSM_UNROLL
                for (int k = 0; k < SSDC_VEC; k++)
                    acc[k] += PSSM_SSDC_LD(ya[k]) * PSSM_SSDC_LD(xa[k]);
            }
        }
        PSSM_UNROLL
        for (int k = 0; k < SSDC_VEC; k++)
            dred[r0 * P + pv + k] = acc[k];
        PSSM_SYNC();
        for (int pp = tid; pp < P; pp += PSSM_SSDC_THREADS) {
            float t = 0.0f;
            for (int r = 0; r < rstep; r++)
                t += dred[r * P + pp];
            p.part_D[at * P + pp] = t;
        }
    } else if (p.part_D) { /* the lanes over p, the warps over the tokens, then the warps'
                             * partials in order (one thread per p over every token was a
                             * chain of 2q loads with three quarters of the block idle) */
        const PSSM_SSDC_ACT *x = (const PSSM_SSDC_ACT *)p.x + b * p.x_s[0] + h * p.x_s[2];
        const PSSM_SSDC_ACT *dy = (const PSSM_SSDC_ACT *)p.dy + b * p.dy_s[0] + h * p.dy_s[2];
        float *const red = dcs; /* (read by no thread since the block sums' barriers) */
        typedef char pssm_ssdc_red_fits[PSSM_SSDC_THREADS <= PSSM_SSD_CHUNK_MAX ? 1 : -1];
        (void)sizeof(pssm_ssdc_red_fits);
        for (int64_t p0 = 0; p0 < P; p0 += PSSM_WARP_SIZE) {
            const int64_t pp = p0 + lane;
            float s = 0.0f;
            if (pp < P)
                for (int j = warp; j < q; j += SSDC_NWARPS)
                    s += PSSM_SSDC_LD(dy[(c0 + j) * p.dy_s[1] + pp * p.dy_s[3]]) *
                         PSSM_SSDC_LD(x[(c0 + j) * p.x_s[1] + pp * p.x_s[3]]);
            red[warp * PSSM_WARP_SIZE + lane] = s;
            PSSM_SYNC();
            if (tid < PSSM_WARP_SIZE && p0 + tid < P) {
                float t = 0.0f;
                for (int w = 0; w < SSDC_NWARPS; w++)
                    t += red[w * PSSM_WARP_SIZE + tid];
                p.part_D[at * P + p0 + tid] = t;
            }
            PSSM_SYNC();
        }
    }
}

#undef PSSM_SSDC_PROD_MIN_BLOCKS
#undef PSSM_SSDC_STATE_MIN_BLOCKS
#undef SSDC_SNG
#undef SSDC_T
#undef SSDC_LDS
#undef SSDC_SUB
#undef SSDC_NWARPS
#undef SSDC_TPW
#undef SSDC_TILE_WORDS
#undef SSDC_TILE_VECS
#undef SSDC_VEC
#undef SSDC_VITERS
#undef SSDC_FITERS
#undef SSDC_RBP
#undef SSDC_F32P
#undef SSDC_RQ
#undef PSSM_SSDC_ACT
#undef PSSM_SSDC_LD
#undef PSSM_SSDC_ST
#undef PSSM_SSDC_SMEM
#undef PSSM_SSDC_TO_SMEM
#undef PSSM_SSDC_TO_SMEM2
#undef PSSM_SSDC_MMA
#undef PSSM_SSDC_MMAS
#undef PSSM_SSDC_TILE
#undef PSSM_SSDC_DT
#undef PSSM_SSDC_THREADS
