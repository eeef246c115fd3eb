/*
 * cpu_scan.c - the scan ops of the cpu backend: ref_scan.c or ref_update.c read the inputs
 * where they lie and write each output element once; the forward's (b,d) rows are spread over
 * threads (cpu_threads.h; the backward runs on the calling thread).  Scratch (each thread's row,
 * the gradients summed over rows, the decode rows in use) is allocated before anything is
 * written, so a failed allocation writes nothing.
 */
#include "cpu_io.h"
#include "cpu_ops.h"
#include "cpu_threads.h"
#include "ref.h"
#include "../../src/size_math.h"

/* The fields the forward and the backward share.  A variable B/C is (B,G,N,L): 4 dims. */
static void scan_params(const portssm_tensor *u, const portssm_tensor *delta,
                        const portssm_tensor *A, const portssm_tensor *B, const portssm_tensor *C,
                        const portssm_tensor *D, const portssm_tensor *z,
                        const portssm_tensor *delta_bias, const portssm_tensor *initial_state,
                        int32_t softplus, pssm_ref_scan *p)
{
    p->B = u->shape[0];
    p->D = u->shape[1];
    p->L = u->shape[2];
    p->N = A->shape[1];
    p->GB = B->ndim == 4 ? B->shape[1] : 0;
    p->GC = C->ndim == 4 ? C->shape[1] : 0;
    p->u = pssm_cpu_in(u);
    p->delta = pssm_cpu_in(delta);
    p->A = pssm_cpu_in(A);
    p->Bm = pssm_cpu_in(B);
    p->Cm = pssm_cpu_in(C);
    p->Dv = pssm_cpu_in(D);
    p->z = pssm_cpu_in(z);
    p->delta_bias = pssm_cpu_in(delta_bias);
    p->initial_state = pssm_cpu_in(initial_state);
    p->softplus = softplus != 0;
}

typedef struct fwd_job {
    const pssm_ref_scan *p;
    const pssm_ref_out *out, *fin, *ck;
    int64_t work_len;
    double *work; /* per thread slot */
} fwd_job;

static void fwd_row(void *arg, int64_t u, int slot, int part)
{
    (void)part;
    const fwd_job *j = arg;
    pssm_ref_scan_fwd_row(j->p, u / j->p->D, u % j->p->D, j->out, j->fin, j->ck,
                          PSSM_SCAN_CHECKPOINT_INTERVAL, j->work + slot * j->work_len);
}

portssm_status pssm_cpu_selective_scan_fwd(pssm_bctx *c, const portssm_selective_scan_fwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_scan p;
    scan_params(&a->u, &a->delta, &a->A, &a->B, &a->C, &a->D, &a->z, &a->delta_bias,
                &a->initial_state, a->delta_softplus, &p);
    const pssm_ref_out out = pssm_cpu_out(&a->out), fin = pssm_cpu_out(&a->final_state);
    const pssm_ref_out ck = pssm_cpu_out(&a->checkpoints);
    /* an exp per state update: about 8 multiply-adds of the spread rule's cost */
    const double cost = 8.0 * (double)p.B * p.D * p.L * p.N;
    const int threads = pssm_cpu_threads_for(p.B * p.D, cost);
    const int64_t len = pssm_ref_scan_fwd_work(&p);
    double *work = pssm_cpu_alloc(&s, pssm_size_mul(len, threads), sizeof(double)); /* -1 fails */
    if (s.failed)
        return pssm_cpu_oom(c, &s, "selective_scan_fwd");
    fwd_job j = {&p, &out, &fin, &ck, len, work};
    pssm_cpu_parallel(p.B * p.D, threads, fwd_row, NULL, &j);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

/* The oracle computes the backward from its definition: checkpoints, valid or not, change
 * nothing here (the GPU backends read them). */
portssm_status pssm_cpu_selective_scan_bwd(pssm_bctx *c, const portssm_selective_scan_bwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_scan p;
    scan_params(&a->u, &a->delta, &a->A, &a->B, &a->C, &a->D, &a->z, &a->delta_bias,
                &a->initial_state, a->delta_softplus, &p);
    const pssm_ref_in dout = pssm_cpu_in(&a->dout), dfinal = pssm_cpu_in(&a->dfinal_state);
    pssm_ref_scan_grads g;
    g.du = pssm_cpu_out(&a->du);
    g.ddelta = pssm_cpu_out(&a->ddelta);
    g.dz = pssm_cpu_out(&a->dz);
    g.dinitial_state = pssm_cpu_out(&a->dinitial_state);
    g.dA = pssm_cpu_sum(&s, &a->dA);
    g.dB = pssm_cpu_sum(&s, &a->dB);
    g.dC = pssm_cpu_sum(&s, &a->dC);
    g.dD = pssm_cpu_sum(&s, &a->dD);
    g.ddelta_bias = pssm_cpu_sum(&s, &a->ddelta_bias);
    double *work = pssm_cpu_alloc(&s, pssm_ref_scan_bwd_work(&p), sizeof(double)); /* -1 fails */
    if (s.failed)
        return pssm_cpu_oom(c, &s, "selective_scan_bwd");
    pssm_ref_scan_bwd(&p, &dout, &dfinal, &g, work);
    pssm_cpu_store(&a->dA, g.dA);
    pssm_cpu_store(&a->dB, g.dB);
    pssm_cpu_store(&a->dC, g.dC);
    pssm_cpu_store(&a->dD, g.dD);
    pssm_cpu_store(&a->ddelta_bias, g.ddelta_bias);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

/* Both forms map onto the heads form of ref.h: Mamba-1 state (B',D,N) is H = 1, P = D, G = 1;
 * its (B,D), (B,N), (D,N), (D) tensors are viewed as (B,1,D), (B,1,N), (1,D,N), (1,D). */
portssm_status pssm_cpu_selective_state_update(pssm_bctx *c,
                                               const portssm_selective_state_update_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_cpu_pool pool;
    pssm_ref_state_update p;
    const int heads = a->state.ndim == 4;
    const int bh = heads ? -1 : 1, hp = heads ? -1 : 0; /* where Mamba-1 lacks the H / G dim */
    p.B = a->x.shape[0];
    p.H = heads ? a->state.shape[1] : 1;
    p.P = a->state.shape[heads ? 2 : 1];
    p.N = a->state.shape[heads ? 3 : 2];
    p.G = heads ? a->B.shape[1] : 1;
    p.x = pssm_cpu_in_unsqueeze(&a->x, bh);
    p.dt = pssm_cpu_in_unsqueeze(&a->dt, bh);
    p.A = pssm_cpu_in_unsqueeze(&a->A, hp);
    p.Bm = pssm_cpu_in_unsqueeze(&a->B, bh);
    p.Cm = pssm_cpu_in_unsqueeze(&a->C, bh);
    p.Dv = pssm_cpu_in_unsqueeze(&a->D, hp);
    p.z = pssm_cpu_in_unsqueeze(&a->z, bh);
    p.dt_bias = pssm_cpu_in_unsqueeze(&a->dt_bias, hp);
    p.softplus = a->dt_softplus != 0;
    if (!pssm_cpu_pool_init(&s, &pool, &a->state, &a->state_batch_indices, p.B))
        return pssm_cpu_oom(c, &s, "selective_state_update");
    /* the math sees the pool as the rows in use, sequence b at its slot */
    p.Bp = pool.nslots;
    p.state_indices = pssm_cpu_pool_indices(&pool);
    const pssm_ref_out out = pssm_cpu_out_unsqueeze(&a->out, bh);
    /* the state in any of its dtypes (f32, f16, bf16): read exactly into double, updated there,
     * and each new element rounded once (to nearest even) to the state's dtype on the store */
    pssm_cpu_pool_load(&pool, &a->state);
    pssm_ref_state_update_run(&p, pool.rows, &out);
    pssm_cpu_pool_store(&pool, &a->state); /* other rows stay untouched, bit for bit */
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}
