/*
 * ssd_params.h - the SSD's helper kernels (kernels/ssd_kernels.h); the scan itself runs on the
 * selective scan kernels (scan_params.h, `ssd`).
 */
#ifndef PSSM_SSD_PARAMS_H
#define PSSM_SSD_PARAMS_H
#include <stdint.h>

#define PSSM_SSD_BLOCK 256

/* seq[t] = the sequence k of token t of a packed row, cu[k] <= t < cu[k+1] (the last such k;
 * offsets past [0, L] clamp, so that bad values give wrong sequences, never a bad address);
 * varlen[k,h,p,n] of every empty sequence k = its start state (x0 for k = 0 if given, else 0).
 * One thread per token, then one per element of varlen. */
typedef struct pssm_ssd_seq_params {
    const int32_t *cu;         /* (nseq+1)                              */
    int32_t *seq;              /* (L), workspace                        */
    float *varlen;             /* (nseq,H,P,N) or NULL                  */
    const float *x0;           /* (1,H,P,N) or NULL                     */
    int64_t seqlen, nseq, heads, hdim, dstate;
    int64_t cu_s, varlen_s[4], x0_s[3]; /* k, h, p, n; h, p, n          */
} pssm_ssd_seq_params;

#endif
