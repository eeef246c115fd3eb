/* kernels.hip - the hip target's one translation unit: every kernel of kernels/, compiled by
 * hipcc --genco into the code-object bundle that libportssm_hip.so embeds. */
#include "../../kernels/all_kernels.h"
