/*
 * all_kernels.h - the one translation unit body that every target compiles: the cuda module's
 * .cu, the hip module's .hip and the sim builds include this file and nothing else.  The build
 * compiles it once per part (kernel_parts.h: -DPSSM_KERNEL_PART=<name>); each family header
 * compiles the stamps of the part being built.  A family's header is included only by the parts
 * that compile some of it, so that a part's recorded dependencies (the build's depfiles) name
 * its own family alone: an edit of the SSD's kernels rebuilds parts base and ssd_*, no other.
 */
#include "pssm_dialect.h"
#include "kernel_parts.h"
#include "params.h"
#if PSSM_IN_PART(base)
#include "selftest.h"
#include "reduce_kernels.h"
#endif
#if PSSM_IN_PART(conv1d_f32) || PSSM_IN_PART(conv1d_f16) || PSSM_IN_PART(conv1d_bf16)
#include "conv1d_kernels.h"
#endif
#if PSSM_IN_PART(scan_f32) || PSSM_IN_PART(scan_f16) || PSSM_IN_PART(scan_bf16)
#include "scan_kernels.h"
#endif
#if PSSM_IN_PART(base) || PSSM_IN_PART(ssd_f32) || PSSM_IN_PART(ssd_f16) || PSSM_IN_PART(ssd_bf16)
#include "ssd_kernels.h"
#endif
#if PSSM_IN_PART(norm)
#include "norm_kernels.h"
#endif
