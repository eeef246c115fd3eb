/*
 * scan_act.body.h - the per-dtype half of the scan family, included by scan_kernels.h once per
 * activation dtype with:
 *   PSSM_SCAN_ACT     storage type of activations (float, pssm_f16, pssm_bf16)
 *   PSSM_SCAN_LD(v)   storage -> float;  PSSM_SCAN_ST(f)  float -> storage (the one rounding)
 *   PSSM_SCAN_DT      name suffix (f32, f16, bf16)
 * Defines the scan's row-group and B/C-tile helpers and the state update kernel.
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
 * selective_state_update, one work item: row `row` (one (h, p)) of batch row b.  A team of
 * p.team adjacent lanes walks the row's N states; per round a lane takes PSSM_UPDATE_SLOTS
 * slots of p.vec consecutive states, slot v of lane l at n = ((v * team + l) * vec), so every
 * slot's access is contiguous across the team (16-byte accesses when vec == 4).  The state, the
 * only large operand, is read and written once; the per-row work (indices, dt, softplus, the
 * reduction, the output) is shared by up to 16 states per lane.  A with stride 0 along n
 * (Mamba-2's tied A) costs one exp per row.  A dead row (an index outside the pool) reads valid
 * memory and writes nothing.
 */
PSSM_DEVICE void PSSM_SCAN_FN(pssm_state_update_item_)(const pssm_state_update_params p,
                                                        int64_t row, int lane, int64_t b)
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
    const float *A = p.A + h * p.A_s[0] + hp * p.A_s[1];
    const int tied = p.A_s[2] == 0;
    const int64_t sb = p.sbi ? (int64_t)p.sbi[b * p.sbi_s] : b;
    const int live = active && sb >= 0 && sb < p.state_rows;
    float *st = p.state + (live ? sb : 0) * p.state_s[0] + h * p.state_s[1] + hp * p.state_s[2];
    const PSSM_SCAN_ACT *Bs = (const PSSM_SCAN_ACT *)p.Bm + b * p.B_s[0] + g * p.B_s[1];
    const PSSM_SCAN_ACT *Cs = (const PSSM_SCAN_ACT *)p.Cm + b * p.C_s[0] + g * p.C_s[1];
    const float xv = PSSM_SCAN_LD(((const PSSM_SCAN_ACT *)p.x)[b * p.x_s[0] + h * p.x_s[1] +
                                                               hp * p.x_s[2]]);
    float dt = PSSM_SCAN_LD(((const PSSM_SCAN_ACT *)p.dt)[b * p.dt_s[0] + h * p.dt_s[1] +
                                                          hp * p.dt_s[2]]);
    dt += p.dt_bias ? p.dt_bias[h * p.bias_s[0] + hp * p.bias_s[1]] : 0.0f;
    if (p.softplus)
        dt = pssm_softplus_fast(dt);
    const float dtx = dt * xv;
    const float da_tied = pssm_exp2f(A[0] * PSSM_LOG2E * dt);
    float y = 0.0f;
    for (int n0 = lane * nn; n0 < nstate; n0 += PSSM_UPDATE_SLOTS * team * nn) {
        /* the slots' state loads first, all in flight together */
        pssm_vec16 sv[PSSM_UPDATE_SLOTS];
        for (int v = 0; v < PSSM_UPDATE_SLOTS; ++v) {
            const int n = n0 + v * team * nn;
            sv[v].w[0] = sv[v].w[1] = sv[v].w[2] = sv[v].w[3] = 0u;
            if (n < nstate) {
                if (nn == 4)
                    sv[v] = *(const pssm_vec16 *)(st + n);
                else
                    sv[v].w[0] = pssm_as_uint(st[n * p.state_s[3]]);
            }
        }
        for (int v = 0; v < PSSM_UPDATE_SLOTS; ++v) {
            const int n = n0 + v * team * nn;
            if (n >= nstate)
                break;
            pssm_vec16 av = {{0u, 0u, 0u, 0u}}, bq, cq;
            if (nn == 4) {
                if (!tied)
                    av = p.a_vec ? *(const pssm_vec16 *)(A + n)
                                 : PSSM_SCAN_FN(pssm_scan_load_a4_)(A, n, p.A_s[2]);
                bq = PSSM_SCAN_FN(pssm_scan_load4_)(Bs, n, p.B_s[2], p.bc_vec);
                cq = PSSM_SCAN_FN(pssm_scan_load4_)(Cs, n, p.C_s[2], p.bc_vec);
            } else {
                if (!tied)
                    av.w[0] = pssm_as_uint(A[n * p.A_s[2]]);
                bq.w[0] = pssm_as_uint(PSSM_SCAN_LD(Bs[n * p.B_s[2]]));
                cq.w[0] = pssm_as_uint(PSSM_SCAN_LD(Cs[n * p.C_s[2]]));
            }
            for (int e = 0; e < 4; ++e) {
                if (e < nn) {
                    const float da =
                        tied ? da_tied : pssm_exp2f(pssm_as_float(av.w[e]) * PSSM_LOG2E * dt);
                    const float s = da * pssm_as_float(sv[v].w[e]) + pssm_as_float(bq.w[e]) * dtx;
                    y += s * pssm_as_float(cq.w[e]);
                    sv[v].w[e] = pssm_as_uint(s);
                }
            }
            if (live) {
                if (nn == 4)
                    *(pssm_vec16 *)(st + n) = sv[v];
                else
                    st[n * p.state_s[3]] = pssm_as_float(sv[v].w[0]);
            }
        }
    }
    y = pssm_scan_team_sum(y, team);
    if (active && lane == 0) {
        float o = 0.0f;
        if (live) {
            o = y + (p.D ? p.D[h * p.D_s[0] + hp * p.D_s[1]] : 0.0f) * xv;
            if (p.z)
                o *= pssm_silu_fast(PSSM_SCAN_LD(
                    ((const PSSM_SCAN_ACT *)p.z)[b * p.z_s[0] + h * p.z_s[1] + hp * p.z_s[2]]));
        }
        ((PSSM_SCAN_ACT *)p.out)[b * p.out_s[0] + h * p.out_s[1] + hp * p.out_s[2]] =
            PSSM_SCAN_ST(o);
    }
}

/* A persistent grid walks the work items (block of rows, batch row):
 * blocks that live for one item each are launched too slowly to keep memory busy (on an H200
 * about 320 blocks per microsecond, far below the bandwidth of a block's few loads). */
PSSM_KERNEL_BOUNDED(PSSM_SCAN_CAT(pssm_state_update_, PSSM_SCAN_DT), pssm_state_update_params, p,
                    PSSM_SCAN_MAX_THREADS)
{
    const int rpb = PSSM_BLOCKDIM_X / p.team;
    const int64_t row_blocks = (p.heads * p.hdim + rpb - 1) / rpb;
    const int64_t items = row_blocks * p.batch;
    const int64_t row_in = PSSM_THREAD_X / p.team;
    const int lane = PSSM_THREAD_X & (p.team - 1);
    for (int64_t item = PSSM_BLOCK_X; item < items; item += PSSM_GRIDDIM_X) {
        const int64_t b = item / row_blocks;
        const int64_t row = (item - b * row_blocks) * rpb + row_in;
        PSSM_SCAN_FN(pssm_state_update_item_)(p, row, lane, b);
    }
}
