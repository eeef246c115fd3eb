/*
 * state_update_flat.body.h - selective_state_update for the layout of every model, with 32-bit
 * offsets and no software pipeline: pssm_state_update_flat_q<Q>_<dtype>_st<state dtype>,
 * included by state_update.stamp.h once per activation x state dtype (the state read as
 * floats, each new state rounded once to its dtype when stored) with PSSM_UPDATE_QUADS quads of
 * consecutive
 * states per lane: 1 (four per lane, at Mamba-1's N16 and Mamba-2's N128, were slower in runs
 * 67-68, so no other is stamped; the parameter stays for such comparisons).
 *
 * Why beside state_update.body.h's fast kernels: at Mamba-1's B64 D4096 N16 those spent their
 * time on work that is not the update (H200 run 40: 18-19 us for 8.5 us of state bytes):
 * 64-bit products for nine operand pointers, the row/batch divisions' 64-bit paths, and the
 * pipeline that carries the next batch row's operands, whose registers cap the warps an SM
 * holds, while this kernel waits on memory and its warps are what keep bytes in flight.  Here
 * the host has checked that every operand's largest offset fits in 31 bits (ops_scan.c), so
 * each offset is a few 32-bit multiply-adds; a block takes one batch row, b = blockIdx.y, every
 * load of it issued before any of it is used.  Measured (H200 runs 67-68) it wins for short
 * rows (Mamba-1's N16) and loses for Mamba-2's N128, where the pipelined kernels keep two batch
 * rows' loads in flight per lane: the host takes it for N <= 32.
 *
 * Lanes as in the fast kernels: a row is one (h, p); a team of p.team lanes (a power of two, at
 * most the warp) covers the row's N states, lane l holding quad v at n = (v * team + l) * 4, so
 * each quad's access is contiguous across the team.  The host checked: states, A (unless tied)
 * and B/C contiguous along n in aligned quads, team * 4 * PSSM_UPDATE_QUADS >= N.
 */
#ifndef PSSM_UPDATE_FLAT_MIN_BLOCKS /* (a build may set it, to compare) */
#define PSSM_UPDATE_FLAT_MIN_BLOCKS (PSSM_UPDATE_QUADS == 1 ? 8 : 1)
#endif
#define PSSM_UPDATE_FLAT_NAME                                                                      \
    PSSM_SCAN_CAT(PSSM_SCAN_CAT(pssm_state_update_flat_q, PSSM_UPDATE_QUADS), PSSM_UPDATE_SUFFIX)

/* At most 32 registers (eight blocks of 256 threads an SM, every warp slot filled): the kernel
 * waits on memory, and its warps are what keeps bytes in flight (H200 runs 67-68, Mamba-1 B64:
 * 40 registers 15.4 us; two batch rows a lane at 59 registers 16.9; the reference runs at 31) */
PSSM_KERNEL_BOUNDED_MIN(PSSM_UPDATE_FLAT_NAME, pssm_state_update_params, p, PSSM_SCAN_MAX_THREADS,
                        PSSM_UPDATE_FLAT_MIN_BLOCKS)
{
    const int team = p.team;
    const int lane = (int)PSSM_THREAD_X & (team - 1);
    const int32_t rows = (int32_t)(p.heads * p.hdim);
    const int32_t row = (int32_t)PSSM_BLOCK_X * ((int32_t)PSSM_BLOCKDIM_X >> p.log2_team) +
                        ((int32_t)PSSM_THREAD_X >> p.log2_team);
    /* Lanes past the last row compute row 0 and store nothing: every lane of a warp must reach
     * the team's shuffles. */
    const int active = row < rows;
    const int32_t r = active ? row : 0;
    const int32_t P = (int32_t)p.hdim, hpg = (int32_t)p.hpg;
    const int32_t h = P == 1 ? r : r / P, hp = r - h * P;
    const int32_t g = hpg >= (int32_t)p.heads ? 0 : hpg == 1 ? h : h / hpg; /* (one group: 0) */
    const int32_t nstate = (int32_t)p.dstate;
    const int tied = p.A_s[2] == 0;
    /* the row's own operands, the same for every batch row */
    const float *const A = p.A + (h * (int32_t)p.A_s[0] + hp * (int32_t)p.A_s[1]);
    const float a0 = A[0]; /* tied A: one exp per row */
    const float Dv = p.D ? p.D[h * (int32_t)p.D_s[0] + hp * (int32_t)p.D_s[1]] : 0.0f;
    const float bias =
        p.dt_bias ? p.dt_bias[h * (int32_t)p.bias_s[0] + hp * (int32_t)p.bias_s[1]] : 0.0f;
    /* A of the lane's quads (untied A), as loaded: log2(e) goes into dt, so that nothing waits
     * on these loads before the batch rows' loads are issued (a scaling here held every lane's
     * state loads back by one memory latency) */
    pssm_vec16 av[PSSM_UPDATE_QUADS];
    PSSM_UNROLL
    for (int v = 0; v < PSSM_UPDATE_QUADS; ++v) {
        const int32_t n = (v * team + lane) * 4;
        av[v].w[0] = av[v].w[1] = av[v].w[2] = av[v].w[3] = 0u;
        if (!tied && n < nstate)
            av[v] = *(const pssm_vec16 *)(A + n);
    }
    /* an operand's offset at batch row b: 32-bit multiply-adds */
#define PSSM_FLAT_AT(s_, b_) ((b_) * (int32_t)(s_)[0] + h * (int32_t)(s_)[1] + hp * (int32_t)(s_)[2])
#define PSSM_FLAT_AT_G(s_, b_) ((b_) * (int32_t)(s_)[0] + g * (int32_t)(s_)[1])

    { /* one batch row a block (the host launches gridDim.y = B) */
        const int32_t b = (int32_t)PSSM_BLOCK_Y;
        int32_t sb = b;
        int live = active;
        if (p.sbi) {
            sb = p.sbi[b * (int32_t)p.sbi_s];
            live = active && sb >= 0 && sb < p.state_rows;
            sb = live ? sb : 0;
        }
        PSSM_STATE_T *const st =
            (PSSM_STATE_T *)p.state + (sb * (int32_t)p.state_s[0] + h * (int32_t)p.state_s[1] +
                                       hp * (int32_t)p.state_s[2]);
        const PSSM_SCAN_ACT *const Bs = (const PSSM_SCAN_ACT *)p.Bm + PSSM_FLAT_AT_G(p.B_s, b);
        const PSSM_SCAN_ACT *const Cs = (const PSSM_SCAN_ACT *)p.Cm + PSSM_FLAT_AT_G(p.C_s, b);
        /* every load of the row first */
        const PSSM_SCAN_ACT xr = ((const PSSM_SCAN_ACT *)p.x)[PSSM_FLAT_AT(p.x_s, b)];
        const PSSM_SCAN_ACT dtr = ((const PSSM_SCAN_ACT *)p.dt)[PSSM_FLAT_AT(p.dt_s, b)];
        const PSSM_SCAN_ACT zr =
            p.z ? ((const PSSM_SCAN_ACT *)p.z)[PSSM_FLAT_AT(p.z_s, b)] : xr;
        PSSM_STATE_FN(pssm_state_quad_) sv[PSSM_UPDATE_QUADS]; /* raw, converted where used */
        PSSM_SCAN_FN(pssm_scan_quad_) bq[PSSM_UPDATE_QUADS], cq[PSSM_UPDATE_QUADS];
        PSSM_UNROLL
        for (int v = 0; v < PSSM_UPDATE_QUADS; ++v) {
            const int32_t n = (v * team + lane) * 4;
            sv[v] = PSSM_STATE_FN(pssm_state_quad_zero_)();
            for (int i = 0; i < (int)(sizeof bq[v] / 4); ++i)
                bq[v].w[i] = cq[v].w[i] = 0u;
            if (n < nstate) {
                sv[v] = PSSM_STATE_FN(pssm_state_quad_load_)(st, n);
                bq[v] = PSSM_SCAN_FN(pssm_scan_quad_load_)(Bs, n);
                cq[v] = PSSM_SCAN_FN(pssm_scan_quad_load_)(Cs, n);
            }
        }
        const float xv = PSSM_SCAN_LD(xr);
        float dt = PSSM_SCAN_LD(dtr) + bias;
        if (p.softplus)
            dt = pssm_softplus_fast(dt);
        const float dtx = dt * xv, dt2 = dt * PSSM_LOG2E; /* exp(A dt) = exp2(A dt2) */
        const float da_tied = pssm_exp2f(a0 * dt2);
        float y = 0.0f;
        PSSM_UNROLL
        for (int v = 0; v < PSSM_UPDATE_QUADS; ++v) {
            const int32_t n = (v * team + lane) * 4;
            if (n < nstate) {
                const pssm_vec16 s_new = PSSM_SCAN_FN(pssm_update_quad_)(
                    PSSM_STATE_FN(pssm_state_quad_floats_)(sv[v]), av[v],
                    PSSM_SCAN_FN(pssm_scan_quad_floats_)(bq[v]),
                    PSSM_SCAN_FN(pssm_scan_quad_floats_)(cq[v]), dt2, dtx, da_tied, tied, 4, &y);
                if (live)
                    PSSM_STATE_FN(pssm_state_quad_store_)(st, n, s_new);
            }
        }
        y = pssm_scan_team_sum(y, team);
        /* (y + D x) silu(z), 0 for a dead row (an index out of the state's rows) */
        if (active && lane == 0) {
            float o = 0.0f;
            if (live) {
                o = y + Dv * xv;
                if (p.z)
                    o *= pssm_silu_fast(PSSM_SCAN_LD(zr));
            }
            ((PSSM_SCAN_ACT *)p.out)[PSSM_FLAT_AT(p.out_s, b)] = PSSM_SCAN_ST(o);
        }
    }
}

#undef PSSM_FLAT_AT
#undef PSSM_FLAT_AT_G
#undef PSSM_UPDATE_FLAT_NAME
#undef PSSM_UPDATE_FLAT_MIN_BLOCKS
