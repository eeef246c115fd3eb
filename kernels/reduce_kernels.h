/*
 * reduce_kernels.h - pssm_reduce_partials: the fixed-order sum of partials (reduce_params.h).
 * One thread per output element (or per four adjacent ones, the quads path), partials in order
 * of k: consecutive threads read consecutive partials of one k, so the loads of a warp stay
 * together.  Sums of PSSM_REDUCE_WIDE terms or
 * more take a warp per element instead (below).  Either way a fixed order: the same bits every
 * run on a given device (the order depends on the warp size).
 */
#include "pssm_dialect.h"
#include "reduce_params.h"

/* Output element i's offsets into the partials (*po) and the output (*oo): its index split by
 * 32-bit divisions where it fits (a 64-bit division is a long subroutine). */
PSSM_DEVICE void pssm_reduce_offsets(const pssm_reduce_job *j, int64_t i, int64_t *po, int64_t *oo)
{
    *po = *oo = 0;
    if (j->numel <= (int64_t)UINT32_MAX) { /* every index and extent fits 32 bits */
        uint32_t r32 = (uint32_t)i;
        for (int d = 3; d >= 0; d--) {
            const uint32_t n = (uint32_t)j->shape[d], q = r32 / n, x = r32 - q * n;
            *po += (int64_t)x * j->p_s[d];
            *oo += (int64_t)x * j->o_s[d];
            r32 = q;
        }
        return;
    }
    int64_t r = i;
    for (int d = 3; d >= 0; d--) {
        const int64_t n = j->shape[d], q = r / n, x = r - q * n;
        *po += x * j->p_s[d];
        *oo += x * j->o_s[d];
        r = q;
    }
}

/* The quads path (pssm_reduce_job.quads): the four sums of elements i .. i+3, whose partials
 * start at src, into acc, term by term in the scalar path's order, eight terms' 16-byte loads
 * in flight at once (the scalar path's four 4-byte loads kept the SSD backward's sums at about
 * half the copy bandwidth: 105 us of its 2.14 ms, H200 run 75). */
#define PSSM_REDUCE_QUAD_AHEAD 8
#define PSSM_REDUCE_WIDE_AHEAD 8
/* Terms t < inner at src + k * ks + t * step for each k < outer, in that order. */
PSSM_DEVICE void pssm_reduce_quad_terms(const float *src, int64_t outer, int64_t ks,
                                        int64_t inner, int64_t step, float acc[4])
{
    for (int64_t k = 0; k < outer; k++) {
        const float *row = src + k * ks;
        int64_t t = 0;
        for (; t + PSSM_REDUCE_QUAD_AHEAD <= inner; t += PSSM_REDUCE_QUAD_AHEAD) {
            pssm_vec16 v[PSSM_REDUCE_QUAD_AHEAD];
            PSSM_UNROLL
            for (int u = 0; u < PSSM_REDUCE_QUAD_AHEAD; u++)
                v[u] = *(const pssm_vec16 *)(row + (t + u) * step);
            PSSM_UNROLL
            for (int u = 0; u < PSSM_REDUCE_QUAD_AHEAD; u++)
                PSSM_UNROLL
                for (int e = 0; e < 4; e++)
                    acc[e] += pssm_as_float(v[u].w[e]);
        }
        for (; t < inner; t++) {
            const pssm_vec16 v = *(const pssm_vec16 *)(row + t * step);
            PSSM_UNROLL
            for (int e = 0; e < 4; e++)
                acc[e] += pssm_as_float(v.w[e]);
        }
    }
}

PSSM_DEVICE void pssm_reduce_quad(const pssm_reduce_job *j, const float *src, float acc[4])
{
    const int inner2 = j->count2 > 1; /* the unrolled loop runs over k2, else over k */
    pssm_reduce_quad_terms(src, inner2 ? j->count : 1, j->k_stride,
                           inner2 ? j->count2 : j->count, inner2 ? j->k_stride2 : j->k_stride,
                           acc);
}

/* The split path (pssm_reduce_job.split): a block takes BLOCK / split quads of elements; its
 * threads tid = slice * (BLOCK / split) + q sum terms [slice * count / split, (slice + 1) *
 * count / split) of quad q in order, then thread (0, q) adds the slices' sums in slice order. */
PSSM_DEVICE void pssm_reduce_split(const pssm_reduce_job *j, pssm_vec16 *red)
{
    const int split = j->split, width = PSSM_BLOCKDIM_X / split;
    const int slice = PSSM_TID / width, q = PSSM_TID - slice * width;
    const int64_t k0 = slice * j->count / split, k1 = (slice + 1) * j->count / split;
    for (int64_t base = 4 * PSSM_BLOCK_X * width; base < j->numel;
         base += 4 * PSSM_GRIDDIM_X * width) { /* the same trip count on every thread */
        const int64_t i = base + 4 * (int64_t)q;
        int64_t po = 0, oo = 0;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (i < j->numel) {
            pssm_reduce_offsets(j, i, &po, &oo);
            pssm_reduce_quad_terms(j->part + po + k0 * j->k_stride, 1, 0, k1 - k0,
                                   j->k_stride, acc);
        }
        pssm_vec16 v;
        PSSM_UNROLL
        for (int e = 0; e < 4; e++)
            v.w[e] = pssm_as_uint(acc[e]);
        red[PSSM_TID] = v;
        PSSM_SYNC();
        if (slice == 0 && i < j->numel) {
            for (int s = 1; s < split; s++) {
                const pssm_vec16 w = red[s * width + q];
                PSSM_UNROLL
                for (int e = 0; e < 4; e++)
                    acc[e] += pssm_as_float(w.w[e]);
            }
            pssm_store_any4(j->out, oo, j->out_dtype, acc);
        }
        PSSM_SYNC(); /* red is written again by the next round */
    }
}

PSSM_KERNEL_BOUNDED(pssm_reduce_partials, pssm_reduce_params, p, PSSM_REDUCE_BLOCK)
{
    PSSM_SHARED(pssm_vec16, red, PSSM_REDUCE_BLOCK);
    const pssm_reduce_job *j = &p.job[PSSM_BLOCK_Y];
    if (j->split > 1) {
        pssm_reduce_split(j, red);
        return;
    }
    const int64_t terms = j->count * j->count2;
    if (terms >= PSSM_REDUCE_WIDE && j->numel <= PSSM_REDUCE_WIDE_MAX) {
        /* Few long sums (the SSD's dD per head: 80 outputs of 2048 partials each took 220 us
         * as one thread's chain, run 44): a warp per element; lane l adds terms l, l + warp,
         * ... in order, then the warp's tree (xor shuffles) adds the lanes, and lane 0 stores.
         * The same fixed order every run.  Many elements keep a thread each: their loads are
         * the coalesced ones (the Mamba-1 backward's sums ran 3.6% slower by warps, run 45). */
        const int64_t warps = PSSM_GRIDDIM_X * (PSSM_BLOCKDIM_X / PSSM_WARP_SIZE);
        const int lane = PSSM_LANE;
        for (int64_t i = PSSM_BLOCK_X * (PSSM_BLOCKDIM_X / PSSM_WARP_SIZE) + PSSM_WARP_ID;
             i < j->numel; i += warps) {
            int64_t po, oo;
            pssm_reduce_offsets(j, i, &po, &oo);
            const float *src = j->part + po;
            float acc = 0.0f;
            int64_t k = 0, k2 = lane; /* term t = k count2 + k2, stepped without divisions */
            while (k2 >= j->count2 && k < j->count)
                k2 -= j->count2, k++;
            /* PSSM_REDUCE_WIDE_AHEAD terms' loads in flight, then added in order (one at a
             * time, the 64 loads of a lane of the SSD's per-head dD, 2048 terms, were 64 round
             * trips: the longest job of its launch) */
            for (int64_t t = lane; t < terms;) {
                float v[PSSM_REDUCE_WIDE_AHEAD];
                int n = 0;
                PSSM_UNROLL
                for (int u = 0; u < PSSM_REDUCE_WIDE_AHEAD; u++) {
                    v[u] = 0.0f;
                    if (t < terms) {
                        v[u] = src[k * j->k_stride + k2 * j->k_stride2];
                        n++;
                        t += PSSM_WARP_SIZE;
                        k2 += PSSM_WARP_SIZE;
                        while (k2 >= j->count2 && k < j->count)
                            k2 -= j->count2, k++;
                    }
                }
                PSSM_UNROLL
                for (int u = 0; u < PSSM_REDUCE_WIDE_AHEAD; u++)
                    if (u < n)
                        acc += v[u];
            }
            acc = pssm_warp_sum(acc);
            if (lane == 0)
                pssm_store_any(j->out, oo, j->out_dtype, acc);
        }
        return;
    }
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    if (j->quads) {
        for (int64_t i = 4 * (PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X); i < j->numel;
             i += 4 * threads) {
            int64_t po, oo;
            pssm_reduce_offsets(j, i, &po, &oo);
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            pssm_reduce_quad(j, j->part + po, acc);
            pssm_store_any4(j->out, oo, j->out_dtype, acc);
        }
        return;
    }
    for (int64_t i = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; i < j->numel;
         i += threads) {
        int64_t po, oo;
        pssm_reduce_offsets(j, i, &po, &oo);
        const float *src = j->part + po;
        float acc = 0.0f;
        /* four terms' loads in flight at once, added in the same order as one by one (one
         * load at a time, the SSD's dB and dC sums of 10 terms waited on each) */
        const int64_t ks = j->k_stride, ks2 = j->k_stride2;
        if (j->count2 == 1) {
            int64_t k = 0;
            for (; k + 4 <= j->count; k += 4) {
                const float a0 = src[k * ks], a1 = src[(k + 1) * ks];
                const float a2 = src[(k + 2) * ks], a3 = src[(k + 3) * ks];
                acc += a0;
                acc += a1;
                acc += a2;
                acc += a3;
            }
            for (; k < j->count; k++)
                acc += src[k * ks];
        } else {
            for (int64_t k = 0; k < j->count; k++) {
                const float *row = src + k * ks;
                int64_t k2 = 0;
                for (; k2 + 4 <= j->count2; k2 += 4) {
                    const float a0 = row[k2 * ks2], a1 = row[(k2 + 1) * ks2];
                    const float a2 = row[(k2 + 2) * ks2], a3 = row[(k2 + 3) * ks2];
                    acc += a0;
                    acc += a1;
                    acc += a2;
                    acc += a3;
                }
                for (; k2 < j->count2; k2++)
                    acc += row[k2 * ks2];
            }
        }
        pssm_store_any(j->out, oo, j->out_dtype, acc);
    }
}
