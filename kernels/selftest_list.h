/* selftest_list.h - the selftest kernels' entry points (see kernel_list.h). */
#ifndef PSSM_SELFTEST_LIST_H
#define PSSM_SELFTEST_LIST_H
#define PSSM_SELFTEST_KERNELS(X)                                                                \
    X(pssm_selftest_shuffle, base)                                                                    \
    X(pssm_selftest_reduce, base)                                                                     \
    X(pssm_selftest_block, base)                                                                      \
    X(pssm_selftest_f16, base)                                                                        \
    X(pssm_selftest_math, base)                                                                       \
    X(pssm_selftest_mma, base)                                                                        \
    X(pssm_selftest_dynamic, base)                                                                    \
    X(pssm_selftest_misuse, base)
#endif
