/*
 * conv1d_fwd.body.h - causal_conv1d_fwd for one dtype (conv1d_dtype.body.h) and one width
 * PSSM_C1_W in 1..8 (stamped for 2..4): the channel-first kernel pssm_conv1d_fwd_cf_w<W>_<dt>
 * and the channel-last kernel pssm_conv1d_fwd_cl_w<W>_<dt>.  Both take every option.
 *
 * Both walk a grid of 16-byte vectors, along a row (cf: x and out have stride 1 in time) or
 * across the channels (cl: stride 1 in channels), that sits on 16-byte boundaries of memory:
 * m is the misalignment of the row (cf) or batch (cl), the same for x and out (the host
 * checks it).  The few elements before the first whole vector and after the last ("edges",
 * fewer than 2*VEC per row) go through the scalar out_at, and seq_idx is applied by redoing
 * the outputs next to a sequence boundary (redo), so the vector paths stay plain.
 */

#define C1F_W PSSM_C1_W
#define C1F_HW (PSSM_C1_W - 1)                    /* halo: taps before the current element */
#define C1F_H (PSSM_C1_W > 1 ? PSSM_C1_W - 1 : 1) /* size of halo arrays (never 0)         */
#define C1F_V PSSM_C1_VEC
/* cf: halo element h (offset h - HW from a vector's first element) lives q(h) vectors back, at
 * index idx(h) of that vector; q is 1 unless W - 1 exceeds the vector (f32 with W > 5). */
#define C1F_Q(h) ((C1F_HW - (h) + C1F_V - 1) / C1F_V)
#define C1F_IDX(h) ((h)-C1F_HW + C1F_Q(h) * C1F_V)
/* cl: time steps loaded ahead of their use (more would cost registers for wide windows). */
#define C1F_U PSSM_C1_CL_STEPS(C1F_V, C1F_W)
#define C1F_FN(name) PSSM_C1_CAT4(pssm_c1_, name, PSSM_C1_W, PSSM_C1_DT)

/*
 * Channel-first, the whole vectors vbeg .. vend-1 of row (b,d), whose vector 0 starts at
 * element head.  A tile is NV vectors per lane, and PSSM_C1_AHEAD tiles are loaded ahead of the
 * one being computed; vector j of lane l is the (j*warp + l)-th of
 * the tile, so each load instruction of the warp reads one contiguous stretch.
 * The W-1 elements before a vector are the tail of the vector before it: lane l-q's vector j,
 * or for lanes l < q the previous vector j-1 of lane warp-q+l, which the same rotation
 * shuffle delivered one step earlier (prev).  The first vector reads its halo from memory
 * (x, initial state or zeros).  With seq_idx, the vectors whose windows span two sequences
 * are redone by the scalar path at the end.  Called by the whole warp.
 */
PSSM_DEVICE void C1F_FN(cf_vectors_w)(const pssm_conv1d_fwd_params p, int64_t b, int64_t d,
                                      int64_t head, int64_t vbeg, int64_t vend, int lane)
{
    const int64_t tile = (int64_t)PSSM_WARP_SIZE * PSSM_C1_NV;
    const PSSM_C1_T *xrow = (const PSSM_C1_T *)p.x + b * p.x_sb + d * p.x_sd;
    const PSSM_C1_VT *xv = (const PSSM_C1_VT *)(xrow + head) + lane;
    PSSM_C1_VT *ov = (PSSM_C1_VT *)((PSSM_C1_T *)p.out + b * p.o_sb + d * p.o_sd + head) + lane;
    const int64_t lend = vend - lane; /* this lane's vectors: v - lane < lend */
    /* tiles in flight: the one being computed and PSSM_C1_AHEAD after it, as loaded */
    PSSM_C1_VT tiles[PSSM_C1_AHEAD + 1][PSSM_C1_NV];
    PSSM_UNROLL
    for (int a = 0; a < PSSM_C1_AHEAD; a++) /* first, so the parameters' loads overlap them */
        PSSM_UNROLL
        for (int j = 0; j < PSSM_C1_NV; j++)
            PSSM_C1_FN(load_raw)(&tiles[a][j], xv, vbeg + a * tile + j * PSSM_WARP_SIZE, lend);

    float wv[C1F_W];
    PSSM_C1_FN(load_params)(wv, 1, C1F_W, p.weight, d * p.w_sd, 0, p.w_sw, p.weight_dtype);
    const float bv = p.bias ? pssm_load_any(p.bias, d * p.bias_sd, p.weight_dtype) : 0.0f;
    float prev[C1F_H];
    PSSM_UNROLL
    for (int h = 0; h < C1F_H; h++)
        prev[h] = 0.0f;
    if (lane < C1F_Q(0)) {
        const PSSM_C1_T *ir =
            p.init ? (const PSSM_C1_T *)p.init + b * p.init_sb + d * p.init_sd : 0;
        PSSM_UNROLL
        for (int h = 0; h < C1F_HW; h++)
            prev[h] = PSSM_C1_FN(xval)(xrow, 1, ir, p.init_sw, C1F_HW, p.len,
                                       head + (vbeg + lane) * C1F_V + h - C1F_HW);
    }

    for (int64_t vt = vbeg; vt < vend; vt += tile) { /* uniform over the warp */
        PSSM_UNROLL /* the tile PSSM_C1_AHEAD after this one, in flight while it is computed */
        for (int j = 0; j < PSSM_C1_NV; j++)
            PSSM_C1_FN(load_raw)(&tiles[PSSM_C1_AHEAD][j], xv,
                                 vt + PSSM_C1_AHEAD * tile + j * PSSM_WARP_SIZE, lend);
        PSSM_UNROLL
        for (int j = 0; j < PSSM_C1_NV; j++) {
            const int64_t v = vt + j * PSSM_WARP_SIZE; /* minus lane */
            float x[C1F_V];
            PSSM_C1_FN(unpack)(x, tiles[0][j]);
            float halo[C1F_H];
            halo[0] = 0.0f;
            PSSM_UNROLL
            for (int h = 0; h < C1F_HW; h++) { /* every lane shuffles */
                const float r = PSSM_SHFL_IDX_F32(x[C1F_IDX(h)],
                                                  (lane - C1F_Q(h)) & (PSSM_WARP_SIZE - 1));
                halo[h] = lane >= C1F_Q(h) ? r : prev[h];
                prev[h] = r;
            }
            if (v >= lend)
                continue;
            float y[C1F_V];
            PSSM_UNROLL
            for (int i = 0; i < C1F_V; i++) {
                float acc = bv;
                PSSM_UNROLL
                for (int k = 0; k < C1F_W; k++) {
                    const int e = i - C1F_HW + k; /* tap offset inside this vector */
                    acc += wv[k] * (e >= 0 ? x[e >= 0 ? e : 0] : halo[e < 0 ? e + C1F_HW : 0]);
                }
                y[i] = acc;
            }
            pssm_c1_activate(y, C1F_V, p.silu);
            PSSM_C1_FN(store_vec)((PSSM_C1_T *)(ov + v), y);
        }
        PSSM_UNROLL
        for (int a = 0; a < PSSM_C1_AHEAD; a++)
            PSSM_UNROLL
            for (int j = 0; j < PSSM_C1_NV; j++)
                tiles[a][j] = tiles[a + 1][j];
    }
    if (C1F_HW > 0 && p.seq_idx) { /* this lane's vectors whose windows span two sequences */
        const int32_t *sr = p.seq_idx + b * p.seq_sb;
        PSSM_NOUNROLL
        for (int64_t v = vbeg; v < lend; v += PSSM_WARP_SIZE) {
            const int64_t t0 = head + (v + lane) * C1F_V;
            if (pssm_c1_seq_mixed(sr, p.seq_sl, p.len, t0 - C1F_HW, C1F_HW + C1F_V))
                PSSM_C1_FN(redo)(p, b, d, 1, t0, t0 + C1F_V, t0 + C1F_V, C1F_HW);
        }
    }
}

/*
 * Channel-first.  A warp owns work item (row b*D+d, segment): seg_len tiles of the row's whole
 * vectors.  The warp of segment 0 also does the row's edges, one element per lane, and its
 * final state.
 */
PSSM_C1_CF_KERNEL(PSSM_C1_CAT4(pssm_conv1d_fwd_cf_w, PSSM_C1_W, _, PSSM_C1_DT),
                  pssm_conv1d_fwd_params, p)
{
    const int lane = PSSM_LANE;
    const int64_t warps = (int64_t)(PSSM_BLOCKDIM_X * PSSM_BLOCKDIM_Y) / PSSM_WARP_SIZE;
    const int64_t tile = (int64_t)PSSM_WARP_SIZE * PSSM_C1_NV;
    const int64_t len = p.len;
    for (int64_t item = PSSM_BLOCK_X * warps + PSSM_WARP_ID; item < p.work;
         item += PSSM_GRIDDIM_X * warps) { /* uniform over the warp */
        const int64_t row = pssm_c1_div(item, p.segs), seg = item - row * p.segs;
        const int64_t b = pssm_c1_div(row, p.dim), d = row - b * p.dim;
        const int64_t m = pssm_c1_emod(p.misalign + b * p.x_sb + d * p.x_sd, C1F_V);
        const int64_t head = PSSM_C1_MIN(len, (C1F_V - m) % C1F_V); /* edge before the grid */
        const int64_t nvec = (len - head) / C1F_V;                  /* whole vectors         */
        const int64_t vbeg = seg * p.seg_len * tile;
        const int64_t vend = PSSM_C1_MIN(vbeg + p.seg_len * tile, nvec);
        if (vbeg < vend)
            C1F_FN(cf_vectors_w)(p, b, d, head, vbeg, vend, lane);

        if (seg == 0 && lane < len - nvec * C1F_V) { /* fewer than 2 VEC <= warp edges */
            const int64_t t = lane < head ? lane : lane + nvec * C1F_V;
            PSSM_C1_FN(out_at)(p, b, d, t, C1F_HW);
        }
        if (seg == 0 && p.final && lane < C1F_HW)
            PSSM_C1_FN(put_final)(p, b, d, C1F_HW, lane);
    }
}

/* Channel-last window: steps t-HW .. t-1 in win, oldest first; push step t. */
PSSM_DEVICE void C1F_FN(push_w)(float (*win)[C1F_V], const float *cur)
{
    PSSM_UNROLL
    for (int k = 0; k + 1 < C1F_HW; k++) {
        PSSM_UNROLL
        for (int i = 0; i < C1F_V; i++)
            win[k][i] = win[k + 1][i];
    }
    PSSM_UNROLL
    for (int i = 0; i < C1F_V; i++)
        win[C1F_H - 1][i] = cur[i];
}

/* Channel-last, steps t0 .. tw-1 ((tw-t0) % U == 0) of the VEC channels c0.. of batch b: the
 * window of the last W-1 steps slides along time in registers, primed from the W-1 steps
 * before t0 (x, initial state or zeros); the next chunk of U steps is in flight while one is
 * computed. */
PSSM_DEVICE void C1F_FN(cl_vectors_w)(const pssm_conv1d_fwd_params p, int64_t b, int64_t c0,
                                      int64_t t0, int64_t tw)
{
    const PSSM_C1_T *x = (const PSSM_C1_T *)p.x + b * p.x_sb + c0;
    PSSM_C1_T *out = (PSSM_C1_T *)p.out + b * p.o_sb + c0;
    PSSM_C1_VT cur[C1F_U];
    PSSM_UNROLL
    for (int u = 0; u < C1F_U; u++) /* first, so the loads below overlap them */
        cur[u] = *(const PSSM_C1_VT *)(x + (t0 + u) * p.x_sl);

    float wv[C1F_V][C1F_W], bv[C1F_V];
    PSSM_C1_FN(load_params)(&wv[0][0], C1F_V, C1F_W, p.weight, c0 * p.w_sd, p.w_sd, p.w_sw,
                            p.weight_dtype);
    PSSM_UNROLL
    for (int i = 0; i < C1F_V; i++)
        bv[i] = 0.0f;
    if (p.bias)
        PSSM_C1_FN(load_params)(bv, 1, C1F_V, p.bias, c0 * p.bias_sd, 0, p.bias_sd,
                                p.weight_dtype);
    float win[C1F_H][C1F_V];
    PSSM_UNROLL
    for (int h = 0; h < C1F_H; h++) {
        const int64_t t = t0 - C1F_HW + h;
        if (h < C1F_HW && t >= 0) {
            PSSM_C1_FN(load_vec)(win[h], x + t * p.x_sl);
        } else {
            const PSSM_C1_T *init = (const PSSM_C1_T *)p.init;
            PSSM_UNROLL
            for (int i = 0; i < C1F_V; i++)
                win[h][i] = init && h < C1F_HW
                                ? PSSM_C1_LD(init[b * p.init_sb + (c0 + i) * p.init_sd +
                                                  (C1F_HW + t) * p.init_sw])
                                : 0.0f;
        }
    }
    for (int64_t t = t0; t < tw; t += C1F_U) {
        PSSM_C1_VT next[C1F_U];
        PSSM_UNROLL
        for (int u = 0; u < C1F_U; u++)
            PSSM_C1_FN(load_raw)(&next[u], (const PSSM_C1_VT *)(x + (t + C1F_U + u) * p.x_sl), 0,
                                 t + C1F_U < tw);
        PSSM_UNROLL
        for (int u = 0; u < C1F_U; u++) {
            float c[C1F_V], y[C1F_V];
            PSSM_C1_FN(unpack)(c, cur[u]);
            PSSM_UNROLL
            for (int i = 0; i < C1F_V; i++) {
                float acc = bv[i];
                PSSM_UNROLL
                for (int k = 0; k < C1F_HW; k++)
                    acc += wv[i][k] * win[k][i];
                y[i] = acc + wv[i][C1F_W - 1] * c[i];
            }
            pssm_c1_activate(y, C1F_V, p.silu);
            PSSM_C1_FN(store_vec)(out + (t + u) * p.o_sl, y);
            C1F_FN(push_w)(win, c);
        }
        PSSM_UNROLL
        for (int u = 0; u < C1F_U; u++)
            cur[u] = next[u];
    }
}

/*
 * Channel-last.  A thread owns work item (b, time segment, group g), groups fastest so that a
 * warp reads contiguous stretches of each time step.  Group g < nvec is the whole vector g of
 * batch b's channel grid (cl_vectors_w); the next groups are the edge channels, one each, done
 * by the scalar pass, which also takes the steps past a segment's last whole chunk of U (only
 * in a batch's last segment: the host makes seg_len a multiple of U).
 */
PSSM_C1_KERNEL_BOUNDED(PSSM_C1_CAT4(pssm_conv1d_fwd_cl_w, PSSM_C1_W, _, PSSM_C1_DT),
                       pssm_conv1d_fwd_params, p, PSSM_C1_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    for (int64_t item = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; item < p.work;
         item += threads) {
        const int64_t rest = pssm_c1_div(item, p.nvec), g = item - rest * p.nvec;
        const int64_t b = pssm_c1_div(rest, p.segs), seg = rest - b * p.segs;
        const int64_t m = pssm_c1_emod(p.misalign + b * p.x_sb, C1F_V);
        const int64_t head = PSSM_C1_MIN(p.dim, (C1F_V - m) % C1F_V);
        const int64_t nvec = (p.dim - head) / C1F_V;
        const int64_t t0 = seg * p.seg_len, t1 = PSSM_C1_MIN(t0 + p.seg_len, p.len);
        const int64_t tw = t0 + (t1 - t0) / C1F_U * C1F_U;
        const int32_t last = seg == p.segs - 1;
        if (g >= nvec + (p.dim - nvec * C1F_V))
            continue; /* no such group in this batch */
        if (g < nvec && t0 < tw)
            C1F_FN(cl_vectors_w)(p, b, head + g * C1F_V, t0, tw);
        /* the scalar pass: an edge channel whole, a vector's steps from tw on and those next to a
         * sequence boundary (the vector path ignores seq_idx) */
        const int64_t e = g - nvec;
        const int64_t c0 = g < nvec ? head + g * C1F_V : (e < head ? e : e + nvec * C1F_V);
        const int64_t nc = g < nvec ? C1F_V : 1;
        const int64_t tf = g < nvec ? tw : t0;
        if (tf < t1 || (C1F_HW > 0 && p.seq_idx))
            PSSM_C1_FN(redo)(p, b, c0, nc, t0, t1, tf, C1F_HW);
        if (p.final && last) {
            PSSM_NOUNROLL
            for (int64_t h = 0; h < nc * C1F_HW; h++)
                PSSM_C1_FN(put_final)(p, b, c0 + h / C1F_H, C1F_HW, h % C1F_H);
        }
    }
}

#undef C1F_W
#undef C1F_HW
#undef C1F_H
#undef C1F_V
#undef C1F_Q
#undef C1F_IDX
#undef C1F_U
#undef C1F_FN
