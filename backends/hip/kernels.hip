/* kernels.hip - the hip target's translation unit: the kernels of kernels/, compiled by hipcc
 * --genco once per kernel part (-DPSSM_KERNEL_PART) into the code-object bundles that
 * libportssm_hip.so embeds. */
#include "../../kernels/all_kernels.h"
