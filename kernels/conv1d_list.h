/* conv1d_list.h - the conv1d kernels' entry points (see kernel_list.h and conv1d_kernels.h). */
#ifndef PSSM_CONV1D_LIST_H
#define PSSM_CONV1D_LIST_H

/* kind_w2_dt .. kind_w4_dt: the width-specialised kernels of one kind and dtype, for
 * PSSM_C1_MIN_WIDTH .. PSSM_C1_MAX_WIDTH (conv1d_params.h). */
#define PSSM_CONV1D_WIDTHS_(X, kind, dt)                                                        \
    X(pssm_conv1d_##kind##_w2_##dt, conv1d_##dt) X(pssm_conv1d_##kind##_w3_##dt, conv1d_##dt)   \
    X(pssm_conv1d_##kind##_w4_##dt, conv1d_##dt)

#define PSSM_CONV1D_DTYPE_(X, dt)                                                               \
    PSSM_CONV1D_WIDTHS_(X, fwd_cf, dt) PSSM_CONV1D_WIDTHS_(X, fwd_cl, dt)                       \
    X(pssm_conv1d_fwd_any_##dt, conv1d_##dt) PSSM_CONV1D_WIDTHS_(X, update, dt) X(pssm_conv1d_update_any_##dt, conv1d_##dt) \
    X(pssm_conv1d_bwd_dpre_any_##dt, conv1d_##dt) X(pssm_conv1d_bwd_dx_any_##dt, conv1d_##dt) X(pssm_conv1d_bwd_dw_any_##dt, conv1d_##dt) \
    PSSM_CONV1D_WIDTHS_(X, bwd_cf, dt) PSSM_CONV1D_WIDTHS_(X, bwd_cl, dt)

#define PSSM_CONV1D_KERNELS(X)                                                                  \
    PSSM_CONV1D_DTYPE_(X, f32) PSSM_CONV1D_DTYPE_(X, f16) PSSM_CONV1D_DTYPE_(X, bf16)

#endif
