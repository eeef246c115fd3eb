/* ssd_list.h - the SSD kernels' entry points (see kernel_list.h and ssd_kernels.h): the chunked
 * forward's and backward's per-dtype kernels, the state passes, the packed-row helpers. */
#ifndef PSSM_SSD_LIST_H
#define PSSM_SSD_LIST_H
#define PSSM_SSD_KERNELS(X)                                                                     \
    X(pssm_ssd_seq_from_cu, base) X(pssm_ssd_varlen_empty, base) X(pssm_ssd_state_pass, base)                    \
    X(pssm_ssd_chunk_state_f32, ssd_f32) X(pssm_ssd_chunk_state_f16, ssd_f16) X(pssm_ssd_chunk_state_bf16, ssd_bf16)       \
    X(pssm_ssd_chunk_y_f32, ssd_f32) X(pssm_ssd_chunk_y_f16, ssd_f16) X(pssm_ssd_chunk_y_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_dx_f32, ssd_f32) X(pssm_ssd_chunk_dx_f16, ssd_f16) X(pssm_ssd_chunk_dx_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_yv_f32, ssd_f32) X(pssm_ssd_chunk_yv_f16, ssd_f16) X(pssm_ssd_chunk_yv_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_dxv_f32, ssd_f32) X(pssm_ssd_chunk_dxv_f16, ssd_f16) X(pssm_ssd_chunk_dxv_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_db_f32, ssd_f32) X(pssm_ssd_chunk_db_f16, ssd_f16) X(pssm_ssd_chunk_db_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_dc_f32, ssd_f32) X(pssm_ssd_chunk_dc_f16, ssd_f16) X(pssm_ssd_chunk_dc_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_dcb_f32, ssd_f32) X(pssm_ssd_chunk_dcb_f16, ssd_f16) X(pssm_ssd_chunk_dcb_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_dbc_f32, ssd_f32) X(pssm_ssd_chunk_dbc_f16, ssd_f16) X(pssm_ssd_chunk_dbc_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_cb_f32, ssd_f32) X(pssm_ssd_chunk_cb_f16, ssd_f16) X(pssm_ssd_chunk_cb_bf16, ssd_bf16)             \
    X(pssm_ssd_chunk_out_f32, ssd_f32) X(pssm_ssd_chunk_out_f16, ssd_f16) X(pssm_ssd_chunk_out_bf16, ssd_bf16) \
    X(pssm_ssd_chunk_outr_f16, ssd_f16) X(pssm_ssd_chunk_outr_bf16, ssd_bf16)          \
    X(pssm_ssd_chunk_ybr_f16, ssd_f16) X(pssm_ssd_chunk_ybr_bf16, ssd_bf16)            \
    X(pssm_ssd_chunk_dxr_f16, ssd_f16) X(pssm_ssd_chunk_dxr_bf16, ssd_bf16)            \
    X(pssm_ssd_state_pass_bwd, base) X(pssm_ssd_dt_bwd_f32, ssd_f32) X(pssm_ssd_dt_bwd_f16, ssd_f16)                  \
    X(pssm_ssd_dt_bwd_bf16, ssd_bf16)
#endif
