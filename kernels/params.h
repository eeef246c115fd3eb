/*
 * params.h - the parameter structs of every kernel: plain C, shared by host code (which fills
 * them) and kernels (which take one by value).  Sizes and offsets are int64_t; pointers are
 * device pointers.  Each family keeps its structs in its own header.
 */
#ifndef PSSM_PARAMS_H
#define PSSM_PARAMS_H
#include <stdint.h>
#include "selftest_params.h"
#include "conv1d_params.h"
#include "scan_params.h"
#include "reduce_params.h"
#include "ssd_params.h"
#include "norm_params.h"
#endif
