/* scan_list.h - the scan kernels' entry points (see kernel_list.h).
 *
 * pssm_scan_fwd_n<NS>_<dtype>: selective_scan_fwd with NS states per lane (a team of lanes per
 * channel covers N <= NS * team); pssm_scan_states_n<NS>_<dtype>: the same kernel's states
 * alone (the backward's checkpoints, no output); pssm_scan_bwd_[var_]n<NS>_<dtype>: the scan's backward,
 * likewise, one entry per form (any B and C; both variable, Mamba's) so that each gets its own
 * register allocation;
 * pssm_state_update_s<slots>_<dtype>_st<state dtype>: selective_state_update, both forms,
 * contiguous quads, 1, 2 or 4 slots of 4 states per lane; pssm_state_update_any_<dtype>_st<state
 * dtype>: any strides and N (4 slots per lane and round); pssm_state_update_flat_q1_<dtype>_st<state
 * dtype>: the fast kernels' layout with 32-bit offsets and no pipeline (state_update_flat.body.h).
 * Every variant for every activation dtype x state dtype (f32, f16, bf16 each).
 * Stamped by scan_kernels.h; the two lists must agree. */
#ifndef PSSM_SCAN_LIST_H
#define PSSM_SCAN_LIST_H
#define PSSM_SCAN_KERNELS(X)                                                                    \
    X(pssm_scan_fwd_n4_f32, scan_f32) X(pssm_scan_fwd_n8_f32, scan_f32) X(pssm_scan_fwd_n16_f32, scan_f32)                    \
    X(pssm_scan_fwd_n4_f16, scan_f16) X(pssm_scan_fwd_n8_f16, scan_f16) X(pssm_scan_fwd_n16_f16, scan_f16)                    \
    X(pssm_scan_fwd_n4_bf16, scan_bf16) X(pssm_scan_fwd_n8_bf16, scan_bf16) X(pssm_scan_fwd_n16_bf16, scan_bf16)                 \
    X(pssm_scan_states_n4_f32, scan_f32) X(pssm_scan_states_n8_f32, scan_f32) X(pssm_scan_states_n16_f32, scan_f32)           \
    X(pssm_scan_states_n4_f16, scan_f16) X(pssm_scan_states_n8_f16, scan_f16) X(pssm_scan_states_n16_f16, scan_f16)           \
    X(pssm_scan_states_n4_bf16, scan_bf16) X(pssm_scan_states_n8_bf16, scan_bf16) X(pssm_scan_states_n16_bf16, scan_bf16)     \
    X(pssm_scan_bwd_n4_f32, scan_f32) X(pssm_scan_bwd_n8_f32, scan_f32) X(pssm_scan_bwd_var_n4_f32, scan_f32) X(pssm_scan_bwd_var_n8_f32, scan_f32)\
    X(pssm_scan_bwd_n4_f16, scan_f16) X(pssm_scan_bwd_n8_f16, scan_f16) X(pssm_scan_bwd_var_n4_f16, scan_f16) X(pssm_scan_bwd_var_n8_f16, scan_f16)\
    X(pssm_scan_bwd_n4_bf16, scan_bf16) X(pssm_scan_bwd_n8_bf16, scan_bf16) X(pssm_scan_bwd_var_n4_bf16, scan_bf16) X(pssm_scan_bwd_var_n8_bf16, scan_bf16)                                                  \
    PSSM_STATE_UPDATE_KERNELS_(X, f32) PSSM_STATE_UPDATE_KERNELS_(X, f16)                       \
    PSSM_STATE_UPDATE_KERNELS_(X, bf16)
/* the state update's kernels of one activation dtype (part scan_<act>), for each state dtype */
#define PSSM_STATE_UPDATE_KERNELS_(X, act)                                                      \
    PSSM_STATE_UPDATE_VARIANTS_(X, act, f32) PSSM_STATE_UPDATE_VARIANTS_(X, act, f16)            \
    PSSM_STATE_UPDATE_VARIANTS_(X, act, bf16)
#define PSSM_STATE_UPDATE_VARIANTS_(X, act, st)                                                 \
    X(pssm_state_update_s1_##act##_st##st, scan_##act)                                          \
    X(pssm_state_update_s2_##act##_st##st, scan_##act)                                          \
    X(pssm_state_update_s4_##act##_st##st, scan_##act)                                          \
    X(pssm_state_update_any_##act##_st##st, scan_##act)                                         \
    X(pssm_state_update_flat_q1_##act##_st##st, scan_##act)
#endif
