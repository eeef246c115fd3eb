/*
 * ssd_out.body.h - the SSD forward's outputs with M in registers (pssm_ssd_chunk_outr_*),
 * included by ssd_chunk.body.h in its 16-bit stamps (tiles of 64, tensor instructions where the
 * target has them).  It computes what the chunk products' FWD mode computes (ssd_chunk.body.h,
 * 3.), with the same roundings and in the same order along k, where PSSM_SSD_OUTR(p) holds:
 *     y_t[p] = [seg_t == -1] exp(cs_t) sum_n C_t[n] S_in[p][n]
 *            + sum_{s reaches t} (C_t . B_s) exp(cs_t - cs_s) dt'_s x_s[p],
 *     out = (y + D x) silu(z)    (y + D x also into ys where the caller asks for it)
 * Why a kernel of its own: in the generic product every slab's weighted M goes through a shared
 * tile (a store, a block barrier, ldmatrix) and every warp holds a 16 x 32 strip, so that about
 * half of its instructions were addressing and its warps waited at barriers (run 43).  Here a
 * block takes T rows of a chunk and T columns (p) with four warps, each warp 16 whole rows:
 * its M values are formed in the accumulator's arrangement straight from C B^T and multiply
 * from registers (pssm_mma16rs_*); a warp stops at its own diagonal (16-row steps, not
 * T-row slabs); C B^T is read one slab ahead into registers, x by asynchronous copies one slab
 * ahead; the block's barriers are one per slab of x.
 * Block x = (b, c, row tile, h), the heads innermost as in the product kernel; y = column tile.
 *
 * Stamped twice by ssd_chunk.body.h: PSSM_SSDO_NAME (the kernel's name before the dtype suffix)
 * and PSSM_SSDO_BWD (a constant):
 *   0  pssm_ssd_chunk_outr_*: the forward's out;
 *   1  pssm_ssd_chunk_ybr_*: the backward's Y product (the chunk products' Y mode, with
 *      PSSM_SSD_YR(p)): the state's share of dcs, sum_p dy_t[p] y_inter,t[p] with dy = dout
 *      silu(z) (or dout), into part_y; where z is given, y again as above (+ D x, not gated)
 *      for dz = dout y sigmoid(z) (1 + z (1 - sigmoid(z))) and dy (into the workspace).  dout
 *      and z wait in tile3 and tile2 through the chunk's own tokens.  Where the forward's y is
 *      given (ys), it is read into tile0 with them and the chunk's own tokens are skipped:
 *      the y product was 184 of this kernel's 288 us at B4 L2048 H80 (run 80).  (The generic Y stamp took
 *      560 us of the 2.68 ms fwd+bwd at B4 L2048 H80, where this forward took 229, run 71.)
 * Leaves neither defined.
 */
#define SSDO_WARPS PSSM_SSD_OUTR_WARPS
#define SSDO_THREADS (SSDO_WARPS * PSSM_WARP_SIZE)
#define SSDO_TN (SSDC_T / 16)  /* 16-column tiles of a warp's rows */
#define SSDO_STEPS (SSDC_T / 16) /* steps of 16 along k per slab */
/* Five blocks of four warps per SM on sm_80 and newer, at most 96 registers a thread (16 bytes
 * of spills on sm_90, none on sm_80; four blocks at 128 registers left the kernel waiting on
 * latencies with 16 warps an SM: 223 -> 214 us, H200 runs 63-64).  Four elsewhere: sm_75's
 * m16n8k8 form spilled 152 bytes at 96 registers (16 at 128), unmeasured on such a GPU. */
#if defined(PSSM_SSD_OUTR_MIN_BLOCKS) /* (a build may set it, to compare) */
#define PSSM_SSDO_MIN_BLOCKS PSSM_SSD_OUTR_MIN_BLOCKS
#elif defined(PSSM_TARGET_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PSSM_SSDO_MIN_BLOCKS 5
#else
#define PSSM_SSDO_MIN_BLOCKS 4
#endif
PSSM_KERNEL_BOUNDED_MIN(PSSM_SSDC_FN(PSSM_SSDO_NAME), pssm_ssd_chunk_params, p, SSDO_THREADS,
                        PSSM_SSDO_MIN_BLOCKS)
{
    const int bwd = PSSM_SSDO_BWD; /* a constant in every stamp */
    PSSM_SHARED(float, dtp, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, csl, PSSM_SSD_CHUNK_MAX); /* cs log2(e): the weights' exps as exp2 of a
                                                   difference, one multiply fewer per value */
    PSSM_SHARED(int, seg, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, dcol, SSDC_T); /* D of the tile's columns, 0 past them */
    PSSM_SHARED(float, colw, PSSM_SSD_CHUNK_MAX); /* the split weights' column factors */
    PSSM_SHARED(pssm_vec16, tiles_w, 4 * SSDC_TILE_VECS);
    PSSM_SHARED(pssm_vec16, scratch_w,
                SSDO_WARPS * PSSM_MMA_RS_SCRATCH * (int)sizeof(PSSM_SSDC_SMEM) / 16);
    typedef char pssm_ssdo_rows_fit[SSDO_WARPS * 16 == SSDC_T ? 1 : -1];
    (void)sizeof(pssm_ssdo_rows_fit);
    PSSM_SSDC_SMEM *const tile0 = (PSSM_SSDC_SMEM *)tiles_w;
    PSSM_SSDC_SMEM *const tile1 = (PSSM_SSDC_SMEM *)(tiles_w + SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const tile2 = (PSSM_SSDC_SMEM *)(tiles_w + 2 * SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const tile3 = (PSSM_SSDC_SMEM *)(tiles_w + 3 * SSDC_TILE_VECS);
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    PSSM_SSDC_SMEM *const scratch = (PSSM_SSDC_SMEM *)scratch_w + warp * PSSM_MMA_RS_SCRATCH;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    /* 32-bit division: the grid's x is below 2^31 */
    const uint32_t bx = (uint32_t)PSSM_BLOCK_X, nq = (uint32_t)p.qtiles;
    const uint32_t rest = bx / (uint32_t)H, rest2 = rest / nq;
    const int64_t h = bx % (uint32_t)H, c = rest2 % (uint32_t)p.nchunks;
    const int qt = (int)(rest % nq);
    const int64_t b = rest2 / (uint32_t)p.nchunks, bh = b * H + h;
    const int64_t G = (uint32_t)H / (uint32_t)p.hpg, g = (uint32_t)h / (uint32_t)p.hpg;
    const int64_t c0 = c * Q, col0 = PSSM_BLOCK_Y * SSDC_T;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), r0 = qt * SSDC_T;
    if (r0 >= q || !(bwd ? PSSM_SSD_YR(p) : PSSM_SSD_OUTR(p)))
        return; /* past the last chunk's end; (the host launches it only where OUTR / YR hold) */
    const int rrows = q - r0 < SSDC_T ? q - r0 : SSDC_T;
    const int ccols = (int)(p.width - col0 < SSDC_T ? p.width - col0 : SSDC_T);
    const int rw = r0 + 16 * warp; /* this warp's first row */
    const float *const Mcb = p.cb + ((b * G + g) * p.nchunks + c) * Q * Q;
    const PSSM_SSDC_ACT *const Cr = SSDC_OPND(p.u, h, g) + (c0 + r0) * p.u.s[1];
    const PSSM_SSDC_ACT *const Sa =
        (const PSSM_SSDC_ACT *)p.sact + (bh * p.nchunks + c) * P * N + col0 * N;
    const int64_t xrs = p.w.s[1];
    const PSSM_SSDC_ACT *const X = SSDC_OPND(p.w, h, g) + c0 * xrs + col0;
    const int state_part = c > 0 || p.x0 != 0; /* nothing enters chunk 0 without x0 */
    /* the backward with the forward's y (z given): y's tile instead of its product */
    const PSSM_SSDC_ACT *const Ys =
        bwd && p.z && p.ys.ptr ? SSDC_OPND(p.ys, h, 0) + (c0 + r0) * p.ys.s[1] + col0 : 0;
    const int nsl = (int)((N + SSDC_T - 1) / SSDC_T); /* slabs of n in the state's product */
    const int nslabs = r0 / SSDC_T + 1;              /* slabs of k, the diagonal one last */
    const float ah = p.A[h * p.A_s]; /* (loaded early: the split's test waited on it, run 62) */

    /* the state's first two slabs of n in flight: C's rows and S_in's rows p, as they lie */
#define SSDO_STATE_COPY(slab, ct, st)                                                              \
    PSSM_SSDC_FN(pssm_ssdr_state_copy_)(ct, st, Cr, p.u.s[1], Sa, N, slab, rrows, ccols,           \
                                        SSDO_THREADS)
    if (state_part) {
        SSDO_STATE_COPY(0, tile0, tile1);
        if (nsl > 1)
            SSDO_STATE_COPY(1, tile2, tile3);
    }
    /* C B^T of this warp's rows, two steps ahead in registers (step kb in mb[kb / 16 % 2]; a
     * whole slab ahead took 159 registers) */
    float mb[2][PSSM_MMA_ACC];
    const float *const mrows = Mcb + (int64_t)rw * Q; /* (32-bit offsets from here: fewer
                                                         registers than pointers per value) */
    const int qi = (int)Q;
#define SSDO_CB_LOAD(j, kb) PSSM_SSDC_FN(pssm_ssdr_cb_load_)(mb[j], mrows, qi, kb)
    /* the chunk's dt', cs and seg (p.prep), D of the columns */
    PSSM_SSDC_FN(pssm_ssdc_prep_load_by_)(p, bh, c, dtp, csl, seg, PSSM_LOG2E, SSDO_THREADS);
    for (int cc = tid; cc < SSDC_T; cc += SSDO_THREADS)
        dcol[cc] = p.D && cc < ccols ? p.D[h * p.D_s[0] + (col0 + cc) * p.D_s[1]] : 0.0f;

    float acc[SSDO_TN][PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int j = 0; j < SSDO_TN; j++)
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            acc[j][i] = 0.0f;
    if (state_part) { /* C_r . S_in[p] over slabs of n, two in flight */
        for (int s = 0; s < nsl; s++) {
            if (s + 1 < nsl)
                PSSM_COPY_WAIT(1);
            else
                PSSM_COPY_WAIT(0);
            PSSM_SYNC(); /* (the first: also the prep's arrays) */
            const PSSM_SSDC_SMEM *const ct = s % 2 ? tile2 : tile0, *const st = s % 2 ? tile3 : tile1;
            /* A[r][n] = ct[r][n], B[n][p] = st[p][n] */
            PSSM_SSDC_MMAS(acc, SSDO_TN, SSDC_T / 16, ct + 16 * warp * SSDC_LDS, SSDC_LDS, 0, st,
                           SSDC_LDS, 0);
            if (s + 2 < nsl) {
                PSSM_SYNC(); /* every warp read this pair */
                SSDO_STATE_COPY(s + 2, s % 2 ? tile2 : tile0, s % 2 ? tile3 : tile1);
            }
        }
        /* scaled by the decay from the chunk's start, where the entering state reaches */
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++) {
            /* (r < Q: seg and csl hold every row; without branches, one exp per row) */
            const int r = rw + pssm_mma_row(lane, i);
            const float er = pssm_exp2f(csl[r]); /* exp(cs_r) */
            const float sc = ((r < q) & (seg[r] == -1)) ? er : 0.0f;
            PSSM_UNROLL
            for (int j = 0; j < SSDO_TN; j++)
                acc[j][i] *= sc;
        }
    }
#undef SSDO_STATE_COPY
    /* the first two steps' C B^T (during the state's product they would take registers its
     * fragments need: 68 bytes of spills) */
    const PSSM_SSDC_ACT *const Z = p.z ? SSDC_OPND(p.zo, h, 0) + (c0 + r0) * p.zo.s[1] + col0 : 0;
    if (!bwd || (Z && !Ys)) {
        PSSM_UNROLL
        for (int j = 0; j < 2; j++)
            if (16 * j <= rw)
                SSDO_CB_LOAD(j, 16 * j);
    }
    PSSM_SYNC(); /* the state's tiles are read (or the prep's arrays are written) */

    if (bwd) { /* the state's share of dcs, per row: dout (and z) wait in tile3 (tile2) */
        PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile3, SSDC_OPND(p.go, h, 0) +
                                                          (c0 + r0) * p.go.s[1] + col0,
                                               p.go.s[1], rrows, ccols, SSDO_THREADS, 1);
        if (Z) { /* and the first slab of x, or the forward's y of these rows */
            PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile2, Z, p.zo.s[1], rrows, ccols,
                                                   SSDO_THREADS, 1);
            if (Ys)
                PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile0, Ys, p.ys.s[1], rrows, ccols,
                                                       SSDO_THREADS, 1);
            else
                PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile0, X, xrs, q, ccols, SSDO_THREADS, 1);
        }
        PSSM_COPY_WAIT_ALL();
        PSSM_SYNC();
        /* dy y_inter summed over this lane's columns of each of its values' rows, then over
         * the row's lanes through a 16 x 17 float scratch of the warp's (over tile1, free until
         * the loop's first barrier) */
        float part[PSSM_MMA_ACC];
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            part[i] = 0.0f;
        /* (gated or not as a constant of each loop: see the epilogue below) */
#define SSDO_DCS(gated)                                                                            \
    PSSM_UNROLL                                                                                    \
    for (int j = 0; j < SSDO_TN; j++)                                                              \
        PSSM_UNROLL                                                                                \
        for (int i = 0; i < PSSM_MMA_ACC; i++) {                                                   \
            const int at = (16 * warp + pssm_mma_row(lane, i)) * SSDC_LDS + 16 * j +               \
                           pssm_mma_col(lane, i);                                                  \
            float dy = PSSM_SSDC_LD(tile3[at]); /* (zero past the tile: the copy's fill) */        \
            if (gated) {                                                                           \
                const float zv = PSSM_SSDC_LD(tile2[at]);                                          \
                dy *= zv * pssm_sigmoid_fast(zv);                                                  \
            }                                                                                      \
            part[i] += dy * acc[j][i];                                                             \
        }
        if (Z) {
            SSDO_DCS(1)
        } else {
            SSDO_DCS(0)
        }
#undef SSDO_DCS
        typedef char pssm_ssdo_rs_fits[SSDO_WARPS * 16 * 17 * 4 <= SSDC_TILE_VECS * 16 ? 1 : -1];
        (void)sizeof(pssm_ssdo_rs_fits);
        PSSM_SSDC_FN(pssm_ssdc_warp_row_sums_)(
            part, (float *)tile1 + warp * 16 * 17, rrows - 16 * warp,
            p.part_y + (bh * p.coltiles + PSSM_BLOCK_Y) * L + c0 + rw);
        if (!Z)
            return; /* dy is dout and no dz: the chunk's own tokens change nothing here */
    }

    /* the chunk's own tokens: slabs of x (T tokens, tile0 / tile1 in turn, one slab ahead);
     * z's tile into tile2 with the last slab's x; segs: the chunk has a restart (seg is
     * monotone, so its last token's is not -1), and each pair's segments are compared */
    const int segs = seg[q - 1] != -1;
    /* split: the weights of the steps off the diagonal in two factors,
     *     exp(cs_r - cs_k) dt'_k = exp(cs_r - cs_e) * [exp(cs_e - cs_k) dt'_k],  e = k | 15
     * (the step's last token), where the chunk has no restart and its cs cannot rise (A <= 0,
     * dt' >= 0).  Each row of such a step lies past e, so both factors are at most 1 (neither
     * overflows); the column factor (colw) is formed once per block and the row factor takes
     * two exps per lane a step where the exact form took eight.  (The chunk's Q is a multiple
     * of the tile, so e < Q.) */
    const int split = !segs && ah <= 0.0f && p.softplus && (!p.dt_limit || p.dt_min >= 0.0f);
    if (split && !Ys) /* (read after the slab loop's first barrier) */
        for (int k = tid; k < (int)Q; k += SSDO_THREADS)
            colw[k] = pssm_exp2f(csl[k | 15] - csl[k]) * dtp[k];
    if (!bwd)
        PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile0, X, xrs, q, ccols, SSDO_THREADS, 1);
    if (!bwd && nslabs == 1 && Z)
        PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile2, Z, p.zo.s[1], rrows, ccols, SSDO_THREADS, 1);
    float csr[PSSM_MMA_ACC]; /* csl and seg of the rows of this lane's values */
    int segr[PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i++) {
        csr[i] = csl[rw + pssm_mma_row(lane, i)];
        segr[i] = seg[rw + pssm_mma_row(lane, i)];
    }
    PSSM_SSDC_SMEM *xt = tile0;
    for (int s = 0; s < (Ys ? 0 : nslabs); s++) {
        const int k0 = s * SSDC_T;
        PSSM_COPY_WAIT_ALL();
        PSSM_SYNC(); /* this slab's x; every warp is done with the other buffer */
        xt = s % 2 ? tile1 : tile0;
        if (s + 1 < nslabs) { /* the next slab's x (and z with the last) */
            const int kn = k0 + SSDC_T;
            PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(s % 2 ? tile0 : tile1, X + kn * xrs, xrs,
                                                   q - kn, ccols, SSDO_THREADS, 1);
            if (!bwd && s + 2 == nslabs && Z)
                PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile2, Z, p.zo.s[1], rrows, ccols,
                                                       SSDO_THREADS, 1);
        }
        PSSM_UNROLL
        for (int j = 0; j < SSDO_STEPS; j++) {
            const int kb = k0 + 16 * j;
            if (kb > rw)
                break; /* past this warp's diagonal (warp-uniform) */
            /* M's values of the step: C B^T exp(cs_r - cs_k) dt'_k where k reaches r, masked
             * only on the diagonal step or where the chunk has a restart (warp-uniform; the
             * mask without branches: per value, the short-circuit form took ten instructions
             * of branching) */
            float am[PSSM_MMA_ACC];
#define SSDO_WEIGHT(i, k) (mb[j % 2][i] * pssm_exp2f(csr[i] - csl[k]) * dtp[k])
            if (kb == rw || segs) {
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int k = kb + pssm_mma_col(lane, i), r = rw + pssm_mma_row(lane, i);
                    const int reach = (k <= r) & (r < q) & (seg[k] == segr[i]);
                    const float m = SSDO_WEIGHT(i, k); /* (may overflow where masked) */
                    am[i] = reach ? m : 0.0f;
                }
            } else if (split) {
                const float ce = csl[kb + 15];
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) /* (the row factor: one exp per row) */
                    am[i] = mb[j % 2][i] * pssm_exp2f(csr[i] - ce) *
                            colw[kb + pssm_mma_col(lane, i)];
            } else {
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    am[i] = SSDO_WEIGHT(i, kb + pssm_mma_col(lane, i));
            }
#undef SSDO_WEIGHT
            const pssm_mma_a16 a = PSSM_SSDC_FN(pssm_mma_a16_)(am);
            if (kb + 32 <= rw) /* C B^T of the step after the next (in the next slab for the
                                 last two) */
                SSDO_CB_LOAD(j % 2, kb + 32);
            /* B[k][p] = xt[k][p] */
            PSSM_SSDC_FN(pssm_mma16rs_)(acc, SSDO_TN, a, xt + 16 * j * SSDC_LDS, SSDC_LDS, 1,
                                        scratch);
        }
    }
#undef SSDO_CB_LOAD

    /* the epilogue: x of these rows in the last (diagonal) slab's tile, z in tile2; out staged
     * over z (each pair read and written by one thread) and stored by 16-byte vectors, y where
     * asked over tile3 (free in the forward once the state's product is done); the backward's
     * dy over dout in tile3 and dz over z, from the forward's y in tile0 where given */
    PSSM_COPY_WAIT_ALL();
    PSSM_SYNC();
    /* Each loop over the warp's pairs has its options as constants (the usual ones spelled
     * out), so that the pairs make one block and their exp -> rcp chains (silu, sigmoid)
     * overlap: with the options as run-time flags each pair was blocks of its own, its chain
     * waiting on the previous pair's (the scan's softplus had the same shape, runs 95-96). */
#define SSDO_EPILOGUE(...)                                                                         \
    PSSM_UNROLL                                                                                    \
    for (int j = 0; j < SSDO_TN; j++) {                                                            \
        PSSM_UNROLL                                                                                \
        for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {                               \
            const int rr = 16 * warp + pssm_mma_row(lane, i), cc = 16 * j + pssm_mma_col(lane, i); \
            const int at = rr * SSDC_LDS + cc;                                                     \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    }
#define SSDO_OUT(has_d, has_z, has_y)                                                              \
    SSDO_EPILOGUE(PSSM_SSDC_FN(pssm_ssdc_out_pair_)(acc[j][i], acc[j][i + PSSM_MMA_PAIRS], at, cc, \
                                                    xt, dcol, has_d, has_z, tile2, tile2, has_y,   \
                                                    tile3))
    if (bwd && Ys) { /* y as the forward wrote it (D x included) */
        SSDO_EPILOGUE({
            float y0, y1;
            if (PSSM_MMA_PAIRS)
                PSSM_SSDC_FN(pssm_ssdc_get2_)(tile0 + at, &y0, &y1);
            else
                y0 = y1 = PSSM_SSDC_LD(tile0[at]);
            PSSM_SSDC_FN(pssm_ssdc_dz_pair_)(y0, y1, at, cc, xt, dcol, 0, tile3, tile2, tile2);
        })
    } else if (bwd) {
        SSDO_EPILOGUE(PSSM_SSDC_FN(pssm_ssdc_dz_pair_)(acc[j][i], acc[j][i + PSSM_MMA_PAIRS], at,
                                                       cc, xt, dcol, p.D != 0, tile3, tile2,
                                                       tile2))
    } else if (p.D && Z && !p.ys.ptr) { /* inference: D, z */
        SSDO_OUT(1, 1, 0)
    } else if (p.D && Z) { /* training: D, z, y kept for the backward */
        SSDO_OUT(1, 1, 1)
    } else {
        SSDO_OUT(p.D != 0, Z != 0, p.ys.ptr != 0)
    }
#undef SSDO_OUT
#undef SSDO_EPILOGUE
    PSSM_SYNC();
    if (bwd) {
        PSSM_SSDC_FN(pssm_ssdc_store_by_)((PSSM_SSDC_ACT *)p.yo.ptr + b * p.yo.s[0] +
                                              (c0 + r0) * p.yo.s[1] + h * p.yo.s[2] + col0,
                                          p.yo.s[1], tile3, rrows, ccols, SSDO_THREADS);
        if (p.dz)
            PSSM_SSDC_FN(pssm_ssdc_store_by_)((PSSM_SSDC_ACT *)p.oo.ptr + b * p.oo.s[0] +
                                                  (c0 + r0) * p.oo.s[1] + h * p.oo.s[2] + col0,
                                              p.oo.s[1], tile2, rrows, ccols, SSDO_THREADS);
        return;
    }
    PSSM_SSDC_FN(pssm_ssdc_store_by_)((PSSM_SSDC_ACT *)p.oo.ptr + b * p.oo.s[0] +
                                          (c0 + r0) * p.oo.s[1] + h * p.oo.s[2] + col0,
                                      p.oo.s[1], tile2, rrows, ccols, SSDO_THREADS);
    if (p.ys.ptr)
        PSSM_SSDC_FN(pssm_ssdc_store_by_)((PSSM_SSDC_ACT *)p.ys.ptr + b * p.ys.s[0] +
                                              (c0 + r0) * p.ys.s[1] + h * p.ys.s[2] + col0,
                                          p.ys.s[1], tile3, rrows, ccols, SSDO_THREADS);
}
#undef PSSM_SSDO_MIN_BLOCKS
#undef SSDO_STEPS
#undef SSDO_TN
#undef SSDO_THREADS
#undef SSDO_WARPS
#undef PSSM_SSDO_NAME
#undef PSSM_SSDO_BWD
