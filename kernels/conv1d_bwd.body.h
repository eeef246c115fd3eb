/*
 * conv1d_bwd.body.h - causal_conv1d_bwd of one dtype (conv1d_dtype.body.h) and width PSSM_C1_W,
 * the fused vector kernels of the common case (no seq_idx; channel-first needs W-1 <= VEC):
 *   pssm_conv1d_bwd_cf_w<W>_<dt>  x, dout, dx with stride 1 in time, one 16-byte grid;
 *   pssm_conv1d_bwd_cl_w<W>_<dt>  x, dout, dx with stride 1 in channels, whole aligned vectors.
 * Each reads x and dout once and writes dx once; pre and dpre = dout * act'(pre) live in
 * registers.  dxp[s] = sum_k weight[k] * dpre[s + W-1 - k] needs the dpre of the W-1 steps after
 * s: cf takes them from the next lane (the next tile's first lane one tile later: dx of a tile is
 * written while the next tile is computed), cl keeps a window of the last W dpre in registers and
 * writes dx W-1 steps late.  Sums for dweight / dbias are kept per thread and written, per work
 * item, as one F32 partial ((b*segs + seg)*D + d)*(W+1) + k for the reduce kernel.
 */
#define C1B_W PSSM_C1_W
#define C1B_HW (PSSM_C1_W - 1)
#define C1B_H (PSSM_C1_W > 1 ? PSSM_C1_W - 1 : 1) /* size of halo arrays (never 0) */
#define C1B_V PSSM_C1_VEC
#define C1B_U PSSM_C1_CL_BWD_STEPS
#define C1B_FN(name) PSSM_C1_CAT4(pssm_c1b_, name, PSSM_C1_W, PSSM_C1_DT)

/* dpre = g * act'(pre) of one vector, in place over its pre-activations; 0 where !on.  One
 * branch for the vector's activation, not one per element: a branch per element made each
 * element's sigmoid chain (exp -> add -> rcp) a block of its own, waiting on its latency (the
 * scan's softplus, runs 95-96; the cl kernel at B8 D4352 L1024, 166 us, 43% of the copy
 * bandwidth, run 123). */
PSSM_DEVICE void C1B_FN(dact_vec)(float *dp, const float *g, int32_t silu, int on)
{
    if (silu) {
        PSSM_UNROLL
        for (int i = 0; i < C1B_V; i++)
            dp[i] = g[i] * pssm_dsilu_fast(dp[i]);
    } else {
        PSSM_UNROLL
        for (int i = 0; i < C1B_V; i++)
            dp[i] = g[i];
    }
    PSSM_UNROLL
    for (int i = 0; i < C1B_V; i++)
        dp[i] = on ? dp[i] : 0.0f;
}

/* pre-activations of one vector from its elements x and the hw before them (halo), and the
 * gradient through the activation; the taps' sums for dweight / dbias when `on`. */
PSSM_DEVICE void C1B_FN(dpre_vec_w)(const float *x, const float *halo, const float *g,
                                    const float *w, float bias, int32_t silu, int on, float *dp,
                                    float *dw, float *db)
{
    PSSM_UNROLL
    for (int i = 0; i < C1B_V; i++) {
        float pre = bias;
        PSSM_UNROLL
        for (int k = 0; k < C1B_W; k++) {
            const int e = i - C1B_HW + k;
            pre += w[k] * (e >= 0 ? x[e >= 0 ? e : 0] : halo[e < 0 ? e + C1B_HW : 0]);
        }
        dp[i] = pre;
    }
    C1B_FN(dact_vec)(dp, g, silu, on);
    if (!on)
        return;
    PSSM_UNROLL
    for (int i = 0; i < C1B_V; i++) {
        *db += dp[i];
        PSSM_UNROLL
        for (int k = 0; k < C1B_W; k++) {
            const int e = i - C1B_HW + k;
            dw[k] += dp[i] * (e >= 0 ? x[e >= 0 ? e : 0] : halo[e < 0 ? e + C1B_HW : 0]);
        }
    }
}

/* dxp of one vector from its dpre and the hw dpre after it (ahead). */
PSSM_DEVICE void C1B_FN(dx_vec_w)(const float *dp, const float *ahead, const float *w, float *dx)
{
    PSSM_UNROLL
    for (int i = 0; i < C1B_V; i++) {
        float acc = 0.0f;
        PSSM_UNROLL
        for (int k = 0; k < C1B_W; k++) {
            const int j = i + C1B_HW - k;
            acc += w[k] * (j < C1B_V ? dp[j < C1B_V ? j : 0] : ahead[j >= C1B_V ? j - C1B_V : 0]);
        }
        dx[i] = acc;
    }
}

/* Adds dfinal to the elements of a vector from position s0 on that went to final_states. */
PSSM_DEVICE void C1B_FN(add_dfinal_w)(const pssm_conv1d_bwd_params p, int64_t b, int64_t d,
                                      int64_t s0, int64_t step_d, float *dx)
{
    PSSM_UNROLL /* (unrolled, so that dx stays in registers: a loop indexing it put every dx
                   vector of the cf kernel through the stack, 80 bytes of it) */
    for (int i = 0; i < C1B_V; i++) /* d + i along channels (cl) or s0 + i along time (cf) */
        dx[i] += PSSM_C1_FN(dfinal_at)(p, b, d + i * step_d, s0 + i * (1 - step_d), C1B_HW);
}

PSSM_C1_CF_BWD_KERNEL(PSSM_C1_CAT4(pssm_conv1d_bwd_cf_w, PSSM_C1_W, _, PSSM_C1_DT),
                      pssm_conv1d_bwd_params, p)
{
#if C1B_HW <= C1B_V /* else never launched: the planner takes the generic path */
    const int lane = PSSM_LANE;
    const int64_t warps = (int64_t)(PSSM_BLOCKDIM_X * PSSM_BLOCKDIM_Y) / PSSM_WARP_SIZE;
    const int64_t len = p.len;
    for (int64_t item = PSSM_BLOCK_X * warps + PSSM_WARP_ID; item < p.work;
         item += PSSM_GRIDDIM_X * warps) { /* uniform over the warp */
        const int64_t row = pssm_c1_div(item, p.segs), seg = item - row * p.segs;
        const int64_t b = pssm_c1_div(row, p.dim), d = row - b * p.dim;
        const int64_t m = pssm_c1_emod(p.misalign + b * p.x_sb + d * p.x_sd, C1B_V);
        const int64_t head = PSSM_C1_MIN(len, (C1B_V - m) % C1B_V); /* edge before the grid */
        const int64_t nvec = (len - head) / C1B_V;                  /* whole vectors         */
        const int64_t vbeg = seg * p.seg_len * PSSM_WARP_SIZE;
        const int64_t vend = PSSM_C1_MIN(vbeg + p.seg_len * PSSM_WARP_SIZE, nvec);
        float w[C1B_W], dw[C1B_W], db = 0.0f;
        PSSM_C1_FN(load_params)(w, 1, C1B_W, p.weight, d * p.w_sd, 0, p.w_sw, p.weight_dtype);
        const float bias = p.bias ? pssm_load_any(p.bias, d * p.bias_sd, p.weight_dtype) : 0.0f;
        PSSM_UNROLL
        for (int k = 0; k < C1B_W; k++)
            dw[k] = 0.0f;

        const PSSM_C1_T *xrow = (const PSSM_C1_T *)p.x + b * p.x_sb + d * p.x_sd;
        const PSSM_C1_VT *xv = (const PSSM_C1_VT *)(xrow + head);
        const PSSM_C1_VT *gv =
            (const PSSM_C1_VT *)((const PSSM_C1_T *)p.dout + b * p.g_sb + d * p.g_sd + head);
        PSSM_C1_VT *dxv = (PSSM_C1_VT *)((PSSM_C1_T *)p.dx + b * p.dx_sb + d * p.dx_sd + head);
        if (vbeg < vend) {
            /* the tile being computed and the two after it in flight (one was too few to
             * reach the copy bandwidth: each warp walks its row tile by tile) */
            PSSM_C1_VT cx, cg, nx, ng, mx, mg;
            PSSM_C1_FN(load_raw)(&cx, xv, vbeg + lane, vend);
            PSSM_C1_FN(load_raw)(&cg, gv, vbeg + lane, vend);
            PSSM_C1_FN(load_raw)(&nx, xv, vbeg + PSSM_WARP_SIZE + lane, vend);
            PSSM_C1_FN(load_raw)(&ng, gv, vbeg + PSSM_WARP_SIZE + lane, vend);
            /* the hw elements before the segment's first vector: memory (x, initial state, 0) */
            float prevx[C1B_H], dprev[C1B_V];
            PSSM_UNROLL
            for (int h = 0; h < C1B_H; h++)
                prevx[h] = 0.0f;
            PSSM_UNROLL
            for (int i = 0; i < C1B_V; i++)
                dprev[i] = 0.0f; /* read from the second tile on */
            if (lane == 0) {
                const PSSM_C1_T *ir =
                    p.init ? (const PSSM_C1_T *)p.init + b * p.init_sb + d * p.init_sd : 0;
                PSSM_UNROLL
                for (int h = 0; h < C1B_HW; h++)
                    prevx[h] = PSSM_C1_FN(xval)(xrow, 1, ir, p.init_sw, C1B_HW, len,
                                                head + vbeg * C1B_V + h - C1B_HW);
            }
            int64_t vt = vbeg;
            for (;;) { /* uniform over the warp */
                const int64_t vi = vt + lane;
                const int on = vi < vend;
                PSSM_C1_FN(load_raw)(&mx, xv, vi + 2 * PSSM_WARP_SIZE, vend);
                PSSM_C1_FN(load_raw)(&mg, gv, vi + 2 * PSSM_WARP_SIZE, vend);
                float x[C1B_V], g[C1B_V], halo[C1B_H], dp[C1B_V];
                PSSM_C1_FN(unpack)(x, cx);
                PSSM_C1_FN(unpack)(g, cg);
                halo[0] = 0.0f;
                PSSM_UNROLL
                for (int h = 0; h < C1B_HW; h++) { /* every lane shuffles */
                    const float r = PSSM_SHFL_IDX_F32(x[C1B_V - C1B_HW + h],
                                                      (lane - 1) & (PSSM_WARP_SIZE - 1));
                    halo[h] = lane >= 1 ? r : prevx[h];
                    prevx[h] = PSSM_SHFL_IDX_F32(x[C1B_V - C1B_HW + h], PSSM_WARP_SIZE - 1);
                }
                C1B_FN(dpre_vec_w)(x, halo, g, w, bias, p.silu, on, dp, dw, &db);
                if (vt > vbeg) { /* dx of the previous tile, which was whole */
                    float ahead[C1B_H], dxo[C1B_V];
                    ahead[0] = 0.0f;
                    PSSM_UNROLL
                    for (int h = 0; h < C1B_HW; h++) {
                        const float nb = PSSM_SHFL_DOWN_F32(dprev[h], 1);
                        const float first = PSSM_SHFL_IDX_F32(dp[h], 0);
                        ahead[h] = lane < PSSM_WARP_SIZE - 1 ? nb : first;
                    }
                    C1B_FN(dx_vec_w)(dprev, ahead, w, dxo);
                    const int64_t s0 = head + (vi - PSSM_WARP_SIZE) * C1B_V;
                    if (s0 + C1B_V > len - C1B_HW)
                        C1B_FN(add_dfinal_w)(p, b, d, s0, 0, dxo);
                    PSSM_C1_FN(store_vec)((PSSM_C1_T *)(dxv + vi - PSSM_WARP_SIZE), dxo);
                }
                PSSM_UNROLL
                for (int i = 0; i < C1B_V; i++)
                    dprev[i] = dp[i];
                if (vt + PSSM_WARP_SIZE >= vend)
                    break;
                vt += PSSM_WARP_SIZE;
                cx = nx;
                cg = ng;
                nx = mx;
                ng = mg;
            }
            /* dx of the last tile: the dpre after a vector from the next lane, or from memory
             * past the segment */
            const int64_t vi = vt + lane;
            float ahead[C1B_H], dxo[C1B_V];
            ahead[0] = 0.0f;
            PSSM_UNROLL
            for (int h = 0; h < C1B_HW; h++)
                ahead[h] = PSSM_SHFL_DOWN_F32(dprev[h], 1);
            if (vi < vend) {
                if (vi + 1 >= vend || lane == PSSM_WARP_SIZE - 1) {
                    PSSM_UNROLL /* (ahead in registers, as dx above) */
                    for (int h = 0; h < C1B_HW; h++)
                        ahead[h] = PSSM_C1_FN(dpre_at)(p, b, d, head + (vi + 1) * C1B_V + h,
                                                       C1B_HW);
                }
                C1B_FN(dx_vec_w)(dprev, ahead, w, dxo);
                const int64_t s0 = head + vi * C1B_V;
                if (s0 + C1B_V > len - C1B_HW)
                    C1B_FN(add_dfinal_w)(p, b, d, s0, 0, dxo);
                PSSM_C1_FN(store_vec)((PSSM_C1_T *)(dxv + vi), dxo);
            }
        }
        /* the edges, one position per lane: dinitial_states, the head, the tail */
        const int64_t nd = p.dinit ? C1B_HW : 0, tail = len - head - nvec * C1B_V;
        if (seg == 0 && lane < nd + head + tail) { /* nd + 2 VEC <= 23 positions */
            const int64_t e = lane - nd;
            const int64_t s = e < 0 ? e : (e < head ? e : e - head + head + nvec * C1B_V);
            PSSM_C1_FN(put_dx)(p, b, d, s, C1B_HW, PSSM_C1_FN(dx_at)(p, b, d, s, C1B_HW));
            if (s >= 0) {
                const PSSM_C1_T *ir =
                    p.init ? (const PSSM_C1_T *)p.init + b * p.init_sb + d * p.init_sd : 0;
                const float dps = PSSM_C1_FN(dpre_at)(p, b, d, s, C1B_HW);
                db += dps;
                PSSM_UNROLL
                for (int k = 0; k < C1B_W; k++)
                    dw[k] += dps * PSSM_C1_FN(xval)(xrow, 1, ir, p.init_sw, C1B_HW, len,
                                                    s - C1B_HW + k);
            }
        }
        PSSM_UNROLL
        for (int k = 0; k < C1B_W; k++)
            dw[k] = pssm_warp_sum(dw[k]);
        db = pssm_warp_sum(db);
        if (lane == 0) {
            float *part = p.part + ((b * p.segs + seg) * p.dim + d) * (C1B_W + 1);
            PSSM_UNROLL
            for (int k = 0; k < C1B_W; k++)
                part[k] = dw[k];
            part[C1B_W] = db;
        }
    }
#else
    (void)p;
#endif
}

/*
 * Channel-last.  A thread owns work item (b, time segment, vector g of channels), g fastest:
 * steps t0-hw .. t1+hw-1 in order, x's window of the last hw steps and dpre's of the last W in
 * registers; dx of step t-hw is written at step t.  The first segment also writes
 * dinitial_states (steps -hw .. -1).  The host makes every vector whole and aligned.
 */
PSSM_C1_KERNEL_BOUNDED(PSSM_C1_CAT4(pssm_conv1d_bwd_cl_w, PSSM_C1_W, _, PSSM_C1_DT),
                       pssm_conv1d_bwd_params, p, PSSM_C1_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    for (int64_t item = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; item < p.work;
         item += threads) {
        const int64_t rest = pssm_c1_div(item, p.nvec), g = item - rest * p.nvec;
        const int64_t b = pssm_c1_div(rest, p.segs), seg = rest - b * p.segs;
        const int64_t c0 = g * C1B_V, len = p.len;
        const int64_t t0 = seg * p.seg_len, t1 = PSSM_C1_MIN(t0 + p.seg_len, len);
        const PSSM_C1_T *x = (const PSSM_C1_T *)p.x + b * p.x_sb + c0;
        const PSSM_C1_T *dout = (const PSSM_C1_T *)p.dout + b * p.g_sb + c0;
        PSSM_C1_T *dx = (PSSM_C1_T *)p.dx + b * p.dx_sb + c0;
        float w[C1B_V][C1B_W], bv[C1B_V], dw[C1B_V][C1B_W], db[C1B_V];
        PSSM_C1_FN(load_params)(&w[0][0], C1B_V, C1B_W, p.weight, c0 * p.w_sd, p.w_sd, p.w_sw,
                                p.weight_dtype);
        PSSM_UNROLL
        for (int i = 0; i < C1B_V; i++) {
            bv[i] = 0.0f;
            db[i] = 0.0f;
            PSSM_UNROLL
            for (int k = 0; k < C1B_W; k++)
                dw[i][k] = 0.0f;
        }
        if (p.bias)
            PSSM_C1_FN(load_params)(bv, 1, C1B_V, p.bias, c0 * p.bias_sd, 0, p.bias_sd,
                                    p.weight_dtype);
        /* x at steps t0-hw .. t0-1 (x, initial state or zeros); dpre of the steps before t0
         * are not needed: dx from step t0 on is written from step t0 + hw on */
        float xw[C1B_H][C1B_V], dpw[C1B_W][C1B_V];
        PSSM_UNROLL
        for (int h = 0; h < C1B_H; h++) {
            const int64_t t = t0 - C1B_HW + h;
            if (h < C1B_HW && t >= 0) {
                PSSM_C1_FN(load_vec)(xw[h], x + t * p.x_sl);
            } else {
                const PSSM_C1_T *init = (const PSSM_C1_T *)p.init;
                PSSM_UNROLL
                for (int i = 0; i < C1B_V; i++)
                    xw[h][i] = init && h < C1B_HW
                                   ? PSSM_C1_LD(init[b * p.init_sb + (c0 + i) * p.init_sd +
                                                     (C1B_HW + t) * p.init_sw])
                                   : 0.0f;
            }
        }
        PSSM_UNROLL
        for (int k = 0; k < C1B_W; k++)
            PSSM_UNROLL
            for (int i = 0; i < C1B_V; i++)
                dpw[k][i] = 0.0f;
        const int64_t sfirst = seg == 0 && p.dinit ? -C1B_HW : t0; /* first dx written */
        const int64_t tend = t1 + C1B_HW;
        /* steps tc .. tc+U-1 in registers while the next U are in flight (one step in flight
         * was 8 KB an SM at two blocks of 184 registers: a third of the copy bandwidth) */
        PSSM_C1_VT cx[C1B_U], cg[C1B_U];
        PSSM_UNROLL
        for (int u = 0; u < C1B_U; u++) {
            const int64_t tu = t0 + u, in = tu < len && tu < tend;
            PSSM_C1_FN(load_raw)(&cx[u], (const PSSM_C1_VT *)(x + tu * p.x_sl), 0, in);
            PSSM_C1_FN(load_raw)(&cg[u], (const PSSM_C1_VT *)(dout + tu * p.g_sl), 0, in);
        }
        for (int64_t tc = t0; tc < tend; tc += C1B_U) {
            PSSM_C1_VT nx[C1B_U], ng[C1B_U];
            PSSM_UNROLL
            for (int u = 0; u < C1B_U; u++) {
                const int64_t tn = tc + C1B_U + u, in = tn < len && tn < tend;
                PSSM_C1_FN(load_raw)(&nx[u], (const PSSM_C1_VT *)(x + tn * p.x_sl), 0, in);
                PSSM_C1_FN(load_raw)(&ng[u], (const PSSM_C1_VT *)(dout + tn * p.g_sl), 0, in);
            }
            PSSM_UNROLL
            for (int u = 0; u < C1B_U; u++) {
                const int64_t t = tc + u;
                if (t >= tend)
                    break;
                float xc[C1B_V], gc[C1B_V], dp[C1B_V];
                PSSM_C1_FN(unpack)(xc, cx[u]);
                PSSM_C1_FN(unpack)(gc, cg[u]);
                const int live = t < len, own = t < t1; /* steps past L have dpre 0 */
                PSSM_UNROLL
                for (int i = 0; i < C1B_V; i++) {
                    float pre = bv[i];
                    PSSM_UNROLL
                    for (int k = 0; k < C1B_HW; k++)
                        pre += w[i][k] * xw[k][i];
                    dp[i] = pre + w[i][C1B_W - 1] * xc[i];
                }
                C1B_FN(dact_vec)(dp, gc, p.silu, live);
                if (own) {
                    PSSM_UNROLL
                    for (int i = 0; i < C1B_V; i++) {
                        db[i] += dp[i];
                        PSSM_UNROLL
                        for (int k = 0; k < C1B_HW; k++)
                            dw[i][k] += dp[i] * xw[k][i];
                        dw[i][C1B_W - 1] += dp[i] * xc[i];
                    }
                }
                /* slide the windows: dpw[W-1] is step t, dpw[0] step t-hw */
                PSSM_UNROLL
                for (int k = 0; k + 1 < C1B_W; k++)
                    PSSM_UNROLL
                    for (int i = 0; i < C1B_V; i++)
                        dpw[k][i] = dpw[k + 1][i];
                PSSM_UNROLL
                for (int i = 0; i < C1B_V; i++)
                    dpw[C1B_W - 1][i] = dp[i];
                PSSM_UNROLL
                for (int k = 0; k + 1 < C1B_HW; k++)
                    PSSM_UNROLL
                    for (int i = 0; i < C1B_V; i++)
                        xw[k][i] = xw[k + 1][i];
                if (C1B_HW > 0) {
                    PSSM_UNROLL
                    for (int i = 0; i < C1B_V; i++)
                        xw[C1B_H - 1][i] = xc[i];
                }
                const int64_t s = t - C1B_HW;
                if (s >= sfirst && s < t1) {
                    float o[C1B_V];
                    PSSM_UNROLL
                    for (int i = 0; i < C1B_V; i++) {
                        float acc = 0.0f;
                        PSSM_UNROLL
                        for (int k = 0; k < C1B_W; k++)
                            acc += w[i][k] * dpw[C1B_HW - k][i];
                        o[i] = acc;
                    }
                    if (s >= len - C1B_HW)
                        C1B_FN(add_dfinal_w)(p, b, c0, s, 1, o);
                    if (s >= 0) {
                        PSSM_C1_FN(store_vec)(dx + s * p.dx_sl, o);
                    } else {
                        PSSM_NOUNROLL
                        for (int i = 0; i < C1B_V; i++)
                            PSSM_C1_FN(put_dx)(p, b, c0 + i, s, C1B_HW, o[i]);
                    }
                }
            }
            PSSM_UNROLL
            for (int u = 0; u < C1B_U; u++) {
                cx[u] = nx[u];
                cg[u] = ng[u];
            }
        }
        float *part = p.part + ((b * p.segs + seg) * p.dim + c0) * (C1B_W + 1);
        PSSM_UNROLL
        for (int i = 0; i < C1B_V; i++) {
            PSSM_UNROLL
            for (int k = 0; k < C1B_W; k++)
                part[i * (C1B_W + 1) + k] = dw[i][k];
            part[i * (C1B_W + 1) + C1B_W] = db[i];
        }
    }
}

#undef C1B_W
#undef C1B_HW
#undef C1B_H
#undef C1B_V
#undef C1B_U
#undef C1B_FN
