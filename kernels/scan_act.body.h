/*
 * scan_act.body.h - the per-dtype half of the scan family, included by scan_kernels.h once per
 * activation dtype with:
 *   PSSM_SCAN_ACT     storage type of activations (float, pssm_f16, pssm_bf16)
 *   PSSM_SCAN_LD(v)   storage -> float;  PSSM_SCAN_ST(f)  float -> storage (the one rounding)
 *   PSSM_SCAN_DT      name suffix (f32, f16, bf16)
 * Defines the scan's row-group and B/C-tile helpers (the kernels are in scan_fwd.body.h and
 * state_update.body.h).
 */
/*
 * Steps t .. t+7 of a row with element stride st, raw; steps from nvalid on are zeros.  One or
 * two 16-byte loads when `vec` (the host checked: stride 1, 16-byte aligned rows; t is a
 * multiple of 8) and the group is whole, else element loads.
 */
PSSM_DEVICE pssm_scan_grp PSSM_SCAN_FN(pssm_scan_grp_load_)(const PSSM_SCAN_ACT *row, int64_t st,
                                                             int64_t t, int64_t nvalid, int vec)
{
    pssm_scan_grp g = pssm_scan_grp_zero();
    if (vec && nvalid >= PSSM_SCAN_GROUP) {
        const pssm_vec16 *v = (const pssm_vec16 *)(row + t);
        for (int i = 0; i < PSSM_SCAN_VECS; ++i)
            g.v[i] = v[i];
    } else {
        for (int j = 0; j < PSSM_SCAN_GROUP; ++j)
            if (j < nvalid)
                g = PSSM_SCAN_SET(g, j, row[(t + j) * st]);
    }
    return g;
}

/* Stores steps [0, nvalid) of a group at t .. t+7 of a row (see the load). */
PSSM_DEVICE void PSSM_SCAN_FN(pssm_scan_grp_store_)(PSSM_SCAN_ACT *row, int64_t st, int64_t t,
                                                     int64_t nvalid, int vec, pssm_scan_grp g)
{
    if (vec && nvalid >= PSSM_SCAN_GROUP) {
        pssm_vec16 *v = (pssm_vec16 *)(row + t);
        for (int i = 0; i < PSSM_SCAN_VECS; ++i)
            v[i] = g.v[i];
    } else {
        for (int j = 0; j < PSSM_SCAN_GROUP; ++j) {
            if (j < nvalid) {
#if PSSM_SCAN_VECS == 2
                row[(t + j) * st] = pssm_as_float(g.v[j >> 2].w[j & 3]);
#else
                row[(t + j) * st] = pssm_scan_grp_get16(g, j);
#endif
            }
        }
    }
}

/*
 * A chunk's B and C are stored transposed and interleaved: a step's row holds, per team rank r,
 * the quads of r's states as [B quad | C quad] pairs, then 4 floats of padding (so that the
 * ranks' 16-byte reads fall in different banks).  A lane reads its whole step as 16-byte loads at
 * immediate offsets from one pointer.  This puts element j of state n's group of 8 steps from
 * step 8q at row 8q + j; `off` is n's place in the row (C: off + 4).
 */
PSSM_DEVICE void PSSM_SCAN_FN(pssm_scan_tile_put_)(float *tile, pssm_scan_grp g, int q, int off,
                                                    int row_stride)
{
    for (int j = 0; j < PSSM_SCAN_GROUP; ++j)
        tile[(q * PSSM_SCAN_GROUP + j) * row_stride + off] = PSSM_SCAN_GET(g, j);
}

/* A[n0 .. n0+3] (stride s) as float bits. */
PSSM_DEVICE pssm_vec16 PSSM_SCAN_FN(pssm_scan_load_a4_)(const float *row, int n0, int64_t s)
{
    pssm_vec16 r;
    for (int e = 0; e < 4; ++e)
        r.w[e] = pssm_as_uint(row[(n0 + e) * s]);
    return r;
}

/* Four consecutive elements in storage form (16 bytes of f32, 8 of f16/bf16): loaded early,
 * converted where they are used, so that a prefetch costs no registers for floats and no wait
 * where it is issued. */
#if PSSM_SCAN_VECS == 2
typedef pssm_vec16 PSSM_SCAN_FN(pssm_scan_quad_);
#else
typedef pssm_vec8 PSSM_SCAN_FN(pssm_scan_quad_);
#endif

/* The quad at row + n0 (the host checked: stride 1, rows aligned to 4 elements). */
PSSM_DEVICE PSSM_SCAN_FN(pssm_scan_quad_) PSSM_SCAN_FN(pssm_scan_quad_load_)(
    const PSSM_SCAN_ACT *row, int n0)
{
    return *(const PSSM_SCAN_FN(pssm_scan_quad_) *)(row + n0);
}

/* A quad as four floats (their bits). */
PSSM_DEVICE pssm_vec16 PSSM_SCAN_FN(pssm_scan_quad_floats_)(PSSM_SCAN_FN(pssm_scan_quad_) q)
{
#if PSSM_SCAN_VECS == 2
    return q;
#else
    pssm_vec16 r;
    r.w[0] = pssm_as_uint(PSSM_SCAN_LD((uint16_t)q.w[0]));
    r.w[1] = pssm_as_uint(PSSM_SCAN_LD((uint16_t)(q.w[0] >> 16)));
    r.w[2] = pssm_as_uint(PSSM_SCAN_LD((uint16_t)q.w[1]));
    r.w[3] = pssm_as_uint(PSSM_SCAN_LD((uint16_t)(q.w[1] >> 16)));
    return r;
#endif
}

/* Elements n0 .. n0+3 (stride s) as floats: one quad load when `vec`. */
PSSM_DEVICE pssm_vec16 PSSM_SCAN_FN(pssm_scan_load4_)(const PSSM_SCAN_ACT *row, int n0, int64_t s,
                                                       int vec)
{
    pssm_vec16 r;
    if (vec)
        return PSSM_SCAN_FN(pssm_scan_quad_floats_)(PSSM_SCAN_FN(pssm_scan_quad_load_)(row, n0));
    for (int e = 0; e < 4; ++e)
        r.w[e] = pssm_as_uint(PSSM_SCAN_LD(row[(n0 + e) * s]));
    return r;
}

/* `nn` (4 or 1) states of one batch row: s = exp2(a2 * dt) * s + B * dt * x, y += s * C, with
 * a2 = A * log2(e) (or da_tied = exp2(a2 * dt) once per row when A is tied over n). */
PSSM_DEVICE pssm_vec16 PSSM_SCAN_FN(pssm_update_quad_)(pssm_vec16 s, pssm_vec16 a2, pssm_vec16 bq,
                                                        pssm_vec16 cq, float dt, float dtx,
                                                        float da_tied, int tied, int nn, float *y)
{
    for (int e = 0; e < 4; ++e) {
        if (e < nn) {
            const float da = tied ? da_tied : pssm_exp2f(pssm_as_float(a2.w[e]) * dt);
            const float v = da * pssm_as_float(s.w[e]) + pssm_as_float(bq.w[e]) * dtx;
            *y += v * pssm_as_float(cq.w[e]);
            s.w[e] = pssm_as_uint(v);
        }
    }
    return s;
}
