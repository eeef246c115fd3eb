/* validate_scan.c - arguments of selective_scan_fwd and selective_scan_bwd. */
#include "validate.h"

/* B and C are each constant, (D,N) f32, or variable, (B,G,N,L) in the activation dtype. */
static int add_bc(pssm_validator *v, const char *name, const portssm_tensor *t)
{
    int variable = pssm_present(t) && t->ndim == 4;
    int i = pssm_add(v, name, t, PSSM_IN, PSSM_REQUIRED, variable ? PSSM_DT_ACT : PSSM_DT_F32,
                     variable ? "BGNL" : "DN");
    v->args[i].forms = "2 dims (D,N) when constant or 4 dims (B,G,N,L) when variable";
    return i;
}

/* The work of a scan: B*D*L*N state updates. */
static portssm_status check_scan_work(pssm_validator *v)
{
    const int64_t work = pssm_size_mul(
        pssm_size_mul(pssm_work_dim(v, 'B'), pssm_work_dim(v, 'D')),
        pssm_size_mul(pssm_work_dim(v, 'L'), pssm_work_dim(v, 'N')));
    return pssm_check_work(v, work, "B*D*L*N", "BDLN");
}

typedef struct scan_inputs {
    int B, C; /* indices of 'B' and 'C', whose shape and dtype dB and dC take */
} scan_inputs;

static scan_inputs add_inputs(pssm_validator *v, const portssm_tensor *u,
                              const portssm_tensor *delta, const portssm_tensor *A,
                              const portssm_tensor *B, const portssm_tensor *C,
                              const portssm_tensor *D, const portssm_tensor *z,
                              const portssm_tensor *delta_bias,
                              const portssm_tensor *initial_state)
{
    scan_inputs in;
    pssm_add(v, "u", u, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    pssm_add(v, "delta", delta, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    pssm_add(v, "A", A, PSSM_IN, PSSM_REQUIRED, PSSM_DT_F32, "DN");
    in.B = add_bc(v, "B", B);
    in.C = add_bc(v, "C", C);
    pssm_add(v, "D", D, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, "D");
    pssm_add(v, "z", z, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_ACT, "BDL");
    pssm_add(v, "delta_bias", delta_bias, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, "D");
    pssm_add(v, "initial_state", initial_state, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, "BDN");
    return in;
}

portssm_status pssm_validate_selective_scan_fwd(pssm_bctx *c,
                                                const portssm_selective_scan_fwd_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "selective_scan_fwd");
    add_inputs(&v, &a->u, &a->delta, &a->A, &a->B, &a->C, &a->D, &a->z, &a->delta_bias,
               &a->initial_state);
    pssm_add(&v, "final_state", &a->final_state, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32, "BDN");
    pssm_add(&v, "out", &a->out, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    pssm_add(&v, "checkpoints", &a->checkpoints, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32, "BDKN");

    PSSM_TRY(pssm_check_tensors(&v));
    PSSM_TRY(pssm_fix_scan_checkpoints(&v, a->u.shape[2], &a->checkpoints));
    PSSM_TRY(pssm_check_shapes(&v));
    PSSM_TRY(pssm_check_divides(&v, 'G', 'D'));
    PSSM_TRY(check_scan_work(&v));
    return pssm_check_overlaps(&v);
}

portssm_status pssm_validate_selective_scan_bwd(pssm_bctx *c,
                                                const portssm_selective_scan_bwd_args *a)
{
    pssm_validator v;
    pssm_validator_init(&v, c, "selective_scan_bwd");
    scan_inputs in = add_inputs(&v, &a->u, &a->delta, &a->A, &a->B, &a->C, &a->D, &a->z,
                                &a->delta_bias, &a->initial_state);
    pssm_add(&v, "dout", &a->dout, PSSM_IN, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    pssm_add(&v, "dfinal_state", &a->dfinal_state, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, "BDN");
    pssm_add(&v, "du", &a->du, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    pssm_add(&v, "ddelta", &a->ddelta, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_ACT, "BDL");
    pssm_add(&v, "dA", &a->dA, PSSM_OUT, PSSM_REQUIRED, PSSM_DT_F32, "DN");
    pssm_add_like(&v, "dB", &a->dB, PSSM_OUT, PSSM_REQUIRED, in.B, v.args[in.B].dims);
    pssm_add_like(&v, "dC", &a->dC, PSSM_OUT, PSSM_REQUIRED, in.C, v.args[in.C].dims);
    pssm_add(&v, "dD", &a->dD, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32, "D");
    pssm_add(&v, "dz", &a->dz, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_ACT, "BDL");
    pssm_add(&v, "ddelta_bias", &a->ddelta_bias, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32, "D");
    pssm_add(&v, "dinitial_state", &a->dinitial_state, PSSM_OUT, PSSM_OPTIONAL, PSSM_DT_F32,
             "BDN");
    pssm_add(&v, "checkpoints", &a->checkpoints, PSSM_IN, PSSM_OPTIONAL, PSSM_DT_F32, "BDKN");

    PSSM_TRY(pssm_check_tensors(&v));
    PSSM_TRY(pssm_fix_scan_checkpoints(&v, a->u.shape[2], &a->checkpoints));
    PSSM_TRY(pssm_check_needs(&v, "dD", &a->dD, "D", &a->D, NULL));
    PSSM_TRY(pssm_check_needs(&v, "dz", &a->dz, "z", &a->z, NULL));
    PSSM_TRY(
        pssm_check_needs(&v, "ddelta_bias", &a->ddelta_bias, "delta_bias", &a->delta_bias, NULL));
    PSSM_TRY(pssm_check_shapes(&v));
    PSSM_TRY(pssm_check_divides(&v, 'G', 'D'));
    PSSM_TRY(check_scan_work(&v));
    PSSM_TRY(pssm_check_overlaps(&v));
    return pssm_check_workspace(&v, &a->workspace);
}
