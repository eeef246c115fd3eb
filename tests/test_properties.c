/*
 * test_properties.c - properties every backend must have, through the public API on the backend
 * under test (th_ctx):
 *   hand_*  small cases whose numbers are worked out by hand in the comments;
 *   id_*    identities on random data (a width-1 conv is x + bias, a scan with A -> -inf is
 *           memoryless, splitting a sequence through the states changes nothing, decode steps
 *           equal the forward over the same tokens);
 *   fd_*    every gradient of both backward ops: first the double-precision reference
 *           (backends/cpu/ref.h) against central finite differences of the reference forward,
 *           then the backend under test against that reference.
 * An op the backend lacks (PORTSSM_ERR_UNSUPPORTED) skips the test.
 */
#include "harness.h"
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 PORTSSM_F32
#define F16 PORTSSM_F16
#define BF16 PORTSSM_BF16
#define I32 PORTSSM_I32
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})
#define INTS(...) ((const int32_t[]){__VA_ARGS__})

/* Hand cases are exact up to float rounding and fast exp: tighter than the f32 defaults. */
static const th_tol HAND = {2e-5, 1e-5};

/* ---------------------------------------------------------------- scratch of one test */

#define MAX_TEMP 1024
static void *temps[MAX_TEMP];
static int ntemps;

static void *temp(size_t bytes)
{
    assert_true(ntemps < MAX_TEMP);
    void *p = calloc(bytes ? bytes : 1, 1);
    assert_non_null(p);
    temps[ntemps++] = p;
    return p;
}

static double *dvec(int64_t n) { return temp((size_t)(n > 0 ? n : 1) * sizeof(double)); }

static int teardown(void **state)
{
    (void)state;
    th_free_all();
    while (ntemps > 0)
        free(temps[--ntemps]);
    return 0;
}

/* Random doubles that are exact floats, so that F32 tensors hold exactly what the reference sees. */
static double *rvec(th_rng *r, int64_t n, double lo, double hi)
{
    double *v = dvec(n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)(float)th_uniform(r, lo, hi);
    return v;
}

/* seq_idx rows: non-decreasing, starting anywhere in [0,3], a new sequence with probability 0.3. */
static int32_t *rand_seq(th_rng *r, int64_t B, int64_t L)
{
    int32_t *s = temp((size_t)(B * L) * sizeof *s);
    for (int64_t b = 0; b < B; b++) {
        int32_t cur = (int32_t)th_randint(r, 0, 3);
        for (int64_t t = 0; t < L; t++) {
            if (th_uniform(r, 0, 1) < 0.3)
                cur++;
            s[b * L + t] = cur;
        }
    }
    return s;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* ---------------------------------------------------------------- tensors on th_ctx */

static int64_t numel(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    return n;
}

static th_tensor *t_rand(th_rng *r, portssm_dtype dt, int nd, const int64_t *shape, double lo,
                         double hi)
{
    th_tensor *t = th_new(th_ctx, dt, nd, shape, NULL);
    th_fill_uniform(t, r, lo, hi);
    return t;
}

/* An output: elements NaN, gaps and guards a pattern that th_assert_guards checks. */
static th_tensor *t_out_strided(portssm_dtype dt, int nd, const int64_t *shape,
                                const int64_t *stride)
{
    th_tensor *t = th_new(th_ctx, dt, nd, shape, stride);
    th_poison(t);
    return t;
}

static th_tensor *t_out(portssm_dtype dt, int nd, const int64_t *shape)
{
    return t_out_strided(dt, nd, shape, NULL);
}

/* Values v (row-major) with the output pattern around them: usable as an input, and as an
 * in/out state whose gaps and guards th_assert_guards checks afterwards. */
static th_tensor *t_set(th_tensor *t, const double *v)
{
    th_poison(t);
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(t);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(t, k, idx);
        th_set(t, idx, v[k]);
    }
    th_upload(t);
    return t;
}

static th_tensor *t_vals(portssm_dtype dt, int nd, const int64_t *shape, const double *v)
{
    return t_set(th_new(th_ctx, dt, nd, shape, NULL), v);
}

static th_tensor *t_ints(int nd, const int64_t *shape, const int32_t *v)
{
    int64_t n = numel(nd, shape);
    double *d = dvec(n);
    for (int64_t i = 0; i < n; i++)
        d[i] = v[i];
    return t_vals(I32, nd, shape, d);
}

/* Layouts of a (B,D,L) tensor: contiguous, channel-last (D fastest), time reversed (L stride
 * -1). */
enum { CONTIG = 0, CHLAST = 1, REVERSED = 2 };

static const int64_t *bdl_stride(const int64_t *shape, int layout)
{
    if (layout == CONTIG)
        return NULL;
    int64_t *s = temp(3 * sizeof *s);
    s[0] = shape[1] * shape[2];
    s[1] = layout == CHLAST ? 1 : shape[2];
    s[2] = layout == CHLAST ? shape[1] : -1;
    return s;
}

/* The elements of t, downloaded, as row-major doubles. */
static double *t_get(th_tensor *t)
{
    th_download(t);
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(t);
    double *v = dvec(n);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(t, k, idx);
        v[k] = th_get(t, idx);
    }
    return v;
}

/* got ~ want (row-major doubles) within tol, and got's guards and gaps intact. */
static void expect(th_tensor *got, const double *want, th_tol tol, const char *name)
{
    th_tensor *ref = t_vals(F32, got->ndim, got->shape, want);
    th_assert_close(got, ref, tol, name);
    th_assert_guards(got, name);
}

/* A view of v restricted to [start, start+len) along dim. */
static portssm_tensor narrow(portssm_tensor v, int dim, int64_t start, int64_t len)
{
    v.data = (char *)v.data + start * v.stride[dim] * (int64_t)portssm_dtype_size(v.dtype);
    v.shape[dim] = len;
    return v;
}

/* A view of v with dimension dim (of size 1 after narrow) removed. */
static portssm_tensor drop_dim(portssm_tensor v, int dim)
{
    for (int i = dim; i + 1 < v.ndim && i + 1 < PORTSSM_MAX_DIMS; i++) {
        v.shape[i] = v.shape[i + 1];
        v.stride[i] = v.stride[i + 1];
    }
    v.ndim--;
    return v;
}

/* v with dims dim and dim+1 made one (they must be laid out as one). */
static portssm_tensor merge_dims(portssm_tensor v, int dim)
{
    assert_true(v.stride[dim] == v.shape[dim + 1] * v.stride[dim + 1]);
    v.shape[dim + 1] *= v.shape[dim];
    return drop_dim(v, dim);
}

/* Columns [start, start+len) of the last dim of row-major rows x cols doubles. */
static double *cols(const double *v, int64_t rows, int64_t ncols, int64_t start, int64_t len)
{
    double *o = dvec(rows * len);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < len; j++)
            o[r * len + j] = v[r * ncols + start + j];
    return o;
}

/* ================================================================ hand-computed cases */

static void hand_conv1d_fwd(void **state)
{
    (void)state;
    /* x = [1,2,3], weight = [0.5,2], bias 1, initial state [4]:  xp = [4 | 1,2,3]
     *   out[t] = 1 + 0.5*xp[t] + 2*xp[t+1] = [1+2+2, 1+0.5+4, 1+1+6] = [5, 5.5, 8]
     *   final = last W-1 = 1 column of xp = [3] */
    th_tensor *x = t_vals(F32, 3, SHAPE(1, 1, 3), VALS(1, 2, 3));
    th_tensor *w = t_vals(F32, 2, SHAPE(1, 2), VALS(0.5, 2));
    th_tensor *bias = t_vals(F32, 1, SHAPE(1), VALS(1));
    th_tensor *init = t_vals(F32, 3, SHAPE(1, 1, 1), VALS(4));
    th_tensor *out = t_out(F32, 3, SHAPE(1, 1, 3)), *fin = t_out(F32, 3, SHAPE(1, 1, 1));
    portssm_causal_conv1d_fwd_args a = {0};
    a.x = th_view(x);
    a.weight = th_view(w);
    a.bias = th_view(bias);
    a.initial_states = th_view(init);
    a.final_states = th_view(fin);
    a.out = th_view(out);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a));
    expect(out, VALS(5, 5.5, 8), HAND, "out");
    expect(fin, VALS(3), HAND, "final_states");

    /* W = 3, weight [1,2,3], no bias, x = [1,2,3,4], initial [5,6], seq_idx [0,1,1,2].
     * Positions -2,-1 (the initial states) belong to the sequence of token 0 (seq 0):
     *   t=0 (seq 0): 1*5 + 2*6 + 3*1 = 20
     *   t=1 (seq 1): positions -1 and 0 are seq 0, dropped:      3*2 = 6
     *   t=2 (seq 1): position 0 dropped:                2*2 + 3*3 = 13
     *   t=3 (seq 2): positions 1, 2 dropped:                  3*4 = 12
     *   final = [3, 4] (seq_idx does not change it).  Then the same with SILU. */
    for (int act = 0; act < 2; act++) {
        x = t_vals(F32, 3, SHAPE(1, 1, 4), VALS(1, 2, 3, 4));
        w = t_vals(F32, 2, SHAPE(1, 3), VALS(1, 2, 3));
        init = t_vals(F32, 3, SHAPE(1, 1, 2), VALS(5, 6));
        th_tensor *seq = t_ints(2, SHAPE(1, 4), INTS(0, 1, 1, 2));
        out = t_out(F32, 3, SHAPE(1, 1, 4));
        fin = t_out(F32, 3, SHAPE(1, 1, 2));
        memset(&a, 0, sizeof a);
        a.x = th_view(x);
        a.weight = th_view(w);
        a.seq_idx = th_view(seq);
        a.initial_states = th_view(init);
        a.final_states = th_view(fin);
        a.out = th_view(out);
        a.activation = act ? PORTSSM_ACTIVATION_SILU : PORTSSM_ACTIVATION_NONE;
        TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a));
        if (act)
            expect(out, VALS(silu(20), silu(6), silu(13), silu(12)), HAND, "out (seq_idx, silu)");
        else
            expect(out, VALS(20, 6, 13, 12), HAND, "out (seq_idx)");
        expect(fin, VALS(3, 4), HAND, "final_states (seq_idx)");
    }
}

static void hand_conv1d_bwd(void **state)
{
    (void)state;
    /* The first case of hand_conv1d_fwd, out[t] = 1 + 0.5*xp[t] + 2*xp[t+1], xp = [4 | 1,2,3],
     * dout = [1,-1,2], dfinal = [10] (final = xp[3]):
     *   dweight[0] = sum dout[t]*xp[t]   = 4 - 1 + 4 = 7
     *   dweight[1] = sum dout[t]*xp[t+1] = 1 - 2 + 6 = 5,   dbias = 1 - 1 + 2 = 2
     *   dxp[s] = 0.5*dout[s] + 2*dout[s-1]:  dxp[0] = 0.5, dxp[1] = -0.5 + 2 = 1.5,
     *            dxp[2] = 1 - 2 = -1, dxp[3] = 4 + dfinal 10 = 14
     *   dinitial = [0.5], dx = [1.5, -1, 14] */
    th_tensor *x = t_vals(F32, 3, SHAPE(1, 1, 3), VALS(1, 2, 3));
    th_tensor *w = t_vals(F32, 2, SHAPE(1, 2), VALS(0.5, 2));
    th_tensor *bias = t_vals(F32, 1, SHAPE(1), VALS(1));
    th_tensor *init = t_vals(F32, 3, SHAPE(1, 1, 1), VALS(4));
    th_tensor *dout = t_vals(F32, 3, SHAPE(1, 1, 3), VALS(1, -1, 2));
    th_tensor *dfin = t_vals(F32, 3, SHAPE(1, 1, 1), VALS(10));
    th_tensor *dx = t_out(F32, 3, SHAPE(1, 1, 3)), *dw = t_out(F32, 2, SHAPE(1, 2));
    th_tensor *db = t_out(F32, 1, SHAPE(1)), *dinit = t_out(F32, 3, SHAPE(1, 1, 1));
    portssm_causal_conv1d_bwd_args a = {0};
    a.x = th_view(x);
    a.weight = th_view(w);
    a.bias = th_view(bias);
    a.initial_states = th_view(init);
    a.dout = th_view(dout);
    a.dfinal_states = th_view(dfin);
    a.dx = th_view(dx);
    a.dweight = th_view(dw);
    a.dbias = th_view(db);
    a.dinitial_states = th_view(dinit);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_bwd(th_ctx, &a));
    expect(dx, VALS(1.5, -1, 14), HAND, "dx");
    expect(dw, VALS(7, 5), HAND, "dweight");
    expect(db, VALS(2), HAND, "dbias");
    expect(dinit, VALS(0.5), HAND, "dinitial_states");

    /* The seq_idx case of hand_conv1d_fwd (weight [1,2,3], xp = [5,6 | 1,2,3,4]), dout = 1.
     * Taps kept (t: position/weight): t0: -2/w0 -1/w1 0/w2;  t1: 1/w2;  t2: 1/w1 2/w2;  t3: 3/w2
     *   dxp: -2: 1, -1: 2, 0: 3, 1: 3 + 2 = 5, 2: 3, 3: 3  ->  dinitial [1,2], dx [3,5,3,3]
     *   dweight: w0: xp[-2] = 5;  w1: xp[-1] + xp[1] = 6 + 2 = 8;  w2: 1 + 2 + 3 + 4 = 10 */
    x = t_vals(F32, 3, SHAPE(1, 1, 4), VALS(1, 2, 3, 4));
    w = t_vals(F32, 2, SHAPE(1, 3), VALS(1, 2, 3));
    init = t_vals(F32, 3, SHAPE(1, 1, 2), VALS(5, 6));
    th_tensor *seq = t_ints(2, SHAPE(1, 4), INTS(0, 1, 1, 2));
    dout = t_vals(F32, 3, SHAPE(1, 1, 4), VALS(1, 1, 1, 1));
    dx = t_out(F32, 3, SHAPE(1, 1, 4));
    dw = t_out(F32, 2, SHAPE(1, 3));
    dinit = t_out(F32, 3, SHAPE(1, 1, 2));
    memset(&a, 0, sizeof a);
    a.x = th_view(x);
    a.weight = th_view(w);
    a.seq_idx = th_view(seq);
    a.initial_states = th_view(init);
    a.dout = th_view(dout);
    a.dx = th_view(dx);
    a.dweight = th_view(dw);
    a.dinitial_states = th_view(dinit);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_bwd(th_ctx, &a));
    expect(dx, VALS(3, 5, 3, 3), HAND, "dx (seq_idx)");
    expect(dw, VALS(5, 8, 10), HAND, "dweight (seq_idx)");
    expect(dinit, VALS(1, 2), HAND, "dinitial_states (seq_idx)");
}

/* One causal_conv1d_update with D = 1 on F32 tensors; checks out and the whole state pool. */
typedef struct upd_case {
    const char *name;
    int64_t B, Bp, S, T, W;
    int x2d; /* x and out as (B,D) (needs T == 1) */
    const double *state, *x, *weight, *bias;
    const int32_t *cache_seqlens, *indices;
    const double *want_out, *want_state;
} upd_case;

static void run_update_case(const upd_case *k)
{
    th_tensor *st = t_vals(F32, 3, SHAPE(k->Bp, 1, k->S), k->state);
    th_tensor *x = k->x2d ? t_vals(F32, 2, SHAPE(k->B, 1), k->x)
                          : t_vals(F32, 3, SHAPE(k->B, 1, k->T), k->x);
    th_tensor *out = k->x2d ? t_out(F32, 2, SHAPE(k->B, 1)) : t_out(F32, 3, SHAPE(k->B, 1, k->T));
    th_tensor *w = t_vals(F32, 2, SHAPE(1, k->W), k->weight);
    portssm_causal_conv1d_update_args a = {0};
    a.x = th_view(x);
    a.conv_state = th_view(st);
    a.weight = th_view(w);
    if (k->bias)
        a.bias = th_view(t_vals(F32, 1, SHAPE(1), k->bias));
    if (k->cache_seqlens)
        a.cache_seqlens = th_view(t_ints(1, SHAPE(k->B), k->cache_seqlens));
    if (k->indices)
        a.conv_state_indices = th_view(t_ints(1, SHAPE(k->B), k->indices));
    a.out = th_view(out);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_update(th_ctx, &a));
    char name[128];
    snprintf(name, sizeof name, "%s: out", k->name);
    expect(out, k->want_out, HAND, name);
    snprintf(name, sizeof name, "%s: conv_state", k->name);
    expect(st, k->want_state, HAND, name);
}

static void hand_conv1d_update(void **state)
{
    (void)state;
    static const double w3[3] = {1, 10, 100}, w2[2] = {1, 10}, s123[3] = {1, 2, 3};
    static const double s3x[9] = {1, 2, 3, 1, 2, 3, 1, 2, 3};
    const upd_case cases[] = {
        /* shift register: reads the last W-1 = 2 entries [2,3]: 2 + 30 + 400 = 432; the state
         * becomes the last 3 of [1,2,3 | 4] */
        {"shift", 1, 1, 3, 1, 3, 1, s123, VALS(4), w3, NULL, NULL, NULL, VALS(432), VALS(2, 3, 4)},
        /* ring, cache_seqlens c: reads entries (c-2, c-1) mod 3, writes x at c mod 3
         *   c = 1:  entries 2, 0 = [3,1]: 3 + 10 + 400 = 413, state [1,4,3]
         *   c = -2: Euclidean -2 mod 3 = 1, the same
         *   c = 5:  5 mod 3 = 2, entries 0, 1 = [1,2]: 1 + 20 + 400 = 421, state [1,2,4] */
        {"ring", 3, 3, 3, 1, 3, 0, s3x, VALS(4, 4, 4), w3, NULL, INTS(1, -2, 5), NULL,
         VALS(413, 413, 421), VALS(1, 4, 3, 1, 4, 3, 1, 2, 4)},
        /* two tokens, shift: windows [2,3,4] -> 432 and [3,4,5] -> 3 + 40 + 500 = 543;
         * state = last 3 of [1,2,3,4,5] */
        {"shift T=2", 1, 1, 3, 2, 3, 0, s123, VALS(4, 5), w3, NULL, NULL, NULL, VALS(432, 543),
         VALS(3, 4, 5)},
        /* two tokens, ring c = 2: prefix = entries 0, 1 = [1,2]; windows [1,2,4] -> 421 and
         * [2,4,5] -> 2 + 40 + 500 = 542; x0 -> slot 2, x1 -> slot 0: state [5,2,4] */
        {"ring T=2", 1, 1, 3, 2, 3, 0, s123, VALS(4, 5), w3, NULL, INTS(2), NULL, VALS(421, 542),
         VALS(5, 2, 4)},
        /* W = 2, T = 4 > S = 3, ring c = 0: prefix = entry 2 = [3]; outputs 3+40, 4+50, 5+60,
         * 6+70; writes slots 0,1,2,0: the later token 7 wins slot 0: [7,5,6] */
        {"ring wrap", 1, 1, 3, 4, 2, 0, s123, VALS(4, 5, 6, 7), w2, NULL, INTS(0), NULL,
         VALS(43, 54, 65, 76), VALS(7, 5, 6)},
        /* the same as a shift register: prefix = last entry [3], same outputs; state = last 3 of
         * [1,2,3,4,5,6,7] */
        {"shift wrap", 1, 1, 3, 4, 2, 0, s123, VALS(4, 5, 6, 7), w2, NULL, NULL, NULL,
         VALS(43, 54, 65, 76), VALS(5, 6, 7)},
        /* pool of 2 rows [1,2,3], [7,8,9]; indices [1, 2, -1], bias -400:
         *   seq 0 uses row 1: window [8,9,4]: 8 + 90 + 400 - 400 = 98, row 1 -> [8,9,4]
         *   seq 1 (index 2 >= B') and seq 2 (index -1): output 0 (not the bias), no write;
         *   row 0 untouched */
        {"indices", 3, 2, 3, 1, 3, 1, VALS(1, 2, 3, 7, 8, 9), VALS(4, 5, 6), w3, VALS(-400),
         NULL, INTS(1, 2, -1), VALS(98, 0, 0), VALS(1, 2, 3, 8, 9, 4)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_update_case(&cases[i]);
}

/* Scan tensors of the hand cases: B = D = N = 1, L = 2. */
static void hand_scan_common(portssm_selective_scan_fwd_args *a, const double *delta)
{
    memset(a, 0, sizeof *a);
    a->u = th_view(t_vals(F32, 3, SHAPE(1, 1, 2), VALS(1, 2)));
    a->delta = th_view(t_vals(F32, 3, SHAPE(1, 1, 2), delta));
    a->A = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(-2)));
    a->B = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(3)));
    a->C = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(2)));
    a->D = th_view(t_vals(F32, 1, SHAPE(1), VALS(0.5)));
}

static void hand_selective_scan_fwd(void **state)
{
    (void)state;
    const double e1 = exp(-1), e2 = exp(-2), e3 = exp(-3), ln2 = log(2.0);
    /* u = [1,2], delta = [0.5,1], A = -2, B = 3, C = 2, D = 0.5:  a_t = exp(delta_t*A) = [e^-1, e^-2]
     *   x0 = 0.5*3*1 = 1.5                   y0 = 2*1.5 + 0.5*1 = 3.5
     *   x1 = e^-2*1.5 + 1*3*2 = 6 + 1.5e^-2  y1 = 2*x1 + 0.5*2 = 13 + 3e^-2 */
    portssm_selective_scan_fwd_args a;
    hand_scan_common(&a, VALS(0.5, 1));
    th_tensor *out = t_out(F32, 3, SHAPE(1, 1, 2)), *fin = t_out(F32, 3, SHAPE(1, 1, 1));
    a.out = th_view(out);
    a.final_state = th_view(fin);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
    expect(out, VALS(3.5, 13 + 3 * e2), HAND, "out");
    expect(fin, VALS(6 + 1.5 * e2), HAND, "final_state");

    /* + z = [2,-1]: out = y * silu(z);  + initial state 1: x0 = e^-1 + 1.5, y0 = 3.5 + 2e^-1,
     * x1 = e^-2*(1.5 + e^-1) + 6, y1 = 13 + 3e^-2 + 2e^-3 */
    hand_scan_common(&a, VALS(0.5, 1));
    out = t_out(F32, 3, SHAPE(1, 1, 2));
    fin = t_out(F32, 3, SHAPE(1, 1, 1));
    a.z = th_view(t_vals(F32, 3, SHAPE(1, 1, 2), VALS(2, -1)));
    a.initial_state = th_view(t_vals(F32, 3, SHAPE(1, 1, 1), VALS(1)));
    a.out = th_view(out);
    a.final_state = th_view(fin);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
    expect(out, VALS((3.5 + 2 * e1) * silu(2), (13 + 3 * e2 + 2 * e3) * silu(-1)), HAND,
           "out (z, initial_state)");
    expect(fin, VALS(6 + 1.5 * e2 + e3), HAND, "final_state (initial_state)");

    /* delta = [-0.5, 24.5] + delta_bias 0.5 = [0, 25], softplus: dt = [log1p(1), 25] = [ln 2, 25]
     * (25 > 20 passes through);  a = [exp(-2 ln 2), e^-50] = [0.25, ~0]
     *   x0 = ln2*3*1 = 3 ln2, y0 = 6 ln2 + 0.5;  x1 = ~0 + 25*3*2 = 150, y1 = 300 + 1 = 301 */
    hand_scan_common(&a, VALS(-0.5, 24.5));
    out = t_out(F32, 3, SHAPE(1, 1, 2));
    a.delta_bias = th_view(t_vals(F32, 1, SHAPE(1), VALS(0.5)));
    a.delta_softplus = 1;
    a.out = th_view(out);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
    expect(out, VALS(6 * ln2 + 0.5, 301), HAND, "out (delta_bias, softplus)");

    /* Groups: D = 4, G = 2, L = N = 1, u = delta = 1, A = -1: x = B, y = C*B.  Channels 0,1 use
     * group 0 (B 2, C 5: y 10), channels 2,3 group 1 (B 3, C 7: y 21). */
    memset(&a, 0, sizeof a);
    a.u = th_view(t_vals(F32, 3, SHAPE(1, 4, 1), VALS(1, 1, 1, 1)));
    a.delta = th_view(t_vals(F32, 3, SHAPE(1, 4, 1), VALS(1, 1, 1, 1)));
    a.A = th_view(t_vals(F32, 2, SHAPE(4, 1), VALS(-1, -1, -1, -1)));
    a.B = th_view(t_vals(F32, 4, SHAPE(1, 2, 1, 1), VALS(2, 3)));
    a.C = th_view(t_vals(F32, 4, SHAPE(1, 2, 1, 1), VALS(5, 7)));
    out = t_out(F32, 3, SHAPE(1, 4, 1));
    a.out = th_view(out);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
    expect(out, VALS(10, 10, 21, 21), HAND, "out (groups)");
}

static void hand_selective_scan_bwd(void **state)
{
    (void)state;
    const double e1 = exp(-1), e2 = exp(-2), e3 = exp(-3);
    /* The first case of hand_selective_scan_fwd (x0 = 1.5, x1 = 6 + 1.5e^-2, a = [e^-1, e^-2]),
     * dout = [1,1], delta_bias 0 present, no initial state:
     *   h1 = C*dy1 = 2;  h0 = C*dy0 + a1*h1 = 2 + 2e^-2
     *   du_t = D*dy_t + h_t*dt_t*B:  du0 = 0.5 + (2+2e^-2)*1.5 = 3.5 + 3e^-2,  du1 = 0.5 + 6 = 6.5
     *   ddelta_t = h_t*(A*a_t*x_{t-1} + B*u_t):  ddelta0 = (2+2e^-2)*3 = 6 + 6e^-2,
     *            ddelta1 = 2*(-2*e^-2*1.5 + 6) = 12 - 6e^-2;   ddelta_bias = 18
     *   dA = sum h_t*dt_t*a_t*x_{t-1} = 2*1*e^-2*1.5 = 3e^-2
     *   dB = sum h_t*dt_t*u_t = (2+2e^-2)*0.5 + 2*2 = 5 + e^-2
     *   dC = sum dy_t*x_t = 1.5 + 6 + 1.5e^-2 = 7.5 + 1.5e^-2;   dD = sum dy_t*u_t = 3
     *   dinitial = a0*h0 = 2e^-1 + 2e^-3 (the gradient at a zero initial state) */
    portssm_selective_scan_fwd_args f;
    hand_scan_common(&f, VALS(0.5, 1));
    portssm_selective_scan_bwd_args a = {0};
    a.u = f.u;
    a.delta = f.delta;
    a.A = f.A;
    a.B = f.B;
    a.C = f.C;
    a.D = f.D;
    a.delta_bias = th_view(t_vals(F32, 1, SHAPE(1), VALS(0)));
    a.dout = th_view(t_vals(F32, 3, SHAPE(1, 1, 2), VALS(1, 1)));
    th_tensor *du = t_out(F32, 3, SHAPE(1, 1, 2)), *ddelta = t_out(F32, 3, SHAPE(1, 1, 2));
    th_tensor *dA = t_out(F32, 2, SHAPE(1, 1)), *dB = t_out(F32, 2, SHAPE(1, 1));
    th_tensor *dC = t_out(F32, 2, SHAPE(1, 1)), *dD = t_out(F32, 1, SHAPE(1));
    th_tensor *ddb = t_out(F32, 1, SHAPE(1)), *dinit = t_out(F32, 3, SHAPE(1, 1, 1));
    a.du = th_view(du);
    a.ddelta = th_view(ddelta);
    a.dA = th_view(dA);
    a.dB = th_view(dB);
    a.dC = th_view(dC);
    a.dD = th_view(dD);
    a.ddelta_bias = th_view(ddb);
    a.dinitial_state = th_view(dinit);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_bwd(th_ctx, &a));
    expect(du, VALS(3.5 + 3 * e2, 6.5), HAND, "du");
    expect(ddelta, VALS(6 + 6 * e2, 12 - 6 * e2), HAND, "ddelta");
    expect(dA, VALS(3 * e2), HAND, "dA");
    expect(dB, VALS(5 + e2), HAND, "dB");
    expect(dC, VALS(7.5 + 1.5 * e2), HAND, "dC");
    expect(dD, VALS(3), HAND, "dD");
    expect(ddb, VALS(18), HAND, "ddelta_bias");
    expect(dinit, VALS(2 * e1 + 2 * e3), HAND, "dinitial_state");
}

/* A selective_state_update on F32 tensors; x/dt/z/out (B,[H,]P), B/C (B,[G,]N). */
static void run_state_update(portssm_selective_state_update_args *a, th_tensor *st,
                             th_tensor *out, const double *want_out, const double *want_state,
                             const char *name)
{
    a->state = th_view(st);
    a->out = th_view(out);
    TH_CHECK_OP(th_ctx, portssm_selective_state_update(th_ctx, a));
    char n[128];
    snprintf(n, sizeof n, "%s: out", name);
    expect(out, want_out, HAND, n);
    snprintf(n, sizeof n, "%s: state", name);
    expect(st, want_state, HAND, n);
}

static void hand_selective_state_update(void **state)
{
    (void)state;
    const double e1 = exp(-1), ln2 = log(2.0);
    /* Mamba-1, one channel: state 1, x 2, dt 0.5, A -2, B 3, C 2, D 0.5:
     *   state = e^-1*1 + 3*0.5*2 = 3 + e^-1,  out = 2*(3 + e^-1) + 0.5*2 = 7 + 2e^-1;
     * with z = 1 the output is multiplied by silu(1). */
    for (int with_z = 0; with_z < 2; with_z++) {
        portssm_selective_state_update_args a = {0};
        a.x = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(2)));
        a.dt = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(0.5)));
        a.A = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(-2)));
        a.B = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(3)));
        a.C = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(2)));
        a.D = th_view(t_vals(F32, 1, SHAPE(1), VALS(0.5)));
        if (with_z)
            a.z = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(1)));
        run_state_update(&a, t_vals(F32, 3, SHAPE(1, 1, 1), VALS(1)), t_out(F32, 2, SHAPE(1, 1)),
                         VALS((7 + 2 * e1) * (with_z ? silu(1) : 1)), VALS(3 + e1),
                         with_z ? "mamba1 z" : "mamba1");
    }
    /* dt -0.5 + dt_bias 0.5 = 0, softplus: ln 2; exp(A*dt) = exp(-2 ln 2) = 0.25:
     *   state = 0.25 + 3*ln2*2 = 0.25 + 6 ln2,  out = 2*state + 0.5*2 = 1.5 + 12 ln2 */
    {
        portssm_selective_state_update_args a = {0};
        a.x = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(2)));
        a.dt = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(-0.5)));
        a.dt_bias = th_view(t_vals(F32, 1, SHAPE(1), VALS(0.5)));
        a.dt_softplus = 1;
        a.A = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(-2)));
        a.B = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(3)));
        a.C = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(2)));
        a.D = th_view(t_vals(F32, 1, SHAPE(1), VALS(0.5)));
        run_state_update(&a, t_vals(F32, 3, SHAPE(1, 1, 1), VALS(1)), t_out(F32, 2, SHAPE(1, 1)),
                         VALS(1.5 + 12 * ln2), VALS(0.25 + 6 * ln2), "dt_bias softplus");
    }
    /* Heads: H = 4, P = N = 1, G = 2 (heads 0,1 use group 0, heads 2,3 group 1), state 1, x 2,
     * dt 0.5, A -2 (given as (H,P,N) with stride 0 over P and N), B = [3,1], C = [2,4], no D:
     *   group 0: state = e^-1 + 3*0.5*2 = 3 + e^-1, out = 2*(3 + e^-1) = 6 + 2e^-1
     *   group 1: state = e^-1 + 1*0.5*2 = 1 + e^-1, out = 4*(1 + e^-1) = 4 + 4e^-1 */
    {
        portssm_selective_state_update_args a = {0};
        a.x = th_view(t_vals(F32, 3, SHAPE(1, 4, 1), VALS(2, 2, 2, 2)));
        a.dt = th_view(t_vals(F32, 3, SHAPE(1, 4, 1), VALS(0.5, 0.5, 0.5, 0.5)));
        th_tensor *A = th_new(th_ctx, F32, 3, SHAPE(4, 1, 1), SHAPE(1, 0, 0));
        a.A = th_view(t_set(A, VALS(-2, -2, -2, -2)));
        a.B = th_view(t_vals(F32, 3, SHAPE(1, 2, 1), VALS(3, 1)));
        a.C = th_view(t_vals(F32, 3, SHAPE(1, 2, 1), VALS(2, 4)));
        run_state_update(&a, t_vals(F32, 4, SHAPE(1, 4, 1, 1), VALS(1, 1, 1, 1)),
                         t_out(F32, 3, SHAPE(1, 4, 1)),
                         VALS(6 + 2 * e1, 6 + 2 * e1, 4 + 4 * e1, 4 + 4 * e1),
                         VALS(3 + e1, 3 + e1, 1 + e1, 1 + e1), "heads");
    }
    /* state_batch_indices [1,-1] on a pool of rows [1], [5]: sequence 0 uses row 1:
     *   state = 5e^-1 + 3, out = 2*(3 + 5e^-1) + 0.5*2 = 7 + 10e^-1;
     * sequence 1 gets 0 and row 0 stays 1. */
    {
        portssm_selective_state_update_args a = {0};
        a.x = th_view(t_vals(F32, 2, SHAPE(2, 1), VALS(2, 2)));
        a.dt = th_view(t_vals(F32, 2, SHAPE(2, 1), VALS(0.5, 0.5)));
        a.A = th_view(t_vals(F32, 2, SHAPE(1, 1), VALS(-2)));
        a.B = th_view(t_vals(F32, 2, SHAPE(2, 1), VALS(3, 3)));
        a.C = th_view(t_vals(F32, 2, SHAPE(2, 1), VALS(2, 2)));
        a.D = th_view(t_vals(F32, 1, SHAPE(1), VALS(0.5)));
        a.state_batch_indices = th_view(t_ints(1, SHAPE(2), INTS(1, -1)));
        run_state_update(&a, t_vals(F32, 3, SHAPE(2, 1, 1), VALS(1, 5)), t_out(F32, 2, SHAPE(2, 1)),
                         VALS(7 + 10 * e1, 0), VALS(1, 3 + 5 * e1), "indices");
    }
}

/* The reference's pointwise rules, exactly (these decide values the GPU kernels must match). */
static void ref_pointwise(void **state)
{
    (void)state;
    assert_true(pssm_ref_softplus(20.0) == log1p(exp(20.0))); /* 20 itself takes log1p(exp) */
    assert_true(pssm_ref_softplus(20.000001) == 20.000001);   /* above 20: the identity */
    assert_true(pssm_ref_softplus(-3.0) == log1p(exp(-3.0)));
    assert_true(pssm_ref_dsoftplus(25.0) == 1.0);
    assert_true(fabs(pssm_ref_dsoftplus(0.0) - 0.5) < 1e-15);
    assert_true(fabs(pssm_ref_silu(1.0) - 1.0 / (1.0 + exp(-1.0))) < 1e-15);
    assert_true(pssm_ref_silu(0.0) == 0.0);
    /* silu'(0) = 1/2;  silu'(v) by a central difference elsewhere */
    assert_true(fabs(pssm_ref_dsilu(0.0) - 0.5) < 1e-15);
    for (double v = -6; v <= 6; v += 0.75) {
        double fd = (pssm_ref_silu(v + 1e-6) - pssm_ref_silu(v - 1e-6)) / 2e-6;
        assert_true(fabs(fd - pssm_ref_dsilu(v)) < 1e-8);
    }
}

/* softplus and silu across their whole range on the backend under test, through ops whose output
 * is exactly that function: scan with L = N = 1, A = 0, B = C = u = 1 gives out = softplus(delta);
 * with z it gives softplus(delta) * silu(z); the state update likewise.  Relative error per element
 * (no absolute slack: the tails are tiny), so a fast form that cancels (log(1 + e) with e below
 * float's epsilon) fails here.  GPU special-function units give about 1e-6. */
#define TAIL_N 121 /* delta = -30, -29.5, ..., 30 */
static void expect_rel(th_tensor *got, const double *want, double rtol, const char *name)
{
    double *g = t_get(got);
    for (int64_t i = 0; i < th_numel(got); i++)
        if (!(fabs(g[i] - want[i]) <= rtol * fabs(want[i])))
            fail_msg("%s: element %lld: got %.9g, expected %.9g (relative error %.3g > %.1g)", name,
                     (long long)i, g[i], want[i], fabs(g[i] - want[i]) / fabs(want[i]), rtol);
    th_assert_guards(got, name);
}

static void pointwise_range(void **state)
{
    (void)state;
    double *delta = dvec(TAIL_N), *z = dvec(TAIL_N), *ones = dvec(TAIL_N), *zeros = dvec(TAIL_N);
    double *want = dvec(TAIL_N), *want_z = dvec(TAIL_N);
    for (int i = 0; i < TAIL_N; i++) {
        delta[i] = -30 + 0.5 * i;
        z[i] = 30 - 0.5 * i + 0.25; /* silu over the same range, never 0 */
        ones[i] = 1, zeros[i] = 0;
        want[i] = delta[i] <= 20 ? log1p(exp(delta[i])) : delta[i];
        want_z[i] = want[i] * z[i] / (1 + exp(-z[i]));
    }
    const double rtol = 1e-5;
    for (int with_z = 0; with_z <= 1; with_z++) {
        portssm_selective_scan_fwd_args a;
        memset(&a, 0, sizeof a);
        a.u = th_view(t_vals(F32, 3, SHAPE(1, TAIL_N, 1), ones));
        a.delta = th_view(t_vals(F32, 3, SHAPE(1, TAIL_N, 1), delta));
        a.A = th_view(t_vals(F32, 2, SHAPE(TAIL_N, 1), zeros));
        a.B = th_view(t_vals(F32, 2, SHAPE(TAIL_N, 1), ones));
        a.C = th_view(t_vals(F32, 2, SHAPE(TAIL_N, 1), ones));
        if (with_z)
            a.z = th_view(t_vals(F32, 3, SHAPE(1, TAIL_N, 1), z));
        a.delta_softplus = 1;
        th_tensor *out = th_new(th_ctx, F32, 3, SHAPE(1, TAIL_N, 1), NULL);
        th_poison(out);
        a.out = th_view(out);
        TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
        expect_rel(out, with_z ? want_z : want, rtol,
                   with_z ? "scan: softplus(delta) * silu(z)" : "scan: softplus(delta)");

        portssm_selective_state_update_args u;
        memset(&u, 0, sizeof u);
        th_tensor *st = t_vals(F32, 3, SHAPE(1, TAIL_N, 1), zeros);
        u.state = th_view(st);
        u.x = th_view(t_vals(F32, 2, SHAPE(1, TAIL_N), ones));
        u.dt = th_view(t_vals(F32, 2, SHAPE(1, TAIL_N), delta));
        u.A = th_view(t_vals(F32, 2, SHAPE(TAIL_N, 1), zeros));
        u.B = th_view(t_vals(F32, 2, SHAPE(1, 1), ones));
        u.C = th_view(t_vals(F32, 2, SHAPE(1, 1), ones));
        if (with_z)
            u.z = th_view(t_vals(F32, 2, SHAPE(1, TAIL_N), z));
        u.dt_softplus = 1;
        th_tensor *uo = th_new(th_ctx, F32, 2, SHAPE(1, TAIL_N), NULL);
        th_poison(uo);
        u.out = th_view(uo);
        TH_CHECK_OP(th_ctx, portssm_selective_state_update(th_ctx, &u));
        expect_rel(uo, with_z ? want_z : want, rtol,
                   with_z ? "state update: softplus(dt) * silu(z)" : "state update: softplus(dt)");
        expect_rel(st, want, rtol, "state update: state = softplus(dt)");
    }
}

/* ================================================================ identities on random data */

static const portssm_dtype ACT_DTYPES[3] = {F32, F16, BF16};

static void id_conv1d_width1(void **state)
{
    (void)state;
    /* W = 1, weight 1: out = x + bias, in every activation dtype and layout */
    for (int di = 0; di < 3; di++)
        for (int layout = CONTIG; layout <= REVERSED; layout++) {
            portssm_dtype dt = ACT_DTYPES[di];
            th_rng r = th_rng_for(100 + (uint64_t)(di * 3 + layout));
            const int64_t B = 2, D = 5, L = 37;
            const int64_t *sh = SHAPE(B, D, L);
            th_tensor *x = th_new(th_ctx, dt, 3, sh, bdl_stride(sh, layout));
            th_fill_uniform(x, &r, -2, 2);
            th_tensor *w = t_vals(F32, 2, SHAPE(D, 1), VALS(1, 1, 1, 1, 1));
            th_tensor *bias = t_rand(&r, F32, 1, SHAPE(D), -1, 1);
            th_tensor *out = t_out_strided(dt, 3, sh, bdl_stride(sh, (layout + 1) % 3));
            portssm_causal_conv1d_fwd_args a = {0};
            a.x = th_view(x);
            a.weight = th_view(w);
            a.bias = th_view(bias);
            a.out = th_view(out);
            TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a));
            double *xv = t_get(x), *bv = t_get(bias), *want = dvec(B * D * L);
            for (int64_t i = 0; i < B * D * L; i++)
                want[i] = xv[i] + bv[(i / L) % D];
            expect(out, want, th_tol_for(dt), "out = x + bias");
        }
}

static void id_scan_memoryless(void **state)
{
    (void)state;
    /* A = -1e4 with dt in [0.5, 1.5]: exp(dt*A) underflows to 0, so x_t = dt*B_t*u_t and
     * y_t = dt*u_t*sum_n C_t[n]*B_t[n] + D*u_t.  Variable B/C with groups, then constant. */
    for (int variable = 0; variable < 2; variable++) {
        th_rng r = th_rng_for(200 + (uint64_t)variable);
        const int64_t B = 2, D = 4, L = 19, N = 5, G = 2;
        th_tensor *u = t_rand(&r, F32, 3, SHAPE(B, D, L), -1, 1);
        th_tensor *delta = t_rand(&r, F32, 3, SHAPE(B, D, L), 0.5, 1.5);
        th_tensor *A = th_new(th_ctx, F32, 2, SHAPE(D, N), NULL);
        double *Av = dvec(D * N);
        for (int64_t i = 0; i < D * N; i++)
            Av[i] = -1e4;
        t_set(A, Av);
        th_tensor *Bt = variable ? t_rand(&r, F32, 4, SHAPE(B, G, N, L), -1, 1)
                                 : t_rand(&r, F32, 2, SHAPE(D, N), -1, 1);
        th_tensor *Ct = variable ? t_rand(&r, F32, 4, SHAPE(B, G, N, L), -1, 1)
                                 : t_rand(&r, F32, 2, SHAPE(D, N), -1, 1);
        th_tensor *Dt = t_rand(&r, F32, 1, SHAPE(D), -1, 1);
        th_tensor *out = t_out(F32, 3, SHAPE(B, D, L));
        portssm_selective_scan_fwd_args a = {0};
        a.u = th_view(u);
        a.delta = th_view(delta);
        a.A = th_view(A);
        a.B = th_view(Bt);
        a.C = th_view(Ct);
        a.D = th_view(Dt);
        a.out = th_view(out);
        TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
        double *uv = t_get(u), *dv = t_get(delta), *bv = t_get(Bt), *cv = t_get(Ct);
        double *Dv = t_get(Dt), *want = dvec(B * D * L);
        for (int64_t b = 0; b < B; b++)
            for (int64_t d = 0; d < D; d++)
                for (int64_t t = 0; t < L; t++) {
                    int64_t i = (b * D + d) * L + t, g = d / (D / G);
                    double cb = 0;
                    for (int64_t n = 0; n < N; n++) {
                        int64_t k = variable ? ((b * G + g) * N + n) * L + t : d * N + n;
                        cb += cv[k] * bv[k];
                    }
                    want[i] = dv[i] * uv[i] * cb + Dv[d] * uv[i];
                }
        expect(out, want, th_tol_for(F32), variable ? "out (variable B/C)" : "out (constant B/C)");
    }
}

static void id_conv1d_split(void **state)
{
    (void)state;
    /* conv over L tokens == conv over the first L1 (final_states out) then the rest (those as
     * initial_states).  With seq_idx, the identity needs the W-1 tokens before the cut to be in
     * the sequence of the token at the cut (positions before t = 0 belong to token 0's). */
    const int64_t B = 2, D = 3, L = 13, L1 = 6, W = 4;
    for (int with_seq = 0; with_seq < 2; with_seq++) {
        th_rng r = th_rng_for(300 + (uint64_t)with_seq);
        th_tensor *x = t_rand(&r, F32, 3, SHAPE(B, D, L), -1, 1);
        th_tensor *w = t_rand(&r, F32, 2, SHAPE(D, W), -1, 1);
        th_tensor *bias = t_rand(&r, F32, 1, SHAPE(D), -1, 1);
        th_tensor *init = t_rand(&r, F32, 3, SHAPE(B, D, W - 1), -1, 1);
        /* sequences change at 2 (before the cut's window) and 9 (after the cut) */
        th_tensor *seq = t_ints(2, SHAPE(B, L), INTS(0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                                      4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7));
        th_tensor *out = t_out(F32, 3, SHAPE(B, D, L)), *fin = t_out(F32, 3, SHAPE(B, D, W - 1));
        th_tensor *out1 = t_out(F32, 3, SHAPE(B, D, L1));
        th_tensor *out2 = t_out(F32, 3, SHAPE(B, D, L - L1));
        th_tensor *fin1 = t_out(F32, 3, SHAPE(B, D, W - 1)), *fin2 = t_out(F32, 3, SHAPE(B, D, W - 1));
        portssm_causal_conv1d_fwd_args a = {0};
        a.x = th_view(x);
        a.weight = th_view(w);
        a.bias = th_view(bias);
        a.initial_states = th_view(init);
        a.seq_idx = with_seq ? th_view(seq) : th_absent();
        a.activation = PORTSSM_ACTIVATION_SILU;
        a.out = th_view(out);
        a.final_states = th_view(fin);
        TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a));
        portssm_causal_conv1d_fwd_args a1 = a, a2 = a;
        a1.x = narrow(th_view(x), 2, 0, L1);
        a1.seq_idx = with_seq ? narrow(th_view(seq), 1, 0, L1) : th_absent();
        a1.out = th_view(out1);
        a1.final_states = th_view(fin1);
        TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a1));
        a2.x = narrow(th_view(x), 2, L1, L - L1);
        a2.seq_idx = with_seq ? narrow(th_view(seq), 1, L1, L - L1) : th_absent();
        a2.initial_states = th_view(fin1);
        a2.out = th_view(out2);
        a2.final_states = th_view(fin2);
        TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a2));
        double *ov = t_get(out), *xv = t_get(x);
        th_tol tol = th_tol_for(F32);
        expect(out1, cols(ov, B * D, L, 0, L1), tol, "first part");
        expect(out2, cols(ov, B * D, L, L1, L - L1), tol, "second part");
        expect(fin1, cols(xv, B * D, L, L1 - (W - 1), W - 1), tol, "final_states of the first part");
        expect(fin2, t_get(fin), tol, "final_states of the second part");
    }
}

static void id_scan_split(void **state)
{
    (void)state;
    /* scan over L == scan over the first L1 (final_state out) then the rest (as initial_state);
     * variable B with groups, constant C, D, z, delta_bias, softplus, initial_state. */
    const int64_t B = 2, D = 4, L = 11, L1 = 5, N = 3, G = 2;
    th_rng r = th_rng_for(400);
    th_tensor *u = t_rand(&r, F32, 3, SHAPE(B, D, L), -1, 1);
    th_tensor *delta = t_rand(&r, F32, 3, SHAPE(B, D, L), -2, 1);
    th_tensor *A = t_rand(&r, F32, 2, SHAPE(D, N), -1.5, -0.2);
    th_tensor *Bt = t_rand(&r, F32, 4, SHAPE(B, G, N, L), -1, 1);
    th_tensor *Ct = t_rand(&r, F32, 2, SHAPE(D, N), -1, 1);
    th_tensor *Dt = t_rand(&r, F32, 1, SHAPE(D), -1, 1);
    th_tensor *z = t_rand(&r, F32, 3, SHAPE(B, D, L), -2, 2);
    th_tensor *db = t_rand(&r, F32, 1, SHAPE(D), -0.5, 0.5);
    th_tensor *init = t_rand(&r, F32, 3, SHAPE(B, D, N), -1, 1);
    th_tensor *out = t_out(F32, 3, SHAPE(B, D, L)), *fin = t_out(F32, 3, SHAPE(B, D, N));
    th_tensor *out1 = t_out(F32, 3, SHAPE(B, D, L1)), *out2 = t_out(F32, 3, SHAPE(B, D, L - L1));
    th_tensor *fin1 = t_out(F32, 3, SHAPE(B, D, N)), *fin2 = t_out(F32, 3, SHAPE(B, D, N));
    portssm_selective_scan_fwd_args a = {0};
    a.u = th_view(u);
    a.delta = th_view(delta);
    a.A = th_view(A);
    a.B = th_view(Bt);
    a.C = th_view(Ct);
    a.D = th_view(Dt);
    a.z = th_view(z);
    a.delta_bias = th_view(db);
    a.delta_softplus = 1;
    a.initial_state = th_view(init);
    a.out = th_view(out);
    a.final_state = th_view(fin);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
    portssm_selective_scan_fwd_args a1 = a, a2 = a;
    a1.u = narrow(a.u, 2, 0, L1);
    a1.delta = narrow(a.delta, 2, 0, L1);
    a1.z = narrow(a.z, 2, 0, L1);
    a1.B = narrow(a.B, 3, 0, L1);
    a1.out = th_view(out1);
    a1.final_state = th_view(fin1);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a1));
    a2.u = narrow(a.u, 2, L1, L - L1);
    a2.delta = narrow(a.delta, 2, L1, L - L1);
    a2.z = narrow(a.z, 2, L1, L - L1);
    a2.B = narrow(a.B, 3, L1, L - L1);
    a2.initial_state = th_view(fin1);
    a2.out = th_view(out2);
    a2.final_state = th_view(fin2);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a2));
    double *ov = t_get(out);
    th_tol tol = th_tol_for(F32);
    expect(out1, cols(ov, B * D, L, 0, L1), tol, "first part");
    expect(out2, cols(ov, B * D, L, L1, L - L1), tol, "second part");
    expect(fin2, t_get(fin), tol, "final_state of the second part");
}

/* Euclidean mod, as the ring buffer uses it. */
static int64_t emod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

static void id_conv1d_update_vs_fwd(void **state)
{
    (void)state;
    /* T decode tokens == the forward over [the W-1 entries the state gives | x], and the state
     * afterwards is [state | x] shifted (shift register) or x written at (c+i) mod S (ring,
     * later tokens win).  A pool larger than the batch, with out-of-range indices: those
     * sequences get 0 and no row of the pool changes except the ones used. */
    const int64_t B = 4, Bp = 6, D = 3, W = 4, S = 5, T = 7;
    for (int di = 0; di < 2; di++)
        for (int ring = 0; ring < 2; ring++) {
            portssm_dtype dt = ACT_DTYPES[di];
            th_rng r = th_rng_for(500 + (uint64_t)(di * 2 + ring));
            const int32_t idx[4] = {3, -1, 0, 6}; /* rows 3 and 0 used; -1 and 6 (= B') not */
            const int32_t cs[4] = {-7, 2, 11, 4};
            double *sv = rvec(&r, Bp * D * S, -1, 1);
            /* state with gaps between elements (stride 2 along S): they must stay untouched */
            th_tensor *st = th_new(th_ctx, dt, 3, SHAPE(Bp, D, S), SHAPE(D * S * 2, S * 2, 2));
            t_set(st, sv);
            sv = t_get(st); /* rounded to dt */
            th_tensor *x = t_rand(&r, dt, 3, SHAPE(B, D, T), -1, 1);
            th_tensor *w = t_rand(&r, F32, 2, SHAPE(D, W), -1, 1);
            th_tensor *bias = t_rand(&r, F32, 1, SHAPE(D), -1, 1);
            th_tensor *out = t_out(dt, 3, SHAPE(B, D, T));
            portssm_causal_conv1d_update_args a = {0};
            a.x = th_view(x);
            a.conv_state = th_view(st);
            a.weight = th_view(w);
            a.bias = th_view(bias);
            a.conv_state_indices = th_view(t_ints(1, SHAPE(B), idx));
            if (ring)
                a.cache_seqlens = th_view(t_ints(1, SHAPE(B), cs));
            a.activation = PORTSSM_ACTIVATION_SILU;
            a.out = th_view(out);
            TH_CHECK_OP(th_ctx, portssm_causal_conv1d_update(th_ctx, &a));

            /* the expected: the prefix each sequence reads, then the forward over it */
            double *xv = t_get(x), *prefix = dvec(B * D * (W - 1)), *want_state = dvec(Bp * D * S);
            memcpy(want_state, sv, (size_t)(Bp * D * S) * sizeof(double));
            for (int64_t b = 0; b < B; b++)
                for (int64_t d = 0; d < D; d++) {
                    int64_t row = idx[b] >= 0 && idx[b] < Bp ? idx[b] : 0; /* any row: out is 0 */
                    const double *s = sv + (row * D + d) * S;
                    for (int64_t k = 0; k < W - 1; k++)
                        prefix[(b * D + d) * (W - 1) + k] =
                            ring ? s[emod(cs[b] - (W - 1) + k, S)] : s[S - (W - 1) + k];
                    if (idx[b] < 0 || idx[b] >= Bp)
                        continue;
                    double *ns = want_state + (row * D + d) * S;
                    const double *xr = xv + (b * D + d) * T;
                    for (int64_t i = 0; i < T; i++)
                        if (ring)
                            ns[emod(cs[b] + i, S)] = xr[i];
                    if (!ring) /* last S of [state | x] */
                        for (int64_t k = 0; k < S; k++)
                            ns[k] = k + T < S ? s[k + T] : xr[k + T - S];
                }
            th_tensor *fout = t_out(dt, 3, SHAPE(B, D, T));
            portssm_causal_conv1d_fwd_args f = {0};
            f.x = a.x;
            f.weight = a.weight;
            f.bias = a.bias;
            f.initial_states = th_view(t_vals(dt, 3, SHAPE(B, D, W - 1), prefix));
            f.activation = PORTSSM_ACTIVATION_SILU;
            f.out = th_view(fout);
            TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &f));
            double *want_out = t_get(fout);
            for (int64_t b = 0; b < B; b++)
                if (idx[b] < 0 || idx[b] >= Bp)
                    for (int64_t k = 0; k < D * T; k++)
                        want_out[b * D * T + k] = 0;
            expect(out, want_out, th_tol_for(dt), ring ? "out (ring)" : "out (shift)");
            expect(st, want_state, (th_tol){0, 0}, ring ? "conv_state (ring)" : "conv_state (shift)");
        }
}

static void id_state_update_vs_scan(void **state)
{
    (void)state;
    /* Mamba-1: selective_state_update applied token by token (strided views of the scan's
     * tensors) == selective_scan_fwd, output per token and the final state. */
    const int64_t B = 2, D = 3, N = 4, L = 6;
    th_rng r = th_rng_for(600);
    th_tensor *u = t_rand(&r, F32, 3, SHAPE(B, D, L), -1, 1);
    th_tensor *delta = t_rand(&r, F32, 3, SHAPE(B, D, L), -2, 1);
    th_tensor *A = t_rand(&r, F32, 2, SHAPE(D, N), -1.5, -0.2);
    th_tensor *Bt = t_rand(&r, F32, 4, SHAPE(B, 1, N, L), -1, 1);
    th_tensor *Ct = t_rand(&r, F32, 4, SHAPE(B, 1, N, L), -1, 1);
    th_tensor *Dt = t_rand(&r, F32, 1, SHAPE(D), -1, 1);
    th_tensor *z = t_rand(&r, F32, 3, SHAPE(B, D, L), -2, 2);
    th_tensor *db = t_rand(&r, F32, 1, SHAPE(D), -0.5, 0.5);
    th_tensor *init = t_rand(&r, F32, 3, SHAPE(B, D, N), -1, 1);
    th_tensor *out = t_out(F32, 3, SHAPE(B, D, L)), *fin = t_out(F32, 3, SHAPE(B, D, N));
    portssm_selective_scan_fwd_args a = {0};
    a.u = th_view(u);
    a.delta = th_view(delta);
    a.A = th_view(A);
    a.B = th_view(Bt);
    a.C = th_view(Ct);
    a.D = th_view(Dt);
    a.z = th_view(z);
    a.delta_bias = th_view(db);
    a.delta_softplus = 1;
    a.initial_state = th_view(init);
    a.out = th_view(out);
    a.final_state = th_view(fin);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
    double *ov = t_get(out);
    th_tensor *st = t_vals(F32, 3, SHAPE(B, D, N), t_get(init));
    for (int64_t t = 0; t < L; t++) {
        th_tensor *o = t_out(F32, 2, SHAPE(B, D));
        portssm_selective_state_update_args s = {0};
        s.state = th_view(st);
        s.x = drop_dim(narrow(a.u, 2, t, 1), 2);
        s.dt = drop_dim(narrow(a.delta, 2, t, 1), 2);
        s.z = drop_dim(narrow(a.z, 2, t, 1), 2);
        s.A = a.A;
        s.B = drop_dim(drop_dim(narrow(a.B, 3, t, 1), 3), 1); /* (B,1,N,L) -> (B,N) */
        s.C = drop_dim(drop_dim(narrow(a.C, 3, t, 1), 3), 1);
        s.D = a.D;
        s.dt_bias = a.delta_bias;
        s.dt_softplus = 1;
        s.out = th_view(o);
        TH_CHECK_OP(th_ctx, portssm_selective_state_update(th_ctx, &s));
        char name[64];
        snprintf(name, sizeof name, "out of token %lld", (long long)t);
        expect(o, cols(ov, B * D, L, t, 1), th_tol_for(F32), name);
    }
    expect(st, t_get(fin), th_tol_for(F32), "state after L tokens");
}

static void id_state_update_heads_vs_mamba1(void **state)
{
    (void)state;
    /* The heads form on (B',H,P,N) with G groups == the Mamba-1 form run once per group on the
     * channels (h,p) of its heads, through views that merge H and P; with a pool, indices
     * (one out of range), D, z, dt_bias and softplus. */
    const int64_t B = 3, Bp = 4, H = 4, P = 3, N = 5, G = 2, hpg = H / G;
    th_rng r = th_rng_for(650);
    const int32_t idx[3] = {2, -1, 0};
    double *sv = rvec(&r, Bp * H * P * N, -1, 1);
    th_tensor *st1 = t_vals(F32, 4, SHAPE(Bp, H, P, N), sv);
    th_tensor *st2 = t_vals(F32, 4, SHAPE(Bp, H, P, N), sv);
    th_tensor *out1 = t_out(F32, 3, SHAPE(B, H, P)), *out2 = t_out(F32, 3, SHAPE(B, H, P));
    portssm_selective_state_update_args a = {0};
    a.x = th_view(t_rand(&r, F32, 3, SHAPE(B, H, P), -1, 1));
    a.dt = th_view(t_rand(&r, F32, 3, SHAPE(B, H, P), -2, 1));
    a.A = th_view(t_rand(&r, F32, 3, SHAPE(H, P, N), -1.5, -0.2));
    a.B = th_view(t_rand(&r, F32, 3, SHAPE(B, G, N), -1, 1));
    a.C = th_view(t_rand(&r, F32, 3, SHAPE(B, G, N), -1, 1));
    a.D = th_view(t_rand(&r, F32, 2, SHAPE(H, P), -1, 1));
    a.z = th_view(t_rand(&r, F32, 3, SHAPE(B, H, P), -2, 2));
    a.dt_bias = th_view(t_rand(&r, F32, 2, SHAPE(H, P), -0.5, 0.5));
    a.state_batch_indices = th_view(t_ints(1, SHAPE(B), idx));
    a.dt_softplus = 1;
    a.state = th_view(st1);
    a.out = th_view(out1);
    TH_CHECK_OP(th_ctx, portssm_selective_state_update(th_ctx, &a));
    for (int64_t g = 0; g < G; g++) {
        portssm_selective_state_update_args m = a;
        m.state = merge_dims(narrow(th_view(st2), 1, g * hpg, hpg), 1); /* (B',hpg*P,N) */
        m.x = merge_dims(narrow(a.x, 1, g * hpg, hpg), 1);                /* (B,hpg*P)   */
        m.dt = merge_dims(narrow(a.dt, 1, g * hpg, hpg), 1);
        m.z = merge_dims(narrow(a.z, 1, g * hpg, hpg), 1);
        m.A = merge_dims(narrow(a.A, 0, g * hpg, hpg), 0);                /* (hpg*P,N)   */
        m.D = merge_dims(narrow(a.D, 0, g * hpg, hpg), 0);                /* (hpg*P)     */
        m.dt_bias = merge_dims(narrow(a.dt_bias, 0, g * hpg, hpg), 0);
        m.B = drop_dim(narrow(a.B, 1, g, 1), 1);                          /* (B,N)       */
        m.C = drop_dim(narrow(a.C, 1, g, 1), 1);
        m.out = merge_dims(narrow(th_view(out2), 1, g * hpg, hpg), 1);
        TH_CHECK_OP(th_ctx, portssm_selective_state_update(th_ctx, &m));
    }
    th_tol tol = th_tol_for(F32);
    expect(out1, t_get(out2), tol, "out: heads vs per-group Mamba-1");
    expect(st1, t_get(st2), tol, "state: heads vs per-group Mamba-1");
    th_assert_guards(out2, "out (Mamba-1 views)");
    th_assert_guards(st2, "state (Mamba-1 views)");
}

/* ================================================================ gradients */

/* Central differences of loss() in every element of v, against the analytic gradient an.  The
 * step is 1e-6 relative; the tolerance 1e-6 relative to the element or to the largest element
 * of the gradient (cancellation in the difference is relative to the loss, not the element). */
typedef double (*loss_fn)(void *ctx);

static void fd_check(const char *name, double *v, int64_t n, const double *an, loss_fn loss,
                     void *ctx)
{
    double scale = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(an[i]));
    for (int64_t i = 0; i < n; i++) {
        double x0 = v[i], h = 1e-6 * fmax(1.0, fabs(x0));
        v[i] = x0 + h;
        double lp = loss(ctx);
        v[i] = x0 - h;
        double lm = loss(ctx);
        v[i] = x0;
        double fd = (lp - lm) / (2 * h);
        if (!(fabs(fd - an[i]) <= 1e-6 * (fabs(an[i]) + scale) + 1e-12))
            fail_msg("%s[%lld]: reference backward %.12g, finite difference %.12g", name,
                     (long long)i, an[i], fd);
    }
}

/* ---------------------------------------------------------------- conv1d */

typedef struct conv_cfg {
    int64_t B, D, L, W;
    int bias, silu, seq, init, dfinal, dinit, layout; /* layout of x, dout, dx */
} conv_cfg;

typedef struct conv_fd {
    pssm_ref_conv1d p;
    const double *g, *gf;
    double *out, *fin, *work;
} conv_fd;

static double conv_loss(void *ctx)
{
    conv_fd *c = ctx;
    const int64_t B = c->p.B, D = c->p.D, L = c->p.L, W1 = c->p.W - 1;
    int64_t n = B * D * L, nf = B * D * W1;
    const pssm_ref_out out = PSSM_REF_OUT(c->out, B, D, L);
    const pssm_ref_out fin = PSSM_REF_OUT(W1 > 0 ? c->fin : NULL, B, D, W1);
    pssm_ref_conv1d_fwd(&c->p, &out, &fin, c->work);
    return dot(c->g, c->out, n) + (c->gf ? dot(c->gf, c->fin, nf) : 0.0);
}

static void fd_conv1d_bwd(void **state)
{
    const conv_cfg *k = *state;
    th_rng r = th_rng_for(700 + (uint64_t)(k->W * 131 + k->L * 7 + k->seq * 3 + k->init));
    const int64_t B = k->B, D = k->D, L = k->L, W = k->W, n = B * D * L, ns = B * D * (W - 1);
    const int want_dinit = k->init || k->dinit;
    double *x = rvec(&r, n, -1, 1), *w = rvec(&r, D * W, -1, 1);
    double *bias = k->bias ? rvec(&r, D, -1, 1) : NULL;
    /* without initial_states, the gradient is the one at zeros: differences around zeros */
    double *init = k->init ? rvec(&r, ns, -1, 1) : want_dinit ? dvec(ns) : NULL;
    int32_t *seq = k->seq ? rand_seq(&r, B, L) : NULL;
    double *g = rvec(&r, n, -1, 1), *gf = k->dfinal ? rvec(&r, ns, -1, 1) : NULL;

    pssm_ref_conv1d p = {B, D, L, W, PSSM_REF_IN(x, B, D, L), PSSM_REF_IN(w, D, W),
                         PSSM_REF_IN(bias, D), PSSM_REF_I32(seq, B, L),
                         PSSM_REF_IN(k->init ? init : NULL, B, D, W - 1), k->silu};
    double *dx = dvec(n), *dw = dvec(D * W), *db = k->bias ? dvec(D) : NULL;
    double *dinit = want_dinit ? dvec(ns) : NULL;
    double *work = dvec(pssm_ref_conv1d_work(&p));
    const pssm_ref_in vg = PSSM_REF_IN(g, B, D, L), vgf = PSSM_REF_IN(gf, B, D, W - 1);
    const pssm_ref_out vdx = PSSM_REF_OUT(dx, B, D, L), vdi = PSSM_REF_OUT(dinit, B, D, W - 1);
    pssm_ref_conv1d_bwd(&p, &vg, &vgf, &vdx, dw, db, &vdi, work);

    conv_fd c = {p, g, gf, dvec(n), dvec(ns), dvec(pssm_ref_conv1d_work(&p))};
    c.p.initial_states = PSSM_REF_IN(init, B, D, W - 1);
    fd_check("reference dx", x, n, dx, conv_loss, &c);
    fd_check("reference dweight", w, D * W, dw, conv_loss, &c);
    if (bias)
        fd_check("reference dbias", bias, D, db, conv_loss, &c);
    if (dinit)
        fd_check("reference dinitial_states", init, ns, dinit, conv_loss, &c);

    /* the backend under test against the reference */
    const int64_t *sh = SHAPE(B, D, L), *shs = SHAPE(B, D, W - 1);
    portssm_causal_conv1d_bwd_args a = {0};
    a.x = th_view(t_set(th_new(th_ctx, F32, 3, sh, bdl_stride(sh, k->layout)), x));
    a.weight = th_view(t_vals(F32, 2, SHAPE(D, W), w));
    if (bias)
        a.bias = th_view(t_vals(F32, 1, SHAPE(D), bias));
    if (seq)
        a.seq_idx = th_view(t_ints(2, SHAPE(B, L), seq));
    if (k->init)
        a.initial_states = th_view(t_vals(F32, 3, shs, init));
    a.dout = th_view(t_set(th_new(th_ctx, F32, 3, sh, bdl_stride(sh, k->layout)), g));
    if (gf)
        a.dfinal_states = th_view(t_vals(F32, 3, shs, gf));
    a.activation = k->silu ? PORTSSM_ACTIVATION_SILU : PORTSSM_ACTIVATION_NONE;
    th_tensor *tdx = t_out_strided(F32, 3, sh, bdl_stride(sh, k->layout));
    th_tensor *tdw = t_out(F32, 2, SHAPE(D, W));
    th_tensor *tdb = bias ? t_out(F32, 1, SHAPE(D)) : NULL;
    th_tensor *tdi = dinit ? t_out(F32, 3, shs) : NULL;
    a.dx = th_view(tdx);
    a.dweight = th_view(tdw);
    if (tdb)
        a.dbias = th_view(tdb);
    if (tdi)
        a.dinitial_states = th_view(tdi);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_bwd(th_ctx, &a));
    th_tol tol = th_tol_for(F32);
    expect(tdx, dx, tol, "dx");
    expect(tdw, dw, tol, "dweight");
    if (tdb)
        expect(tdb, db, tol, "dbias");
    if (tdi)
        expect(tdi, dinit, tol, "dinitial_states");
}

/*                                  B  D  L  W  bias silu seq init dfin dinit layout */
static const conv_cfg CONV_PLAIN = {2, 3, 9, 4, 0, 0, 0, 0, 0, 0, 0};
static const conv_cfg CONV_BIAS_SILU = {2, 3, 9, 4, 1, 1, 0, 0, 0, 0, 1};
static const conv_cfg CONV_W1 = {2, 2, 6, 1, 1, 1, 0, 0, 0, 0, 0};
static const conv_cfg CONV_SEQ = {2, 2, 11, 2, 0, 1, 1, 0, 0, 0, 2};
static const conv_cfg CONV_STATES = {2, 3, 9, 3, 1, 0, 0, 1, 1, 0, 0};
static const conv_cfg CONV_ALL = {2, 3, 10, 4, 1, 1, 1, 1, 1, 0, 1};
/* dinitial without initial_states; L < W-1, so final_states reaches into the initial ones */
static const conv_cfg CONV_DINIT_SHORT = {1, 2, 3, 5, 0, 0, 0, 0, 1, 1, 0};
static const conv_cfg CONV_W8 = {1, 2, 12, 8, 1, 1, 1, 1, 1, 0, 0};

/* ---------------------------------------------------------------- selective scan */

typedef struct scan_cfg {
    /* GB / GC: 0 = constant (D,N), else the groups of a variable B / C (the same when both are) */
    int64_t B, D, L, N, GB, GC;
    int hasD, z, dbias, softplus, init, dfinal, dinit, big, layout; /* of u, delta, dout, du, ddelta */
} scan_cfg;

typedef struct scan_fd {
    pssm_ref_scan p;
    const double *g, *gf;
    double *out, *fin, *work;
} scan_fd;

static double scan_loss(void *ctx)
{
    scan_fd *s = ctx;
    const int64_t B = s->p.B, D = s->p.D, L = s->p.L, N = s->p.N;
    int64_t n = B * D * L, nf = B * D * N;
    const pssm_ref_out out = PSSM_REF_OUT(s->out, B, D, L), fin = PSSM_REF_OUT(s->fin, B, D, N);
    const pssm_ref_out ck = PSSM_REF_OUT(NULL, 1);
    pssm_ref_scan_fwd(&s->p, &out, &fin, &ck, 0, s->work);
    return dot(s->g, s->out, n) + (s->gf ? dot(s->gf, s->fin, nf) : 0.0);
}

static th_tensor *bc_tensor(const scan_cfg *k, int64_t G, const double *v, int out)
{
    if (G == 0)
        return out ? t_out(F32, 2, SHAPE(k->D, k->N)) : t_vals(F32, 2, SHAPE(k->D, k->N), v);
    const int64_t *sh = SHAPE(k->B, G, k->N, k->L);
    return out ? t_out(F32, 4, sh) : t_vals(F32, 4, sh, v);
}

static void fd_selective_scan_bwd(void **state)
{
    const scan_cfg *k = *state;
    th_rng r = th_rng_for(800 + (uint64_t)(k->GB * 97 + k->GC * 31 + k->N * 7 + k->L + k->big));
    const int64_t B = k->B, D = k->D, L = k->L, N = k->N, n = B * D * L, ns = B * D * N;
    const int64_t nb = k->GB ? B * k->GB * N * L : D * N, nc = k->GC ? B * k->GC * N * L : D * N;
    const int want_dinit = k->init || k->dinit;
    double *u = rvec(&r, n, -1, 1);
    double *delta = k->softplus ? rvec(&r, n, -2, 2) : rvec(&r, n, 0.1, 1);
    if (k->big) /* the softplus pass-through above 20, far enough from the kink for the steps */
        for (int64_t i = 0; i < n; i += 3)
            delta[i] = (double)(float)th_uniform(&r, 20.5, 22);
    double *A = rvec(&r, D * N, -1.5, -0.2);
    double *Bm = rvec(&r, nb, -1, 1), *Cm = rvec(&r, nc, -1, 1);
    double *Dv = k->hasD ? rvec(&r, D, -1, 1) : NULL, *z = k->z ? rvec(&r, n, -2, 2) : NULL;
    double *db = k->dbias ? rvec(&r, D, -0.5, 0.5) : NULL;
    double *init = k->init ? rvec(&r, ns, -1, 1) : want_dinit ? dvec(ns) : NULL;
    double *g = rvec(&r, n, -1, 1), *gf = k->dfinal ? rvec(&r, ns, -1, 1) : NULL;

    const int64_t *shb = k->GB ? SHAPE(B, k->GB, N, L) : SHAPE(D, N, 1, 1);
    const int64_t *shc = k->GC ? SHAPE(B, k->GC, N, L) : SHAPE(D, N, 1, 1);
    pssm_ref_scan p = {B, D, L, N, PSSM_REF_IN(u, B, D, L), PSSM_REF_IN(delta, B, D, L),
                       PSSM_REF_IN(A, D, N), pssm_ref_dense(Bm, 4, shb),
                       pssm_ref_dense(Cm, 4, shc), k->GB, k->GC, PSSM_REF_IN(Dv, D),
                       PSSM_REF_IN(z, B, D, L), PSSM_REF_IN(db, D),
                       PSSM_REF_IN(k->init ? init : NULL, B, D, N), k->softplus};
    double *du = dvec(n), *ddelta = dvec(n), *dz = z ? dvec(n) : NULL;
    double *dinit = want_dinit ? dvec(ns) : NULL;
    pssm_ref_scan_grads gr = {PSSM_REF_OUT(du, B, D, L), PSSM_REF_OUT(ddelta, B, D, L),
                              dvec(D * N), dvec(nb), dvec(nc), Dv ? dvec(D) : NULL,
                              PSSM_REF_OUT(dz, B, D, L), db ? dvec(D) : NULL,
                              PSSM_REF_OUT(dinit, B, D, N)};
    double *work = dvec(pssm_ref_scan_bwd_work(&p));
    const pssm_ref_in vg = PSSM_REF_IN(g, B, D, L), vgf = PSSM_REF_IN(gf, B, D, N);
    pssm_ref_scan_bwd(&p, &vg, &vgf, &gr, work);

    scan_fd s = {p, g, gf, dvec(n), dvec(ns), dvec(pssm_ref_scan_fwd_work(&p))};
    s.p.initial_state = PSSM_REF_IN(init, B, D, N);
    fd_check("reference du", u, n, du, scan_loss, &s);
    fd_check("reference ddelta", delta, n, ddelta, scan_loss, &s);
    fd_check("reference dA", A, D * N, gr.dA, scan_loss, &s);
    fd_check("reference dB", Bm, nb, gr.dB, scan_loss, &s);
    fd_check("reference dC", Cm, nc, gr.dC, scan_loss, &s);
    if (Dv)
        fd_check("reference dD", Dv, D, gr.dD, scan_loss, &s);
    if (z)
        fd_check("reference dz", z, n, dz, scan_loss, &s);
    if (db)
        fd_check("reference ddelta_bias", db, D, gr.ddelta_bias, scan_loss, &s);
    if (want_dinit)
        fd_check("reference dinitial_state", init, ns, dinit, scan_loss, &s);

    /* the backend under test against the reference */
    const int64_t *sh = SHAPE(B, D, L), *shn = SHAPE(B, D, N);
    const int64_t *st = bdl_stride(sh, k->layout);
    portssm_selective_scan_bwd_args a = {0};
    a.u = th_view(t_set(th_new(th_ctx, F32, 3, sh, st), u));
    a.delta = th_view(t_set(th_new(th_ctx, F32, 3, sh, st), delta));
    a.A = th_view(t_vals(F32, 2, SHAPE(D, N), A));
    a.B = th_view(bc_tensor(k, k->GB, Bm, 0));
    a.C = th_view(bc_tensor(k, k->GC, Cm, 0));
    if (Dv)
        a.D = th_view(t_vals(F32, 1, SHAPE(D), Dv));
    if (z)
        a.z = th_view(t_vals(F32, 3, sh, z));
    if (db)
        a.delta_bias = th_view(t_vals(F32, 1, SHAPE(D), db));
    if (k->init)
        a.initial_state = th_view(t_vals(F32, 3, shn, init));
    a.dout = th_view(t_set(th_new(th_ctx, F32, 3, sh, st), g));
    if (gf)
        a.dfinal_state = th_view(t_vals(F32, 3, shn, gf));
    a.delta_softplus = k->softplus;
    th_tensor *tdu = t_out_strided(F32, 3, sh, st), *tdd = t_out_strided(F32, 3, sh, st);
    th_tensor *tdA = t_out(F32, 2, SHAPE(D, N));
    th_tensor *tdB = bc_tensor(k, k->GB, NULL, 1), *tdC = bc_tensor(k, k->GC, NULL, 1);
    th_tensor *tdD = Dv ? t_out(F32, 1, SHAPE(D)) : NULL, *tdz = z ? t_out(F32, 3, sh) : NULL;
    th_tensor *tddb = db ? t_out(F32, 1, SHAPE(D)) : NULL;
    th_tensor *tdi = want_dinit ? t_out(F32, 3, shn) : NULL;
    a.du = th_view(tdu);
    a.ddelta = th_view(tdd);
    a.dA = th_view(tdA);
    a.dB = th_view(tdB);
    a.dC = th_view(tdC);
    if (tdD)
        a.dD = th_view(tdD);
    if (tdz)
        a.dz = th_view(tdz);
    if (tddb)
        a.ddelta_bias = th_view(tddb);
    if (tdi)
        a.dinitial_state = th_view(tdi);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_bwd(th_ctx, &a));
    th_tol tol = th_tol_for(F32);
    expect(tdu, du, tol, "du");
    expect(tdd, ddelta, tol, "ddelta");
    expect(tdA, gr.dA, tol, "dA");
    expect(tdB, gr.dB, tol, "dB");
    expect(tdC, gr.dC, tol, "dC");
    if (tdD)
        expect(tdD, gr.dD, tol, "dD");
    if (tdz)
        expect(tdz, dz, tol, "dz");
    if (tddb)
        expect(tddb, gr.ddelta_bias, tol, "ddelta_bias");
    if (tdi)
        expect(tdi, dinit, tol, "dinitial_state");
}

/*                                  B  D  L  N GB GC  D  z db sp init dfin dinit big layout */
static const scan_cfg SCAN_PLAIN = {2, 3, 6, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
static const scan_cfg SCAN_VAR_D_Z = {2, 3, 6, 4, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1};
static const scan_cfg SCAN_GROUPS_SOFTPLUS = {2, 4, 5, 3, 2, 0, 0, 0, 1, 1, 0, 0, 0, 0, 2};
static const scan_cfg SCAN_STATES_BIG = {2, 4, 5, 3, 0, 2, 0, 0, 0, 1, 1, 1, 0, 1, 0};
static const scan_cfg SCAN_ALL_N1 = {2, 4, 7, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1};
/* dinitial_state without initial_state, L = 1 */
static const scan_cfg SCAN_DINIT_L1 = {1, 2, 1, 3, 2, 2, 1, 1, 1, 0, 0, 1, 1, 0, 0};
static const scan_cfg SCAN_ALL_LONG = {1, 4, 33, 5, 4, 4, 1, 1, 1, 1, 1, 1, 0, 0, 0};

/* ================================================================ main */

#define T_(f) {#f, f, NULL, teardown, NULL}
#define T_CFG(f, cfg) {#f "/" #cfg, f, NULL, teardown, (void *)&cfg}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T_(ref_pointwise),
        T_(pointwise_range),
        T_(hand_conv1d_fwd),
        T_(hand_conv1d_bwd),
        T_(hand_conv1d_update),
        T_(hand_selective_scan_fwd),
        T_(hand_selective_scan_bwd),
        T_(hand_selective_state_update),
        T_(id_conv1d_width1),
        T_(id_scan_memoryless),
        T_(id_conv1d_split),
        T_(id_scan_split),
        T_(id_conv1d_update_vs_fwd),
        T_(id_state_update_vs_scan),
        T_(id_state_update_heads_vs_mamba1),
        T_CFG(fd_conv1d_bwd, CONV_PLAIN),
        T_CFG(fd_conv1d_bwd, CONV_BIAS_SILU),
        T_CFG(fd_conv1d_bwd, CONV_W1),
        T_CFG(fd_conv1d_bwd, CONV_SEQ),
        T_CFG(fd_conv1d_bwd, CONV_STATES),
        T_CFG(fd_conv1d_bwd, CONV_ALL),
        T_CFG(fd_conv1d_bwd, CONV_DINIT_SHORT),
        T_CFG(fd_conv1d_bwd, CONV_W8),
        T_CFG(fd_selective_scan_bwd, SCAN_PLAIN),
        T_CFG(fd_selective_scan_bwd, SCAN_VAR_D_Z),
        T_CFG(fd_selective_scan_bwd, SCAN_GROUPS_SOFTPLUS),
        T_CFG(fd_selective_scan_bwd, SCAN_STATES_BIG),
        T_CFG(fd_selective_scan_bwd, SCAN_ALL_N1),
        T_CFG(fd_selective_scan_bwd, SCAN_DINIT_L1),
        T_CFG(fd_selective_scan_bwd, SCAN_ALL_LONG),
    };
    return th_main(argc, argv, "test_properties", tests, sizeof tests / sizeof tests[0]);
}
