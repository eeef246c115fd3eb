/*
 * cpu_conv1d.c - the conv1d ops of the cpu backend: ref_conv1d.c or ref_update.c read the
 * inputs where they lie and write each output element once; the forward's (b,d) rows and the
 * backward's channels (each summing its own dweight, dbias) are spread over threads
 * (cpu_threads.h), with the same results for any thread count.  Scratch (the summed gradients,
 * each thread's row scratch, the decode rows in use) is allocated before anything is written,
 * so a failed allocation writes nothing.
 */
#include "cpu_io.h"
#include "cpu_ops.h"
#include "cpu_threads.h"
#include "ref.h"
#include "../../src/size_math.h"

/* The fields the forward and the backward share. */
static void conv_params(const portssm_tensor *x, const portssm_tensor *weight,
                        const portssm_tensor *bias, const portssm_tensor *seq_idx,
                        const portssm_tensor *initial_states, portssm_activation act,
                        pssm_ref_conv1d *p)
{
    p->B = x->shape[0];
    p->D = x->shape[1];
    p->L = x->shape[2];
    p->W = weight->shape[1];
    p->x = pssm_cpu_in(x);
    p->weight = pssm_cpu_in(weight);
    p->bias = pssm_cpu_in(bias);
    p->seq_idx = pssm_cpu_in(seq_idx);
    p->initial_states = pssm_cpu_in(initial_states);
    p->silu = act == PORTSSM_ACTIVATION_SILU;
}

typedef struct conv_job {
    const pssm_ref_conv1d *p;
    const pssm_ref_out *out, *fin;                        /* forward  */
    const pssm_ref_in *dout, *dfinal;                     /* backward */
    const pssm_ref_out *dx, *dinit;
    double *dweight, *dbias;
    int64_t work_len;
    double *work; /* per thread slot */
} conv_job;

static void fwd_row(void *arg, int64_t u, int slot, int part)
{
    (void)part;
    const conv_job *j = arg;
    pssm_ref_conv1d_fwd_row(j->p, u / j->p->D, u % j->p->D, j->out, j->fin,
                            j->work + slot * j->work_len);
}

static void bwd_channel(void *arg, int64_t d, int slot, int part)
{
    (void)part;
    const conv_job *j = arg;
    pssm_ref_conv1d_bwd_channel(j->p, j->dout, j->dfinal, j->dx, j->dweight, j->dbias, j->dinit,
                                d, j->work + slot * j->work_len);
}

/* Multiply-adds of the whole op (the spread rule's cost); an exp per element counts 8. */
static double conv_cost(const pssm_ref_conv1d *p)
{
    return (double)p->B * p->D * p->L * (p->W + 8.0 * p->silu);
}

portssm_status pssm_cpu_causal_conv1d_fwd(pssm_bctx *c, const portssm_causal_conv1d_fwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_conv1d p;
    conv_params(&a->x, &a->weight, &a->bias, &a->seq_idx, &a->initial_states, a->activation, &p);
    const pssm_ref_out out = pssm_cpu_out(&a->out), fin = pssm_cpu_out(&a->final_states);
    const int threads = pssm_cpu_threads_for(p.B * p.D, conv_cost(&p));
    const int64_t len = pssm_ref_conv1d_work(&p);
    double *work = pssm_cpu_alloc(&s, pssm_size_mul(len, threads), sizeof(double));
    if (s.failed)
        return pssm_cpu_oom(c, &s, "causal_conv1d_fwd");
    conv_job j = {&p, &out, &fin, NULL, NULL, NULL, NULL, NULL, NULL, len, work};
    pssm_cpu_parallel(p.B * p.D, threads, fwd_row, NULL, &j);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

portssm_status pssm_cpu_causal_conv1d_bwd(pssm_bctx *c, const portssm_causal_conv1d_bwd_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_ref_conv1d p;
    conv_params(&a->x, &a->weight, &a->bias, &a->seq_idx, &a->initial_states, a->activation, &p);
    const pssm_ref_in dout = pssm_cpu_in(&a->dout), dfinal = pssm_cpu_in(&a->dfinal_states);
    const pssm_ref_out dx = pssm_cpu_out(&a->dx), dinit = pssm_cpu_out(&a->dinitial_states);
    double *dweight = pssm_cpu_sum(&s, &a->dweight), *dbias = pssm_cpu_sum(&s, &a->dbias);
    const int threads = pssm_cpu_threads_for(p.D, 3.0 * conv_cost(&p));
    const int64_t len = pssm_ref_conv1d_work(&p);
    double *work = pssm_cpu_alloc(&s, pssm_size_mul(len, threads), sizeof(double));
    if (s.failed)
        return pssm_cpu_oom(c, &s, "causal_conv1d_bwd");
    conv_job j = {&p, NULL, NULL, &dout, &dfinal, &dx, &dinit, dweight, dbias, len, work};
    pssm_cpu_parallel(p.D, threads, bwd_channel, NULL, &j);
    pssm_cpu_store(&a->dweight, dweight);
    pssm_cpu_store(&a->dbias, dbias);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}

portssm_status pssm_cpu_causal_conv1d_update(pssm_bctx *c,
                                             const portssm_causal_conv1d_update_args *a)
{
    pssm_cpu_scratch s = {0};
    pssm_cpu_pool pool;
    pssm_ref_conv1d_update p;
    p.B = a->x.shape[0];
    p.D = a->x.shape[1];
    p.T = a->x.ndim == 3 ? a->x.shape[2] : 1; /* (B,D) is (B,D,1): its third stride is 0 */
    p.W = a->weight.shape[1];
    p.S = a->conv_state.shape[2];
    p.x = pssm_cpu_in(&a->x);
    p.weight = pssm_cpu_in(&a->weight);
    p.bias = pssm_cpu_in(&a->bias);
    p.cache_seqlens = pssm_cpu_in(&a->cache_seqlens);
    p.silu = a->activation == PORTSSM_ACTIVATION_SILU;
    if (!pssm_cpu_pool_init(&s, &pool, &a->conv_state, &a->conv_state_indices, p.B))
        return pssm_cpu_oom(c, &s, "causal_conv1d_update");
    /* the math sees the pool as the rows in use, sequence b at its slot */
    p.Bp = pool.nslots;
    p.state_indices = pssm_cpu_pool_indices(&pool);
    const pssm_ref_out out = pssm_cpu_out(&a->out); /* (B,D): the same, its third stride 0 */
    pssm_cpu_pool_load(&pool, &a->conv_state);
    pssm_ref_conv1d_update_run(&p, pool.rows, &out);
    pssm_cpu_pool_store(&pool, &a->conv_state); /* other rows stay untouched, bit for bit */
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}
