/*
 * empty_call.h - the core's answer to a call whose tensors include an empty one (empty_call.c):
 * one function per op, run after validation instead of the backend's op.
 */
#ifndef PSSM_EMPTY_CALL_H
#define PSSM_EMPTY_CALL_H

#include "core.h"
#include "validate.h"

portssm_status pssm_empty_causal_conv1d_fwd(portssm_context *ctx,
                                            const portssm_causal_conv1d_fwd_args *a);
portssm_status pssm_empty_causal_conv1d_bwd(portssm_context *ctx,
                                            const portssm_causal_conv1d_bwd_args *a);
portssm_status pssm_empty_causal_conv1d_update(portssm_context *ctx,
                                               const portssm_causal_conv1d_update_args *a);
portssm_status pssm_empty_selective_scan_fwd(portssm_context *ctx,
                                             const portssm_selective_scan_fwd_args *a);
portssm_status pssm_empty_selective_scan_bwd(portssm_context *ctx,
                                             const portssm_selective_scan_bwd_args *a);
portssm_status pssm_empty_selective_state_update(portssm_context *ctx,
                                                 const portssm_selective_state_update_args *a);
portssm_status pssm_empty_ssd_chunk_scan_fwd(portssm_context *ctx,
                                             const portssm_ssd_chunk_scan_fwd_args *a);
portssm_status pssm_empty_ssd_chunk_scan_bwd(portssm_context *ctx,
                                             const portssm_ssd_chunk_scan_bwd_args *a);
portssm_status pssm_empty_norm_fwd(portssm_context *ctx, const portssm_norm_fwd_args *a);
portssm_status pssm_empty_norm_bwd(portssm_context *ctx, const portssm_norm_bwd_args *a);

#endif /* PSSM_EMPTY_CALL_H */
