/*
 * norm.body.h - the row-norm kernels of one activation dtype and access path.  Included by
 * norm_kernels.h once per (dtype, path), with PSSM_NM_SFX (name suffix: f32, any_f32, ...),
 * PSSM_NM_ACT (the dtype's PSSM_DT_*), PSSM_NM_E (its channels in 16 bytes) and PSSM_NM_VEC
 * (1: 16-byte vector accesses, where the planner found them possible; 0: element accesses,
 * any strides) and optionally PSSM_NM_FORM (see norm_params.h: 0, the default, every option
 * read at run time; PSSM_NM_FORM_GATE_BEFORE / _AFTER, that gate, and neither a residual (nor
 * its gradients) nor a bias; PSSM_NM_FORM_PRENORM_F32, no gate, no bias, a residual path in
 * F32: so that the kernels' registers hold that form's values only);
 * undefines them at the end.  The paths are separate kernels so that the vector one carries
 * none of the other's registers.
 *
 * A thread's channels in tile t of a segment of n channels: for k < PSSM_NM_NV, the E channels
 * from j0 = t*C + (k*team + tt)*E, C = team * NV * E, tt the thread's place in its team: a
 * team's vectors are adjacent (its loads coalesce), and channels at or past n are idle.  With
 * one tile the values stay in registers between the passes; with more, each pass reads them
 * again (rows past 16K channels).
 */

#define PSSM_NM_FN(name) PSSM_NM_CAT4(pssm_nm_, name, _, PSSM_NM_SFX)
#define NM_E PSSM_NM_E
#define NM_NV PSSM_NM_NV
#define NM_VEC PSSM_NM_VEC
/* A channel stride: 1 on the vector path (the planner checked it), so that no offset there
 * multiplies by it at run time. */
#define NM_SH(sh) (NM_VEC ? (int64_t)1 : (sh))
#ifndef PSSM_NM_FORM
#define PSSM_NM_FORM 0
#endif
/* The gate, the residual and residual_out: fixed by the form, else the parameters'. */
#define NM_GATED (PSSM_NM_FORM == PSSM_NM_FORM_GATE_BEFORE || PSSM_NM_FORM == PSSM_NM_FORM_GATE_AFTER)
#define NM_PRENORM (PSSM_NM_FORM == PSSM_NM_FORM_PRENORM_F32)
#define NM_GATE(g) (NM_PRENORM ? PSSM_NM_GATE_NONE : PSSM_NM_FORM ? PSSM_NM_FORM : (g))
#define NM_RES(ptr) (NM_GATED ? (const void *)0 : (ptr))
#define NM_RES_OUT(ptr) (NM_GATED ? (void *)0 : (ptr))
/* ... the bias (and its gradient's partial sums) and dresidual_out */
#define NM_BIAS(ptr) (PSSM_NM_FORM ? (const void *)0 : (ptr))
#define NM_PART_B(ptr) (PSSM_NM_FORM ? (float *)0 : (ptr))
#define NM_DRES_OUT(ptr) (NM_GATED ? (const void *)0 : (ptr))
/* ... the residual path's dtype (residual, residual_out, their gradients) */
#define NM_RES_DT(dt) (NM_PRENORM ? PSSM_DT_F32 : (dt))
/* The backward's first pass loads a tile's row data before computing any of it (bwd_tile) */
#define NM_LOADS_FIRST (PSSM_NM_FORM != 0)
/* ... and the gated forms' backward (s, g and z all present) can take it from the row prefetch
 * (norm_params.h).  Not the prenorm form's: its backward took 218 us with the prefetch and 156
 * without it (H100 run 125, D2560 bf16; not for want of L1: 162 without it at the largest
 * shared-memory carveout), likely as its f32 rows' 32-byte slots are copied by two strided
 * cp.async.cg whose lanes each ask for every sector past L1 (bench/HISTORY.md, runs 124-125);
 * compiled in, its register cap spilled 32 bytes. */
#define NM_PREFETCH NM_GATED

/* The first channel of slot k of tile `tile`. */
PSSM_DEVICE int64_t PSSM_NM_FN(j0)(int team, int tt, int64_t tile, int k)
{
    return (tile * NM_NV + k) * (int64_t)team * NM_E + (int64_t)tt * NM_E;
}

/* Forward: v (what the norm normalises) of one tile of segment (r, first channel c0); s = x +
 * residual is written to residual_out when write_res.  An idle team (active 0) reads nothing
 * and gets zeros; idle channels are 0.  Every load of the tile is issued before the first
 * store: the compiler may not move a load past a store to memory it cannot tell apart, and
 * loads and stores interleaved per vector group left one DRAM round trip in flight per
 * thread (the kernel waited on its loads: ncu, run 116). */
PSSM_DEVICE void PSSM_NM_FN(fwd_tile)(const pssm_norm_params *p, int64_t r, int64_t c0,
                                      int64_t tile, int tt, int active, int write_res,
                                      float v[NM_NV][NM_E])
{
    const int64_t n = active ? p->n : 0;
    float a[NM_NV][NM_E];
    PSSM_UNROLL
    for (int k = 0; k < NM_NV; k++) {
        const int64_t j0 = PSSM_NM_FN(j0)(p->team, tt, tile, k);
        pssm_nm_ld(p->x, r * p->x_sr + c0 * NM_SH(p->x_sh), NM_SH(p->x_sh), j0, n, PSSM_NM_ACT,
                   NM_E, NM_VEC, v[k]);
        if (NM_RES(p->res))
            pssm_nm_ld(NM_RES(p->res), r * p->res_sr + c0 * NM_SH(p->res_sh), NM_SH(p->res_sh), j0,
                       n, NM_RES_DT(p->res_dt), NM_E, NM_VEC, a[k]);
        else if (NM_GATE(p->gate) == PSSM_NM_GATE_BEFORE)
            pssm_nm_ld(p->z, r * p->z_sr + c0 * NM_SH(p->z_sh), NM_SH(p->z_sh), j0, n, PSSM_NM_ACT,
                       NM_E, NM_VEC, a[k]);
    }
    PSSM_UNROLL
    for (int k = 0; k < NM_NV; k++) {
        const int64_t j0 = PSSM_NM_FN(j0)(p->team, tt, tile, k);
        if (NM_RES(p->res))
            PSSM_UNROLL
            for (int e = 0; e < NM_E; e++)
                v[k][e] += a[k][e];
        if (write_res && NM_RES_OUT(p->res_out))
            pssm_nm_st(NM_RES_OUT(p->res_out), r * p->ro_sr + c0 * NM_SH(p->ro_sh), NM_SH(p->ro_sh),
                       j0, n, NM_RES_DT(p->ro_dt), NM_E, NM_VEC, v[k]);
    }
    if (NM_GATE(p->gate) != PSSM_NM_GATE_BEFORE)
        return;
    PSSM_UNROLL
    for (int k = 0; k < NM_NV; k++) {
        /* z after the residual's store (rare: a residual and a gate before) */
        if (NM_RES(p->res)) {
            const int64_t j0 = PSSM_NM_FN(j0)(p->team, tt, tile, k);
            pssm_nm_ld(p->z, r * p->z_sr + c0 * NM_SH(p->z_sh), NM_SH(p->z_sh), j0, n, PSSM_NM_ACT,
                       NM_E, NM_VEC, a[k]);
        }
        PSSM_UNROLL
        for (int e = 0; e < NM_E; e++)
            v[k][e] *= pssm_silu_fast(a[k][e]);
    }
}

PSSM_NM_FWD_KERNEL(PSSM_NM_CAT2(pssm_norm_fwd_, PSSM_NM_SFX), pssm_norm_params, p, PSSM_NM_MAX_TEAM)
{
    PSSM_SHARED(float, red, PSSM_NM_RED);
    const int team = p.team, mode = p.team_mode;
    int which;
    const int tt = pssm_nm_place(&p, &which);
    const int64_t per_block = PSSM_BLOCKDIM_X / team, n = p.n;
    const int resident = p.tiles == 1;
    for (int64_t base = PSSM_BLOCK_X * per_block; base < p.work;
         base += PSSM_GRIDDIM_X * per_block) {
        const int64_t seg = base + which;
        const int active = seg < p.work;
        const int64_t r = !active ? 0 : p.groups == 1 ? seg : seg / p.groups;
        const int64_t g = active ? seg - r * p.groups : 0;
        const int64_t c0 = g * n;
        float v[NM_NV][NM_E];

        /* pass 1: residual_out, the mean */
        float acc = 0.0f;
        PSSM_NOUNROLL
        for (int64_t tile = 0; tile < p.tiles; tile++) {
            PSSM_NM_FN(fwd_tile)(&p, r, c0, tile, tt, active, 1, v);
            PSSM_UNROLL
            for (int k = 0; k < NM_NV; k++)
                PSSM_UNROLL
                for (int e = 0; e < NM_E; e++)
                    acc += v[k][e];
        }
        float mean = 0.0f;
        if (!p.rms)
            mean = pssm_nm_sum(acc, team, mode, red) / (float)n;

        /* pass 2: the variance about the mean (RMSNorm: the mean square) */
        acc = 0.0f;
        PSSM_NOUNROLL
        for (int64_t tile = 0; tile < p.tiles; tile++) {
            if (!resident)
                PSSM_NM_FN(fwd_tile)(&p, r, c0, tile, tt, active, 0, v);
            PSSM_UNROLL
            for (int k = 0; k < NM_NV; k++) {
                const int64_t j0 = PSSM_NM_FN(j0)(team, tt, tile, k);
                const int in = active && j0 < n; /* (the vector path's groups: whole) */
                PSSM_UNROLL
                for (int e = 0; e < NM_E; e++) {
                    const float d = v[k][e] - mean;
                    acc += in && (NM_VEC || j0 + e < n) ? d * d : 0.0f;
                }
            }
        }
        const float rstd = 1.0f / pssm_sqrtf(pssm_nm_sum(acc, team, mode, red) / (float)n + p.eps);
        if (active && tt == 0) {
            if (p.mean)
                p.mean[r * p.mean_sr + g * p.mean_sg] = mean;
            if (p.rstd)
                p.rstd[r * p.rstd_sr + g * p.rstd_sg] = rstd;
        }

        /* pass 3: out = ((v - mean) * rstd * w + b) (* silu(z)); the gate's loads (DRAM) all
         * before the first store (see fwd_tile); the weights' (cache hits) one group at a time */
        const int64_t live = active ? n : 0;
        PSSM_NOUNROLL
        for (int64_t tile = 0; tile < p.tiles; tile++) {
            if (!resident)
                PSSM_NM_FN(fwd_tile)(&p, r, c0, tile, tt, active, 0, v);
            float zg[NM_NV][NM_E];
            PSSM_UNROLL
            for (int k = 0; k < NM_NV; k++)
                if (NM_GATE(p.gate) == PSSM_NM_GATE_AFTER)
                    pssm_nm_ld(p.z, r * p.z_sr + c0 * NM_SH(p.z_sh), NM_SH(p.z_sh),
                               PSSM_NM_FN(j0)(team, tt, tile, k), live, PSSM_NM_ACT, NM_E, NM_VEC,
                               zg[k]);
            PSSM_UNROLL
            for (int k = 0; k < NM_NV; k++) {
                const int64_t j0 = PSSM_NM_FN(j0)(team, tt, tile, k);
                if (j0 >= live)
                    continue;
                float w[NM_E], b[NM_E], y[NM_E];
                pssm_nm_ld(p.weight, c0 * NM_SH(p.w_sh), NM_SH(p.w_sh), j0, n, p.w_dt, NM_E, NM_VEC,
                           w);
                if (NM_BIAS(p.bias))
                    pssm_nm_ld(NM_BIAS(p.bias), c0 * NM_SH(p.b_sh), NM_SH(p.b_sh), j0, n, p.w_dt,
                               NM_E, NM_VEC, b);
                PSSM_UNROLL
                for (int e = 0; e < NM_E; e++)
                    y[e] = (v[k][e] - mean) * rstd * w[e] + (NM_BIAS(p.bias) ? b[e] : 0.0f);
                if (NM_GATE(p.gate) == PSSM_NM_GATE_AFTER)
                    PSSM_UNROLL
                    for (int e = 0; e < NM_E; e++)
                        y[e] *= pssm_silu_fast(zg[k][e]);
                pssm_nm_st(p.out, r * p.out_sr + c0 * NM_SH(p.out_sh), NM_SH(p.out_sh), j0, n,
                           PSSM_NM_ACT, NM_E, NM_VEC, y);
            }
        }
    }
}

/* Backward: the row data of one vector slot k (s, g and, with a gate, z): from the prefetched
 * row where f has one, else from global memory; and the weights where w is given. */
PSSM_DEVICE void PSSM_NM_FN(bwd_row_ld)(const pssm_norm_params *p, int64_t r, int64_t c0,
                                        int64_t j0, int64_t n, float *s, float *g, float *w,
                                        float *z, const pssm_nm_pf *f, int k)
{
    if (w)
        pssm_nm_ld(p->weight, c0 * NM_SH(p->w_sh), NM_SH(p->w_sh), j0, n, p->w_dt, NM_E, NM_VEC, w);
    if (NM_PREFETCH && f->row) {
        pssm_nm_from_vecs(pssm_nm_pf_at(f, k, f->s), f->stride, p->x_dt, NM_E, s);
        pssm_nm_from_vecs(pssm_nm_pf_at(f, k, f->g), f->stride, PSSM_NM_ACT, NM_E, g);
        if (NM_GATE(p->gate) != PSSM_NM_GATE_NONE)
            pssm_nm_from_vecs(pssm_nm_pf_at(f, k, f->z), f->stride, PSSM_NM_ACT, NM_E, z);
        return;
    }
    pssm_nm_ld(p->x, r * p->x_sr + c0 * NM_SH(p->x_sh), NM_SH(p->x_sh), j0, n, p->x_dt, NM_E,
               NM_VEC, s);
    pssm_nm_ld(p->dout, r * p->g_sr + c0 * NM_SH(p->g_sh), NM_SH(p->g_sh), j0, n, PSSM_NM_ACT,
               NM_E, NM_VEC, g);
    if (NM_GATE(p->gate) != PSSM_NM_GATE_NONE)
        pssm_nm_ld(p->z, r * p->z_sr + c0 * NM_SH(p->z_sh), NM_SH(p->z_sh), j0, n, PSSM_NM_ACT,
                   NM_E, NM_VEC, z);
}

#if NM_PREFETCH
/* The row prefetch (norm_params.h): the copies of row r's vectors of this thread (one tile)
 * into f->row, zeros for a row that is not live (live 0) and for idle channels. */
PSSM_DEVICE void PSSM_NM_FN(bwd_row_copy)(const pssm_norm_params *p, int64_t r, int64_t c0,
                                          int tt, int live, const pssm_nm_pf *f)
{
    const int64_t n = live ? p->n : 0;
    PSSM_UNROLL
    for (int k = 0; k < NM_NV; k++) {
        const int64_t j0 = PSSM_NM_FN(j0)(p->team, tt, 0, k);
        const int in = j0 < n;
        pssm_nm_copy(pssm_nm_pf_at(f, k, f->s), f->stride, p->x, r * p->x_sr + c0 + j0, p->x_dt,
                     NM_E, in);
        pssm_nm_copy(pssm_nm_pf_at(f, k, f->g), f->stride, p->dout, r * p->g_sr + c0 + j0,
                     PSSM_NM_ACT, NM_E, in);
        pssm_nm_copy(pssm_nm_pf_at(f, k, f->z), f->stride, p->z, r * p->z_sr + c0 + j0,
                     PSSM_NM_ACT, NM_E, in);
    }
}
#endif

/* Backward, the first half for one tile of row r (first channel c0), statistics mean and
 * rstd: vhat and w * g (g, the gradient reaching y = vhat*w + b) per channel into xh, wg (idle
 * channels 0).  With `effects` (the first pass over the tile) it also adds vhat * w * g and
 * w * g into *c1, *c2, stores dz where the gate follows the norm and the forward's out where
 * p->y asks for it (computed as the forward computes it), and adds g * vhat and g into
 * the sums of dweight and dbias: the registers aw, ab with one tile, else this unit's row of
 * the partials (part row `prow`; first_row: written, not added to). */
PSSM_DEVICE void PSSM_NM_FN(bwd_tile)(const pssm_norm_params *p, int64_t r, int64_t c0,
                                      int64_t tile, int tt, int active, float mean, float rstd,
                                      int effects, int first_row, int64_t prow,
                                      float xh[NM_NV][NM_E], float wg[NM_NV][NM_E], float *c1,
                                      float *c2, float aw[NM_NV][NM_E], float ab[NM_NV][NM_E],
                                      const pssm_nm_pf *f)
{
    const int64_t n = active ? p->n : 0;
    /* The forms' kernels load the tile's row data first, every vector of it: s into xh, g into
     * wg, z (DRAM; the weights, cache hits, per vector below).  A load may not pass the stores
     * below (out, dz, partials), so loads issued between them left one DRAM round trip per
     * vector in flight (the forward's fwd_tile, run 116; this kernel's SASS, session 39).  The
     * generic kernels load per vector: the registers of the early loads made them spill (88
     * bytes, bf16, sm_90). */
    float zz[NM_NV][NM_E];
    PSSM_UNROLL
    for (int k = 0; k < NM_NV; k++)
        if (NM_LOADS_FIRST)
            PSSM_NM_FN(bwd_row_ld)(p, r, c0, PSSM_NM_FN(j0)(p->team, tt, tile, k), n, xh[k], wg[k],
                                   0, zz[k], f, k);
    PSSM_UNROLL
    for (int k = 0; k < NM_NV; k++) {
        const int64_t j0 = PSSM_NM_FN(j0)(p->team, tt, tile, k);
        float gl[NM_E], zl[NM_E], w[NM_E], b[NM_E];
        float *z = NM_LOADS_FIRST ? zz[k] : zl, *gy = NM_LOADS_FIRST ? wg[k] : gl;
        if (NM_LOADS_FIRST)
            pssm_nm_ld(p->weight, c0 * NM_SH(p->w_sh), NM_SH(p->w_sh), j0, n, p->w_dt, NM_E, NM_VEC,
                       w);
        else
            PSSM_NM_FN(bwd_row_ld)(p, r, c0, j0, n, xh[k], gl, w, zl, f, k);
        PSSM_UNROLL
        for (int e = 0; e < NM_E; e++) {
            const float s = xh[k][e];
            const float v = NM_GATE(p->gate) == PSSM_NM_GATE_BEFORE ? s * pssm_silu_fast(z[e]) : s;
            xh[k][e] = j0 + e < n ? (v - mean) * rstd : 0.0f;
        }
        const int out_y = effects && p->y;
        if (NM_GATE(p->gate) == PSSM_NM_GATE_AFTER || out_y) {
            if (NM_BIAS(p->bias))
                pssm_nm_ld(NM_BIAS(p->bias), c0 * NM_SH(p->b_sh), NM_SH(p->b_sh), j0, n, p->w_dt,
                           NM_E, NM_VEC, b);
            float y[NM_E];
            PSSM_UNROLL
            for (int e = 0; e < NM_E; e++)
                y[e] = xh[k][e] * w[e] + (NM_BIAS(p->bias) ? b[e] : 0.0f);
            if (NM_GATE(p->gate) == PSSM_NM_GATE_AFTER) {
                float dz[NM_E];
                PSSM_UNROLL
                for (int e = 0; e < NM_E; e++) {
                    const float sz = pssm_silu_fast(z[e]);
                    dz[e] = gy[e] * y[e] * pssm_nm_dsilu(z[e]);
                    gy[e] *= sz;
                    y[e] *= sz;
                }
                if (effects && p->dz)
                    pssm_nm_st(p->dz, r * p->dz_sr + c0 * NM_SH(p->dz_sh), NM_SH(p->dz_sh), j0, n,
                               PSSM_NM_ACT, NM_E, NM_VEC, dz);
            }
            if (out_y)
                pssm_nm_st(p->y, r * p->y_sr + c0 * NM_SH(p->y_sh), NM_SH(p->y_sh), j0, n,
                           PSSM_NM_ACT, NM_E, NM_VEC, y);
        }
        /* gy as the sums of dweight and dbias take it (a copy where gy is wg[k], which becomes
         * w * gy) */
        float gc[NM_E], *g = NM_LOADS_FIRST ? gc : gy;
        PSSM_UNROLL
        for (int e = 0; e < NM_E; e++) {
            gc[e] = gy[e];
            wg[k][e] = w[e] * g[e];
        }
        if (!effects)
            continue;
        PSSM_UNROLL
        for (int e = 0; e < NM_E; e++) {
            *c1 += xh[k][e] * wg[k][e];
            *c2 += wg[k][e];
        }
        if (!p->part_w || j0 >= n)
            continue;
        if (p->tiles == 1) {
            PSSM_UNROLL
            for (int e = 0; e < NM_E; e++) {
                aw[k][e] += g[e] * xh[k][e];
                ab[k][e] += g[e];
            }
            continue;
        }
        /* a long row: this thread's channels of the unit's partial rows, in place */
        float pw[NM_E], pb[NM_E];
        const int64_t at = prow * p->hidden + c0;
        PSSM_UNROLL
        for (int e = 0; e < NM_E; e++)
            pw[e] = pb[e] = 0.0f;
        if (!first_row) {
            pssm_nm_ld(p->part_w, at, 1, j0, n, PSSM_DT_F32, NM_E, NM_VEC, pw);
            if (NM_PART_B(p->part_b))
                pssm_nm_ld(NM_PART_B(p->part_b), at, 1, j0, n, PSSM_DT_F32, NM_E, NM_VEC, pb);
        }
        PSSM_UNROLL
        for (int e = 0; e < NM_E; e++) {
            pw[e] += g[e] * xh[k][e];
            pb[e] += g[e];
        }
        pssm_nm_st(p->part_w, at, 1, j0, n, PSSM_DT_F32, NM_E, NM_VEC, pw);
        if (NM_PART_B(p->part_b))
            pssm_nm_st(NM_PART_B(p->part_b), at, 1, j0, n, PSSM_DT_F32, NM_E, NM_VEC, pb);
    }
}

PSSM_NM_BWD_KERNEL(PSSM_NM_CAT2(pssm_norm_bwd_, PSSM_NM_SFX), pssm_norm_params, p, PSSM_NM_MAX_TEAM)
{
    PSSM_SHARED(float, red, PSSM_NM_RED);
    const int team = p.team, mode = p.team_mode;
    int which;
    const int tt = pssm_nm_place(&p, &which);
    const int64_t per_block = PSSM_BLOCKDIM_X / team, n = p.n;
    const int resident = p.tiles == 1;
    /* the row prefetch (norm_params.h): its layout, and the thread's first vector of buffer b
     * at pf_mem + b * vecs * threads */
    pssm_nm_pf f;
    f.row = 0;
#if NM_PREFETCH
    PSSM_SHARED_DYNAMIC(pssm_vec16, pf_mem);
    const int prefetch = p.prefetch;
    int64_t pf_buf = 0;
    if (prefetch) {
        f.stride = PSSM_BLOCKDIM_X;
        f.s = 0;
        f.g = f.s + NM_E * pssm_nm_bytes(p.x_dt) / 16;
        f.z = f.g + NM_E * pssm_nm_bytes(PSSM_NM_ACT) / 16;
        f.per_k = f.z + NM_E * pssm_nm_bytes(PSSM_NM_ACT) / 16;
        pf_buf = (int64_t)NM_NV * f.per_k * f.stride;
    }
#endif
    for (int64_t base = PSSM_BLOCK_X * per_block; base < p.work;
         base += PSSM_GRIDDIM_X * per_block) {
        const int64_t unit = base + which;
        const int unit_active = unit < p.work;
        const int64_t chunk = !unit_active ? 0 : p.groups == 1 ? unit : unit / p.groups;
        const int64_t g = unit_active ? unit - chunk * p.groups : 0;
        const int64_t c0 = g * n, first = chunk * p.rows_per;
        float aw[NM_NV][NM_E], ab[NM_NV][NM_E];
        PSSM_UNROLL
        for (int k = 0; k < NM_NV; k++)
            PSSM_UNROLL
            for (int e = 0; e < NM_E; e++)
                aw[k][e] = ab[k][e] = 0.0f;
#if NM_PREFETCH
        if (prefetch) { /* the unit's first row into buffer 0 */
            const int live = unit_active && first < p.rows;
            f.row = pf_mem + PSSM_THREAD_X;
            PSSM_NM_FN(bwd_row_copy)(&p, live ? first : 0, c0, tt, live, &f);
            PSSM_COPY_COMMIT();
        }
#endif

        PSSM_NOUNROLL
        for (int64_t i = 0; i < p.rows_per; i++) {
            const int64_t row = first + i;
            const int active = unit_active && row < p.rows;
            const int64_t r = active ? row : 0;
#if NM_PREFETCH
            if (prefetch) { /* the next row into the other buffer (read two rows ago), then
                               wait for this one's (every row commits a group, maybe empty) */
                f.row = pf_mem + ((i + 1) & 1) * pf_buf + PSSM_THREAD_X;
                if (i + 1 < p.rows_per) {
                    const int live = unit_active && row + 1 < p.rows;
                    PSSM_NM_FN(bwd_row_copy)(&p, live ? row + 1 : 0, c0, tt, live, &f);
                }
                PSSM_COPY_COMMIT();
                PSSM_COPY_WAIT(1);
                f.row = pf_mem + (i & 1) * pf_buf + PSSM_THREAD_X;
            }
#endif
            const float mean = active && !p.rms ? p.mean[r * p.mean_sr + g * p.mean_sg] : 0.0f;
            const float rstd = active ? p.rstd[r * p.rstd_sr + g * p.rstd_sg] : 0.0f;
            float xh[NM_NV][NM_E], wg[NM_NV][NM_E];
            float c1 = 0.0f, c2 = 0.0f;
            PSSM_NOUNROLL
            for (int64_t tile = 0; tile < p.tiles; tile++)
                PSSM_NM_FN(bwd_tile)
            (&p, r, c0, tile, tt, active, mean, rstd, 1, i == 0, chunk, xh, wg, &c1, &c2, aw, ab,
             &f);
            pssm_nm_sum2(&c1, &c2, team, mode, red);
            c1 /= (float)n;
            c2 = p.rms ? 0.0f : c2 / (float)n;

            /* dv = (w g - vhat c1 - c2) rstd; the gate before the norm (s and z read again: the
             * row was just read, and registers are the kernel's limit); + dresidual_out */
            const int64_t live = active ? n : 0;
            PSSM_NOUNROLL
            for (int64_t tile = 0; tile < p.tiles; tile++) {
                if (!resident)
                    PSSM_NM_FN(bwd_tile)
                (&p, r, c0, tile, tt, active, mean, rstd, 0, 0, chunk, xh, wg, &c1, &c2, aw, ab,
                 &f);
                /* ds into wg (each channel's wg is read once, here); dresidual_out's loads
                 * all issued before the first store of out (see fwd_tile), into xh */
                PSSM_UNROLL
                for (int k = 0; k < NM_NV; k++) {
                    const int64_t j0 = PSSM_NM_FN(j0)(team, tt, tile, k);
                    float *ds = wg[k];
                    PSSM_UNROLL
                    for (int e = 0; e < NM_E; e++)
                        ds[e] = (ds[e] - xh[k][e] * c1 - c2) * rstd;
                    if (NM_GATE(p.gate) == PSSM_NM_GATE_BEFORE && j0 < live) {
                        float sv[NM_E], a[NM_E];
                        if (NM_PREFETCH && f.row) {
                            pssm_nm_from_vecs(pssm_nm_pf_at(&f, k, f.s), f.stride, p.x_dt, NM_E, sv);
                            pssm_nm_from_vecs(pssm_nm_pf_at(&f, k, f.z), f.stride, PSSM_NM_ACT, NM_E, a);
                        } else {
                            pssm_nm_ld(p.x, r * p.x_sr + c0 * NM_SH(p.x_sh), NM_SH(p.x_sh), j0, n,
                                       p.x_dt, NM_E, NM_VEC, sv);
                            pssm_nm_ld(p.z, r * p.z_sr + c0 * NM_SH(p.z_sh), NM_SH(p.z_sh), j0, n,
                                       PSSM_NM_ACT, NM_E, NM_VEC, a);
                        }
                        PSSM_UNROLL
                        for (int e = 0; e < NM_E; e++) {
                            sv[e] = ds[e] * sv[e] * pssm_nm_dsilu(a[e]); /* dz */
                            ds[e] *= pssm_silu_fast(a[e]);
                        }
                        if (p.dz)
                            pssm_nm_st(p.dz, r * p.dz_sr + c0 * NM_SH(p.dz_sh), NM_SH(p.dz_sh), j0,
                                       n, PSSM_NM_ACT, NM_E, NM_VEC, sv);
                    }
                }
                PSSM_UNROLL
                for (int k = 0; k < NM_NV; k++) {
                    const int64_t j0 = PSSM_NM_FN(j0)(team, tt, tile, k);
                    if (NM_DRES_OUT(p.dres_out))
                        pssm_nm_ld(NM_DRES_OUT(p.dres_out), r * p.gro_sr + c0 * NM_SH(p.gro_sh),
                                   NM_SH(p.gro_sh), j0, live, NM_RES_DT(p.gro_dt), NM_E, NM_VEC, xh[k]);
                }
                PSSM_UNROLL
                for (int k = 0; k < NM_NV; k++) {
                    const int64_t j0 = PSSM_NM_FN(j0)(team, tt, tile, k);
                    if (j0 >= live)
                        continue;
                    float *ds = wg[k];
                    if (NM_DRES_OUT(p.dres_out))
                        PSSM_UNROLL
                        for (int e = 0; e < NM_E; e++)
                            ds[e] += xh[k][e];
                    pssm_nm_st(p.out, r * p.out_sr + c0 * NM_SH(p.out_sh), NM_SH(p.out_sh), j0, n,
                               PSSM_NM_ACT, NM_E, NM_VEC, ds);
                    if (NM_RES_OUT(p.res_out))
                        pssm_nm_st(NM_RES_OUT(p.res_out), r * p.ro_sr + c0 * NM_SH(p.ro_sh),
                                   NM_SH(p.ro_sh), j0, n, NM_RES_DT(p.ro_dt), NM_E, NM_VEC, ds);
                }
            }
        }

        /* one tile: the unit's sums of dweight and dbias, from the registers */
        if (resident && p.part_w && unit_active) {
            const int64_t at = chunk * p.hidden + c0;
            PSSM_UNROLL
            for (int k = 0; k < NM_NV; k++) {
                const int64_t j0 = PSSM_NM_FN(j0)(team, tt, 0, k);
                pssm_nm_st(p.part_w, at, 1, j0, n, PSSM_DT_F32, NM_E, NM_VEC, aw[k]);
                if (NM_PART_B(p.part_b))
                    pssm_nm_st(NM_PART_B(p.part_b), at, 1, j0, n, PSSM_DT_F32, NM_E, NM_VEC, ab[k]);
            }
        }
    }
}

#undef PSSM_NM_FN
#undef NM_E
#undef NM_NV
#undef NM_VEC
#undef NM_SH
#undef NM_GATED
#undef NM_PRENORM
#undef NM_GATE
#undef NM_RES_DT
#undef NM_LOADS_FIRST
#undef NM_PREFETCH
#undef NM_RES
#undef NM_RES_OUT
#undef NM_BIAS
#undef NM_PART_B
#undef NM_DRES_OUT
#undef PSSM_NM_FORM
#undef PSSM_NM_SFX
#undef PSSM_NM_ACT
#undef PSSM_NM_E
#undef PSSM_NM_VEC
