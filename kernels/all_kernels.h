/*
 * all_kernels.h - the one translation unit body that every target compiles: the cuda module's
 * .cu, the hip module's .hip and the sim builds include this file and nothing else.  The build
 * compiles it once per part (kernel_parts.h: -DPSSM_KERNEL_PART=<name>); each family header
 * compiles the stamps of the part being built.
 */
#include "pssm_dialect.h"
#include "kernel_parts.h"
#include "params.h"
#if PSSM_IN_PART(base)
#include "selftest.h"
#include "reduce_kernels.h"
#endif
#include "conv1d_kernels.h"
#include "scan_kernels.h"
#include "ssd_kernels.h"
