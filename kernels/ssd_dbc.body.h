/*
 * ssd_dbc.body.h - dB and dC per slice of a group's heads with the heads pipelined
 * (pssm_ssd_chunk_dbc_*, p.mode DB or DC), included by ssd_chunk.body.h once per dtype stamp.
 * It computes what the chunk products' DB and DC modes compute (ssd_chunk.body.h, 3.), in the
 * same order, where one slab of U covers P (P <= T) and the tiles move by 16-byte vectors:
 *     DC: out_t[n] = sum_h [seg_t == -1] exp(cs_t) sum_p dy_t[p] S_in[p][n]
 *     DB: out_r[n] = sum_h [seg_r == seg_e] exp(cs_e - cs_r) dt'_r sum_p x_r[p] dS_e[p][n]
 * over the slice's heads h, plus in the group's first slice the chunk's own tokens from dCB
 * (dC = dCB B, dB = dCB^T C).  Why a kernel of its own: per head the generic product waits for
 * the head's prep, its U tile and its state one after another (run 57: 4 us a head); here the
 * next head's U tile and state are copied asynchronously while this head's product runs, and
 * its row scales come from p.prep in registers, so that a head costs two block barriers.
 * Where the states lie in the operand type too (p.sact: the backward's passes leave S_in, then
 * dS_e, there), a head's state tile is copied as it lies into one of two operand tiles by the
 * head's parity: no f32 staging and conversion pass, one barrier a head.
 * Block x = (b, c, row tile, slice), the slices innermost; y = tile of N (as the product's).
 */
PSSM_KERNEL_BOUNDED_MIN(PSSM_SSDC_FN(pssm_ssd_chunk_dbc_), pssm_ssd_chunk_params, p,
                        PSSM_SSDC_THREADS, PSSM_SSDC_PROD_MIN_BLOCKS)
{
    PSSM_SHARED(pssm_vec16, tiles_w, 3 * SSDC_TILE_VECS); /* U (two heads), S as operands */
    /* the next head's f32 state, or (sact) the odd heads' operand tile */
    PSSM_SHARED(pssm_vec16, sf_w, SSDC_T * SSDC_F32P / 4);
    PSSM_SHARED(float, sc, 2 * SSDC_T);                    /* two heads' row scales */
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    const int db = p.mode == PSSM_SSD_PROD_DB;
    const int64_t hpb = p.hpb, slices = H / hpb, nc = p.nchunks;
    const uint32_t bx = (uint32_t)PSSM_BLOCK_X, nq = (uint32_t)p.qtiles; /* 32-bit division */
    const uint32_t rest = bx / (uint32_t)slices, rest2 = rest / nq;
    const int64_t slice = bx % (uint32_t)slices, c = rest2 % (uint32_t)nc;
    const int qt = (int)(rest % nq);
    const int64_t b = rest2 / (uint32_t)nc, h = slice * hpb;
    const int64_t G = H / p.hpg, g0 = h / p.hpg;
    const int64_t c0 = c * Q, col0 = PSSM_BLOCK_Y * SSDC_T;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), r0 = qt * SSDC_T, e = q - 1;
    if (r0 >= q || !p.u.vec || !p.vec || P > SSDC_T)
        return; /* (the host launches it only where U is one vector slab: nothing written) */
    const int rrows = q - r0 < SSDC_T ? q - r0 : SSDC_T;
    const int ccols = (int)(N - col0 < SSDC_T ? N - col0 : SSDC_T);
    PSSM_SSDC_SMEM *const ub0 = (PSSM_SSDC_SMEM *)tiles_w;
    PSSM_SSDC_SMEM *const ub1 = (PSSM_SSDC_SMEM *)(tiles_w + SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const vt = (PSSM_SSDC_SMEM *)(tiles_w + 2 * SSDC_TILE_VECS);
    float *const sf = (float *)sf_w;
    /* (16-bit stamps only: an f32 operand tile would not fit over sf) */
    const PSSM_SSDC_ACT *const Sa = sizeof(PSSM_SSDC_SMEM) == 2 ? (const PSSM_SSDC_ACT *)p.sact : 0;
    PSSM_SSDC_SMEM *const vt1 = (PSSM_SSDC_SMEM *)sf_w;
    typedef char pssm_ssdb_vt1_fits[sizeof(PSSM_SSDC_SMEM) != 2 ||
                                            SSDC_T * SSDC_F32P * 4 >= SSDC_TILE_WORDS * 4
                                        ? 1
                                        : -1];
    (void)sizeof(pssm_ssdb_vt1_fits);
    float acc[SSDC_TPW][PSSM_MMA_ACC], mk[SSDC_TPW][PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++)
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            acc[ti][i] = 0.0f;

    /* Head hh's copies (U into ub0/ub1 by the head's parity; S into sf in f32, or, from its
     * 16-bit copy, straight into vt / vt1 by the parity) and its row scale's
     * operands into registers (threads < T: row r0 + tid) */
    float n_dtp = 0.0f, n_cs = 0.0f, n_cse = 0.0f;
    int n_seg = -2, n_sege = -3;
#define SSDB_ISSUE(hh)                                                                             \
    do {                                                                                           \
        const int64_t bhh = b * H + (hh);                                                          \
        PSSM_SSDC_FN(pssm_ssdc_copy_async_)(((hh) - h) & 1 ? ub1 : ub0,                            \
                                            SSDC_OPND(p.u, (hh), g0) + (c0 + r0) * p.u.s[1],       \
                                            p.u.s[1], rrows, (int)P);                              \
        if (Sa)                                                                                    \
            PSSM_SSDC_FN(pssm_ssdc_copy_async_)(((hh) - h) & 1 ? vt1 : vt,                         \
                                                Sa + (bhh * nc + c) * P * N + col0, N, (int)P,     \
                                                ccols);                                            \
        else                                                                                       \
            PSSM_SSDC_FN(pssm_ssdc_copy_f32_async_)(sf, p.sprod + (bhh * nc + c) * P * N + col0,   \
                                                    N, (int)P, ccols);                             \
        if (tid < SSDC_T && r0 + tid < q) {                                                        \
            const float *pr = p.prep + (bhh * nc + c) * 3 * Q;                                     \
            n_dtp = pr[r0 + tid], n_cs = pr[Q + r0 + tid], n_cse = pr[Q + e];                      \
            n_seg = ((const int32_t *)pr)[2 * Q + r0 + tid];                                       \
            n_sege = ((const int32_t *)pr)[2 * Q + e];                                             \
        }                                                                                          \
    } while (0)
    /* the row scale from those registers (0 past the chunk's rows) */
#define SSDB_SCALE()                                                                               \
    (tid < SSDC_T && r0 + tid < q                                                                  \
         ? (db ? (n_seg == n_sege ? pssm_expf(n_cse - n_cs) * n_dtp : 0.0f)                        \
               : (n_seg == -1 ? pssm_expf(n_cs) : 0.0f))                                           \
         : 0.0f)

    /* the states' share (nothing enters the first chunk without an initial state: dC) */
    if (db || c > 0 || p.x0) {
        SSDB_ISSUE(h);
        if (tid < SSDC_T)
            sc[tid] = SSDB_SCALE();
        for (int64_t hh = h; hh < h + hpb; hh++) {
            const int par = (int)((hh - h) & 1);
            PSSM_COPY_WAIT_ALL();
            PSSM_SYNC(); /* U, S and the scales of this head; every warp is done with vt (Sa:
                          * with the other parity's tiles) */
            if (!Sa) {
                PSSM_SSDC_FN(pssm_ssdc_f32_put_)(vt, sf);
                PSSM_SYNC(); /* S as operands; sf is free */
            }
            if (hh + 1 < h + hpb)
                SSDB_ISSUE(hh + 1); /* (the other U buffer was last read by the previous head) */
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++)
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    mk[ti][i] = 0.0f;
            PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(mk, par ? ub1 : ub0, 0, Sa && par ? vt1 : vt, 1);
            const float *const scl = sc + par * SSDC_T;
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tm = (warp * SSDC_TPW + ti) / SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    acc[ti][i] += scl[tm * 16 + pssm_mma_row(lane, i)] * mk[ti][i];
            }
            if (hh + 1 < h + hpb && tid < SSDC_T) /* (read by the previous head alone) */
                sc[(1 - par) * SSDC_T + tid] = SSDB_SCALE();
        }
        PSSM_SYNC(); /* every product read its tiles */
    }
#undef SSDB_ISSUE
#undef SSDB_SCALE

    /* the chunk's own tokens in the group's first slice: M = dCB (DC), dCB^T (DB), weighted and
     * masked already; W = B (DC) or C (DB), its rows k as they lie */
    if (slice % (p.hpg / hpb) == 0) {
        const float *const Md = p.dcb + ((b * G + g0) * nc + c) * Q * Q;
        const int64_t wrs = p.w.s[1];
        const PSSM_SSDC_ACT *const Wc = SSDC_OPND(p.w, h, g0) + c0 * wrs + col0 * p.w.s[3];
        const int nslabs = db ? (e - r0) / SSDC_T + 1 : r0 / SSDC_T + 1;
        for (int s = 0; s < nslabs; s++) {
            const int k0 = db ? r0 + (nslabs - 1 - s) * SSDC_T : s * SSDC_T; /* (as the
                                                   product's order: the diagonal slab last) */
            const int krows = q - k0 < SSDC_T ? q - k0 : SSDC_T;
            PSSM_SSDC_FN(pssm_ssdc_cb_load_)(mk, Md, Q, r0, k0, db);
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {
                    PSSM_SSDC_SMEM *const at = ub0 + (tm * 16 + pssm_mma_row(lane, i)) * SSDC_LDS +
                                               tn * 16 + pssm_mma_col(lane, i);
                    if (PSSM_MMA_PAIRS)
                        PSSM_SSDC_FN(pssm_ssdc_put2_)(at, mk[ti][i], mk[ti][i + PSSM_MMA_PAIRS]);
                    else
                        *at = PSSM_SSDC_TO_SMEM(mk[ti][i]);
                }
            }
            PSSM_SSDC_FN(pssm_ssdc_tile_)(ub1, Wc + k0 * wrs, wrs, p.w.s[3], krows, ccols,
                                          p.w.vec, 0);
            PSSM_SYNC();
            PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(acc, ub0, 0, ub1, 1);
            PSSM_SYNC();
        }
    }

    /* this slice's partial */
    float *const dst = db ? p.dBh : p.dCh;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++) {
        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++) {
            const int rr = tm * 16 + pssm_mma_row(lane, i), cc = tn * 16 + pssm_mma_col(lane, i);
            if (rr < rrows && cc < ccols)
                dst[((b * L + c0 + r0 + rr) * slices + slice) * N + col0 + cc] = acc[ti][i];
        }
    }
}
