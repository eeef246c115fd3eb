/*
 * scan_dtype.stamp.h - stamps every scan kernel of one activation dtype (no include guard: it is
 * included once per dtype by scan_kernels.h).  Expects PSSM_SCAN_ACT, _LD, _ST, _DT, _VECS, _GET,
 * _SET; leaves none of them defined.
 */
#include "scan_act.body.h"
#define PSSM_SCAN_NS 4
#include "scan_fwd.body.h"
#undef PSSM_SCAN_NS
#define PSSM_SCAN_NS 8
#include "scan_fwd.body.h"
#undef PSSM_SCAN_NS
#define PSSM_SCAN_NS 16
#include "scan_fwd.body.h"
#undef PSSM_SCAN_NS
#define PSSM_SCAN_NS 4
#include "scan_bwd.body.h"
#undef PSSM_SCAN_NS
#define PSSM_SCAN_NS 8
#include "scan_bwd.body.h"
#undef PSSM_SCAN_NS
/* the state update, for each state dtype (state_update.stamp.h) */
#define PSSM_STATE_DT f32
#define PSSM_STATE_BYTES 4
#include "state_update.stamp.h"
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES
#define PSSM_STATE_DT f16
#define PSSM_STATE_BYTES 2
#include "state_update.stamp.h"
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES
#define PSSM_STATE_DT bf16
#define PSSM_STATE_BYTES 2
#include "state_update.stamp.h"
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES
#undef PSSM_SCAN_ACT
#undef PSSM_SCAN_LD
#undef PSSM_SCAN_ST
#undef PSSM_SCAN_DT
#undef PSSM_SCAN_VECS
#undef PSSM_SCAN_GET
#undef PSSM_SCAN_SET
