/*
 * scan_kernels.h - selective_scan_fwd (Mamba-1) and selective_state_update kernels.
 *
 * Bodies are stamped per activation dtype (scan_act.body.h: row-group and tile helpers), per
 * dtype x states-per-lane (scan_fwd.body.h: the scan kernel) and per activation dtype x state
 * dtype x variant (state_update.stamp.h: the state update kernels).  The stamped names must
 * match scan_list.h.
 *
 * Scan design (why it is shaped like this): the scan does one exp per (b, d, t, n) and little
 * else, so it is bound by the special-function unit and by instruction issue around it.  Every
 * lane owns one channel (or a slice of its states, for large N or few channels), walks time
 * sequentially with its states in registers, and in the inner loop touches nothing but registers
 * and broadcast shared-memory reads of the B/C tile.  Its own rows (u, delta, z, out) move as
 * 16-byte groups of 8 steps, loaded two groups ahead; the per-token math (softplus, D*u,
 * silu(z), conversions) is done once per group outside the per-state loop.  Steps past L run
 * with dt = 0, which leaves the states unchanged, so the loop has no per-step guard.
 */
#include "pssm_dialect.h"
#include "kernel_parts.h"
#include "scan_params.h"

#define PSSM_SCAN_CAT_(a, b) a##b
#define PSSM_SCAN_CAT(a, b) PSSM_SCAN_CAT_(a, b)
/* name##<dtype suffix> of the stamp being compiled */
#define PSSM_SCAN_FN(name) PSSM_SCAN_CAT(name, PSSM_SCAN_DT)

/* The state update's state dtype, a stamp parameter of its own (PSSM_STATE_DT f32, f16 or bf16,
 * PSSM_STATE_BYTES 4 or 2): any state dtype with any activation dtype.  Its load/store helpers
 * (state_quad.body.h) depend on the state dtype only, so they are stamped here, once each, for
 * every part; the kernels are stamped per activation x state dtype (state_update.stamp.h). */
typedef float pssm_state_t_f32;
typedef pssm_f16 pssm_state_t_f16;
typedef pssm_bf16 pssm_state_t_bf16;
#define PSSM_STATE_T PSSM_SCAN_CAT(pssm_state_t_, PSSM_STATE_DT)
/* name##<state dtype suffix> */
#define PSSM_STATE_FN(name) PSSM_SCAN_CAT(name, PSSM_STATE_DT)
/* storage -> float, exactly; float -> storage, rounded once to nearest even (and two at once) */
#define PSSM_STATE_LD(v) PSSM_SCAN_CAT(pssm_load_, PSSM_STATE_DT)(v)
#define PSSM_STATE_ST(f) PSSM_SCAN_CAT(pssm_store_, PSSM_STATE_DT)(f)
#define PSSM_STATE_ST2(lo, hi) PSSM_SCAN_CAT(PSSM_SCAN_CAT(pssm_store_, PSSM_STATE_DT), x2)(lo, hi)
#define PSSM_STATE_DT f32
#define PSSM_STATE_BYTES 4
#include "state_quad.body.h"
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES
#define PSSM_STATE_DT f16
#define PSSM_STATE_BYTES 2
#include "state_quad.body.h"
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES
#define PSSM_STATE_DT bf16
#define PSSM_STATE_BYTES 2
#include "state_quad.body.h"
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES

/* The sums over the `tpc` adjacent lanes of a channel team (tpc uniform over the warp, so
 * every lane takes part in every shuffle) of v[0..n), in place (n a constant at the call): one
 * round of n independent shuffles per level, so that their latencies overlap.  (A sum of one
 * value at a time, in an unrolled loop over the values, compiles to one loop per value, since
 * tpc is not a constant: each value's shuffles wait on the previous value's.) */
PSSM_DEVICE void pssm_scan_team_sums(float *v, int n, int tpc)
{
    for (int o = 1; o < tpc; o <<= 1) {
        PSSM_UNROLL
        for (int j = 0; j < n; ++j)
            v[j] += PSSM_SHFL_XOR_F32(v[j], o);
    }
}

/* The team sum of one value. */
PSSM_DEVICE float pssm_scan_team_sum(float v, int tpc)
{
    pssm_scan_team_sums(&v, 1, tpc);
    return v;
}

/* One group of 8 time steps of one row as raw storage words: v[0] holds 8 16-bit values, or
 * v[0..1] hold 8 floats.  Kept raw between its (early) load and its use, to cost few registers. */
typedef struct pssm_scan_grp {
    pssm_vec16 v[2];
} pssm_scan_grp;

PSSM_DEVICE pssm_scan_grp pssm_scan_grp_zero(void)
{
    pssm_scan_grp g;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j)
            g.v[i].w[j] = 0u;
    return g;
}

/* Element j of a group of 16-bit values, raw; and the group with element j replaced. */
PSSM_DEVICE uint16_t pssm_scan_grp_get16(pssm_scan_grp g, int j)
{
    return (uint16_t)(g.v[0].w[j >> 1] >> ((j & 1) * 16));
}
PSSM_DEVICE pssm_scan_grp pssm_scan_grp_set16(pssm_scan_grp g, int j, uint16_t h)
{
    const uint32_t w = g.v[0].w[j >> 1];
    g.v[0].w[j >> 1] = (j & 1) ? (w & 0xffffu) | ((uint32_t)h << 16) : (w & 0xffff0000u) | h;
    return g;
}

/* ---------------------------------------------------------------- f32 */
#if PSSM_IN_PART(scan_f32)
#define PSSM_SCAN_ACT float
#define PSSM_SCAN_LD(v) pssm_load_f32(v)
#define PSSM_SCAN_ST(f) pssm_store_f32(f)
#define PSSM_SCAN_DT f32
#define PSSM_SCAN_VECS 2 /* 16-byte vectors per group */
#define PSSM_SCAN_GET(g, j) pssm_as_float((g).v[(j) >> 2].w[(j) & 3])
#define PSSM_SCAN_SET(g, j, e) ((g).v[(j) >> 2].w[(j) & 3] = pssm_as_uint(e), (g))
#include "scan_dtype.stamp.h"
#endif

/* ---------------------------------------------------------------- f16 */
#if PSSM_IN_PART(scan_f16)
#define PSSM_SCAN_ACT pssm_f16
#define PSSM_SCAN_LD(v) pssm_load_f16(v)
#define PSSM_SCAN_ST(f) pssm_store_f16(f)
#define PSSM_SCAN_DT f16
#define PSSM_SCAN_VECS 1
#define PSSM_SCAN_GET(g, j) PSSM_SCAN_LD(pssm_scan_grp_get16((g), (j)))
#define PSSM_SCAN_SET(g, j, e) pssm_scan_grp_set16((g), (j), (e))
#include "scan_dtype.stamp.h"
#endif

/* ---------------------------------------------------------------- bf16 */
#if PSSM_IN_PART(scan_bf16)
#define PSSM_SCAN_ACT pssm_bf16
#define PSSM_SCAN_LD(v) pssm_load_bf16(v)
#define PSSM_SCAN_ST(f) pssm_store_bf16(f)
#define PSSM_SCAN_DT bf16
#define PSSM_SCAN_VECS 1
#define PSSM_SCAN_GET(g, j) PSSM_SCAN_LD(pssm_scan_grp_get16((g), (j)))
#define PSSM_SCAN_SET(g, j, e) pssm_scan_grp_set16((g), (j), (e))
#include "scan_dtype.stamp.h"
#endif
