/*
 * cpu_ssd.c - the Mamba-2 SSD ops of the cpu backend: ref_ssd.c reads the inputs where they lie
 * and writes each output element once, its (batch, head) rows spread over threads
 * (cpu_threads.h; the summed gradients committed in row order, so the results do not depend on
 * the thread count).  Scratch (each thread's row scratch, the gradients summed over heads and
 * rows) is allocated and cu_seqlens checked before anything is written, so a failure writes
 * nothing.  Host memory lets this backend check cu_seqlens' values, which the
 * GPU backends cannot read without waiting for the device.
 */
#include "cpu_io.h"
#include "cpu_ops.h"
#include "cpu_threads.h"
#include "ref.h"
#include "../../src/size_math.h"

typedef struct ssd_inputs {
    const portssm_tensor *x, *dt, *A, *B, *C, *D, *z, *dt_bias, *init, *seq_idx, *cu;
    int32_t softplus, limit;
    float dt_min, dt_max;
} ssd_inputs;
/* The inputs of either op's args (the bwd's args name them as the fwd's do). */
#define SSD_INPUTS_OF(a)                                                                      \
    {&(a)->x, &(a)->dt, &(a)->A, &(a)->B, &(a)->C, &(a)->D, &(a)->z, &(a)->dt_bias,            \
     &(a)->initial_states, &(a)->seq_idx, &(a)->cu_seqlens, (a)->dt_softplus, (a)->dt_limit,  \
     (a)->dt_min, (a)->dt_max}

static void load(const ssd_inputs *in, pssm_ref_ssd *p)
{
    p->B = in->x->shape[0];
    p->L = in->x->shape[1];
    p->H = in->x->shape[2];
    p->P = in->x->shape[3];
    p->G = in->B->shape[2];
    p->N = in->B->shape[3];
    p->x = pssm_cpu_in(in->x);
    p->dt = pssm_cpu_in(in->dt);
    p->A = pssm_cpu_in(in->A);
    p->Bm = pssm_cpu_in(in->B);
    p->Cm = pssm_cpu_in(in->C);
    p->Dv = pssm_cpu_in(in->D);
    p->D_per_head = in->D->data && in->D->ndim == 1;
    p->z = pssm_cpu_in(in->z);
    p->dt_bias = pssm_cpu_in(in->dt_bias);
    p->initial_states = pssm_cpu_in(in->init);
    p->seq_idx = pssm_cpu_in(in->seq_idx);
    p->cu_seqlens = pssm_cpu_in(in->cu);
    p->nseq = in->cu->data ? in->cu->shape[0] - 1 : 0;
    p->softplus = in->softplus != 0;
    p->limit = in->limit != 0;
    p->dt_min = in->dt_min;
    p->dt_max = in->dt_max;
}

/* cu_seqlens must run from 0 to L without going down.  Its ends first, and the walk only where
 * its entries can differ: a broadcast cu_seqlens (stride 0) may have any number of entries in
 * a few bytes (fuzz_api: 2^40 of them, minutes of walk). */
static portssm_status check_offsets(pssm_bctx *c, const char *op, const pssm_ref_ssd *p)
{
    if (!p->cu_seqlens.data)
        return PORTSSM_OK;
    const int64_t ends[2] = {0, p->nseq}, walk = p->cu_seqlens.st[0] != 0;
    for (int e = 0; e < 2; e++) {
        const int64_t k = ends[e];
        const int32_t v = (int32_t)pssm_ref_index(&p->cu_seqlens, k, 0, 0, 0);
        if (v != (k == 0 ? 0 : p->L))
            return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT,
                             "%s: 'cu_seqlens' must run from 0 to L = %lld without decreasing; "
                             "cu_seqlens[%lld] = %d",
                             op, (long long)p->L, (long long)k, (int)v);
    }
    for (int64_t k = 0; walk && k <= p->nseq; k++) {
        const int32_t v = (int32_t)pssm_ref_index(&p->cu_seqlens, k, 0, 0, 0), want_first = 0;
        const int bad = (k == 0 && v != want_first) || (k == p->nseq && v != p->L) ||
                        (k > 0 && v < pssm_ref_index(&p->cu_seqlens, k - 1, 0, 0, 0));
        if (bad)
            return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT,
                             "%s: 'cu_seqlens' must run from 0 to L = %lld without decreasing; "
                             "cu_seqlens[%lld] = %d",
                             op, (long long)p->L, (long long)k, (int)v);
    }
    return PORTSSM_OK;
}

/* Roughly the multiply-adds of one row: the spread rule's cost. */
static double row_cost(const pssm_ref_ssd *p) { return (double)p->L * p->P * p->N; }

typedef struct fwd_job {
    const pssm_ref_ssd *p;
    const pssm_ref_out *out, *fin, *var, *y, *ckpt;
    int64_t T, work_len;
    double *work; /* per thread slot */
} fwd_job;

static void fwd_row(void *arg, int64_t u, int slot, int part)
{
    (void)part;
    const fwd_job *j = arg;
    pssm_ref_ssd_fwd_row(j->p, u / j->p->H, u % j->p->H, j->out, j->fin, j->var, j->y, j->ckpt,
                         j->T, j->work + slot * j->work_len);
}

portssm_status pssm_cpu_ssd_chunk_scan_fwd(pssm_bctx *c, const portssm_ssd_chunk_scan_fwd_args *a)
{
    pssm_cpu_scratch s = {0};
    const ssd_inputs in = SSD_INPUTS_OF(a);
    pssm_ref_ssd p;
    load(&in, &p);
    const pssm_ref_out out = pssm_cpu_out(&a->out), fin = pssm_cpu_out(&a->final_states);
    const pssm_ref_out var = pssm_cpu_out(&a->varlen_states), y = pssm_cpu_out(&a->y);
    const pssm_ref_out ckpt = pssm_cpu_out(&a->checkpoints);
    const int64_t rows = p.B * p.H;
    const int threads = pssm_cpu_threads_for(rows, row_cost(&p) * (double)rows);
    const int64_t len = pssm_ref_ssd_fwd_work(&p);
    double *work = pssm_cpu_alloc(&s, pssm_size_mul(len, threads), sizeof(double)); /* -1 fails */
    if (s.failed)
        return pssm_cpu_oom(c, &s, "ssd_chunk_scan_fwd");
    portssm_status st = check_offsets(c, "ssd_chunk_scan_fwd", &p);
    if (st == PORTSSM_OK) {
        fwd_job j = {&p, &out, &fin, &var, &y, &ckpt,
                     pssm_ssd_chunk(a->chunk_size, a->x.dtype), len, work};
        pssm_ref_ssd_fwd_prepare(&p, &var);
        pssm_cpu_parallel(rows, threads, fwd_row, NULL, &j);
    }
    pssm_cpu_release(&s);
    return st;
}

typedef struct bwd_job {
    const pssm_ref_ssd *p;
    const pssm_ref_in *dout, *dfinal;
    const pssm_ref_ssd_grads *g;
    int64_t work_len, part_len;
    double *work, *parts; /* per thread slot; per part slot */
} bwd_job;

static void bwd_row(void *arg, int64_t u, int slot, int part)
{
    const bwd_job *j = arg;
    pssm_ref_ssd_bwd_row(j->p, j->dout, j->dfinal, j->g, u / j->p->H, u % j->p->H,
                         j->work + slot * j->work_len, j->parts + part * j->part_len);
}

static void bwd_commit(void *arg, int64_t u, int part)
{
    const bwd_job *j = arg;
    pssm_ref_ssd_bwd_commit(j->p, j->g, u / j->p->H, u % j->p->H,
                            j->parts + part * j->part_len);
}

portssm_status pssm_cpu_ssd_chunk_scan_bwd(pssm_bctx *c, const portssm_ssd_chunk_scan_bwd_args *a)
{
    pssm_cpu_scratch s = {0};
    const ssd_inputs in = SSD_INPUTS_OF(a);
    pssm_ref_ssd p;
    load(&in, &p);
    const pssm_ref_in dout = pssm_cpu_in(&a->dout), dfinal = pssm_cpu_in(&a->dfinal_states);
    pssm_ref_ssd_grads g;
    g.dx = pssm_cpu_out(&a->dx);
    g.ddt = pssm_cpu_out(&a->ddt);
    g.dz = pssm_cpu_out(&a->dz);
    g.dinitial_states = pssm_cpu_out(&a->dinitial_states);
    g.dA = pssm_cpu_sum(&s, &a->dA);
    g.dB = pssm_cpu_sum(&s, &a->dB);
    g.dC = pssm_cpu_sum(&s, &a->dC);
    g.dD = pssm_cpu_sum(&s, &a->dD);
    g.ddt_bias = pssm_cpu_sum(&s, &a->ddt_bias);
    const int64_t rows = p.B * p.H;
    const int threads = pssm_cpu_threads_for(rows, 3.0 * row_cost(&p) * (double)rows);
    const int64_t len = pssm_ref_ssd_bwd_scratch(&p), plen = pssm_ref_ssd_bwd_part(&p);
    double *work = pssm_cpu_alloc(&s, pssm_size_mul(len, threads), sizeof(double));
    double *parts = pssm_cpu_alloc(&s, pssm_size_mul(plen, PSSM_CPU_RING(threads)),
                                   sizeof(double));
    if (s.failed)
        return pssm_cpu_oom(c, &s, "ssd_chunk_scan_bwd");
    portssm_status st = check_offsets(c, "ssd_chunk_scan_bwd", &p);
    if (st != PORTSSM_OK) {
        pssm_cpu_release(&s);
        return st;
    }
    bwd_job j = {&p, &dout, &dfinal, &g, len, plen, work, parts};
    pssm_ref_ssd_bwd_zero(&p, &g);
    pssm_cpu_parallel(rows, threads, bwd_row, bwd_commit, &j);
    const portssm_tensor *sums[5] = {&a->dA, &a->dB, &a->dC, &a->dD, &a->ddt_bias};
    double *vals[5] = {g.dA, g.dB, g.dC, g.dD, g.ddt_bias};
    for (int i = 0; i < 5; i++)
        pssm_cpu_store(sums[i], vals[i]);
    pssm_cpu_release(&s);
    return PORTSSM_OK;
}
