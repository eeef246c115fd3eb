/*
 * state_update.body.h - the selective_state_update kernel, included by state_update.stamp.h
 * once per activation dtype (the macros of scan_act.body.h), state dtype (PSSM_STATE_T and the
 * helpers of state_quad.body.h: the state is read as floats and each new state rounded once to
 * its dtype when stored) and variant:
 *   PSSM_UPDATE_SLOTS  slots per lane and round (1, 2 or 4)
 *   PSSM_UPDATE_FAST   1: the layout of every model (state, A, B and C contiguous along n in
 *                      aligned quads, the host checked) and one round covers N: 16- and 8-byte
 *                      loads, no per-element strides, no round loop; the kernel is
 *                      pssm_state_update_s<slots>_<dtype>_st<state dtype>.
 *                      0: any strides and any N (rounds loop):
 *                      pssm_state_update_any_<dtype>_st<state dtype>.
 * The two are one body: the constant folds the general paths away in the fast kernels.
 *
 * Both forms as heads (Mamba-1 is H = D, P = 1, G = 1).  A row is one (h, p); a team of
 * p.team adjacent lanes (a power of two, at most the warp) walks the row's N states; per round
 * a lane takes PSSM_UPDATE_SLOTS slots of `vec` (4, or 1 for strided states) consecutive
 * states, slot v of lane l at n = (v * team + l) * vec, so each slot's access is contiguous
 * across the team.  The state, the only large operand, is read and written once.
 *
 * Grid: x = blocks of rows, y = a stride over batch rows.  Everything that depends on the row
 * only (its indices, A * log2(e), D, dt_bias, offsets) is computed once and reused for every
 * batch row the block walks; per batch row the operands' pointers advance by a step the host
 * computed (p.*_y), so no product of sizes or division happens in the batch loop.
 */
#if PSSM_UPDATE_FAST
#define PSSM_UPDATE_NAME                                                                           \
    PSSM_SCAN_CAT(PSSM_SCAN_CAT(pssm_state_update_s, PSSM_UPDATE_SLOTS), PSSM_UPDATE_SUFFIX)
#else
#define PSSM_UPDATE_NAME PSSM_SCAN_CAT(pssm_state_update_any, PSSM_UPDATE_SUFFIX)
#endif

PSSM_KERNEL_BOUNDED(PSSM_UPDATE_NAME, pssm_state_update_params, p, PSSM_SCAN_MAX_THREADS)
{
    const int team = p.team;
    const int lane = (int)PSSM_THREAD_X & (team - 1);
    const int64_t rows = p.heads * p.hdim;
    const int64_t row =
        PSSM_BLOCK_X * (PSSM_BLOCKDIM_X >> p.log2_team) + (PSSM_THREAD_X >> p.log2_team);
    /* Lanes past the last row compute row 0 and store nothing: every lane of a warp must reach
     * the team's shuffles. */
    const int active = row < rows;
    int64_t h = 0, hp = 0, g = 0;
    if (active) {
        if (rows <= INT32_MAX) { /* 32-bit division: a fraction of the 64-bit one's cost */
            h = p.hdim == 1 ? row : (int32_t)row / (int32_t)p.hdim;
            g = p.hpg == 1 ? h : (int32_t)h / (int32_t)p.hpg;
        } else {
            h = row / p.hdim;
            g = h / p.hpg;
        }
        hp = row - h * p.hdim;
    }
    const int nstate = (int)p.dstate;
    const int nn = PSSM_UPDATE_FAST ? 4 : p.vec;
    const int step = PSSM_UPDATE_SLOTS * team * nn; /* states of one round of the team */
    const int one_round = PSSM_UPDATE_FAST || nstate <= step;
    const float *A = p.A + h * p.A_s[0] + hp * p.A_s[1];
    const int tied = p.A_s[2] == 0;
    const float Dv = p.D ? p.D[h * p.D_s[0] + hp * p.D_s[1]] : 0.0f;
    const float bias = p.dt_bias ? p.dt_bias[h * p.bias_s[0] + hp * p.bias_s[1]] : 0.0f;
    const float a0 = A[0]; /* tied A (stride 0 along n): one exp per row, A[0] * log2(e) * dt */
    /* A * log2(e) of the lane's states, kept when one round covers the row; else per round.
     * The fast loop issues its first batch row's loads before this waits for A. */
    pssm_vec16 a_keep[PSSM_UPDATE_SLOTS];
#define PSSM_UPDATE_LOAD_A()                                                                       \
    for (int v = 0; v < PSSM_UPDATE_SLOTS; ++v) {                                                  \
        const int n = (v * team + lane) * nn;                                                      \
        a_keep[v].w[0] = a_keep[v].w[1] = a_keep[v].w[2] = a_keep[v].w[3] = 0u;                    \
        if (one_round && !tied && n < nstate) {                                                    \
            if (PSSM_UPDATE_FAST)                                                                  \
                a_keep[v] = *(const pssm_vec16 *)(A + n);                                          \
            else if (nn == 4)                                                                      \
                a_keep[v] = p.a_vec ? *(const pssm_vec16 *)(A + n)                                 \
                                    : PSSM_SCAN_FN(pssm_scan_load_a4_)(A, n, p.A_s[2]);            \
            else                                                                                   \
                a_keep[v].w[0] = pssm_as_uint(A[n * p.A_s[2]]);                                    \
            for (int e = 0; e < 4; ++e)                                                            \
                a_keep[v].w[e] = pssm_as_uint(pssm_as_float(a_keep[v].w[e]) * PSSM_LOG2E);         \
        }                                                                                          \
    }

    /* operands of the first batch row this block takes; each later one is p.*_y further */
    int64_t b = PSSM_BLOCK_Y;
    const PSSM_SCAN_ACT *xp =
        (const PSSM_SCAN_ACT *)p.x + b * p.x_s[0] + h * p.x_s[1] + hp * p.x_s[2];
    const PSSM_SCAN_ACT *dtp =
        (const PSSM_SCAN_ACT *)p.dt + b * p.dt_s[0] + h * p.dt_s[1] + hp * p.dt_s[2];
    const PSSM_SCAN_ACT *zp = PSSM_OPT_OFFSET((const PSSM_SCAN_ACT *)p.z,
                                              b * p.z_s[0] + h * p.z_s[1] + hp * p.z_s[2]);
    PSSM_SCAN_ACT *op = (PSSM_SCAN_ACT *)p.out + b * p.out_s[0] + h * p.out_s[1] + hp * p.out_s[2];
    const PSSM_SCAN_ACT *Bs = (const PSSM_SCAN_ACT *)p.Bm + b * p.B_s[0] + g * p.B_s[1];
    const PSSM_SCAN_ACT *Cs = (const PSSM_SCAN_ACT *)p.Cm + b * p.C_s[0] + g * p.C_s[1];
    const int32_t *sbp = p.sbi ? p.sbi + b * p.sbi_s : 0;
    const int64_t st_row = h * p.state_s[1] + hp * p.state_s[2];
    PSSM_STATE_T *const state = (PSSM_STATE_T *)p.state;
    PSSM_STATE_T *st0 = state + st_row + (p.sbi ? 0 : b * p.state_s[0]);
    /* every operand pointer on to the block's next batch row */
#define PSSM_UPDATE_ADVANCE()                                                                      \
    do {                                                                                           \
        xp += p.x_y;                                                                               \
        dtp += p.dt_y;                                                                             \
        zp = PSSM_OPT_OFFSET(zp, p.z_y); /* z and sbi are optional */                              \
        op += p.out_y;                                                                             \
        Bs += p.B_y;                                                                               \
        Cs += p.C_y;                                                                               \
        sbp = PSSM_OPT_OFFSET(sbp, p.sbi_y);                                                       \
        st0 += p.state_y;                                                                          \
    } while (0)

    /* The row's output from the loop's y and xv: (y + D x) * silu(z), 0 for a dead row, stored by
     * the team's lane 0.  A macro, not a function: as a shared function nvcc gave the fast kernel
     * 151 registers instead of 128, and the H200 ran Mamba-2 decode 7% slower (2026-11-29). */
#define PSSM_UPDATE_OUTPUT(live_, zp_, op_)                                                        \
    do {                                                                                           \
        if (active && lane == 0) {                                                                 \
            float o = 0.0f;                                                                        \
            if (live_) {                                                                           \
                o = y + Dv * xv;                                                                   \
                if (p.z)                                                                           \
                    o *= pssm_silu_fast(PSSM_SCAN_LD(*(zp_)));                                     \
            }                                                                                      \
            *(op_) = PSSM_SCAN_ST(o);                                                              \
        }                                                                                          \
    } while (0)

#if PSSM_UPDATE_FAST
    /* Software-pipelined: the next batch row's operands are loaded before this one is
     * computed, so each lane keeps two rows' loads in flight.  A state index is read one row
     * further ahead still, so that the state's address is known when its load is issued. */
    const int64_t gy = PSSM_GRIDDIM_Y;
    int64_t sb_next = p.sbi && b + gy < p.batch ? (int64_t)sbp[p.sbi_y] : 0;
    PSSM_STATE_FN(pssm_state_quad_) sv[PSSM_UPDATE_SLOTS]; /* raw, converted where used */
    PSSM_SCAN_FN(pssm_scan_quad_) bq[PSSM_UPDATE_SLOTS], cq[PSSM_UPDATE_SLOTS];
    PSSM_SCAN_FN(pssm_scan_quad_) pssm_update_quad_zero;
    for (int i = 0; i < (int)(sizeof pssm_update_quad_zero / 4); ++i)
        pssm_update_quad_zero.w[i] = 0u;
    PSSM_SCAN_ACT xr = 0, dtr = 0;
    int live = 0;
    PSSM_STATE_T *st = st0;
    /* loads batch row b (pointers as for b, its state row `sb` when indexed) into the stage */
#define PSSM_UPDATE_STAGE(sb_)                                                                     \
    do {                                                                                           \
        live = active;                                                                             \
        st = st0;                                                                                  \
        if (p.sbi) {                                                                               \
            const int64_t stage_sb = (sb_);                                                        \
            live = active && stage_sb >= 0 && stage_sb < p.state_rows;                             \
            st = state + st_row + (live ? stage_sb : 0) * p.state_s[0];                            \
        }                                                                                          \
        xr = *xp;                                                                                  \
        dtr = *dtp;                                                                                \
        for (int v = 0; v < PSSM_UPDATE_SLOTS; ++v) {                                              \
            const int n = (v * team + lane) * 4;                                                   \
            sv[v] = PSSM_STATE_FN(pssm_state_quad_zero_)();                                        \
            bq[v] = cq[v] = pssm_update_quad_zero;                                                 \
            if (n < nstate) {                                                                      \
                sv[v] = PSSM_STATE_FN(pssm_state_quad_load_)(st, n);                               \
                bq[v] = PSSM_SCAN_FN(pssm_scan_quad_load_)(Bs, n);                                 \
                cq[v] = PSSM_SCAN_FN(pssm_scan_quad_load_)(Cs, n);                                 \
            }                                                                                      \
        }                                                                                          \
    } while (0)
    if (b < p.batch)
        PSSM_UPDATE_STAGE(p.sbi ? (int64_t)*sbp : 0);
    PSSM_UPDATE_LOAD_A();
    for (; b < p.batch; b += gy) {
        /* this row, out of the stage */
        pssm_vec16 s_now[PSSM_UPDATE_SLOTS], b_now[PSSM_UPDATE_SLOTS], c_now[PSSM_UPDATE_SLOTS];
        for (int v = 0; v < PSSM_UPDATE_SLOTS; ++v) {
            s_now[v] = PSSM_STATE_FN(pssm_state_quad_floats_)(sv[v]);
            b_now[v] = PSSM_SCAN_FN(pssm_scan_quad_floats_)(bq[v]);
            c_now[v] = PSSM_SCAN_FN(pssm_scan_quad_floats_)(cq[v]);
        }
        const PSSM_SCAN_ACT x_now = xr, dt_now = dtr;
        const int live_now = live;
        PSSM_STATE_T *st_now = st;
        PSSM_SCAN_ACT *op_now = op;
        const PSSM_SCAN_ACT *zp_now = zp;
        /* the next row into the stage */
        PSSM_UPDATE_ADVANCE();
        if (b + gy < p.batch) {
            const int64_t sb_ahead = sb_next;
            if (p.sbi && b + 2 * gy < p.batch)
                sb_next = sbp[p.sbi_y];
            PSSM_UPDATE_STAGE(sb_ahead);
        }
#undef PSSM_UPDATE_STAGE
        const float xv = PSSM_SCAN_LD(x_now);
        float dt = PSSM_SCAN_LD(dt_now) + bias;
        if (p.softplus)
            dt = pssm_softplus_fast(dt);
        const float dtx = dt * xv;
        const float da_tied = pssm_exp2f(a0 * PSSM_LOG2E * dt);
        float y = 0.0f;
        for (int v = 0; v < PSSM_UPDATE_SLOTS; ++v) {
            const int n = (v * team + lane) * 4;
            if (n < nstate) {
                s_now[v] = PSSM_SCAN_FN(pssm_update_quad_)(s_now[v], a_keep[v], b_now[v], c_now[v],
                                                           dt, dtx, da_tied, tied, 4, &y);
                if (live_now)
                    PSSM_STATE_FN(pssm_state_quad_store_)(st_now, n, s_now[v]);
            }
        }
        y = pssm_scan_team_sum(y, team);
        PSSM_UPDATE_OUTPUT(live_now, zp_now, op_now);
    }
#else
    /* Any strides, any N: rounds of the team over the row's states. */
    PSSM_UPDATE_LOAD_A();
    for (; b < p.batch; b += PSSM_GRIDDIM_Y) {
        int live = active;
        PSSM_STATE_T *st = st0;
        if (p.sbi) {
            const int64_t sb = *sbp;
            live = active && sb >= 0 && sb < p.state_rows;
            st = state + st_row + (live ? sb : 0) * p.state_s[0];
        }
        const float xv = PSSM_SCAN_LD(*xp);
        float dt = PSSM_SCAN_LD(*dtp) + bias;
        if (p.softplus)
            dt = pssm_softplus_fast(dt);
        const float dtx = dt * xv;
        const float da_tied = pssm_exp2f(a0 * PSSM_LOG2E * dt);
        float y = 0.0f;
        for (int n0 = lane * nn; n0 < nstate; n0 += step) {
            /* the slots' state loads first, all in flight together */
            pssm_vec16 sv[PSSM_UPDATE_SLOTS];
            for (int v = 0; v < PSSM_UPDATE_SLOTS; ++v) {
                const int n = n0 + v * team * nn;
                sv[v].w[0] = sv[v].w[1] = sv[v].w[2] = sv[v].w[3] = 0u;
                if (n < nstate) {
                    if (nn == 4)
                        sv[v] = PSSM_STATE_FN(pssm_state_quad_floats_)(
                            PSSM_STATE_FN(pssm_state_quad_load_)(st, n));
                    else
                        sv[v].w[0] = pssm_as_uint(PSSM_STATE_LD(st[n * p.state_s[3]]));
                }
            }
            for (int v = 0; v < PSSM_UPDATE_SLOTS; ++v) {
                const int n = n0 + v * team * nn;
                if (n >= nstate)
                    break;
                pssm_vec16 av = a_keep[v], bq, cq;
                if (nn == 4) {
                    if (!one_round && !tied) {
                        av = p.a_vec ? *(const pssm_vec16 *)(A + n)
                                     : PSSM_SCAN_FN(pssm_scan_load_a4_)(A, n, p.A_s[2]);
                        for (int e = 0; e < 4; ++e)
                            av.w[e] = pssm_as_uint(pssm_as_float(av.w[e]) * PSSM_LOG2E);
                    }
                    bq = PSSM_SCAN_FN(pssm_scan_load4_)(Bs, n, p.B_s[2], p.bc_vec);
                    cq = PSSM_SCAN_FN(pssm_scan_load4_)(Cs, n, p.C_s[2], p.bc_vec);
                } else {
                    if (!one_round && !tied)
                        av.w[0] = pssm_as_uint(A[n * p.A_s[2]] * PSSM_LOG2E);
                    bq.w[0] = pssm_as_uint(PSSM_SCAN_LD(Bs[n * p.B_s[2]]));
                    cq.w[0] = pssm_as_uint(PSSM_SCAN_LD(Cs[n * p.C_s[2]]));
                }
                sv[v] = PSSM_SCAN_FN(pssm_update_quad_)(sv[v], av, bq, cq, dt, dtx, da_tied, tied,
                                                        nn, &y);
                if (live) {
                    if (nn == 4)
                        PSSM_STATE_FN(pssm_state_quad_store_)(st, n, sv[v]);
                    else
                        st[n * p.state_s[3]] = PSSM_STATE_ST(pssm_as_float(sv[v].w[0]));
                }
            }
        }
        y = pssm_scan_team_sum(y, team);
        PSSM_UPDATE_OUTPUT(live, zp, op);
        PSSM_UPDATE_ADVANCE();
    }
#endif
}

#undef PSSM_UPDATE_ADVANCE
#undef PSSM_UPDATE_LOAD_A
#undef PSSM_UPDATE_OUTPUT
#undef PSSM_UPDATE_NAME
