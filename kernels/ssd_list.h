/* ssd_list.h - the SSD helper kernels' entry points (see kernel_list.h and ssd_kernels.h). */
#ifndef PSSM_SSD_LIST_H
#define PSSM_SSD_LIST_H
#define PSSM_SSD_KERNELS(X) X(pssm_ssd_seq_from_cu) X(pssm_ssd_varlen_empty)
#endif
