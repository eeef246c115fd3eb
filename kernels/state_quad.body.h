/*
 * state_quad.body.h - how the state update reads and writes its state, stamped by
 * scan_kernels.h once per state dtype (PSSM_STATE_DT f32, f16 or bf16; PSSM_STATE_BYTES 4 or 2),
 * independently of the activation dtype.  The recurrence is computed in f32 whatever the state
 * dtype: a quad of states is loaded raw (16 bytes of f32, 8 of f16/bf16), converted to floats
 * where it is used, and rounded once (to nearest even) when the new state is stored.
 */

/* Four consecutive states in storage form: kept raw between an early load and its use, so that
 * a prefetch of a 16-bit state costs two registers, not four. */
#if PSSM_STATE_BYTES == 4
typedef pssm_vec16 PSSM_STATE_FN(pssm_state_quad_);
#else
typedef pssm_vec8 PSSM_STATE_FN(pssm_state_quad_);
#endif

PSSM_DEVICE PSSM_STATE_FN(pssm_state_quad_) PSSM_STATE_FN(pssm_state_quad_zero_)(void)
{
    PSSM_STATE_FN(pssm_state_quad_) q;
    for (int i = 0; i < (int)(sizeof q / 4); ++i)
        q.w[i] = 0u;
    return q;
}

/* The quad at row + n0 (the host checked: stride 1 along n, rows aligned to 4 states). */
PSSM_DEVICE PSSM_STATE_FN(pssm_state_quad_)
PSSM_STATE_FN(pssm_state_quad_load_)(const PSSM_STATE_T *row, int n0)
{
    return *(const PSSM_STATE_FN(pssm_state_quad_) *)(row + n0);
}

/* A quad as four floats (their bits), exactly. */
PSSM_DEVICE pssm_vec16 PSSM_STATE_FN(pssm_state_quad_floats_)(PSSM_STATE_FN(pssm_state_quad_) q)
{
#if PSSM_STATE_BYTES == 4
    return q;
#else
    pssm_vec16 r;
    r.w[0] = pssm_as_uint(PSSM_STATE_LD((uint16_t)q.w[0]));
    r.w[1] = pssm_as_uint(PSSM_STATE_LD((uint16_t)(q.w[0] >> 16)));
    r.w[2] = pssm_as_uint(PSSM_STATE_LD((uint16_t)q.w[1]));
    r.w[3] = pssm_as_uint(PSSM_STATE_LD((uint16_t)(q.w[1] >> 16)));
    return r;
#endif
}

/* Stores four floats (their bits) at row + n0, each rounded once to the state dtype. */
PSSM_DEVICE void PSSM_STATE_FN(pssm_state_quad_store_)(PSSM_STATE_T *row, int n0, pssm_vec16 v)
{
#if PSSM_STATE_BYTES == 4
    *(pssm_vec16 *)(row + n0) = v;
#else
    pssm_vec8 o;
    o.w[0] = PSSM_STATE_ST2(pssm_as_float(v.w[0]), pssm_as_float(v.w[1]));
    o.w[1] = PSSM_STATE_ST2(pssm_as_float(v.w[2]), pssm_as_float(v.w[3]));
    *(pssm_vec8 *)(row + n0) = o;
#endif
}
