/* kernels.cu - the cuda target's one translation unit: every kernel of kernels/, compiled by
 * nvcc (or clang) into the images that libportssm_cuda.so embeds. */
#include "../../kernels/all_kernels.h"
