/*
 * norm_kernels.h - the row norms (LayerNorm / RMSNorm with residual add, gate and groups,
 * portssm.h's norm_fwd / norm_bwd): pssm_norm_fwd_<dt> and pssm_norm_bwd_<dt>.
 *
 * Stamping: this file defines the dtype-independent helpers, then includes norm.body.h once
 * per activation dtype (f32, f16, bf16) and access path (16-byte vectors, or elements at any
 * strides: pssm_norm_fwd_any_<dt>, pssm_norm_bwd_any_<dt>), each defining both kernels.  The entry
 * points are listed in norm_list.h, the parameters and the work layout live in norm_params.h,
 * the launch planning is backends/gpu/ops_norm.c.
 *
 * One pass over the data: a team of threads owns one segment (a row's group of channels),
 * loads it once into registers (16-byte vectors where every row tensor has unit channel stride
 * and aligned rows: p.vec; element by element, any strides, otherwise), and reduces its sums
 * by shuffles within a warp or by the block's shared memory, in a fixed order.  Every sum is
 * F32 and deterministic; nothing is atomic.
 */
#ifndef PSSM_NORM_KERNELS_H
#define PSSM_NORM_KERNELS_H

#include "pssm_dialect.h"
#include "kernel_parts.h"
#include "norm_params.h"

#define PSSM_NM_CAT2_(a, b) a##b
#define PSSM_NM_CAT2(a, b) PSSM_NM_CAT2_(a, b)
#define PSSM_NM_CAT4_(a, b, c, d) a##b##c##d
#define PSSM_NM_CAT4(a, b, c, d) PSSM_NM_CAT4_(a, b, c, d)
/* The dialect's kernel macro pastes onto the name, so a stamped name is expanded first. */
#define PSSM_NM_KERNEL(name, type, p, n) PSSM_KERNEL_BOUNDED(name, type, p, n)
/* The backward, its gated forms too: bounded by threads alone (128 registers at 512 threads).
 * Capped lower, the gated forms gain no resident block of 256 threads before spilling (ptxas,
 * sm_90, bf16, the gate before the norm: 32 bytes at 96 registers, 164 at 80).  The prenorm
 * form's takes 117 so (3 resident blocks of the 160-thread team of 2560 bf16 channels); capped
 * at PSSM_NM_PRENORM_BWD_REGS 4 fit, and it spills nothing (ptxas, sm_90, bf16 and f16; 40
 * bytes at 88, 120 at 80; with the row prefetch compiled in, 32 bytes at 96: norm.body.h). */
#ifndef PSSM_NM_PRENORM_BWD_REGS
#define PSSM_NM_PRENORM_BWD_REGS 96
#endif

/* (by the form's number: PSSM_NM_FORM expands to 0 ... 3) */
#define PSSM_NM_BWD_KERNEL(name, type, p, n)                                                       \
    PSSM_NM_CAT2(PSSM_NM_BWD_KERNEL_, PSSM_NM_FORM)(name, type, p, n)
#define PSSM_NM_BWD_KERNEL_0(name, type, p, n) PSSM_KERNEL_BOUNDED(name, type, p, n)
#define PSSM_NM_BWD_KERNEL_1(name, type, p, n) PSSM_KERNEL_BOUNDED(name, type, p, n)
#define PSSM_NM_BWD_KERNEL_2(name, type, p, n) PSSM_KERNEL_BOUNDED(name, type, p, n)
/* ... and by its channels in 16 bytes (PSSM_NM_E expands to 4 or 8): f32 activations stay
 * bounded by threads alone, where ptxas takes 64 registers (spilling 16 bytes; capped, it
 * takes the cap: at 96 the 320-thread team of 2560 channels loses one of 3 resident blocks) */
#define PSSM_NM_BWD_KERNEL_3(name, type, p, n)                                                     \
    PSSM_NM_CAT2(PSSM_NM_BWD_KERNEL_3_, PSSM_NM_E)(name, type, p, n)
#define PSSM_NM_BWD_KERNEL_3_4(name, type, p, n) PSSM_KERNEL_BOUNDED(name, type, p, n)
#define PSSM_NM_BWD_KERNEL_3_8(name, type, p, n)                                                   \
    PSSM_KERNEL_MAXREG(name, type, p, n, PSSM_NM_PRENORM_BWD_REGS)
#if PSSM_NM_FORM_PRENORM_F32 != 3 || PSSM_NM_FORM_GATE_BEFORE != 1 || PSSM_NM_FORM_GATE_AFTER != 2
#error "PSSM_NM_BWD_KERNEL_<n>: the forms' numbers changed"
#endif
#if PSSM_NM_E_F32 != 4 || PSSM_NM_E_16 != 8
#error "PSSM_NM_BWD_KERNEL_3_<e>: the vectors' channels changed"
#endif
/* The forward capped at PSSM_NM_FWD_REGS registers: bounded by threads alone, ptxas gives the
 * bf16 forward 132 (sm_90), 3 resident blocks of a 160-thread team a multiprocessor; at 96 it
 * spills 12 bytes and 4 blocks fit (as at 88, which spilled 60). */
#define PSSM_NM_FWD_REGS 96
/* The gated forms' forwards (norm_params.h) fit fewer registers: more blocks resident, more
 * loads in flight: 4 blocks of 256 threads a multiprocessor at 64, 3 at 80 (the generic
 * forward: 2).  ptxas (sm_90, bf16) spills nothing at these caps. */
#define PSSM_NM_FORM_REGS(form) ((form) == PSSM_NM_FORM_GATE_BEFORE ? 64 : PSSM_NM_PRENORM_REGS_(form))
#define PSSM_NM_PRENORM_REGS_(form) ((form) == PSSM_NM_FORM_PRENORM_F32 ? PSSM_NM_PRENORM_REGS : 80)
/* The prenorm form's forward: 72 without spilling (ptxas, sm_90, bf16; 40 bytes at 64), 5
 * resident blocks of the 160-thread team of 2560 bf16 channels (the generic forward: 4 at 96). */
#ifndef PSSM_NM_PRENORM_REGS
#define PSSM_NM_PRENORM_REGS 72
#endif
#define PSSM_NM_FWD_KERNEL(name, type, p, n)                                                       \
    PSSM_KERNEL_MAXREG(name, type, p, n,                                                           \
                       PSSM_NM_FORM ? PSSM_NM_FORM_REGS(PSSM_NM_FORM) : PSSM_NM_FWD_REGS)

/* Bytes of one value of dtype dt (PSSM_DT_F32 or a 16-bit type). */
PSSM_DEVICE int pssm_nm_bytes(int dt) { return dt == PSSM_DT_F32 ? 4 : 2; }

/* e 16-bit values of dtype dt, in pairs (element 2k in the low half of word k), as floats. */
PSSM_DEVICE void pssm_nm_unpack16(const uint32_t *w, int dt, int e, float *v)
{
    PSSM_UNROLL
    for (int k = 0; k < e / 2; k++) {
        const uint16_t lo = (uint16_t)(w[k] & 0xffffu), hi = (uint16_t)(w[k] >> 16);
        v[2 * k] = dt == PSSM_DT_F16 ? pssm_load_f16(lo) : pssm_load_bf16(lo);
        v[2 * k + 1] = dt == PSSM_DT_F16 ? pssm_load_f16(hi) : pssm_load_bf16(hi);
    }
}

/* e channels of dtype dt from the 16-byte vectors q[0], q[stride], ...: f32 takes e / 4 of
 * them, a 16-bit type one (e == 8).  Global memory (stride 1), or a thread's prefetched row
 * in shared memory (norm_params.h). */
PSSM_DEVICE void pssm_nm_from_vecs(const pssm_vec16 *q, int stride, int dt, int e, float *v)
{
    if (dt == PSSM_DT_F32) {
        PSSM_UNROLL
        for (int i = 0; i < e / 4; i++) {
            const pssm_vec16 w = q[i * stride];
            PSSM_UNROLL
            for (int k = 0; k < 4; k++)
                v[4 * i + k] = pssm_as_float(w.w[k]);
        }
        return;
    }
    const pssm_vec16 h = q[0];
    pssm_nm_unpack16(h.w, dt, e, v);
}

/* e channels (4 or 8) of dtype dt at element `off` of base by 16-byte loads: base + off is
 * 16-byte aligned (f32 takes e / 4 vectors, 16-bit types e / 8, or one 8-byte load for 4). */
PSSM_DEVICE void pssm_nm_ldv(const void *base, int64_t off, int dt, int e, float *v)
{
    /* each dtype's address computed in its own branch: from one address of off * bytes(dt),
     * ptxas shares the first vector's load between the branches and issues it ahead of the
     * branch, and the backward's loads of a row no longer all go out before the first value
     * is used (sm_90: 50 instead of 66 LDG.128 in the generic bf16 backward) */
    if (dt == PSSM_DT_F32) {
        pssm_nm_from_vecs((const pssm_vec16 *)((const float *)base + off), 1, dt, e, v);
        return;
    }
    if (e == 4) {
        const pssm_vec8 h = *(const pssm_vec8 *)((const uint16_t *)base + off);
        pssm_nm_unpack16(h.w, dt, e, v);
        return;
    }
    pssm_nm_from_vecs((const pssm_vec16 *)((const uint16_t *)base + off), 1, dt, e, v);
}

/* The backward's row prefetch (norm_params.h): the e channels of dtype dt at element `off` of
 * base as e * bytes / 16 copies into the shared vectors q[0], q[stride], ... (read back by
 * pssm_nm_from_vecs); zeros where live is 0 (base itself, a valid address, is then named and
 * not read). */
PSSM_DEVICE void pssm_nm_copy(pssm_vec16 *q, int stride, const void *base, int64_t off, int dt,
                              int e, int live)
{
    const char *src = (const char *)base + (live ? off * pssm_nm_bytes(dt) : 0);
    PSSM_UNROLL
    for (int i = 0; i < 2; i++)
        if (i < e * pssm_nm_bytes(dt) / 16)
            pssm_copy_async16(&q[i * stride], src + 16 * i, live);
}

/* Where a thread's prefetched row lies (norm_params.h); row NULL: no prefetch, the kernel
 * reads global memory. */
typedef struct pssm_nm_pf {
    pssm_vec16 *row; /* this row's buffer at the thread's first vector                      */
    int stride;      /* the block's threads: from a thread's vector to its next            */
    int s, g, z;     /* each tensor's first vector in slot k's group                     */
    int per_k;       /* the vectors of slot k's group                                       */
} pssm_nm_pf;

PSSM_DEVICE pssm_vec16 *pssm_nm_pf_at(const pssm_nm_pf *f, int k, int first)
{
    return f->row + (k * f->per_k + first) * f->stride;
}

/* The store of pssm_nm_ldv, each value rounded once to dt. */
PSSM_DEVICE void pssm_nm_stv(void *base, int64_t off, int dt, int e, const float *v)
{
    if (dt == PSSM_DT_F32) {
        pssm_vec16 *q = (pssm_vec16 *)((float *)base + off);
        PSSM_UNROLL
        for (int i = 0; i < e / 4; i++) {
            pssm_vec16 w;
            PSSM_UNROLL
            for (int k = 0; k < 4; k++)
                w.w[k] = pssm_as_uint(v[4 * i + k]);
            q[i] = w;
        }
        return;
    }
    uint32_t w[8];
    PSSM_UNROLL
    for (int k = 0; k < e / 2; k++) {
        const float lo = v[2 * k], hi = v[2 * k + 1];
        w[k] = dt == PSSM_DT_F16 ? (uint32_t)pssm_store_f16(lo) | (uint32_t)pssm_store_f16(hi) << 16
                                 : pssm_store_bf16x2(lo, hi);
    }
    if (e == 4) {
        pssm_vec8 h;
        h.w[0] = w[0], h.w[1] = w[1];
        *(pssm_vec8 *)((uint16_t *)base + off) = h;
        return;
    }
    pssm_vec16 *q = (pssm_vec16 *)((uint16_t *)base + off);
    PSSM_UNROLL
    for (int i = 0; i < e / 8; i++) {
        pssm_vec16 h;
        PSSM_UNROLL
        for (int k = 0; k < 4; k++)
            h.w[k] = w[4 * i + k];
        q[i] = h;
    }
}

/* Channels j0 .. j0+e-1 of a segment of n channels that starts at element `off0` of base, with
 * channel stride sh: by vectors (vec: sh == 1, aligned, n a multiple of e, so a group lies
 * wholly inside or outside) or element by element; channels at or past n read as 0. */
PSSM_DEVICE void pssm_nm_ld(const void *base, int64_t off0, int64_t sh, int64_t j0, int64_t n,
                            int dt, int e, int vec, float *v)
{
    if (vec) { /* a vector group lies wholly inside the segment or wholly past it */
        if (j0 < n) {
            pssm_nm_ldv(base, off0 + j0, dt, e, v);
        } else {
            PSSM_UNROLL
            for (int k = 0; k < e; k++)
                v[k] = 0.0f;
        }
        return;
    }
    PSSM_UNROLL
    for (int k = 0; k < e; k++)
        v[k] = j0 + k < n ? pssm_load_any(base, off0 + (j0 + k) * sh, dt) : 0.0f;
}

/* The store of pssm_nm_ld: channels at or past n are not written. */
PSSM_DEVICE void pssm_nm_st(void *base, int64_t off0, int64_t sh, int64_t j0, int64_t n, int dt,
                            int e, int vec, const float *v)
{
    if (vec) {
        if (j0 < n)
            pssm_nm_stv(base, off0 + j0, dt, e, v);
        return;
    }
    PSSM_UNROLL
    for (int k = 0; k < e; k++)
        if (j0 + k < n)
            pssm_store_any(base, off0 + (j0 + k) * sh, dt, v[k]);
}

/* The calling thread's place in its team (returned) and its team's place in the block
 * (*which).  Only the mixed layout divides by the team's size. */
PSSM_DEVICE int pssm_nm_place(const pssm_norm_params *p, int *which)
{
    const int tid = PSSM_TID;
    if (p->team_mode == PSSM_NM_TEAM_IS_BLOCK) {
        *which = 0;
        return tid;
    }
    if (p->team_mode == PSSM_NM_TEAMS_IN_WARP) {
        *which = tid >> p->team_log2;
        return tid & (p->team - 1);
    }
    *which = tid / p->team;
    return tid - *which * p->team;
}

/* Sums over the calling thread's team, on every thread of it, in a fixed order for a given
 * layout (deterministic); every thread of the block calls them.
 * - teams within a warp (a power of two of lanes): shuffles;
 * - a team that is the whole block: each warp's sum by shuffles, then every thread adds the
 *   warps' sums from red in the order of the warps;
 * - mixed (teams longer than a warp, several a block one after another, so that no lane sits
 *   idle for a group of, say, 40 threads' vectors): each warp adds the part of each team it
 *   holds (at most two) by a segmented tree of shuffles, the first lane of each part stores it
 *   in red[2 * warp + part] (part 0: the team the warp's first lane belongs to), and every
 *   thread adds its team's parts in the order of the warps. */
PSSM_DEVICE float pssm_nm_part(float v, int team)
{
    const int tid = PSSM_TID, me = tid / team;
    for (int o = 1; o < PSSM_WARP_SIZE; o <<= 1) {
        const float w = PSSM_SHFL_DOWN_F32(v, o);
        if (PSSM_LANE + o < PSSM_WARP_SIZE && (tid + o) / team == me)
            v += w;
    }
    return v;
}

/* Where the calling thread stores its team's part of this warp (-1: not its part's first lane). */
PSSM_DEVICE int pssm_nm_part_slot(int team)
{
    const int tid = PSSM_TID, warp = PSSM_WARP_ID, first = warp * PSSM_WARP_SIZE;
    if (PSSM_LANE != 0 && tid % team != 0)
        return -1;
    return 2 * warp + (tid / team - first / team);
}

/* The sum of the parts of the calling thread's team in red. */
PSSM_DEVICE float pssm_nm_team_parts(const float *red, int team)
{
    const int me = PSSM_TID / team;
    const int w0 = me * team / PSSM_WARP_SIZE, w1 = ((me + 1) * team - 1) / PSSM_WARP_SIZE;
    float s = 0.0f;
    for (int w = w0; w <= w1; w++)
        s += red[2 * w + (me - w * PSSM_WARP_SIZE / team)];
    return s;
}

/* The sum of the block's warps' values in red (one a warp, from red[0]). */
PSSM_DEVICE float pssm_nm_warps_sum(const float *red)
{
    const int warps = PSSM_BLOCKDIM_X / PSSM_WARP_SIZE;
    float s = 0.0f;
    for (int w = 0; w < warps; w++)
        s += red[w];
    return s;
}

PSSM_DEVICE float pssm_nm_sum(float v, int team, int mode, float *red)
{
    if (mode == PSSM_NM_TEAMS_IN_WARP)
        return pssm_team_sum(v, team);
    int slot;
    if (mode == PSSM_NM_TEAM_IS_BLOCK) {
        v = pssm_warp_sum(v);
        slot = PSSM_LANE == 0 ? PSSM_WARP_ID : -1;
    } else {
        v = pssm_nm_part(v, team);
        slot = pssm_nm_part_slot(team);
    }
    if (slot >= 0)
        red[slot] = v;
    PSSM_SYNC();
    const float s =
        mode == PSSM_NM_TEAM_IS_BLOCK ? pssm_nm_warps_sum(red) : pssm_nm_team_parts(red, team);
    PSSM_SYNC(); /* red is written again by the next sum */
    return s;
}

/* pssm_nm_sum of two values at once (*a and *b in place), each added in the same order as
 * pssm_nm_sum adds it: one round of the block's barriers for both.  red holds four floats a
 * warp (PSSM_NM_RED floats). */
PSSM_DEVICE void pssm_nm_sum2(float *a, float *b, int team, int mode, float *red)
{
    if (mode == PSSM_NM_TEAMS_IN_WARP) {
        *a = pssm_team_sum(*a, team);
        *b = pssm_team_sum(*b, team);
        return;
    }
    float pa, pb;
    int slot;
    if (mode == PSSM_NM_TEAM_IS_BLOCK) {
        pa = pssm_warp_sum(*a);
        pb = pssm_warp_sum(*b);
        slot = PSSM_LANE == 0 ? PSSM_WARP_ID : -1;
    } else {
        pa = pssm_nm_part(*a, team);
        pb = pssm_nm_part(*b, team);
        slot = pssm_nm_part_slot(team);
    }
    const int half = PSSM_NM_RED / 2;
    if (slot >= 0) {
        red[slot] = pa;
        red[half + slot] = pb;
    }
    PSSM_SYNC();
    if (mode == PSSM_NM_TEAM_IS_BLOCK) {
        *a = pssm_nm_warps_sum(red);
        *b = pssm_nm_warps_sum(red + half);
    } else {
        *a = pssm_nm_team_parts(red, team);
        *b = pssm_nm_team_parts(red + half, team);
    }
    PSSM_SYNC(); /* red is written again by the next sum */
}

/* silu(z) and d silu / dz. */
PSSM_DEVICE float pssm_nm_dsilu(float z)
{
    const float sg = pssm_sigmoid_fast(z);
    return sg * (1.0f + z * (1.0f - sg));
}

#if PSSM_IN_PART(norm)
/* Each dtype: the 16-byte vector path (pssm_norm_*_<dt>), its gated forms without a residual
 * (pssm_norm_*_gb_<dt>: the gate before the norm, _ga_: after), its prenorm form
 * (pssm_norm_*_pr_<dt>), and the element path for any strides (pssm_norm_*_any_<dt>). */
#define PSSM_NM_SFX f32
#define PSSM_NM_ACT PSSM_DT_F32
#define PSSM_NM_E PSSM_NM_E_F32
#define PSSM_NM_VEC 1
#include "norm.body.h"
#define PSSM_NM_SFX gb_f32
#define PSSM_NM_ACT PSSM_DT_F32
#define PSSM_NM_E PSSM_NM_E_F32
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_GATE_BEFORE
#include "norm.body.h"
#define PSSM_NM_SFX ga_f32
#define PSSM_NM_ACT PSSM_DT_F32
#define PSSM_NM_E PSSM_NM_E_F32
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_GATE_AFTER
#include "norm.body.h"
#define PSSM_NM_SFX pr_f32
#define PSSM_NM_ACT PSSM_DT_F32
#define PSSM_NM_E PSSM_NM_E_F32
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_PRENORM_F32
#include "norm.body.h"
#define PSSM_NM_SFX any_f32
#define PSSM_NM_ACT PSSM_DT_F32
#define PSSM_NM_E PSSM_NM_E_F32
#define PSSM_NM_VEC 0
#include "norm.body.h"

#define PSSM_NM_SFX f16
#define PSSM_NM_ACT PSSM_DT_F16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 1
#include "norm.body.h"
#define PSSM_NM_SFX gb_f16
#define PSSM_NM_ACT PSSM_DT_F16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_GATE_BEFORE
#include "norm.body.h"
#define PSSM_NM_SFX ga_f16
#define PSSM_NM_ACT PSSM_DT_F16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_GATE_AFTER
#include "norm.body.h"
#define PSSM_NM_SFX pr_f16
#define PSSM_NM_ACT PSSM_DT_F16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_PRENORM_F32
#include "norm.body.h"
#define PSSM_NM_SFX any_f16
#define PSSM_NM_ACT PSSM_DT_F16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 0
#include "norm.body.h"

#define PSSM_NM_SFX bf16
#define PSSM_NM_ACT PSSM_DT_BF16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 1
#include "norm.body.h"
#define PSSM_NM_SFX gb_bf16
#define PSSM_NM_ACT PSSM_DT_BF16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_GATE_BEFORE
#include "norm.body.h"
#define PSSM_NM_SFX ga_bf16
#define PSSM_NM_ACT PSSM_DT_BF16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_GATE_AFTER
#include "norm.body.h"
#define PSSM_NM_SFX pr_bf16
#define PSSM_NM_ACT PSSM_DT_BF16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 1
#define PSSM_NM_FORM PSSM_NM_FORM_PRENORM_F32
#include "norm.body.h"
#define PSSM_NM_SFX any_bf16
#define PSSM_NM_ACT PSSM_DT_BF16
#define PSSM_NM_E PSSM_NM_E_16
#define PSSM_NM_VEC 0
#include "norm.body.h"
#endif

#endif /* PSSM_NORM_KERNELS_H */
