/*
 * test_threads.c - the cpu backend's threaded ops (conv1d fwd/bwd, the selective scan's
 * forward, the SSD fwd/bwd) give the same bits for any thread count
 * (cpu_threads.h): each op runs on fresh random inputs with PORTSSM_NUM_THREADS=1 and again
 * with 2, 3 and 8 threads into fresh poisoned outputs, and every output must equal the
 * 1-thread one bit for bit (guards intact).  The shapes are edge shapes (batch 1, odd channel
 * and head counts, head dims not a multiple of 8, lengths not a multiple of any chunk, more
 * threads than rows) large enough that the ops do spread (PSSM_CPU_SPREAD_MIN), with every
 * optional input and output.  cpu only: the other backends have no host threads of this kind.
 *
 * The outputs are F32 while the sums are in double, so a wrong order of the summed gradients
 * could hide in the rounding: the pool itself (cpu_threads.c, linked in) is checked too, with
 * units that finish out of order (every unit runs once, on a valid slot, and the commits come
 * in unit order), and the SSD's rows run through it on the oracle's double arrays (ref.h,
 * linked in) must give the same doubles for every thread count.
 */
#include "harness.h"
#include "cpu_threads.h"
#include "ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 10
static const char *const thread_counts[] = {"2", "3", "8"};

typedef struct run {
    th_tensor *out[MAX_OUT];
    const char *name[MAX_OUT];
    int n;
} run;

static th_tensor *input(th_rng *r, portssm_dtype dt, int nd, const int64_t *shape, double lo,
                        double hi)
{
    th_tensor *t = th_new(th_ctx, dt, nd, shape, NULL);
    th_fill_uniform(t, r, lo, hi);
    return t;
}

/* A poisoned output, recorded in `run` under `name`. */
static portssm_tensor output(run *o, const char *name, portssm_dtype dt, int nd,
                             const int64_t *shape)
{
    th_tensor *t = th_new(th_ctx, dt, nd, shape, NULL);
    th_poison(t);
    assert_true(o->n < MAX_OUT);
    o->out[o->n] = t;
    o->name[o->n++] = name;
    return th_view(t);
}

static void set_threads(const char *n) { assert_int_equal(setenv("PORTSSM_NUM_THREADS", n, 1), 0); }

/* Every output of `got` equals the one of `ref`, bit for bit. */
static void assert_runs_same(run *got, run *ref)
{
    assert_int_equal(got->n, ref->n);
    for (int i = 0; i < got->n; i++) {
        th_assert_guards(got->out[i], got->name[i]);
        th_assert_same(got->out[i], ref->out[i], got->name[i]);
    }
}

/* ---------------------------------------------------------------- causal conv1d */

typedef struct conv_case {
    int64_t B, D, L, W;
    int seq, init, silu;
} conv_case;

static void conv_case_run(const conv_case *c)
{
    th_rng r = th_rng_for(0xc0 + (uint64_t)(c->B * 7 + c->D * 3 + c->L + c->seq));
    const int64_t bdl[3] = {c->B, c->D, c->L}, dw[2] = {c->D, c->W}, d[1] = {c->D};
    const int64_t bds[3] = {c->B, c->D, c->W - 1}, bl[2] = {c->B, c->L};
    th_tensor *x = input(&r, PORTSSM_F32, 3, bdl, -1, 1), *w = input(&r, PORTSSM_F32, 2, dw, -1, 1);
    th_tensor *bias = input(&r, PORTSSM_F32, 1, d, -1, 1), *dout = input(&r, PORTSSM_F32, 3, bdl, -1, 1);
    th_tensor *init = c->init ? input(&r, PORTSSM_F32, 3, bds, -1, 1) : NULL;
    th_tensor *dfin = c->W > 1 ? input(&r, PORTSSM_F32, 3, bds, -1, 1) : NULL;
    th_tensor *seq = NULL;
    if (c->seq) { /* non-decreasing sequence ids: a few sequences per row */
        seq = th_new(th_ctx, PORTSSM_I32, 2, bl, NULL);
        for (int64_t b = 0; b < c->B; b++) {
            int64_t id = 0;
            for (int64_t t = 0; t < c->L; t++) {
                if (t > 0 && th_randint(&r, 0, 9) == 0)
                    id++;
                const int64_t idx[2] = {b, t};
                th_set(seq, idx, (double)id);
            }
        }
        th_upload(seq);
    }
    const portssm_activation act = c->silu ? PORTSSM_ACTIVATION_SILU : PORTSSM_ACTIVATION_NONE;
    run fwd[4], bwd[4];
    memset(fwd, 0, sizeof fwd);
    memset(bwd, 0, sizeof bwd);
    for (int k = 0; k < 4; k++) {
        set_threads(k == 0 ? "1" : thread_counts[k - 1]);
        portssm_causal_conv1d_fwd_args f = {0};
        f.x = th_view(x);
        f.weight = th_view(w);
        f.bias = th_view(bias);
        f.seq_idx = th_view_opt(seq);
        f.initial_states = th_view_opt(init);
        f.out = output(&fwd[k], "out", PORTSSM_F32, 3, bdl);
        f.final_states = c->W > 1 ? output(&fwd[k], "final_states", PORTSSM_F32, 3, bds) : th_absent();
        f.activation = act;
        TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &f));
        portssm_causal_conv1d_bwd_args g = {0};
        g.x = th_view(x);
        g.weight = th_view(w);
        g.bias = th_view(bias);
        g.seq_idx = th_view_opt(seq);
        g.initial_states = th_view_opt(init);
        g.dout = th_view(dout);
        g.dfinal_states = th_view_opt(dfin);
        g.dx = output(&bwd[k], "dx", PORTSSM_F32, 3, bdl);
        g.dweight = output(&bwd[k], "dweight", PORTSSM_F32, 2, dw);
        g.dbias = output(&bwd[k], "dbias", PORTSSM_F32, 1, d);
        g.dinitial_states = c->W > 1 ? output(&bwd[k], "dinitial_states", PORTSSM_F32, 3, bds)
                                     : th_absent();
        g.activation = act;
        TH_CHECK_OP(th_ctx, portssm_causal_conv1d_bwd(th_ctx, &g));
    }
    for (int k = 1; k < 4; k++) {
        assert_runs_same(&fwd[k], &fwd[0]);
        assert_runs_same(&bwd[k], &bwd[0]);
    }
    unsetenv("PORTSSM_NUM_THREADS");
    th_free_all();
}

static void conv_threads(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {1, 1001, 301, 4, 0, 0, 1}, /* batch 1, odd channels */
        {3, 257, 333, 3, 1, 1, 1},  /* seq_idx, initial states */
        {2, 97, 2000, 1, 0, 0, 0},  /* W 1: no states */
        {1, 5, 50000, 4, 0, 1, 1},  /* fewer channels than threads x 2 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_case_run(&cases[i]);
}

/* ---------------------------------------------------------------- Mamba-2 SSD */

typedef struct ssd_case {
    int64_t B, L, H, P, G, N;
    int seq, varlen, d_per_head;
} ssd_case;

static void ssd_case_run(const ssd_case *c)
{
    th_rng r = th_rng_for(0x55d + (uint64_t)(c->L * 5 + c->H * 3 + c->P + c->varlen));
    const int64_t blhp[4] = {c->B, c->L, c->H, c->P}, blh[3] = {c->B, c->L, c->H};
    const int64_t blgn[4] = {c->B, c->L, c->G, c->N}, h[1] = {c->H}, hp[2] = {c->H, c->P};
    const int64_t bhpn[4] = {c->B, c->H, c->P, c->N}, bl[2] = {c->B, c->L};
    th_tensor *x = input(&r, PORTSSM_F32, 4, blhp, -1, 1), *dt = input(&r, PORTSSM_F32, 3, blh, -3, 1);
    th_tensor *A = input(&r, PORTSSM_F32, 1, h, -2, -0.1);
    th_tensor *Bm = input(&r, PORTSSM_F32, 4, blgn, -1, 1), *Cm = input(&r, PORTSSM_F32, 4, blgn, -1, 1);
    th_tensor *D = c->d_per_head ? input(&r, PORTSSM_F32, 1, h, -1, 1)
                                 : input(&r, PORTSSM_F32, 2, hp, -1, 1);
    th_tensor *z = input(&r, PORTSSM_F32, 4, blhp, -2, 2), *dtb = input(&r, PORTSSM_F32, 1, h, -1, 1);
    th_tensor *init = input(&r, PORTSSM_F32, 4, bhpn, -1, 1);
    th_tensor *dout = input(&r, PORTSSM_F32, 4, blhp, -1, 1);
    th_tensor *dfin = input(&r, PORTSSM_F32, 4, bhpn, -1, 1);
    th_tensor *seq = NULL, *cu = NULL;
    int64_t nseq = 0;
    if (c->seq) {
        seq = th_new(th_ctx, PORTSSM_I32, 2, bl, NULL);
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t t = 0, id = 0; t < c->L; t++) {
                id += t > 0 && th_randint(&r, 0, 40) == 0;
                const int64_t idx[2] = {b, t};
                th_set(seq, idx, (double)id);
            }
        th_upload(seq);
    }
    if (c->varlen) { /* B = 1: offsets 0, ..., L with an empty sequence inside */
        const int64_t offs[] = {0, c->L / 3, c->L / 3, c->L - 7, c->L};
        nseq = 4;
        const int64_t n1[1] = {nseq + 1};
        cu = th_new(th_ctx, PORTSSM_I32, 1, n1, NULL);
        for (int64_t k = 0; k <= nseq; k++) {
            const int64_t idx[1] = {k};
            th_set(cu, idx, (double)offs[k]);
        }
        th_upload(cu);
    }
    const int64_t vs[4] = {nseq, c->H, c->P, c->N};
    run fwd[4], bwd[4];
    memset(fwd, 0, sizeof fwd);
    memset(bwd, 0, sizeof bwd);
    for (int k = 0; k < 4; k++) {
        set_threads(k == 0 ? "1" : thread_counts[k - 1]);
        portssm_ssd_chunk_scan_fwd_args f = {0};
        f.x = th_view(x);
        f.dt = th_view(dt);
        f.A = th_view(A);
        f.B = th_view(Bm);
        f.C = th_view(Cm);
        f.D = th_view(D);
        f.z = th_view(z);
        f.dt_bias = th_view(dtb);
        f.initial_states = th_view(init);
        f.seq_idx = th_view_opt(seq);
        f.cu_seqlens = th_view_opt(cu);
        f.out = output(&fwd[k], "out", PORTSSM_F32, 4, blhp);
        f.final_states = output(&fwd[k], "final_states", PORTSSM_F32, 4, bhpn);
        f.varlen_states = c->varlen ? output(&fwd[k], "varlen_states", PORTSSM_F32, 4, vs)
                                    : th_absent();
        f.y = output(&fwd[k], "y", PORTSSM_F32, 4, blhp);
        f.dt_softplus = 1;
        f.dt_limit = 1;
        f.dt_min = 0.001f;
        f.dt_max = 2.0f;
        f.chunk_size = 64;
        TH_CHECK_OP(th_ctx, portssm_ssd_chunk_scan_fwd(th_ctx, &f));
        portssm_ssd_chunk_scan_bwd_args g = {0};
        g.x = f.x;
        g.dt = f.dt;
        g.A = f.A;
        g.B = f.B;
        g.C = f.C;
        g.D = f.D;
        g.z = f.z;
        g.dt_bias = f.dt_bias;
        g.initial_states = f.initial_states;
        g.seq_idx = f.seq_idx;
        g.cu_seqlens = f.cu_seqlens;
        g.dout = th_view(dout);
        g.dfinal_states = th_view(dfin);
        g.dx = output(&bwd[k], "dx", PORTSSM_F32, 4, blhp);
        g.ddt = output(&bwd[k], "ddt", PORTSSM_F32, 3, blh);
        g.dA = output(&bwd[k], "dA", PORTSSM_F32, 1, h);
        g.dB = output(&bwd[k], "dB", PORTSSM_F32, 4, blgn);
        g.dC = output(&bwd[k], "dC", PORTSSM_F32, 4, blgn);
        g.dD = c->d_per_head ? output(&bwd[k], "dD", PORTSSM_F32, 1, h)
                             : output(&bwd[k], "dD", PORTSSM_F32, 2, hp);
        g.dz = output(&bwd[k], "dz", PORTSSM_F32, 4, blhp);
        g.ddt_bias = output(&bwd[k], "ddt_bias", PORTSSM_F32, 1, h);
        g.dinitial_states = output(&bwd[k], "dinitial_states", PORTSSM_F32, 4, bhpn);
        g.dt_softplus = 1;
        g.dt_limit = 1;
        g.dt_min = 0.001f;
        g.dt_max = 2.0f;
        g.chunk_size = 64;
        TH_CHECK_OP(th_ctx, portssm_ssd_chunk_scan_bwd(th_ctx, &g));
    }
    for (int k = 1; k < 4; k++) {
        assert_runs_same(&fwd[k], &fwd[0]);
        assert_runs_same(&bwd[k], &bwd[0]);
    }
    unsetenv("PORTSSM_NUM_THREADS");
    th_free_all();
}

static void ssd_threads(void **state)
{
    (void)state;
    const ssd_case cases[] = {
        {1, 301, 5, 17, 1, 40, 0, 0, 0}, /* batch 1, odd heads, P past a tile, L odd */
        {2, 203, 6, 8, 3, 33, 1, 0, 1},  /* groups, seq_idx, D per head */
        {1, 517, 3, 64, 1, 16, 0, 1, 0}, /* cu_seqlens (an empty sequence), varlen states */
        {3, 131, 2, 5, 2, 64, 0, 0, 0},  /* P below a tile: only the scalar channels */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ssd_case_run(&cases[i]);
}

/* ---------------------------------------------------------------- Mamba-1 scan (forward) */

typedef struct scan_case {
    int64_t B, D, L, N, G; /* G = 0: constant B/C (D,N) */
} scan_case;

static void scan_case_run(const scan_case *c)
{
    th_rng r = th_rng_for(0x5ca + (uint64_t)(c->D * 3 + c->L + c->G));
    const int64_t bdl[3] = {c->B, c->D, c->L}, dn[2] = {c->D, c->N}, d[1] = {c->D};
    const int64_t bgnl[4] = {c->B, c->G, c->N, c->L}, bdn[3] = {c->B, c->D, c->N};
    th_tensor *u = input(&r, PORTSSM_F32, 3, bdl, -1, 1), *delta = input(&r, PORTSSM_F32, 3, bdl, -2, 1);
    th_tensor *A = input(&r, PORTSSM_F32, 2, dn, -2, -0.1);
    th_tensor *Bm = c->G ? input(&r, PORTSSM_F32, 4, bgnl, -1, 1) : input(&r, PORTSSM_F32, 2, dn, -1, 1);
    th_tensor *Cm = c->G ? input(&r, PORTSSM_F32, 4, bgnl, -1, 1) : input(&r, PORTSSM_F32, 2, dn, -1, 1);
    th_tensor *D = input(&r, PORTSSM_F32, 1, d, -1, 1), *z = input(&r, PORTSSM_F32, 3, bdl, -2, 2);
    th_tensor *db = input(&r, PORTSSM_F32, 1, d, -1, 1), *init = input(&r, PORTSSM_F32, 3, bdn, -1, 1);
    run fwd[4];
    memset(fwd, 0, sizeof fwd);
    for (int k = 0; k < 4; k++) {
        set_threads(k == 0 ? "1" : thread_counts[k - 1]);
        portssm_selective_scan_fwd_args f = {0};
        f.u = th_view(u);
        f.delta = th_view(delta);
        f.A = th_view(A);
        f.B = th_view(Bm);
        f.C = th_view(Cm);
        f.D = th_view(D);
        f.z = th_view(z);
        f.delta_bias = th_view(db);
        f.initial_state = th_view(init);
        f.final_state = output(&fwd[k], "final_state", PORTSSM_F32, 3, bdn);
        f.out = output(&fwd[k], "out", PORTSSM_F32, 3, bdl);
        f.delta_softplus = 1;
        TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &f));
    }
    for (int k = 1; k < 4; k++)
        assert_runs_same(&fwd[k], &fwd[0]);
    unsetenv("PORTSSM_NUM_THREADS");
    th_free_all();
}

static void scan_threads(void **state)
{
    (void)state;
    const scan_case cases[] = {
        {1, 301, 333, 16, 1}, /* batch 1, odd channels, variable B/C */
        {2, 6, 2001, 5, 3},   /* groups, fewer channels than threads x 2 */
        {3, 33, 257, 7, 0},   /* constant B/C */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        scan_case_run(&cases[i]);
}

/* ---------------------------------------------------------------- in double
 * The same spread as cpu_ssd.c / cpu_conv1d.c (rows through the pool, the summed gradients
 * committed in row order) on the oracle's double arrays (ref.h): no rounding to F32 can hide
 * a difference here. */

static double *dvals(th_rng *r, int64_t n, double lo, double hi)
{
    double *v = test_malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = th_uniform(r, lo, hi);
    return v;
}

typedef struct ssd_job {
    const pssm_ref_ssd *p;
    const pssm_ref_in *dout, *dfinal;
    const pssm_ref_ssd_grads *g;
    const pssm_ref_out *out, *fin, *y, *none;
    int64_t len, plen;
    double *work, *parts;
} ssd_job;

static void ssd_fwd_row(void *a, int64_t u, int slot, int part)
{
    (void)part;
    const ssd_job *j = a;
    pssm_ref_ssd_fwd_row(j->p, u / j->p->H, u % j->p->H, j->out, j->fin, j->none, j->y, j->none,
                         1, j->work + slot * j->len);
}

static void ssd_bwd_row(void *a, int64_t u, int slot, int part)
{
    const ssd_job *j = a;
    pssm_ref_ssd_bwd_row(j->p, j->dout, j->dfinal, j->g, u / j->p->H, u % j->p->H,
                         j->work + slot * j->len, j->parts + part * j->plen);
}

static void ssd_bwd_commit(void *a, int64_t u, int part)
{
    const ssd_job *j = a;
    pssm_ref_ssd_bwd_commit(j->p, j->g, u / j->p->H, u % j->p->H, j->parts + part * j->plen);
}

static void ssd_rows_double(void **state)
{
    (void)state;
    th_rng r = th_rng_for(0xd0b1e);
    const int64_t B = 2, L = 77, H = 5, P = 13, G = 1, N = 9;
    const int64_t nx = B * L * H * P, nbc = B * L * G * N, ns = B * H * P * N;
    double *x = dvals(&r, nx, -1, 1), *dt = dvals(&r, B * L * H, -2, 1);
    double *A = dvals(&r, H, -2, -0.1), *Bm = dvals(&r, nbc, -1, 1), *Cm = dvals(&r, nbc, -1, 1);
    double *D = dvals(&r, H * P, -1, 1), *z = dvals(&r, nx, -1, 1), *dtb = dvals(&r, H, -1, 1);
    double *init = dvals(&r, ns, -1, 1), *dout = dvals(&r, nx, -1, 1), *dfin = dvals(&r, ns, -1, 1);
    pssm_ref_ssd p;
    memset(&p, 0, sizeof p);
    p.B = B, p.L = L, p.H = H, p.P = P, p.G = G, p.N = N;
    p.x = PSSM_REF_IN(x, B, L, H, P);
    p.dt = PSSM_REF_IN(dt, B, L, H);
    p.A = PSSM_REF_IN(A, H);
    p.Bm = PSSM_REF_IN(Bm, B, L, G, N);
    p.Cm = PSSM_REF_IN(Cm, B, L, G, N);
    p.Dv = PSSM_REF_IN(D, H, P);
    p.z = PSSM_REF_IN(z, B, L, H, P);
    p.dt_bias = PSSM_REF_IN(dtb, H);
    p.initial_states = PSSM_REF_IN(init, B, H, P, N);
    p.softplus = 1;
    const pssm_ref_in vdout = PSSM_REF_IN(dout, B, L, H, P), vdfin = PSSM_REF_IN(dfin, B, H, P, N);
    const pssm_ref_out none = PSSM_REF_OUT(NULL, 1);
    enum { OUTS = 12 };
    const int64_t sizes[OUTS] = {nx, ns, nx, nx, B * L * H, nx, ns, H, nbc, nbc, H * P, H};
    double *ref[OUTS] = {0};
    const int threads[] = {1, 2, 3, 8};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        double *o[OUTS];
        for (int i = 0; i < OUTS; i++)
            o[i] = test_calloc((size_t)sizes[i], sizeof(double));
        const pssm_ref_out out = PSSM_REF_OUT(o[0], B, L, H, P), fin = PSSM_REF_OUT(o[1], B, H, P, N);
        const pssm_ref_out y = PSSM_REF_OUT(o[2], B, L, H, P);
        pssm_ref_ssd_grads g = {PSSM_REF_OUT(o[3], B, L, H, P), PSSM_REF_OUT(o[4], B, L, H), o[7],
                                o[8], o[9], o[10], PSSM_REF_OUT(o[5], B, L, H, P), o[11],
                                PSSM_REF_OUT(o[6], B, H, P, N)};
        const int64_t len = pssm_ref_ssd_bwd_scratch(&p), plen = pssm_ref_ssd_bwd_part(&p);
        assert_true(len >= pssm_ref_ssd_fwd_work(&p));
        ssd_job j = {&p, &vdout, &vdfin, &g, &out, &fin, &y, &none, len, plen,
                     test_malloc((size_t)(len * threads[k]) * sizeof(double)),
                     test_malloc((size_t)(plen * PSSM_CPU_RING(threads[k])) * sizeof(double))};
        pssm_cpu_parallel(B * H, threads[k], ssd_fwd_row, NULL, &j);
        pssm_ref_ssd_bwd_zero(&p, &g);
        pssm_cpu_parallel(B * H, threads[k], ssd_bwd_row, ssd_bwd_commit, &j);
        test_free(j.work);
        test_free(j.parts);
        for (int i = 0; i < OUTS; i++) {
            if (k == 0) {
                ref[i] = o[i];
                continue;
            }
            if (memcmp(o[i], ref[i], (size_t)sizes[i] * sizeof(double)) != 0)
                fail_msg("SSD output %d: %d threads differ from 1 in double", i, threads[k]);
            test_free(o[i]);
        }
    }
    for (int i = 0; i < OUTS; i++)
        test_free(ref[i]);
    double *inputs[] = {x, dt, A, Bm, Cm, D, z, dtb, init, dout, dfin};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        test_free(inputs[i]);
}

/* ---------------------------------------------------------------- the pool itself */

typedef struct pool_job {
    int64_t units;
    int threads;
    int64_t *ran;    /* per unit: times run (each unit writes only its own) */
    int *bad_slot;   /* per unit: ran on a slot outside [0, threads)       */
    int64_t *log;    /* the commits in the order they came                  */
    int *part;       /* per unit: the part slot it filled                   */
    int commit;      /* commits are on                                      */
    int busy[2 * PSSM_CPU_MAX_THREADS]; /* per part slot: holds an uncommitted unit */
    int64_t nlog;
} pool_job;

static void pool_unit(void *arg, int64_t u, int slot, int part)
{
    pool_job *j = arg;
    j->ran[u]++;
    j->bad_slot[u] |= slot < 0 || slot >= j->threads || part < 0 ||
                      part >= PSSM_CPU_RING(j->threads);
    if (!j->bad_slot[u]) { /* the part slot must not hold a unit not yet committed */
        j->bad_slot[u] |= j->busy[part];
        j->busy[part] = j->commit;
    }
    j->part[u] = part;
    volatile uint64_t spin = 0; /* uneven work, so that later units often finish first */
    for (uint64_t i = 0; i < (uint64_t)((u * 7919) % 13) * 20000u; i++)
        spin += i;
}

static void pool_commit(void *arg, int64_t u, int part)
{
    pool_job *j = arg;
    assert_true(j->ran[u] == 1);      /* after its unit */
    assert_int_equal(part, j->part[u]); /* with the part slot its unit filled */
    j->busy[part] = 0;
    j->log[j->nlog++] = u;
}

static void pool_order(void **state)
{
    (void)state;
    const int threads[] = {1, 2, 3, 8, 64};
    const int64_t units[] = {1, 2, 5, 100};
    for (size_t a = 0; a < sizeof threads / sizeof threads[0]; a++)
        for (size_t b = 0; b < sizeof units / sizeof units[0]; b++)
            for (int with_commit = 0; with_commit < 2; with_commit++) {
                const int64_t n = units[b];
                pool_job j = {n, threads[a], calloc((size_t)n, sizeof(int64_t)),
                              calloc((size_t)n, sizeof(int)), calloc((size_t)n, sizeof(int64_t)),
                              calloc((size_t)n, sizeof(int)), with_commit, {0}, 0};
                assert_non_null(j.ran);
                assert_non_null(j.bad_slot);
                assert_non_null(j.log);
                pssm_cpu_parallel(n, threads[a], pool_unit, with_commit ? pool_commit : NULL, &j);
                for (int64_t u = 0; u < n; u++) {
                    assert_int_equal(j.ran[u], 1);
                    assert_int_equal(j.bad_slot[u], 0);
                    if (with_commit)
                        assert_int_equal(j.log[u], u);
                }
                assert_int_equal(j.nlog, with_commit ? n : 0);
                free(j.ran);
                free(j.bad_slot);
                free(j.log);
                free(j.part);
            }
}

/* PORTSSM_NUM_THREADS: a count is taken (capped), anything else gives the default; small work
 * and single units stay on one thread. */
static void thread_count_rule(void **state)
{
    (void)state;
    set_threads("5");
    assert_int_equal(pssm_cpu_num_threads(), 5);
    assert_int_equal(pssm_cpu_threads_for(100, 1e9), 5);
    assert_int_equal(pssm_cpu_threads_for(3, 1e9), 3);             /* no more threads than units */
    assert_int_equal(pssm_cpu_threads_for(1, 1e9), 1);
    assert_int_equal(pssm_cpu_threads_for(100, PSSM_CPU_SPREAD_MIN / 2), 1); /* tiny work */
    set_threads("100000");
    assert_int_equal(pssm_cpu_num_threads(), PSSM_CPU_MAX_THREADS);
    set_threads("1");
    assert_int_equal(pssm_cpu_threads_for(100, 1e9), 1);
    unsetenv("PORTSSM_NUM_THREADS");
    const int dflt = pssm_cpu_num_threads();
    assert_true(dflt >= 1 && dflt <= PSSM_CPU_MAX_THREADS);
    const char *junk[] = {"0", "-2", "abc", "3x", ""};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        set_threads(junk[i]);
        assert_int_equal(pssm_cpu_num_threads(), dflt);
    }
    unsetenv("PORTSSM_NUM_THREADS");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_order),
        cmocka_unit_test(ssd_rows_double),
        cmocka_unit_test(thread_count_rule),
        cmocka_unit_test(conv_threads),
        cmocka_unit_test(scan_threads),
        cmocka_unit_test(ssd_threads),
    };
    return th_main(argc, argv, "test_threads", tests, sizeof tests / sizeof tests[0]);
}
