/*
 * each_state_dtype.stamp.h - includes the header PSSM_STATE_STAMP names (a quoted file name) once
 * for each state dtype a decode kernel takes: f32, f16 and bf16, with PSSM_STATE_DT and
 * PSSM_STATE_BYTES set for it.  Leaves neither of them nor PSSM_STATE_STAMP defined.  No include
 * guard: it is included once per header to stamp.
 */
#define PSSM_STATE_DT f32
#define PSSM_STATE_BYTES 4
#include PSSM_STATE_STAMP
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES
#define PSSM_STATE_DT f16
#define PSSM_STATE_BYTES 2
#include PSSM_STATE_STAMP
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES
#define PSSM_STATE_DT bf16
#define PSSM_STATE_BYTES 2
#include PSSM_STATE_STAMP
#undef PSSM_STATE_DT
#undef PSSM_STATE_BYTES
#undef PSSM_STATE_STAMP
