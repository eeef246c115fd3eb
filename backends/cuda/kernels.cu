/* kernels.cu - the cuda target's translation unit: the kernels of kernels/, compiled by nvcc (or
 * clang) once per kernel part (-DPSSM_KERNEL_PART) into the images that libportssm_cuda.so
 * embeds. */
#include "../../kernels/all_kernels.h"
