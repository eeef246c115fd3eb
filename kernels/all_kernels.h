/*
 * all_kernels.h - the one translation unit body that every target compiles: the cuda module's
 * .cu, the hip module's .hip and the two sim builds include this file and nothing else.
 */
#include "pssm_dialect.h"
#include "params.h"
#include "selftest.h"
#include "conv1d_kernels.h"
#include "scan_kernels.h"
#include "reduce_kernels.h"
#include "ssd_kernels.h"
