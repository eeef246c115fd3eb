/* validate_ssd.c - arguments of ssd_chunk_scan_fwd and ssd_chunk_scan_bwd (Mamba-2). */
#include "validate.h"

#include <math.h>
#include <stdint.h>

/* y is the output before z's gate (without z it would be out itself). */
#define SSD_Y_NEEDS_Z "'y' is the output before the gate of 'z', kept for a backward with 'z'"

/* D is (H,P) per channel or (H) per head. */
static int add_d(pssm_validator *v, const char *name, const portssm_tensor *t, pssm_role role)
{
    const int per_head = pssm_present(t) && t->ndim == 1;
    int i = pssm_add(v, name, t, role, PSSM_OPTIONAL, PSSM_DT_F32, per_head ? "H" : "HP");
    v->args[i].forms = "2 dims (H,P) or 1 dim (H)";
    return i;
}

/* The inputs both directions share; returns the index of 'D'. */
static int add_inputs(pssm_validator *v, const portssm_tensor *x, const portssm_tensor *dt,
                      const portssm_tensor *A, const portssm_tensor *B, const portssm_tensor *C,
                      const portssm_tensor *D, const portssm_tensor *z,
                      const portssm_tensor *dt_bias, const portssm_tensor *initial_states,
                      const portssm_tensor *seq_idx, const portssm_tensor *cu_seqlens)
{
    pssm_add(v, "x", x, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BLHP");
    pssm_add(v, "dt", dt, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BLH");
    pssm_add(v, "A", A, PSSM_IN, PSSM_REQUIRED, PSSM_DT_F32, "H");
    pssm_add(v, "B", B, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BLGN");
    pssm_add(v, "C", C, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BLGN");
    int d = add_d(v, "D", D, PSSM_IN);
    pssm_add(v, "z", z, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, "BLHP");
    pssm_add(v, "dt_bias", dt_bias, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, "H");
    pssm_add(v, "initial_states", initial_states, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_FLOAT, "BHPN");
    pssm_add(v, "seq_idx", seq_idx, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_I32, "BL");
    pssm_add(v, "cu_seqlens", cu_seqlens, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_I32, "R");
    return d;
}

/* The states of one call (initial, final and varlen forward; initial, dfinal and dinitial
 * backward) share one dtype, f32, f16 or bf16, whatever the activations' (16-bit states are
 * computed in f32 and rounded once per store): an empty call copies one into another. */
static portssm_status check_state_dtype(pssm_validator *v, const char *const names[3],
                                        const portssm_tensor *const t[3])
{
    int first = -1;
    for (int i = 0; i < 3; i++) {
        if (!pssm_present(t[i]))
            continue;
        if (first < 0)
            first = i;
        else if (t[i]->dtype != t[first]->dtype)
            return pssm_invalid(v, "'%s' dtype must be %s (the dtype of '%s': a call's states "
                                   "share one), got %s",
                                names[i], portssm_dtype_name(t[first]->dtype), names[first],
                                portssm_dtype_name(t[i]->dtype));
    }
    return PORTSSM_OK;
}

/* Rules past the shapes: groups divide heads, packed input is one row, the dt clamp is a range,
 * chunk_size is not negative; n_seq from cu_seqlens (R = n_seq + 1 >= 2). */
static portssm_status check_rules(pssm_validator *v, const portssm_tensor *cu, int32_t dt_limit,
                                  float dt_min, float dt_max, int32_t chunk_size)
{
    if (pssm_present(cu)) {
        if (cu->shape[0] < 2)
            return pssm_invalid(v, "'cu_seqlens' holds n_seq + 1 offsets and needs at least 2 "
                                   "(one sequence), got %lld",
                                (long long)cu->shape[0]);
        pssm_fix(v, 'R', cu->shape[0], "cu_seqlens");
        pssm_fix(v, 'Q', cu->shape[0] - 1, "cu_seqlens (n_seq + 1 offsets)");
    }
    if (dt_limit && (isnan(dt_min) || isnan(dt_max) || dt_min > dt_max))
        return pssm_invalid(v, "'dt_min' .. 'dt_max' must be a range (dt_min <= dt_max, no NaN), "
                               "got %g .. %g",
                            (double)dt_min, (double)dt_max);
    if (chunk_size < 0)
        return pssm_invalid(v, "'chunk_size' must be >= 0 (0: the backend's), got %d",
                            (int)chunk_size);
    return PORTSSM_OK;
}

/* The work of the chunked algorithm, whatever the backend: every state update of every head,
 * and the chunks' C*B^T products under the decay mask, over L rounded up to a whole chunk of
 * the largest size (PSSM_SSD_CHUNK_LIMIT), plus one state per packed sequence.  Every product
 * of sizes the backends form (chunk states, C*B^T tiles, partial sums) is below it. */
static portssm_status check_work(pssm_validator *v)
{
    const int64_t T = PSSM_SSD_CHUNK_LIMIT, L = pssm_work_dim(v, 'L');
    const int64_t rows = pssm_size_mul(pssm_work_dim(v, 'B'), pssm_work_dim(v, 'H'));
    const int64_t padded = pssm_size_mul(L / T + (L % T != 0), T);
    const int64_t state = pssm_size_mul(pssm_work_dim(v, 'P'), pssm_work_dim(v, 'N'));
    const int64_t seqs = pssm_dim(v, 'Q') > 0 ? pssm_dim(v, 'Q') : 0;
    const int64_t work =
        pssm_size_add(pssm_size_mul(pssm_size_mul(rows, padded), pssm_size_add(state, T)),
                      pssm_size_mul(pssm_size_mul(seqs, pssm_work_dim(v, 'H')), state));
    return pssm_check_work(v, work, "B*H*L'*(P*N + 256) + n_seq*H*P*N (L' = L rounded up to "
                                    "256)",
                           "BLHPNQ");
}

/* After the shapes: G divides H, packed input has B = 1; then the work. */
static portssm_status check_relations(pssm_validator *v, const portssm_tensor *cu)
{
    PSSM_TRY(pssm_check_divides(v, 'G', 'H'));
    if (pssm_present(cu) && pssm_dim(v, 'B') != 1)
        return pssm_invalid(v, "'cu_seqlens' packs sequences into one row: B must be 1, got "
                               "%lld (from '%s')",
                            (long long)pssm_dim(v, 'B'), pssm_dim_from(v, 'B'));
    return check_work(v);
}

/* The checkpoints' K and P*N, from x, B and chunk_size (their shape is then checked against
 * them), and their layout: the GPU kernels move them as one dense block of 16-byte vectors. */
static portssm_status fix_checkpoints(pssm_validator *v, const portssm_tensor *x,
                                      const portssm_tensor *B, int32_t chunk_size,
                                      const portssm_tensor *ck)
{
    if (!pssm_present(ck))
        return PORTSSM_OK;
    const int64_t T = pssm_ssd_chunk(chunk_size, x->dtype);
    const int64_t L = x->shape[1], P = x->shape[3], N = B->shape[3], PN = pssm_size_mul(P, N);
    if (PN < 0)
        return pssm_invalid(v, "'checkpoints' would need P*N = %lld*%lld elements a row, more than "
                               "int64 holds",
                            (long long)P, (long long)N);
    pssm_fix(v, 'K', pssm_ssd_checkpoints(L, T), "portssm_ssd_chunk_scan_checkpoint_shape");
    pssm_fix(v, 'M', PN, "portssm_ssd_chunk_scan_checkpoint_shape");
    if (pssm_tensor_empty(ck)) /* K = 0 (L = 0) or P*N = 0: no element to lay out */
        return PORTSSM_OK;
    int64_t want = 1;
    for (int d = 3; d >= 0; d--) {
        if (ck->shape[d] > 1 && ck->stride[d] != want)
            return pssm_invalid(v, "'checkpoints' must be contiguous (row-major): stride[%d] "
                                   "must be %lld, got %lld",
                                d, (long long)want, (long long)ck->stride[d]);
        want *= ck->shape[d];
    }
    if ((uintptr_t)ck->data % 16 != 0)
        return pssm_invalid(v, "'checkpoints' data pointer %p must be 16-byte aligned (the GPU "
                               "backends move it by 16-byte vectors)",
                            ck->data);
    return PORTSSM_OK;
}

portssm_status pssm_validate_ssd_chunk_scan_fwd(pssm_bctx *c,
                                                const portssm_ssd_chunk_scan_fwd_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "ssd_chunk_scan_fwd");
    add_inputs(&v, &a->x, &a->dt, &a->A, &a->B, &a->C, &a->D, &a->z, &a->dt_bias,
               &a->initial_states, &a->seq_idx, &a->cu_seqlens);
    pssm_add(&v, "out", &a->out, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BLHP");
    pssm_add(&v, "final_states", &a->final_states, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_FLOAT,
             "BHPN");
    pssm_add(&v, "varlen_states", &a->varlen_states, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_FLOAT,
             "QHPN");
    pssm_add(&v, "y", &a->y, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_ACT, "BLHP");
    pssm_add(&v, "checkpoints", &a->checkpoints, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_ACT, "BHKM");

    PSSM_TRY(pssm_check_tensors(&v));
    static const char *const states[3] = {"initial_states", "final_states", "varlen_states"};
    const portssm_tensor *const st[3] = {&a->initial_states, &a->final_states, &a->varlen_states};
    PSSM_TRY(check_state_dtype(&v, states, st));
    PSSM_TRY(fix_checkpoints(&v, &a->x, &a->B, a->chunk_size, &a->checkpoints));
    PSSM_TRY(pssm_check_needs(&v, "varlen_states", &a->varlen_states, "cu_seqlens",
                              &a->cu_seqlens, "it holds one state per sequence of cu_seqlens"));
    PSSM_TRY(pssm_check_needs(&v, "y", &a->y, "z", &a->z, SSD_Y_NEEDS_Z));
    PSSM_TRY(check_rules(&v, &a->cu_seqlens, a->dt_limit, a->dt_min, a->dt_max, a->chunk_size));
    PSSM_TRY(pssm_check_shapes(&v));
    PSSM_TRY(check_relations(&v, &a->cu_seqlens));
    PSSM_TRY(pssm_check_overlaps(&v));
    return pssm_check_workspace(&v, &a->workspace);
}

portssm_status pssm_validate_ssd_chunk_scan_bwd(pssm_bctx *c,
                                                const portssm_ssd_chunk_scan_bwd_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "ssd_chunk_scan_bwd");
    int d = add_inputs(&v, &a->x, &a->dt, &a->A, &a->B, &a->C, &a->D, &a->z, &a->dt_bias,
                       &a->initial_states, &a->seq_idx, &a->cu_seqlens);
    pssm_add(&v, "dout", &a->dout, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BLHP");
    pssm_add(&v, "dfinal_states", &a->dfinal_states, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_FLOAT,
             "BHPN");
    pssm_add(&v, "y", &a->y, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, "BLHP");
    pssm_add(&v, "checkpoints", &a->checkpoints, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, "BHKM");
    pssm_add(&v, "dx", &a->dx, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BLHP");
    pssm_add(&v, "ddt", &a->ddt, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BLH");
    pssm_add(&v, "dA", &a->dA, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_F32, "H");
    pssm_add(&v, "dB", &a->dB, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BLGN");
    pssm_add(&v, "dC", &a->dC, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BLGN");
    int dd = pssm_add(&v, "dD", &a->dD, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32,
                      pssm_present(&a->D) ? v.args[d].dims : "HP");
    v.args[dd].forms = "the dims of 'D'";
    pssm_add(&v, "dz", &a->dz, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_ACT, "BLHP");
    pssm_add(&v, "ddt_bias", &a->ddt_bias, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32, "H");
    pssm_add(&v, "dinitial_states", &a->dinitial_states, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_FLOAT,
             "BHPN");

    PSSM_TRY(pssm_check_tensors(&v));
    static const char *const states[3] = {"initial_states", "dfinal_states", "dinitial_states"};
    const portssm_tensor *const st[3] = {&a->initial_states, &a->dfinal_states,
                                         &a->dinitial_states};
    PSSM_TRY(check_state_dtype(&v, states, st));
    PSSM_TRY(fix_checkpoints(&v, &a->x, &a->B, a->chunk_size, &a->checkpoints));
    PSSM_TRY(pssm_check_needs(&v, "dD", &a->dD, "D", &a->D, NULL));
    PSSM_TRY(pssm_check_needs(&v, "dz", &a->dz, "z", &a->z, NULL));
    PSSM_TRY(pssm_check_needs(&v, "y", &a->y, "z", &a->z, SSD_Y_NEEDS_Z));
    PSSM_TRY(pssm_check_needs(&v, "ddt_bias", &a->ddt_bias, "dt_bias", &a->dt_bias, NULL));
    PSSM_TRY(check_rules(&v, &a->cu_seqlens, a->dt_limit, a->dt_min, a->dt_max, a->chunk_size));
    PSSM_TRY(pssm_check_shapes(&v));
    PSSM_TRY(check_relations(&v, &a->cu_seqlens));
    PSSM_TRY(pssm_check_overlaps(&v));
    return pssm_check_workspace(&v, &a->workspace);
}
