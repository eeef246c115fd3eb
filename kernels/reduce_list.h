/* reduce_list.h - the reduce kernel's entry point (see kernel_list.h and reduce_kernels.h). */
#ifndef PSSM_REDUCE_LIST_H
#define PSSM_REDUCE_LIST_H
#define PSSM_REDUCE_KERNELS(X) X(pssm_reduce_partials, base)
#endif
