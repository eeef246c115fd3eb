/*
 * state_update.stamp.h - the selective_state_update kernels of one activation dtype (the macros
 * of scan_act.body.h) and one state dtype (PSSM_STATE_DT, PSSM_STATE_BYTES; the helpers of
 * state_quad.body.h), included by scan_dtype.stamp.h once per state dtype (no include guard).
 * Each kernel's name ends in _<activation dtype>_st<state dtype>: pssm_state_update_s4_bf16_stf16
 * takes bf16 activations and an f16 state.
 */
#define PSSM_UPDATE_SUFFIX                                                                         \
    PSSM_SCAN_CAT(PSSM_SCAN_CAT(_, PSSM_SCAN_DT), PSSM_SCAN_CAT(_st, PSSM_STATE_DT))
#define PSSM_UPDATE_FAST 1
#define PSSM_UPDATE_SLOTS 1
#include "state_update.body.h"
#undef PSSM_UPDATE_SLOTS
#define PSSM_UPDATE_SLOTS 2
#include "state_update.body.h"
#undef PSSM_UPDATE_SLOTS
#define PSSM_UPDATE_SLOTS 4
#include "state_update.body.h"
#undef PSSM_UPDATE_FAST
#define PSSM_UPDATE_FAST 0
#include "state_update.body.h"
#undef PSSM_UPDATE_SLOTS
#undef PSSM_UPDATE_FAST
#define PSSM_UPDATE_QUADS 1
#include "state_update_flat.body.h"
#undef PSSM_UPDATE_QUADS
#undef PSSM_UPDATE_SUFFIX
