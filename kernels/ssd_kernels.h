/*
 * ssd_kernels.h - the helper kernels of the Mamba-2 SSD (ssd_params.h): packed sequences from
 * cu_seqlens.  The recurrence runs on the selective scan's kernels in their `ssd` form.
 */
#include "pssm_dialect.h"
#include "ssd_params.h"

PSSM_DEVICE int64_t pssm_ssd_offset(const pssm_ssd_seq_params p, int64_t k)
{
    const int64_t v = p.cu[k * p.cu_s];
    return v < 0 ? 0 : v > p.seqlen ? p.seqlen : v;
}

PSSM_KERNEL_BOUNDED(pssm_ssd_seq_from_cu, pssm_ssd_seq_params, p, PSSM_SSD_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    for (int64_t t = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; t < p.seqlen; t += threads) {
        int64_t lo = 0, hi = p.nseq - 1; /* the last k in [0, nseq) with cu[k] <= t */
        while (lo < hi) {
            const int64_t mid = (lo + hi + 1) / 2;
            if (pssm_ssd_offset(p, mid) <= t)
                lo = mid;
            else
                hi = mid - 1;
        }
        p.seq[t] = (int32_t)lo;
    }
}

PSSM_KERNEL_BOUNDED(pssm_ssd_varlen_empty, pssm_ssd_seq_params, p, PSSM_SSD_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    const int64_t per_seq = p.heads * p.hdim * p.dstate;
    for (int64_t i = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; i < p.nseq * per_seq;
         i += threads) {
        const int64_t k = i / per_seq, r = i - k * per_seq;
        if (pssm_ssd_offset(p, k + 1) > pssm_ssd_offset(p, k))
            continue; /* written by the scan at the sequence's last token */
        const int64_t h = r / (p.hdim * p.dstate), q = (r / p.dstate) % p.hdim, n = r % p.dstate;
        const float v = k == 0 && p.x0 ? p.x0[h * p.x0_s[0] + q * p.x0_s[1] + n * p.x0_s[2]] : 0.0f;
        p.varlen[k * p.varlen_s[0] + h * p.varlen_s[1] + q * p.varlen_s[2] + n * p.varlen_s[3]] = v;
    }
}
