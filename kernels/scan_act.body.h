/*
 * scan_act.body.h - the per-dtype half of the scan family, included by scan_kernels.h once per
 * activation dtype with:
 *   PSSM_SCAN_ACT     storage type of activations (float, pssm_f16, pssm_bf16)
 *   PSSM_SCAN_LD(v)   storage -> float;  PSSM_SCAN_ST(f)  float -> storage (the one rounding)
 *   PSSM_SCAN_DT      name suffix (f32, f16, bf16)
 * Defines the block-wide staging helpers of the scan and the state update kernel.
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
 * immediate offsets from one pointer.  This puts element j of group g (8 steps from step 8q) of
 * state n at row 8q + j; `off` is n's place in the row (C: off + 4).
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

/* Elements n0 .. n0+3 (stride s) as floats: one 8- or 16-byte load when `vec` (the host
 * checked: stride 1, aligned rows). */
PSSM_DEVICE pssm_vec16 PSSM_SCAN_FN(pssm_scan_load4_)(const PSSM_SCAN_ACT *row, int n0, int64_t s,
                                                       int vec)
{
    pssm_vec16 r;
    if (vec) {
#if PSSM_SCAN_VECS == 2
        r = *(const pssm_vec16 *)(row + n0);
#else
        const uint32_t *w = (const uint32_t *)(row + n0);
        const uint32_t w0 = w[0], w1 = w[1];
        r.w[0] = pssm_as_uint(PSSM_SCAN_LD((uint16_t)w0));
        r.w[1] = pssm_as_uint(PSSM_SCAN_LD((uint16_t)(w0 >> 16)));
        r.w[2] = pssm_as_uint(PSSM_SCAN_LD((uint16_t)w1));
        r.w[3] = pssm_as_uint(PSSM_SCAN_LD((uint16_t)(w1 >> 16)));
#endif
    } else {
        for (int e = 0; e < 4; ++e)
            r.w[e] = pssm_as_uint(PSSM_SCAN_LD(row[(n0 + e) * s]));
    }
    return r;
}

/*
 * selective_state_update, one work item: the row `row` (one (h, p); team lane `lane` of it) for
 * batch rows b0 .. b0 + PSSM_UPDATE_ROWS - 1.  A team of p.team adjacent lanes walks the row's N
 * states, p.vec consecutive ones per lane and step (16-byte accesses when vec == 4): the state,
 * the only large operand, is read and written once, coalesced; the state loads of all the batch
 * rows are issued before the first use.  A with stride 0 along n (Mamba-2's tied A) costs one exp
 * per row, not per state.  A dead row (past B, or an index outside the pool) reads valid memory
 * and writes nothing.
 */
PSSM_DEVICE void PSSM_SCAN_FN(pssm_state_update_item_)(const pssm_state_update_params p,
                                                        int64_t row, int lane, int64_t b0)
{
    const int team = p.team;
    const int64_t rows = p.heads * p.hdim;
    const int active = row < rows;
    int64_t h = 0, hp = 0, g = 0;
    if (active) {
        if (rows <= INT32_MAX) { /* 32-bit division: a fraction of the 64-bit one's cost */
            h = (int32_t)row / (int32_t)p.hdim;
            g = (int32_t)h / (int32_t)p.hpg;
        } else {
            h = row / p.hdim;
            g = h / p.hpg;
        }
        hp = row - h * p.hdim;
    }
    const int nstate = (int)p.dstate;
    const int nn = p.vec;
    const int step = team * nn;
    const float *A = p.A + h * p.A_s[0] + hp * p.A_s[1];
    const int tied = p.A_s[2] == 0;
    const float a2 = A[0] * PSSM_LOG2E;
    const float Dv = p.D ? p.D[h * p.D_s[0] + hp * p.D_s[1]] : 0.0f;
    const float bias = p.dt_bias ? p.dt_bias[h * p.bias_s[0] + hp * p.bias_s[1]] : 0.0f;
    const int64_t xo = h * p.x_s[1] + hp * p.x_s[2], dto = h * p.dt_s[1] + hp * p.dt_s[2];
    const int64_t zo = h * p.z_s[1] + hp * p.z_s[2];

    int live[PSSM_UPDATE_ROWS];
    int64_t bb[PSSM_UPDATE_ROWS];
    float *st[PSSM_UPDATE_ROWS];
    float xv[PSSM_UPDATE_ROWS], dv[PSSM_UPDATE_ROWS], zv[PSSM_UPDATE_ROWS];
    float y[PSSM_UPDATE_ROWS];
    for (int k = 0; k < PSSM_UPDATE_ROWS; ++k) {
        const int64_t b = b0 + k < p.batch ? b0 + k : p.batch - 1;
        const int64_t sb = p.sbi ? (int64_t)p.sbi[b * p.sbi_s] : b;
        live[k] = active && b0 + k < p.batch && sb >= 0 && sb < p.state_rows;
        bb[k] = b;
        st[k] = p.state + (live[k] ? sb : 0) * p.state_s[0] + h * p.state_s[1] +
                hp * p.state_s[2];
        xv[k] = PSSM_SCAN_LD(((const PSSM_SCAN_ACT *)p.x)[b * p.x_s[0] + xo]);
        dv[k] = PSSM_SCAN_LD(((const PSSM_SCAN_ACT *)p.dt)[b * p.dt_s[0] + dto]);
        zv[k] = p.z ? PSSM_SCAN_LD(((const PSSM_SCAN_ACT *)p.z)[b * p.z_s[0] + zo]) : 0.0f;
        y[k] = 0.0f;
    }
    for (int n0 = lane * nn; n0 < nstate; n0 += step) {
        float sv[PSSM_UPDATE_ROWS][4];
        for (int k = 0; k < PSSM_UPDATE_ROWS; ++k) {
            if (nn == 4) {
                const pssm_vec16 v = *(const pssm_vec16 *)(st[k] + n0);
                for (int e = 0; e < 4; ++e)
                    sv[k][e] = pssm_as_float(v.w[e]);
            } else {
                sv[k][0] = st[k][n0 * p.state_s[3]];
            }
        }
        pssm_vec16 av = {{0u, 0u, 0u, 0u}};
        if (!tied) {
            if (nn == 4)
                av = p.a_vec ? *(const pssm_vec16 *)(A + n0)
                             : PSSM_SCAN_FN(pssm_scan_load_a4_)(A, n0, p.A_s[2]);
            else
                av.w[0] = pssm_as_uint(A[n0 * p.A_s[2]]);
        }
        for (int k = 0; k < PSSM_UPDATE_ROWS; ++k) {
            const PSSM_SCAN_ACT *Bs = (const PSSM_SCAN_ACT *)p.Bm + bb[k] * p.B_s[0] + g * p.B_s[1];
            const PSSM_SCAN_ACT *Cs = (const PSSM_SCAN_ACT *)p.Cm + bb[k] * p.C_s[0] + g * p.C_s[1];
            float dt = dv[k] + bias;
            if (p.softplus)
                dt = pssm_scan_softplus(dt);
            const float dtx = dt * xv[k];
            const float da_tied = pssm_exp2f(a2 * dt);
            pssm_vec16 bq, cq;
            if (nn == 4) {
                bq = PSSM_SCAN_FN(pssm_scan_load4_)(Bs, n0, p.B_s[2], p.bc_vec);
                cq = PSSM_SCAN_FN(pssm_scan_load4_)(Cs, n0, p.C_s[2], p.bc_vec);
            } else {
                bq.w[0] = pssm_as_uint(PSSM_SCAN_LD(Bs[n0 * p.B_s[2]]));
                cq.w[0] = pssm_as_uint(PSSM_SCAN_LD(Cs[n0 * p.C_s[2]]));
            }
            for (int e = 0; e < 4; ++e) {
                if (e < nn) {
                    const float da =
                        tied ? da_tied : pssm_exp2f(pssm_as_float(av.w[e]) * PSSM_LOG2E * dt);
                    sv[k][e] = da * sv[k][e] + pssm_as_float(bq.w[e]) * dtx;
                    y[k] += sv[k][e] * pssm_as_float(cq.w[e]);
                }
            }
            if (!live[k])
                continue;
            if (nn == 4) {
                pssm_vec16 v;
                for (int e = 0; e < 4; ++e)
                    v.w[e] = pssm_as_uint(sv[k][e]);
                *(pssm_vec16 *)(st[k] + n0) = v;
            } else {
                st[k][n0 * p.state_s[3]] = sv[k][0];
            }
        }
    }
    for (int k = 0; k < PSSM_UPDATE_ROWS; ++k)
        y[k] = pssm_scan_team_sum(y[k], team);
    if (active && lane == 0) {
        for (int k = 0; k < PSSM_UPDATE_ROWS; ++k) {
            const int64_t b = b0 + k;
            if (b >= p.batch)
                break;
            float o = 0.0f;
            if (live[k]) {
                o = y[k] + Dv * xv[k];
                if (p.z)
                    o *= pssm_scan_silu(zv[k]);
            }
            ((PSSM_SCAN_ACT *)p.out)[b * p.out_s[0] + h * p.out_s[1] + hp * p.out_s[2]] =
                PSSM_SCAN_ST(o);
        }
    }
}

/* A persistent grid walks the work items (block of rows, group of PSSM_UPDATE_ROWS batch rows):
 * blocks that live for one item each are launched too slowly to keep memory busy (on an H200
 * about 320 blocks per microsecond, far below the bandwidth of a block's few loads). */
PSSM_KERNEL_BOUNDED(PSSM_SCAN_CAT(pssm_state_update_, PSSM_SCAN_DT), pssm_state_update_params, p,
                    PSSM_SCAN_MAX_THREADS)
{
    const int rpb = PSSM_BLOCKDIM_X / p.team;
    const int64_t row_blocks = (p.heads * p.hdim + rpb - 1) / rpb;
    const int64_t items = row_blocks * ((p.batch + PSSM_UPDATE_ROWS - 1) / PSSM_UPDATE_ROWS);
    const int64_t row_in = PSSM_THREAD_X / p.team;
    const int lane = PSSM_THREAD_X & (p.team - 1);
    for (int64_t item = PSSM_BLOCK_X; item < items; item += PSSM_GRIDDIM_X) {
        const int64_t bgroup = item / row_blocks;
        const int64_t row = (item - bgroup * row_blocks) * rpb + row_in;
        PSSM_SCAN_FN(pssm_state_update_item_)(p, row, lane, bgroup * PSSM_UPDATE_ROWS);
    }
}
