/*
 * test_backward.c - what the backward ops share, on the backend under test: the workspace
 * (the size query, a caller's workspace, the context's own, every way to pass a bad one),
 * bitwise determinism over ten runs, and on GPU backends a CUDA/HIP graph of forward and
 * backward replayed against the same calls run eagerly, and the refusal to grow the context's
 * workspace while a stream is being captured.  The values themselves are checked against the
 * oracle by test_conv1d and test_scan.
 */
#include "harness.h"
#include "vendor_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT_HAS(msg, part)                                                                   \
    do {                                                                                        \
        if (!strstr((msg), (part)))                                                             \
            fail_msg("message '%s' lacks '%s'", (msg), (part));                                 \
    } while (0)

/* ---------------------------------------------------------------- the problems */

/* A scan backward with several channel blocks per group, several checkpoint chunks, variable
 * B/C in two groups and every optional input and gradient. */
enum { B_ = 2, D_ = 160, L_ = 300, N_ = 16, G_ = 2 };

typedef struct scan_problem {
    th_tensor *u, *delta, *A, *Bm, *Cm, *Dv, *z, *bias, *init, *dout, *dfinal;
    th_tensor *out, *ck; /* the forward's */
    th_tensor *du, *ddelta, *dA, *dB, *dC, *dD, *dz, *dbias, *dinit;
    th_tensor *grads[9]; /* du .. dinit */
} scan_problem;

static void scan_problem_make(scan_problem *p, th_rng *r)
{
    const int64_t x[3] = {B_, D_, L_}, dn[2] = {D_, N_}, d[1] = {D_}, s[3] = {B_, D_, N_};
    const int64_t bc[4] = {B_, G_, N_, L_}, ck[4] = {B_, D_, (L_ - 1) / 128, N_};
    const portssm_dtype act = PORTSSM_BF16;
    th_tensor **in[] = {&p->u, &p->dout};
    for (int i = 0; i < 2; i++) {
        *in[i] = th_new(th_ctx, act, 3, x, NULL);
        th_fill_uniform(*in[i], r, -1, 1);
    }
    p->delta = th_new(th_ctx, act, 3, x, NULL);
    th_fill_uniform(p->delta, r, -3, 1);
    p->z = th_new(th_ctx, act, 3, x, NULL);
    th_fill_uniform(p->z, r, -2, 2);
    p->A = th_new(th_ctx, PORTSSM_F32, 2, dn, NULL);
    th_fill_uniform(p->A, r, -8, -0.5);
    p->Bm = th_new(th_ctx, act, 4, bc, NULL);
    th_fill_uniform(p->Bm, r, -1, 1);
    p->Cm = th_new(th_ctx, act, 4, bc, NULL);
    th_fill_uniform(p->Cm, r, -1, 1);
    p->Dv = th_new(th_ctx, PORTSSM_F32, 1, d, NULL);
    th_fill_uniform(p->Dv, r, -1, 1);
    p->bias = th_new(th_ctx, PORTSSM_F32, 1, d, NULL);
    th_fill_uniform(p->bias, r, -0.5, 0.5);
    p->init = th_new(th_ctx, PORTSSM_F32, 3, s, NULL);
    th_fill_uniform(p->init, r, -1, 1);
    p->dfinal = th_new(th_ctx, PORTSSM_F32, 3, s, NULL);
    th_fill_uniform(p->dfinal, r, -1, 1);
    p->out = th_new(th_ctx, act, 3, x, NULL);
    p->ck = th_new(th_ctx, PORTSSM_F32, 4, ck, NULL);
    p->du = th_new(th_ctx, act, 3, x, NULL);
    p->ddelta = th_new(th_ctx, act, 3, x, NULL);
    p->dz = th_new(th_ctx, act, 3, x, NULL);
    p->dA = th_new(th_ctx, PORTSSM_F32, 2, dn, NULL);
    p->dB = th_new(th_ctx, act, 4, bc, NULL);
    p->dC = th_new(th_ctx, act, 4, bc, NULL);
    p->dD = th_new(th_ctx, PORTSSM_F32, 1, d, NULL);
    p->dbias = th_new(th_ctx, PORTSSM_F32, 1, d, NULL);
    p->dinit = th_new(th_ctx, PORTSSM_F32, 3, s, NULL);
    th_tensor *g[9] = {p->du, p->ddelta, p->dz, p->dA, p->dB, p->dC, p->dD, p->dbias, p->dinit};
    memcpy(p->grads, g, sizeof g);
}

static void scan_poison(scan_problem *p)
{
    th_poison(p->out);
    th_poison(p->ck);
    for (int i = 0; i < 9; i++)
        th_poison(p->grads[i]);
}

static portssm_selective_scan_fwd_args scan_fwd_args(const scan_problem *p)
{
    portssm_selective_scan_fwd_args a;
    memset(&a, 0, sizeof a);
    a.u = th_view(p->u);
    a.delta = th_view(p->delta);
    a.A = th_view(p->A);
    a.B = th_view(p->Bm);
    a.C = th_view(p->Cm);
    a.D = th_view(p->Dv);
    a.z = th_view(p->z);
    a.delta_bias = th_view(p->bias);
    a.initial_state = th_view(p->init);
    a.out = th_view(p->out);
    a.checkpoints = th_view(p->ck);
    a.delta_softplus = 1;
    return a;
}

static portssm_selective_scan_bwd_args scan_bwd_args(const scan_problem *p, int with_ck)
{
    portssm_selective_scan_bwd_args a;
    memset(&a, 0, sizeof a);
    a.u = th_view(p->u);
    a.delta = th_view(p->delta);
    a.A = th_view(p->A);
    a.B = th_view(p->Bm);
    a.C = th_view(p->Cm);
    a.D = th_view(p->Dv);
    a.z = th_view(p->z);
    a.delta_bias = th_view(p->bias);
    a.initial_state = th_view(p->init);
    a.dout = th_view(p->dout);
    a.dfinal_state = th_view(p->dfinal);
    a.du = th_view(p->du);
    a.ddelta = th_view(p->ddelta);
    a.dA = th_view(p->dA);
    a.dB = th_view(p->dB);
    a.dC = th_view(p->dC);
    a.dD = th_view(p->dD);
    a.dz = th_view(p->dz);
    a.ddelta_bias = th_view(p->dbias);
    a.dinitial_state = th_view(p->dinit);
    a.checkpoints = with_ck ? th_view(p->ck) : th_absent();
    a.delta_softplus = 1;
    return a;
}

/* A conv backward on the generic path (seq_idx) with several blocks per reduction. */
enum { CB_ = 3, CD_ = 40, CL_ = 700, CW_ = 4 };

typedef struct conv_problem {
    th_tensor *x, *w, *bias, *seq, *init, *dout, *dfinal;
    th_tensor *dx, *dw, *dbias, *dinit;
} conv_problem;

static void conv_problem_make(conv_problem *p, th_rng *r)
{
    const int64_t x[3] = {CB_, CD_, CL_}, w[2] = {CD_, CW_}, d[1] = {CD_}, s[3] = {CB_, CD_, CW_ - 1};
    const int64_t bl[2] = {CB_, CL_};
    p->x = th_new(th_ctx, PORTSSM_F32, 3, x, NULL);
    th_fill_uniform(p->x, r, -1, 1);
    p->dout = th_new(th_ctx, PORTSSM_F32, 3, x, NULL);
    th_fill_uniform(p->dout, r, -1, 1);
    p->w = th_new(th_ctx, PORTSSM_F32, 2, w, NULL);
    th_fill_uniform(p->w, r, -1, 1);
    p->bias = th_new(th_ctx, PORTSSM_F32, 1, d, NULL);
    th_fill_uniform(p->bias, r, -1, 1);
    p->seq = th_new(th_ctx, PORTSSM_I32, 2, bl, NULL);
    th_fill_int(p->seq, r, 0, 0);
    int64_t idx[2];
    for (idx[0] = 0; idx[0] < CB_; idx[0]++) /* three sequences per row */
        for (idx[1] = 0; idx[1] < CL_; idx[1]++)
            th_set(p->seq, idx, (double)(idx[1] * 3 / CL_));
    th_upload(p->seq);
    p->init = th_new(th_ctx, PORTSSM_F32, 3, s, NULL);
    th_fill_uniform(p->init, r, -1, 1);
    p->dfinal = th_new(th_ctx, PORTSSM_F32, 3, s, NULL);
    th_fill_uniform(p->dfinal, r, -1, 1);
    p->dx = th_new(th_ctx, PORTSSM_F32, 3, x, NULL);
    p->dw = th_new(th_ctx, PORTSSM_F32, 2, w, NULL);
    p->dbias = th_new(th_ctx, PORTSSM_F32, 1, d, NULL);
    p->dinit = th_new(th_ctx, PORTSSM_F32, 3, s, NULL);
}

static portssm_causal_conv1d_bwd_args conv_bwd_args(const conv_problem *p)
{
    portssm_causal_conv1d_bwd_args a;
    memset(&a, 0, sizeof a);
    a.x = th_view(p->x);
    a.weight = th_view(p->w);
    a.bias = th_view(p->bias);
    a.seq_idx = th_view(p->seq);
    a.initial_states = th_view(p->init);
    a.dout = th_view(p->dout);
    a.dfinal_states = th_view(p->dfinal);
    a.dx = th_view(p->dx);
    a.dweight = th_view(p->dw);
    a.dbias = th_view(p->dbias);
    a.dinitial_states = th_view(p->dinit);
    a.activation = PORTSSM_ACTIVATION_SILU;
    return a;
}

/* Every output equals its twin of a reference run, bit for bit. */
static void assert_same_all(th_tensor **got, th_tensor **ref, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s, output %d", what, i);
        th_assert_same(got[i], ref[i], name);
    }
}

/* A copy of t's device contents in a new tensor on the same context (for reference runs). */
static th_tensor *keep(th_tensor *t)
{
    th_download(t);
    th_tensor *k = th_twin(th_ctx, t);
    return k;
}

/* ---------------------------------------------------------------- workspace */

static void test_workspace_query(void **state)
{
    (void)state;
    th_rng r = th_rng_for(1);
    scan_problem p;
    scan_problem_make(&p, &r);
    portssm_selective_scan_bwd_args a = scan_bwd_args(&p, 0);
    size_t need = 1, need_ck = 1;
    TH_CHECK_OP(th_ctx, portssm_selective_scan_bwd_workspace_size(th_ctx, &a, &need));
    portssm_selective_scan_bwd_args b = scan_bwd_args(&p, 1);
    assert_int_equal(portssm_selective_scan_bwd_workspace_size(th_ctx, &b, &need_ck), PORTSSM_OK);
    if (th_is_oracle()) { /* the cpu backend keeps its scratch on the host */
        assert_true(need == 0 && need_ck == 0);
    } else {
        assert_true(need > 0);
        assert_true(need_ck < need); /* given checkpoints are not recomputed into it */
    }
    /* the query ignores the workspace field and validates like the op */
    a.workspace.data = (void *)1;
    assert_int_equal(portssm_selective_scan_bwd_workspace_size(th_ctx, &a, &need), PORTSSM_OK);
    a.du.shape[2] = L_ + 1;
    const size_t before = need;
    assert_int_equal(portssm_selective_scan_bwd_workspace_size(th_ctx, &a, &need),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'du'");
    assert_int_equal(need, before); /* a failed query leaves *bytes alone */
    assert_int_equal(portssm_selective_scan_bwd_workspace_size(th_ctx, &a, NULL),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(portssm_selective_scan_bwd_workspace_size(th_ctx, NULL, &need),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(portssm_selective_scan_bwd_workspace_size(NULL, &b, &need),
                     PORTSSM_ERR_INVALID_ARGUMENT);

    conv_problem q;
    conv_problem_make(&q, &r);
    portssm_causal_conv1d_bwd_args c = conv_bwd_args(&q);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_bwd_workspace_size(th_ctx, &c, &need));
    assert_true(th_is_oracle() ? need == 0 : need > 0);

    /* the checkpoints' shape: K = (L-1) / 128, absent below */
    portssm_selective_scan_fwd_args f = scan_fwd_args(&p);
    int64_t shape[4] = {0, 0, 0, 0};
    assert_int_equal(portssm_selective_scan_checkpoint_shape(th_ctx, &f, shape), PORTSSM_OK);
    assert_true(shape[0] == B_ && shape[1] == D_ && shape[2] == (L_ - 1) / 128 && shape[3] == N_);
    assert_int_equal(portssm_selective_scan_checkpoint_shape(th_ctx, &f, NULL),
                     PORTSSM_ERR_INVALID_ARGUMENT);
}

/* The caller's workspace, filled with noise, gives the same bits as the context's own; every bad
 * workspace is refused, naming it, with every output untouched. */
static void test_caller_workspace(void **state)
{
    (void)state;
    th_rng r = th_rng_for(2);
    scan_problem p;
    scan_problem_make(&p, &r);
    portssm_selective_scan_bwd_args a = scan_bwd_args(&p, 0);
    size_t need = 0;
    TH_CHECK_OP(th_ctx, portssm_selective_scan_bwd_workspace_size(th_ctx, &a, &need));
    scan_poison(&p);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_bwd(th_ctx, &a)); /* the context's own */
    th_tensor *ref[9], **outs = p.grads;
    for (int i = 0; i < 9; i++)
        ref[i] = keep(outs[i]);

    /* a workspace of exactly the bytes asked for, 256-aligned, full of noise */
    const int64_t words = (int64_t)(need / 4) + 64 + 1;
    th_tensor *ws = th_new(th_ctx, PORTSSM_I32, 1, (int64_t[]){words}, NULL);
    th_fill_int(ws, &r, INT32_MIN, INT32_MAX);
    char *base = (char *)th_view(ws).data;
    char *aligned = base + (256 - (uintptr_t)base % 256) % 256;
    scan_poison(&p);
    a.workspace.data = need ? aligned : NULL;
    a.workspace.bytes = need;
    assert_int_equal(portssm_selective_scan_bwd(th_ctx, &a), PORTSSM_OK);
    assert_same_all(outs, ref, 9, "caller's workspace vs the context's");
    if (need == 0)
        return; /* the oracle takes none: nothing below applies */

    /* A in memory of its own (256-aligned): a workspace there overlaps an input */
    void *abuf = NULL;
    assert_int_equal(portssm_malloc(th_ctx, &abuf, 4 * D_ * N_ + need), PORTSSM_OK);
    assert_int_equal(portssm_memcpy(th_ctx, abuf, th_view(p.A).data, 4 * D_ * N_,
                                    PORTSSM_DEVICE_TO_DEVICE),
                     PORTSSM_OK);
    a.A = portssm_tensor_contiguous(abuf, PORTSSM_F32, 2, (int64_t[]){D_, N_});
    /* too small, misaligned, size without data, overlapping an input: refused, nothing written */
    struct {
        void *data;
        size_t bytes;
        const char *says;
    } bad[] = {
        {aligned, need - 1, "need"},
        {aligned + 16, need, "aligned"},
        {NULL, need, "data NULL"},
        {abuf, need, "overlaps input 'A'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        scan_poison(&p);
        th_snapshot snaps[9];
        for (int i = 0; i < 9; i++)
            snaps[i] = th_snap(outs[i]);
        a.workspace.data = bad[k].data;
        a.workspace.bytes = bad[k].bytes;
        assert_int_equal(portssm_selective_scan_bwd(th_ctx, &a), PORTSSM_ERR_INVALID_ARGUMENT);
        ASSERT_HAS(portssm_last_error(th_ctx), "'workspace'");
        ASSERT_HAS(portssm_last_error(th_ctx), bad[k].says);
        for (int i = 0; i < 9; i++)
            if (!th_unchanged(outs[i], &snaps[i]))
                fail_msg("a refused workspace (%s) wrote output %d", bad[k].says, i);
    }
    assert_int_equal(portssm_free(th_ctx, abuf), PORTSSM_OK);
}

/* ---------------------------------------------------------------- determinism */

#define RUNS 10

static void test_scan_bwd_deterministic(void **state)
{
    (void)state;
    th_rng r = th_rng_for(3);
    scan_problem p;
    scan_problem_make(&p, &r);
    th_tensor **outs = p.grads, *ref[9];
    for (int run = 0; run < RUNS; run++) {
        portssm_selective_scan_bwd_args a = scan_bwd_args(&p, run % 2); /* with and without */
        scan_poison(&p);
        if (run % 2) { /* the checkpoints of this run's forward */
            portssm_selective_scan_fwd_args f = scan_fwd_args(&p);
            TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &f));
        }
        TH_CHECK_OP(th_ctx, portssm_selective_scan_bwd(th_ctx, &a));
        if (run == 0) {
            for (int i = 0; i < 9; i++)
                ref[i] = keep(outs[i]);
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "selective_scan_bwd run %d vs run 0", run);
        if (run % 2 == 0)
            assert_same_all(outs, ref, 9, what);
        else /* from checkpoints: the same function, equal to rounding (test_scan checks it) */
            for (int i = 0; i < 9; i++)
                th_assert_close(outs[i], ref[i], th_tol_for(outs[i]->dtype), what);
    }
}

static void test_conv_bwd_deterministic(void **state)
{
    (void)state;
    th_rng r = th_rng_for(4);
    conv_problem p;
    conv_problem_make(&p, &r);
    th_tensor *outs[4] = {p.dx, p.dw, p.dbias, p.dinit}, *ref[4];
    portssm_causal_conv1d_bwd_args a = conv_bwd_args(&p);
    for (int run = 0; run < RUNS; run++) {
        for (int i = 0; i < 4; i++)
            th_poison(outs[i]);
        TH_CHECK_OP(th_ctx, portssm_causal_conv1d_bwd(th_ctx, &a));
        if (run == 0) {
            for (int i = 0; i < 4; i++)
                ref[i] = keep(outs[i]);
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "causal_conv1d_bwd run %d vs run 0", run);
        assert_same_all(outs, ref, 4, what);
    }
}

/* ---------------------------------------------------------------- graphs */

typedef struct graph_env {
    vs_vendor *v;
    void *stream;
} graph_env;

/* A vendor stream on the device, set on th_ctx; skips where the backend has no graphs. */
static graph_env graph_open(void)
{
    graph_env e = {NULL, NULL};
    portssm_backend be = portssm_get_backend(th_ctx);
    if (be != PORTSSM_BACKEND_CUDA && be != PORTSSM_BACKEND_HIP)
        th_skip_test("skipped: the %s backend runs synchronously and has no graphs",
                     th_backend_label);
    char why[256];
    e.v = vs_open(be, portssm_get_device(th_ctx), why, sizeof why);
    if (!e.v)
        fail_msg("the %s backend runs but its driver cannot be opened here: %s",
                 th_backend_label, why);
    if (!vs_has_graphs(e.v)) {
        vs_close(e.v);
        th_skip_test("skipped: this driver has no graph API");
    }
    e.stream = vs_stream_create(e.v, why, sizeof why);
    if (!e.stream)
        fail_msg("%s", why);
    assert_int_equal(portssm_set_stream(th_ctx, e.stream), PORTSSM_OK);
    return e;
}

static void graph_close(graph_env *e)
{
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
    assert_int_equal(portssm_set_stream(th_ctx, NULL), PORTSSM_OK);
    vs_stream_destroy(e->v, e->stream);
    vs_close(e->v);
}

/* scan fwd (with checkpoints), scan bwd from them, conv bwd: the training step's kernels. */
static portssm_status step(scan_problem *p, conv_problem *q)
{
    portssm_selective_scan_fwd_args f = scan_fwd_args(p);
    portssm_selective_scan_bwd_args b = scan_bwd_args(p, 1);
    portssm_causal_conv1d_bwd_args c = conv_bwd_args(q);
    portssm_status s = portssm_selective_scan_fwd(th_ctx, &f);
    if (s == PORTSSM_OK)
        s = portssm_selective_scan_bwd(th_ctx, &b);
    if (s == PORTSSM_OK)
        s = portssm_causal_conv1d_bwd(th_ctx, &c);
    return s;
}

static void test_graph_replay(void **state)
{
    (void)state;
    graph_env e = graph_open();
    th_rng r = th_rng_for(5);
    scan_problem p;
    conv_problem q;
    scan_problem_make(&p, &r);
    conv_problem_make(&q, &r);
    th_tensor *outs[15], *ref[15];
    int n = 0;
    outs[n++] = p.out;
    outs[n++] = p.ck;
    for (int i = 0; i < 9; i++)
        outs[n++] = p.grads[i];
    th_tensor *co[4] = {q.dx, q.dw, q.dbias, q.dinit};
    for (int i = 0; i < 4; i++)
        outs[n++] = co[i];

    for (int i = 0; i < n; i++)
        th_poison(outs[i]);
    assert_int_equal(step(&p, &q), PORTSSM_OK); /* eager; grows the context's workspace */
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
    for (int i = 0; i < n; i++)
        ref[i] = keep(outs[i]);

    for (int i = 0; i < n; i++)
        th_poison(outs[i]);
    assert_int_equal(vs_capture_begin(e.v, e.stream), 0);
    portssm_status s = step(&p, &q);
    void *graph = vs_capture_end(e.v, e.stream);
    assert_int_equal(s, PORTSSM_OK);
    assert_non_null(graph);
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(vs_graph_launch(e.v, graph, e.stream), 0);
        assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
        assert_same_all(outs, ref, n, "graph replay vs eager");
        for (int i = 0; i < n; i++)
            th_poison(outs[i]);
    }
    vs_graph_destroy(e.v, graph);
    graph_close(&e);
}

/* A fresh context whose workspace is too small refuses to grow it inside a capture. */
static void test_no_growth_in_capture(void **state)
{
    (void)state;
    graph_env e = graph_open();
    portssm_context *fresh = NULL;
    assert_int_equal(portssm_create(&fresh, portssm_get_backend(th_ctx), portssm_get_device(th_ctx)),
                     PORTSSM_OK);
    assert_int_equal(portssm_set_stream(fresh, e.stream), PORTSSM_OK);
    th_rng r = th_rng_for(6);
    scan_problem p;
    scan_problem_make(&p, &r);
    scan_poison(&p);
    th_snapshot snap = th_snap(p.du);
    portssm_selective_scan_bwd_args a = scan_bwd_args(&p, 0);
    assert_int_equal(vs_capture_begin(e.v, e.stream), 0);
    portssm_status s = portssm_selective_scan_bwd(fresh, &a);
    void *graph = vs_capture_end(e.v, e.stream);
    assert_int_equal(s, PORTSSM_ERR_UNSUPPORTED);
    ASSERT_HAS(portssm_last_error(fresh), "captured");
    ASSERT_HAS(portssm_last_error(fresh), "workspace");
    if (graph)
        vs_graph_destroy(e.v, graph);
    assert_true(th_unchanged(p.du, &snap));
    /* outside the capture the same call grows it and runs */
    assert_int_equal(portssm_selective_scan_bwd(fresh, &a), PORTSSM_OK);
    assert_int_equal(portssm_synchronize(fresh), PORTSSM_OK);
    portssm_destroy(fresh);
    graph_close(&e);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_workspace_query, th_teardown),
        cmocka_unit_test_teardown(test_caller_workspace, th_teardown),
        cmocka_unit_test_teardown(test_scan_bwd_deterministic, th_teardown),
        cmocka_unit_test_teardown(test_conv_bwd_deterministic, th_teardown),
        cmocka_unit_test_teardown(test_graph_replay, th_teardown),
        cmocka_unit_test_teardown(test_no_growth_in_capture, th_teardown),
    };
    return th_main(argc, argv, "test_backward", tests, sizeof tests / sizeof tests[0]);
}
