/* selftest_list.h - the selftest kernels' entry points (see kernel_list.h). */
#ifndef PSSM_SELFTEST_LIST_H
#define PSSM_SELFTEST_LIST_H
#define PSSM_SELFTEST_KERNELS(X)                                                                \
    X(pssm_selftest_shuffle)                                                                    \
    X(pssm_selftest_reduce)                                                                     \
    X(pssm_selftest_block)                                                                      \
    X(pssm_selftest_f16)                                                                        \
    X(pssm_selftest_math)                                                                       \
    X(pssm_selftest_mma)                                                                        \
    X(pssm_selftest_misuse)
#endif
