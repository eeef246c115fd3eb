/* norm_list.h - the row-norm kernels' entry points (see kernel_list.h and norm_kernels.h). */
#ifndef PSSM_NORM_LIST_H
#define PSSM_NORM_LIST_H
/* per dtype: the vector path's kernels, its gated forms' (gb: the gate before the norm, ga:
 * after), its prenorm form's (pr), then the element path's (any strides) */
#define PSSM_NORM_DTYPE_(X, dt)                                                                    \
    X(pssm_norm_fwd_##dt, norm) X(pssm_norm_bwd_##dt, norm)                                        \
    X(pssm_norm_fwd_gb_##dt, norm) X(pssm_norm_bwd_gb_##dt, norm)                                  \
    X(pssm_norm_fwd_ga_##dt, norm) X(pssm_norm_bwd_ga_##dt, norm)                                  \
    X(pssm_norm_fwd_pr_##dt, norm) X(pssm_norm_bwd_pr_##dt, norm)                                  \
    X(pssm_norm_fwd_any_##dt, norm) X(pssm_norm_bwd_any_##dt, norm)
#define PSSM_NORM_KERNELS(X)                                                                       \
    PSSM_NORM_DTYPE_(X, f32) PSSM_NORM_DTYPE_(X, f16) PSSM_NORM_DTYPE_(X, bf16)
#endif
