/* cpu_ops.h - the ops of the cpu backend (tensors as views -> ref.h in double -> outputs). */
#ifndef PSSM_CPU_OPS_H
#define PSSM_CPU_OPS_H

#include "backend.h"

portssm_status pssm_cpu_causal_conv1d_fwd(pssm_bctx *c, const portssm_causal_conv1d_fwd_args *a);
portssm_status pssm_cpu_causal_conv1d_bwd(pssm_bctx *c, const portssm_causal_conv1d_bwd_args *a);
portssm_status pssm_cpu_causal_conv1d_update(pssm_bctx *c,
                                             const portssm_causal_conv1d_update_args *a);
portssm_status pssm_cpu_selective_scan_fwd(pssm_bctx *c, const portssm_selective_scan_fwd_args *a);
portssm_status pssm_cpu_selective_scan_bwd(pssm_bctx *c, const portssm_selective_scan_bwd_args *a);
portssm_status pssm_cpu_selective_state_update(pssm_bctx *c,
                                               const portssm_selective_state_update_args *a);
portssm_status pssm_cpu_ssd_chunk_scan_fwd(pssm_bctx *c, const portssm_ssd_chunk_scan_fwd_args *a);
portssm_status pssm_cpu_ssd_chunk_scan_bwd(pssm_bctx *c, const portssm_ssd_chunk_scan_bwd_args *a);
portssm_status pssm_cpu_norm_fwd(pssm_bctx *c, const portssm_norm_fwd_args *a);
portssm_status pssm_cpu_norm_bwd(pssm_bctx *c, const portssm_norm_bwd_args *a);

#endif /* PSSM_CPU_OPS_H */
