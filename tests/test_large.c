/*
 * test_large.c - every op with element offsets past 2^31, on a GPU with the memory for them:
 * the scan forward (with checkpoints) and backward, the conv forward and backward (B*D*L past
 * 2^31), the conv update and both forms of the state update (a state pool past 2^31, rows at
 * its end picked by indices), and the SSD forward and backward (B*L*H*P past 2^31).
 * 32-bit offsets silently corrupt such tensors (mamba-ssm #884, the SSD's #1015); here every
 * output of a few sampled channels, rows or heads - among them ones lying past 2^31 elements -
 * is checked against the cpu oracle run on those alone, as are their parameter gradients.
 *
 * Inputs are a random tile of P values (P odd, so rows see different stretches of it) repeated
 * through device-to-device copies: element i of a tensor is tile[i mod P], which lets the host
 * rebuild any sampled row without a copy of the whole tensor.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sizes can be shrunk (-DBIG_D=.. -DBIG_L=.. -DBIG_SMALL) to try the suite itself on the sim. */
#ifndef BIG_D
#define BIG_D 4096
#endif
#ifndef BIG_L
#define BIG_L 262400 /* B * D * L = 2.15e9 > 2^31 */
#endif
#define BIG_B 2
#define BIG_N 16
#define BIG_W 4
#define TILE ((int64_t)(1 << 24) + 17)
#ifndef BIG_SMALL
#define NEED_BYTES (80ull << 30)
#define BIG_2G ((int64_t)INT32_MAX + 1) /* the state pools pass this many elements */
#else
#define NEED_BYTES 0ull
#define BIG_2G ((int64_t)1 << 23)
#endif

static const int64_t sampled_d[] = {0, BIG_D / 2 + 1, BIG_D - 1};
#define NSAMPLED (int)(sizeof sampled_d / sizeof sampled_d[0])

/* Skips unless the backend is a GPU with at least `need` bytes: the scan, conv and update cases
 * ask NEED_BYTES (80 GiB, an H200's class), the SSD case what its own tensors take (it fits an
 * 80 GB H100). */
static void skip_unless_big_gpu_bytes(unsigned long long need)
{
    portssm_backend be = portssm_get_backend(th_ctx);
#ifdef BIG_SMALL
    be = PORTSSM_BACKEND_CUDA;
    need = 0;
#endif
    if (be != PORTSSM_BACKEND_CUDA && be != PORTSSM_BACKEND_HIP)
        th_skip_test("skipped: tensors past 2^31 elements are checked on GPUs (this is %s)",
                     th_backend_label);
    portssm_device_info info;
    assert_int_equal(portssm_get_device_info(th_ctx, &info), PORTSSM_OK);
    if (info.total_memory < need)
        th_skip_test("skipped: needs a GPU with %.1f GiB, %s has %.1f", need / 1073741824.0,
                     info.name, info.total_memory / 1073741824.0);
}

static void skip_unless_big_gpu(void) { skip_unless_big_gpu_bytes(NEED_BYTES); }

/* ---------------------------------------------------------------- tiled device tensors */

typedef struct big {
    void *dev;
    portssm_dtype dt;
    int64_t numel;
    float *tile; /* the values, as the dtype rounds them; NULL for outputs */
} big;

static size_t esize(portssm_dtype dt) { return portssm_dtype_size(dt); }

static void big_alloc(big *t, portssm_dtype dt, int64_t numel)
{
    memset(t, 0, sizeof *t);
    t->dt = dt;
    t->numel = numel;
    portssm_status s = portssm_malloc(th_ctx, &t->dev, (size_t)numel * esize(dt));
    if (s != PORTSSM_OK)
        fail_msg("portssm_malloc of %lld elements: %s", (long long)numel,
                 portssm_last_error(th_ctx));
    /* poisoned: every float format's 0xff..ff is NaN, so an output element no kernel wrote
     * fails its comparison (inputs overwrite it) */
    assert_int_equal(portssm_memset(th_ctx, t->dev, 0xff, (size_t)numel * esize(dt)), PORTSSM_OK);
}

/* Host float <-> storage bits of dt, through a one-element tensor of the harness. */
static void to_storage(portssm_dtype dt, const float *v, void *dst, int64_t n)
{
    th_tensor *one = th_new(th_oracle, dt, 1, (int64_t[]){n}, NULL);
    int64_t idx[1];
    for (idx[0] = 0; idx[0] < n; idx[0]++)
        th_set(one, idx, v[idx[0]]);
    memcpy(dst, one->host + one->guard, (size_t)n * esize(dt));
    th_free(one);
}

/* An input: a tile of values uniform in [lo, hi] (rounded to dt), repeated over the tensor. */
static void big_input(big *t, portssm_dtype dt, int64_t numel, th_rng *r, double lo, double hi)
{
    big_alloc(t, dt, numel);
    const int64_t P = numel < TILE ? numel : TILE;
    t->tile = malloc((size_t)P * sizeof(float));
    void *bits = malloc((size_t)P * esize(dt));
    assert_true(t->tile && bits);
    for (int64_t i = 0; i < P; i++)
        t->tile[i] = (float)th_uniform(r, lo, hi);
    to_storage(dt, t->tile, bits, P);
    /* the rounded values, read back the same way */
    th_tensor *back = th_new(th_oracle, dt, 1, (int64_t[]){P}, NULL);
    memcpy(back->host + back->guard, bits, (size_t)P * esize(dt));
    int64_t idx[1];
    for (idx[0] = 0; idx[0] < P; idx[0]++)
        t->tile[idx[0]] = (float)th_get(back, idx);
    th_free(back);
    assert_int_equal(portssm_memcpy(th_ctx, t->dev, bits, (size_t)P * esize(dt),
                                    PORTSSM_HOST_TO_DEVICE),
                     PORTSSM_OK);
    free(bits);
    for (int64_t have = P; have < numel;) { /* doubling copies */
        const int64_t n = have < numel - have ? have : numel - have;
        assert_int_equal(portssm_memcpy(th_ctx, (char *)t->dev + (size_t)have * esize(dt), t->dev,
                                        (size_t)n * esize(dt), PORTSSM_DEVICE_TO_DEVICE),
                         PORTSSM_OK);
        have += n;
    }
}

static float big_value(const big *t, int64_t i)
{
    const int64_t P = t->numel < TILE ? t->numel : TILE;
    return t->tile[i % P];
}

static void big_free(big *t)
{
    portssm_free(th_ctx, t->dev);
    free(t->tile);
    memset(t, 0, sizeof *t);
}

/* Frees the n tensors of a test. */
static void big_free_all(big *const *all, size_t n)
{
    for (size_t i = 0; i < n; i++)
        big_free(all[i]);
}

static portssm_tensor big_view(const big *t, int ndim, const int64_t *shape)
{
    return portssm_tensor_contiguous(t->dev, t->dt, ndim, shape);
}

/* ---------------------------------------------------------------- one channel on the oracle */

/* An oracle tensor holding the rows (b, d) of every b of a (B,D,L) input: shape (B,1,L). */
static th_tensor *channel_rows(const big *t, int64_t d)
{
    th_tensor *o = th_new(th_oracle, t->dt, 3, (int64_t[]){BIG_B, 1, BIG_L}, NULL);
    int64_t idx[3] = {0, 0, 0};
    for (idx[0] = 0; idx[0] < BIG_B; idx[0]++)
        for (idx[2] = 0; idx[2] < BIG_L; idx[2]++)
            th_set(o, idx, big_value(t, (idx[0] * BIG_D + d) * BIG_L + idx[2]));
    th_upload(o);
    return o;
}

/* Elements [first, first + n) of t as an oracle tensor of the given shape. */
static th_tensor *span_of(const big *t, int64_t first, int ndim, const int64_t *shape)
{
    th_tensor *o = th_new(th_oracle, t->dt, ndim, shape, NULL);
    const int64_t n = th_numel(o);
    int64_t idx[4];
    for (int64_t k = 0; k < n; k++) {
        th_unravel(o, k, idx);
        th_set(o, idx, big_value(t, first + k));
    }
    th_upload(o);
    return o;
}

/* The GPU's rows (b, d) of every b of a (B,D,L) output against the oracle's (B,1,L) tensor;
 * with stride 0 one element per b (a per-channel output of B rows). */
static void check_rows(const big *got, int64_t d, int64_t row_len, int64_t row_stride_b,
                       th_tensor *ref, th_tol tol, const char *name)
{
    th_tensor *g = th_new(th_oracle, got->dt, 3, (int64_t[]){BIG_B, 1, row_len}, NULL);
    for (int64_t b = 0; b < BIG_B; b++) {
        const size_t es = esize(got->dt);
        const int64_t first = b * row_stride_b + d * row_len;
        assert_int_equal(portssm_memcpy(th_ctx, g->host + g->guard + (size_t)(b * row_len) * es,
                                        (char *)got->dev + (size_t)first * es,
                                        (size_t)row_len * es, PORTSSM_DEVICE_TO_HOST),
                         PORTSSM_OK);
    }
    th_upload(g);
    char what[160];
    snprintf(what, sizeof what, "%s, channel %lld (rows past 2^31 elements: %s)", name,
             (long long)d, (BIG_B - 1) * row_stride_b + d * row_len > INT32_MAX ? "yes" : "no");
    th_assert_close(g, ref, tol, what);
    th_free(g);
}

/* ---------------------------------------------------------------- picking elements */

/* A whole output on the host (its storage bits); free() it. */
static unsigned char *big_download(const big *t)
{
    const size_t bytes = (size_t)t->numel * esize(t->dt);
    unsigned char *h = malloc(bytes);
    if (!h)
        fail_msg("out of host memory for %zu bytes", bytes);
    assert_int_equal(portssm_memcpy(th_ctx, h, t->dev, bytes, PORTSSM_DEVICE_TO_HOST), PORTSSM_OK);
    return h;
}

/* An oracle tensor of `shape` whose element idx is element first + sum idx[i] * stride[i] of t:
 * of its tiled values (an input; bits NULL) or of its downloaded bits (an output). */
static th_tensor *pick(const big *t, const unsigned char *bits, int ndim, const int64_t *shape,
                       const int64_t *stride, int64_t first)
{
    th_tensor *o = th_new(th_oracle, t->dt, ndim, shape, NULL);
    const int64_t n = th_numel(o);
    const size_t es = esize(t->dt);
    int64_t idx[PORTSSM_MAX_DIMS];
    for (int64_t k = 0; k < n; k++) {
        th_unravel(o, k, idx);
        int64_t off = first;
        for (int i = 0; i < ndim; i++)
            off += idx[i] * stride[i];
        if (bits)
            memcpy(o->host + o->guard + (size_t)k * es, bits + (size_t)off * es, es);
        else
            th_set(o, idx, big_value(t, off));
    }
    th_upload(o);
    return o;
}

/* A device span [first, first + numel(shape)) of t as an oracle tensor of that shape. */
static th_tensor *fetch_span(const big *t, int64_t first, int ndim, const int64_t *shape)
{
    th_tensor *o = th_new(th_oracle, t->dt, ndim, shape, NULL);
    const size_t es = esize(t->dt);
    assert_int_equal(portssm_memcpy(th_ctx, o->host + o->guard, (char *)t->dev + (size_t)first * es,
                                    (size_t)th_numel(o) * es, PORTSSM_DEVICE_TO_HOST),
                     PORTSSM_OK);
    th_upload(o);
    return o;
}

/* An int32 vector on the device. */
static void big_ints(big *t, const int32_t *v, int64_t n)
{
    big_alloc(t, PORTSSM_I32, n);
    assert_int_equal(portssm_memcpy(th_ctx, t->dev, v, (size_t)n * 4, PORTSSM_HOST_TO_DEVICE),
                     PORTSSM_OK);
}

static const char *past(int64_t last_offset) { return last_offset > INT32_MAX ? "past 2^31" : "below 2^31"; }

/* ---------------------------------------------------------------- the scan */

static void test_scan_past_2g(void **state)
{
    (void)state;
    skip_unless_big_gpu();
    const portssm_dtype act = PORTSSM_BF16;
    const int64_t BDL = (int64_t)BIG_B * BIG_D * BIG_L, x[3] = {BIG_B, BIG_D, BIG_L};
    const int64_t dn[2] = {BIG_D, BIG_N}, d1[1] = {BIG_D}, bc[4] = {BIG_B, 1, BIG_N, BIG_L};
#ifndef BIG_SMALL
    assert_true(BDL > INT32_MAX);
#endif
    th_rng r = th_rng_for(7);
    big u, delta, z, dout, A, Bm, Cm, Dv, bias, out, ck, du, ddelta, dz, dA, dB, dC, dD, dbias;
    big_input(&u, act, BDL, &r, -1, 1);
    big_input(&delta, act, BDL, &r, -3, 1);
    big_input(&z, act, BDL, &r, -2, 2);
    big_input(&dout, act, BDL, &r, -1, 1);
    big_input(&A, PORTSSM_F32, BIG_D * BIG_N, &r, -8, -0.5);
    big_input(&Bm, act, BIG_B * BIG_N * BIG_L, &r, -1, 1);
    big_input(&Cm, act, BIG_B * BIG_N * BIG_L, &r, -1, 1);
    big_input(&Dv, PORTSSM_F32, BIG_D, &r, -1, 1);
    big_input(&bias, PORTSSM_F32, BIG_D, &r, -0.5, 0.5);
    const int64_t K = (BIG_L - 1) / 128, cks[4] = {BIG_B, BIG_D, K, BIG_N};
    big_alloc(&out, act, BDL);
    big_alloc(&ck, PORTSSM_F32, BIG_B * BIG_D * K * BIG_N);
    big_alloc(&du, act, BDL);
    big_alloc(&ddelta, act, BDL);
    big_alloc(&dz, act, BDL);
    big_alloc(&dA, PORTSSM_F32, BIG_D * BIG_N);
    big_alloc(&dB, act, BIG_B * BIG_N * BIG_L);
    big_alloc(&dC, act, BIG_B * BIG_N * BIG_L);
    big_alloc(&dD, PORTSSM_F32, BIG_D);
    big_alloc(&dbias, PORTSSM_F32, BIG_D);

    portssm_selective_scan_fwd_args f;
    memset(&f, 0, sizeof f);
    f.u = big_view(&u, 3, x);
    f.delta = big_view(&delta, 3, x);
    f.A = big_view(&A, 2, dn);
    f.B = big_view(&Bm, 4, bc);
    f.C = big_view(&Cm, 4, bc);
    f.D = big_view(&Dv, 1, d1);
    f.z = big_view(&z, 3, x);
    f.delta_bias = big_view(&bias, 1, d1);
    f.out = big_view(&out, 3, x);
    f.checkpoints = big_view(&ck, 4, cks);
    f.delta_softplus = 1;
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &f));
    portssm_selective_scan_bwd_args a;
    memset(&a, 0, sizeof a);
    a.u = f.u, a.delta = f.delta, a.A = f.A, a.B = f.B, a.C = f.C, a.D = f.D, a.z = f.z;
    a.delta_bias = f.delta_bias, a.checkpoints = f.checkpoints, a.delta_softplus = 1;
    a.dout = big_view(&dout, 3, x);
    a.du = big_view(&du, 3, x);
    a.ddelta = big_view(&ddelta, 3, x);
    a.dz = big_view(&dz, 3, x);
    a.dA = big_view(&dA, 2, dn);
    a.dB = big_view(&dB, 4, bc);
    a.dC = big_view(&dC, 4, bc);
    a.dD = big_view(&dD, 1, d1);
    a.ddelta_bias = big_view(&dbias, 1, d1);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_bwd(th_ctx, &a));
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
    big_free(&ck);

    const th_tol t = th_tol_for(act), w = {1e-3, 1e-3};
    for (int s = 0; s < NSAMPLED; s++) {
        const int64_t d = sampled_d[s];
        const int64_t x1[3] = {BIG_B, 1, BIG_L}, n1[2] = {1, BIG_N}, one[1] = {1};
        th_tensor *ou = channel_rows(&u, d), *od = channel_rows(&delta, d);
        th_tensor *oz = channel_rows(&z, d), *og = channel_rows(&dout, d);
        th_tensor *oA = span_of(&A, d * BIG_N, 2, n1), *oD = span_of(&Dv, d, 1, one);
        th_tensor *obias = span_of(&bias, d, 1, one);
        th_tensor *oB = span_of(&Bm, 0, 4, bc), *oC = span_of(&Cm, 0, 4, bc);
        th_tensor *rout = th_oracle_out(act, 3, x1), *rdu = th_oracle_out(act, 3, x1);
        th_tensor *rdd = th_oracle_out(act, 3, x1), *rdz = th_oracle_out(act, 3, x1);
        th_tensor *rdA = th_oracle_out(PORTSSM_F32, 2, n1), *rdB = th_oracle_out(act, 4, bc);
        th_tensor *rdC = th_oracle_out(act, 4, bc), *rdD = th_oracle_out(PORTSSM_F32, 1, one);
        th_tensor *rdb = th_oracle_out(PORTSSM_F32, 1, one);
        portssm_selective_scan_fwd_args rf;
        memset(&rf, 0, sizeof rf);
        rf.u = th_view(ou), rf.delta = th_view(od), rf.A = th_view(oA), rf.B = th_view(oB);
        rf.C = th_view(oC), rf.D = th_view(oD), rf.z = th_view(oz), rf.delta_bias = th_view(obias);
        rf.out = th_view(rout), rf.delta_softplus = 1;
        assert_int_equal(portssm_selective_scan_fwd(th_oracle, &rf), PORTSSM_OK);
        portssm_selective_scan_bwd_args rb;
        memset(&rb, 0, sizeof rb);
        rb.u = rf.u, rb.delta = rf.delta, rb.A = rf.A, rb.B = rf.B, rb.C = rf.C, rb.D = rf.D;
        rb.z = rf.z, rb.delta_bias = rf.delta_bias, rb.delta_softplus = 1;
        rb.dout = th_view(og), rb.du = th_view(rdu), rb.ddelta = th_view(rdd);
        rb.dz = th_view(rdz), rb.dA = th_view(rdA), rb.dB = th_view(rdB), rb.dC = th_view(rdC);
        rb.dD = th_view(rdD), rb.ddelta_bias = th_view(rdb);
        assert_int_equal(portssm_selective_scan_bwd(th_oracle, &rb), PORTSSM_OK);
        th_download(rout), th_download(rdu), th_download(rdd), th_download(rdz);
        th_download(rdA), th_download(rdD), th_download(rdb);
        check_rows(&out, d, BIG_L, (int64_t)BIG_D * BIG_L, rout, t, "scan fwd out");
        check_rows(&du, d, BIG_L, (int64_t)BIG_D * BIG_L, rdu,
                   (th_tol){2 * t.rtol, 2 * t.atol}, "scan bwd du");
        check_rows(&ddelta, d, BIG_L, (int64_t)BIG_D * BIG_L, rdd,
                   (th_tol){5 * t.rtol, 10 * t.atol}, "scan bwd ddelta");
        check_rows(&dz, d, BIG_L, (int64_t)BIG_D * BIG_L, rdz, t, "scan bwd dz"); /* act's, as
                                                                                 test_scan */
        /* per-channel sums: one "row" of N (dA) or 1 (dD, ddelta_bias) values, B times the same */
        th_tensor *two = th_new(th_oracle, PORTSSM_F32, 3, (int64_t[]){BIG_B, 1, BIG_N}, NULL);
        int64_t idx[3] = {0, 0, 0}, j[2] = {0, 0};
        for (idx[0] = 0; idx[0] < BIG_B; idx[0]++)
            for (idx[2] = j[1] = 0; idx[2] < BIG_N; idx[2]++, j[1]++)
                th_set(two, idx, th_get(rdA, j));
        th_upload(two);
        check_rows(&dA, d, BIG_N, 0, two, (th_tol){w.rtol, 5 * w.atol}, "scan bwd dA");
        th_free(two);
        th_tensor *rows[2] = {rdD, rdb};
        const big *gots[2] = {&dD, &dbias};
        const char *names[2] = {"scan bwd dD", "scan bwd ddelta_bias"};
        for (int q = 0; q < 2; q++) {
            th_tensor *tw = th_new(th_oracle, PORTSSM_F32, 3, (int64_t[]){BIG_B, 1, 1}, NULL);
            int64_t k0[1] = {0};
            for (idx[0] = 0, idx[2] = 0; idx[0] < BIG_B; idx[0]++)
                th_set(tw, idx, th_get(rows[q], k0));
            th_upload(tw);
            check_rows(gots[q], d, 1, 0, tw, w, names[q]);
            th_free(tw);
        }
        th_free_all();
    }
    big *all[] = {&u, &delta, &z, &dout, &A, &Bm, &Cm, &Dv, &bias, &out,
                  &du, &ddelta, &dz, &dA, &dB, &dC, &dD, &dbias};
    big_free_all(all, sizeof all / sizeof all[0]);
}

/* ---------------------------------------------------------------- the conv */

static void test_conv_past_2g(void **state)
{
    (void)state;
    skip_unless_big_gpu();
    const portssm_dtype act = PORTSSM_BF16;
    const int64_t BDL = (int64_t)BIG_B * BIG_D * BIG_L, x[3] = {BIG_B, BIG_D, BIG_L};
    const int64_t wd[2] = {BIG_D, BIG_W}, d1[1] = {BIG_D};
    th_rng r = th_rng_for(8);
    big xx, dout, w, bias, out, dx, dw, db;
    big_input(&xx, act, BDL, &r, -1, 1);
    big_input(&dout, act, BDL, &r, -1, 1);
    big_input(&w, PORTSSM_F32, BIG_D * BIG_W, &r, -1, 1);
    big_input(&bias, PORTSSM_F32, BIG_D, &r, -1, 1);
    big_alloc(&out, act, BDL);
    big_alloc(&dx, act, BDL);
    big_alloc(&dw, PORTSSM_F32, BIG_D * BIG_W);
    big_alloc(&db, PORTSSM_F32, BIG_D);
    portssm_causal_conv1d_fwd_args f;
    memset(&f, 0, sizeof f);
    f.x = big_view(&xx, 3, x);
    f.weight = big_view(&w, 2, wd);
    f.bias = big_view(&bias, 1, d1);
    f.out = big_view(&out, 3, x);
    f.activation = PORTSSM_ACTIVATION_SILU;
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &f));
    portssm_causal_conv1d_bwd_args a;
    memset(&a, 0, sizeof a);
    a.x = f.x, a.weight = f.weight, a.bias = f.bias, a.activation = f.activation;
    a.dout = big_view(&dout, 3, x);
    a.dx = big_view(&dx, 3, x);
    a.dweight = big_view(&dw, 2, wd);
    a.dbias = big_view(&db, 1, d1);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_bwd(th_ctx, &a));
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);

    const th_tol t = th_tol_for(act), tw = {1e-3, 1e-3};
    for (int s = 0; s < NSAMPLED; s++) {
        const int64_t d = sampled_d[s];
        const int64_t x1[3] = {BIG_B, 1, BIG_L}, w1[2] = {1, BIG_W}, one[1] = {1};
        th_tensor *ox = channel_rows(&xx, d), *og = channel_rows(&dout, d);
        th_tensor *ow = span_of(&w, d * BIG_W, 2, w1), *ob = span_of(&bias, d, 1, one);
        th_tensor *rout = th_oracle_out(act, 3, x1), *rdx = th_oracle_out(act, 3, x1);
        th_tensor *rdw = th_oracle_out(PORTSSM_F32, 2, w1), *rdb = th_oracle_out(PORTSSM_F32, 1, one);
        portssm_causal_conv1d_fwd_args rf = f;
        rf.x = th_view(ox), rf.weight = th_view(ow), rf.bias = th_view(ob), rf.out = th_view(rout);
        assert_int_equal(portssm_causal_conv1d_fwd(th_oracle, &rf), PORTSSM_OK);
        portssm_causal_conv1d_bwd_args rb;
        memset(&rb, 0, sizeof rb);
        rb.x = rf.x, rb.weight = rf.weight, rb.bias = rf.bias, rb.activation = rf.activation;
        rb.dout = th_view(og), rb.dx = th_view(rdx), rb.dweight = th_view(rdw);
        rb.dbias = th_view(rdb);
        assert_int_equal(portssm_causal_conv1d_bwd(th_oracle, &rb), PORTSSM_OK);
        th_download(rout), th_download(rdx), th_download(rdw), th_download(rdb);
        check_rows(&out, d, BIG_L, (int64_t)BIG_D * BIG_L, rout, t, "conv fwd out");
        check_rows(&dx, d, BIG_L, (int64_t)BIG_D * BIG_L, rdx, t, "conv bwd dx");
        int64_t idx[3] = {0, 0, 0}, j[2] = {0, 0}, k0[1] = {0};
        th_tensor *two = th_new(th_oracle, PORTSSM_F32, 3, (int64_t[]){BIG_B, 1, BIG_W}, NULL);
        th_tensor *twb = th_new(th_oracle, PORTSSM_F32, 3, (int64_t[]){BIG_B, 1, 1}, NULL);
        for (idx[0] = 0; idx[0] < BIG_B; idx[0]++) {
            for (idx[2] = j[1] = 0; idx[2] < BIG_W; idx[2]++, j[1]++)
                th_set(two, idx, th_get(rdw, j));
            idx[2] = 0;
            th_set(twb, idx, th_get(rdb, k0));
        }
        th_upload(two);
        th_upload(twb);
        check_rows(&dw, d, BIG_W, 0, two, tw, "conv bwd dweight");
        check_rows(&db, d, 1, 0, twb, tw, "conv bwd dbias");
        th_free_all();
    }
    big *all[] = {&xx, &dout, &w, &bias, &out, &dx, &dw, &db};
    big_free_all(all, sizeof all / sizeof all[0]);
}

/* ---------------------------------------------------------------- decode with a large pool */

/* Rows of a state pool the sequences update: its last row, its first, its middle and the one
 * before the last; the pool row past them (POOL - 3) must stay as it was. */
static void pool_rows(int64_t pool, int32_t *rows)
{
    rows[0] = (int32_t)(pool - 1), rows[1] = 0, rows[2] = (int32_t)(pool / 2);
    rows[3] = (int32_t)(pool - 2);
}
#define NROWS 4

/* The pool rows `rows` of t (each `per` elements) against the oracle's (NROWS, ...) tensor. */
static void check_pool_rows(const big *t, const int32_t *rows, int64_t per, int ndim,
                            const int64_t *shape, th_tensor *ref, th_tol tol, const char *name)
{
    for (int k = 0; k < NROWS; k++) {
        th_tensor *got = fetch_span(t, rows[k] * per, ndim - 1, shape + 1);
        th_tensor *want = th_new(th_oracle, ref->dtype, ndim - 1, shape + 1, NULL);
        const size_t es = esize(ref->dtype);
        memcpy(want->host + want->guard, ref->host + ref->guard + (size_t)(k * per) * es,
               (size_t)per * es);
        th_upload(want);
        char what[160];
        snprintf(what, sizeof what, "%s, pool row %d (%s)", name, (int)rows[k],
                 past((rows[k] + 1) * per - 1));
        if (tol.rtol == 0 && tol.atol == 0)
            th_assert_same(got, want, what);
        else
            th_assert_close(got, want, tol, what);
    }
    /* a row no sequence picked is untouched, bit for bit */
    const int64_t quiet = rows[0] - 2;
    th_tensor *got = fetch_span(t, quiet * per, ndim - 1, shape + 1);
    int64_t idx[PORTSSM_MAX_DIMS];
    for (int64_t k = 0; k < per; k++) {
        th_unravel(got, k, idx);
        if (th_get(got, idx) != big_value(t, quiet * per + k))
            fail_msg("%s: pool row %lld, picked by no sequence, changed at element %lld", name,
                     (long long)quiet, (long long)k);
    }
}

static void test_conv_update_past_2g(void **state)
{
    (void)state;
    skip_unless_big_gpu();
    const portssm_dtype act = PORTSSM_BF16;
    const int64_t D = BIG_D, W = BIG_W, S = BIG_W - 1, T = 2, B = NROWS;
    const int64_t pool = BIG_2G / (D * S) + 1; /* pool * D * S > 2^31 */
    const int64_t sp[3] = {pool, D, S}, sx[3] = {B, D, T}, wd[2] = {D, W}, d1[1] = {D};
    int32_t rows[NROWS];
    pool_rows(pool, rows);
    th_rng r = th_rng_for(9);
    big st, xx, w, bias, idx, out;
    big_input(&st, act, pool * D * S, &r, -1, 1);
    big_input(&xx, act, B * D * T, &r, -1, 1);
    big_input(&w, PORTSSM_F32, D * W, &r, -1, 1);
    big_input(&bias, PORTSSM_F32, D, &r, -1, 1);
    big_ints(&idx, rows, B);
    big_alloc(&out, act, B * D * T);
    portssm_causal_conv1d_update_args a;
    memset(&a, 0, sizeof a);
    a.x = big_view(&xx, 3, sx);
    a.conv_state = big_view(&st, 3, sp);
    a.weight = big_view(&w, 2, wd);
    a.bias = big_view(&bias, 1, d1);
    a.conv_state_indices = big_view(&idx, 1, (int64_t[]){B});
    a.out = big_view(&out, 3, sx);
    a.activation = PORTSSM_ACTIVATION_SILU;
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_update(th_ctx, &a));
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);

    /* the oracle: the picked rows as a pool of their own, in order */
    const int64_t so[3] = {B, D, S}, ss[3] = {D * S, S, 1}, cx[3] = {D * T, T, 1};
    th_tensor *ost = th_new(th_oracle, act, 3, so, NULL);
    for (int k = 0; k < NROWS; k++) {
        th_tensor *row = pick(&st, NULL, 3, (int64_t[]){1, D, S}, ss, rows[k] * D * S);
        memcpy(ost->host + ost->guard + (size_t)(k * D * S) * esize(act), row->host + row->guard,
               (size_t)(D * S) * esize(act));
    }
    th_upload(ost);
    th_tensor *rout = th_oracle_out(act, 3, sx);
    portssm_causal_conv1d_update_args o = a;
    o.x = th_view(pick(&xx, NULL, 3, sx, cx, 0));
    o.conv_state = th_view(ost);
    o.weight = th_view(pick(&w, NULL, 2, wd, (int64_t[]){W, 1}, 0));
    o.bias = th_view(pick(&bias, NULL, 1, d1, (int64_t[]){1}, 0));
    memset(&o.conv_state_indices, 0, sizeof o.conv_state_indices);
    o.out = th_view(rout);
    assert_int_equal(portssm_causal_conv1d_update(th_oracle, &o), PORTSSM_OK);
    th_download(rout);
    th_download(ost);
    th_assert_close(fetch_span(&out, 0, 3, sx), rout, th_tol_for(act), "conv update out");
    check_pool_rows(&st, rows, D * S, 3, so, ost, (th_tol){0, 0}, "conv update state");
    th_free_all();
    big *all[] = {&st, &xx, &w, &bias, &idx, &out};
    big_free_all(all, sizeof all / sizeof all[0]);
}

/* The state update in its Mamba-1 form (state (pool, D, N)) or heads form (pool, H, P, N) with
 * Mamba-2's tied A, dt, D and dt_bias (stride 0 over P and N). */
static void state_update_past_2g(int heads)
{
    skip_unless_big_gpu();
    const portssm_dtype act = PORTSSM_BF16;
    const int64_t B = NROWS, H = heads ? 64 : BIG_D, P = heads ? 64 : 1, N = heads ? 128 : BIG_N;
    const int64_t per = H * P * N, pool = BIG_2G / per + 1;
    int32_t rows[NROWS];
    pool_rows(pool, rows);
    th_rng r = th_rng_for(heads ? 11 : 10);
    big st, xx, dt, A, Bm, Cm, Dv, bias, z, idx, out;
    big_input(&st, PORTSSM_F32, pool * per, &r, -1, 1);
    big_input(&xx, act, B * H * P, &r, -1, 1);
    big_input(&dt, act, B * H, &r, -3, 1);
    big_input(&A, PORTSSM_F32, heads ? H : H * N, &r, -8, -0.5);
    big_input(&Bm, act, B * N, &r, -1, 1);
    big_input(&Cm, act, B * N, &r, -1, 1);
    big_input(&Dv, PORTSSM_F32, H, &r, -1, 1);
    big_input(&bias, PORTSSM_F32, H, &r, -0.5, 0.5);
    big_input(&z, act, B * H * P, &r, -2, 2);
    big_ints(&idx, rows, B);
    big_alloc(&out, act, B * H * P);
    /* shapes and strides of both forms; the tied operands are stride 0 over P (and N) */
    const int64_t sst[4] = {pool, H, P, N}, sx[3] = {B, H, P}, sx_s[3] = {H * P, P, 1};
    const int64_t sdt_s[3] = {H, 1, 0}, sA[3] = {H, P, N}, sA_s[3] = {1, 0, 0};
    const int64_t shp[2] = {H, P}, shp_s[2] = {1, 0}, sbc[3] = {B, 1, N}, sbc_s[3] = {N, N, 1};
    const int64_t m1_st[3] = {pool, H, N}, m1_x[2] = {B, H}, m1_A[2] = {H, N}, m1_bc[2] = {B, N};
    const int64_t m1_h[1] = {H};
    portssm_tensor views[11];
    /* 0 state, 1 x, 2 dt, 3 A, 4 B, 5 C, 6 D, 7 dt_bias, 8 z, 9 out, 10 indices */
    const big *srcs[10] = {&st, &xx, &dt, &A, &Bm, &Cm, &Dv, &bias, &z, &out};
    for (int i = 0; i < 10; i++) {
        const int64_t *shape, *stride = NULL;
        int n;
        if (heads) {
            static const int dims[10] = {4, 3, 3, 3, 3, 3, 2, 2, 3, 3};
            const int64_t *shapes[10] = {sst, sx, sx, sA, sbc, sbc, shp, shp, sx, sx};
            const int64_t *strides[10] = {NULL,  sx_s,  sdt_s, sA_s, sbc_s,
                                          sbc_s, shp_s, shp_s, sx_s, sx_s};
            n = dims[i], shape = shapes[i], stride = strides[i];
        } else {
            static const int dims[10] = {3, 2, 2, 2, 2, 2, 1, 1, 2, 2};
            const int64_t *shapes[10] = {m1_st, m1_x,  m1_x, m1_A, m1_bc,
                                         m1_bc, m1_h,  m1_h, m1_x, m1_x};
            n = dims[i], shape = shapes[i];
        }
        views[i] = portssm_tensor_contiguous(srcs[i]->dev, srcs[i]->dt, n, shape);
        if (stride)
            memcpy(views[i].stride, stride, (size_t)n * sizeof(int64_t));
    }
    views[10] = big_view(&idx, 1, (int64_t[]){B});
    portssm_selective_state_update_args a;
    memset(&a, 0, sizeof a);
    a.state = views[0], a.x = views[1], a.dt = views[2], a.A = views[3], a.B = views[4];
    a.C = views[5], a.D = views[6], a.dt_bias = views[7], a.z = views[8], a.out = views[9];
    a.state_batch_indices = views[10];
    a.dt_softplus = 1;
    TH_CHECK_OP(th_ctx, portssm_selective_state_update(th_ctx, &a));
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);

    /* the oracle: the same views over the host's copies (the picked state rows in order) */
    portssm_selective_state_update_args o = a;
    portssm_tensor *ov[10] = {&o.state, &o.x, &o.dt, &o.A, &o.B, &o.C, &o.D, &o.dt_bias, &o.z, &o.out};
    th_tensor *ost = NULL, *rout = NULL;
    for (int i = 0; i < 10; i++) {
        const portssm_tensor *v = ov[i];
        th_tensor *h;
        if (i == 0) {
            int64_t shape[4];
            memcpy(shape, v->shape, sizeof shape);
            shape[0] = NROWS;
            h = th_new(th_oracle, PORTSSM_F32, v->ndim, shape, NULL);
            for (int k = 0; k < NROWS; k++)
                for (int64_t e = 0; e < per; e++) {
                    const float f = big_value(&st, rows[k] * per + e);
                    memcpy(h->host + h->guard + (size_t)(k * per + e) * 4, &f, 4);
                }
            th_upload(h);
            ost = h;
        } else if (i == 9) {
            h = rout = th_oracle_out(act, v->ndim, v->shape);
        } else { /* the source's elements as they lie (span = numel of the big tensor) */
            h = pick(srcs[i], NULL, 1, (int64_t[]){srcs[i]->numel}, (int64_t[]){1}, 0);
        }
        portssm_tensor hv = th_view(h);
        if (i != 0 && i != 9) { /* the device view's shape and strides over the host copy */
            hv = *v;
            hv.data = th_view(h).data;
        }
        *ov[i] = hv;
    }
    memset(&o.state_batch_indices, 0, sizeof o.state_batch_indices);
    assert_int_equal(portssm_selective_state_update(th_oracle, &o), PORTSSM_OK);
    th_download(rout);
    th_download(ost);
    const char *form = heads ? "state update (heads)" : "state update (Mamba-1)";
    char what[96];
    snprintf(what, sizeof what, "%s out", form);
    th_assert_close(fetch_span(&out, 0, a.out.ndim, a.out.shape), rout, th_tol_for(act), what);
    snprintf(what, sizeof what, "%s state", form);
    int64_t so[4];
    memcpy(so, a.state.shape, sizeof so);
    so[0] = NROWS;
    check_pool_rows(&st, rows, per, a.state.ndim, so, ost, th_tol_for(PORTSSM_F32), what);
    th_free_all();
    big *all[] = {&st, &xx, &dt, &A, &Bm, &Cm, &Dv, &bias, &z, &idx, &out};
    big_free_all(all, sizeof all / sizeof all[0]);
}

static void test_state_update_past_2g(void **state)
{
    (void)state;
    state_update_past_2g(0);
}

static void test_state_update_heads_past_2g(void **state)
{
    (void)state;
    state_update_past_2g(1);
}

/* ---------------------------------------------------------------- the SSD */

/* B1 L262400 H128 P64 (x past 2^31 elements) G16 N16, z, D (H,P), dt_bias, softplus, the final
 * states; forward and backward.  The oracle runs the last group's 8 heads (its dB and dC are
 * theirs alone): every element of theirs checked, the late tokens' offsets past 2^31. */
static void test_ssd_past_2g(void **state)
{
    (void)state;
    const portssm_dtype act = PORTSSM_BF16;
    const int64_t L = BIG_L, H = 128, P = 64, G = 16, N = 16, hg = H / G, g = G - 1, h0 = g * hg;
    const int64_t sx[4] = {1, L, H, P}, sdt[3] = {1, L, H}, sbc[4] = {1, L, G, N};
    const int64_t shp[2] = {H, P}, sh[1] = {H}, ss[4] = {1, H, P, N};
#ifndef BIG_SMALL
    assert_true(L * H * P > INT32_MAX);
#endif
    /* x, z, dout, out, dx, dz (4 GiB each), dt, ddt, B, C, dB, dC: 24.3 GiB; then the
     * backward's workspace (queried below: 15.6 GiB on the sim's plan) with room to spare */
    const unsigned long long tensors = (6ull * L * H * P + 2ull * L * H + 4ull * L * G * N) * 2;
    skip_unless_big_gpu_bytes(tensors + (24ull << 30));
    th_rng r = th_rng_for(12);
    big x, dt, A, Bm, Cm, Dv, z, bias, dout, out, fin, dx, ddt, dA, dB, dC, dD, dz, dbias;
    big_input(&x, act, L * H * P, &r, -1, 1);
    big_input(&dt, act, L * H, &r, -3, 1);
    big_input(&A, PORTSSM_F32, H, &r, -8, -0.5);
    big_input(&Bm, act, L * G * N, &r, -1, 1);
    big_input(&Cm, act, L * G * N, &r, -1, 1);
    big_input(&Dv, PORTSSM_F32, H * P, &r, -1, 1);
    big_input(&z, act, L * H * P, &r, -2, 2);
    big_input(&bias, PORTSSM_F32, H, &r, -0.5, 0.5);
    big_input(&dout, act, L * H * P, &r, -1, 1);
    big_alloc(&out, act, L * H * P);
    big_alloc(&fin, PORTSSM_F32, H * P * N);
    big_alloc(&dx, act, L * H * P);
    big_alloc(&ddt, act, L * H);
    big_alloc(&dA, PORTSSM_F32, H);
    big_alloc(&dB, act, L * G * N);
    big_alloc(&dC, act, L * G * N);
    big_alloc(&dD, PORTSSM_F32, H * P);
    big_alloc(&dz, act, L * H * P);
    big_alloc(&dbias, PORTSSM_F32, H);
    portssm_ssd_chunk_scan_fwd_args f;
    memset(&f, 0, sizeof f);
    f.x = big_view(&x, 4, sx), f.dt = big_view(&dt, 3, sdt), f.A = big_view(&A, 1, sh);
    f.B = big_view(&Bm, 4, sbc), f.C = big_view(&Cm, 4, sbc), f.D = big_view(&Dv, 2, shp);
    f.z = big_view(&z, 4, sx), f.dt_bias = big_view(&bias, 1, sh);
    f.out = big_view(&out, 4, sx), f.final_states = big_view(&fin, 4, ss);
    f.dt_softplus = 1;
    portssm_ssd_chunk_scan_bwd_args b;
    memset(&b, 0, sizeof b);
    b.x = f.x, b.dt = f.dt, b.A = f.A, b.B = f.B, b.C = f.C, b.D = f.D, b.z = f.z;
    b.dt_bias = f.dt_bias, b.dt_softplus = 1, b.dout = big_view(&dout, 4, sx);
    b.dx = big_view(&dx, 4, sx), b.ddt = big_view(&ddt, 3, sdt), b.dA = big_view(&dA, 1, sh);
    b.dB = big_view(&dB, 4, sbc), b.dC = big_view(&dC, 4, sbc), b.dD = big_view(&dD, 2, shp);
    b.dz = big_view(&dz, 4, sx), b.ddt_bias = big_view(&dbias, 1, sh);
    /* a workspace of the caller's (the API's own path at this size), queried for both ops */
    size_t wf = 0, wb = 0;
    assert_int_equal(portssm_ssd_chunk_scan_fwd_workspace_size(th_ctx, &f, &wf), PORTSSM_OK);
    assert_int_equal(portssm_ssd_chunk_scan_bwd_workspace_size(th_ctx, &b, &wb), PORTSSM_OK);
    void *ws = NULL;
    if (wf || wb)
        assert_int_equal(portssm_malloc(th_ctx, &ws, wf > wb ? wf : wb), PORTSSM_OK);
    f.workspace = (portssm_workspace){ws, wf};
    b.workspace = (portssm_workspace){ws, wb};
    print_message("ssd past 2^31: %.2f GiB of tensors, workspace %.2f GiB (fwd %.2f)\n",
                  tensors / 1073741824.0, wb / 1073741824.0, wf / 1073741824.0);
    TH_CHECK_OP(th_ctx, portssm_ssd_chunk_scan_fwd(th_ctx, &f));
    TH_CHECK_OP(th_ctx, portssm_ssd_chunk_scan_bwd(th_ctx, &b));
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);

    /* the last group's heads, as their own problem on the oracle */
    const int64_t ox[4] = {1, L, hg, P}, ox_s[4] = {L * H * P, H * P, P, 1};
    const int64_t odt[3] = {1, L, hg}, odt_s[3] = {L * H, H, 1}, oh[1] = {hg}, oh_s[1] = {1};
    const int64_t obc[4] = {1, L, 1, N}, obc_s[4] = {L * G * N, G * N, N, 1};
    const int64_t ohp[2] = {hg, P}, ohp_s[2] = {P, 1}, os[4] = {1, hg, P, N};
    const int64_t os_s[4] = {H * P * N, P * N, N, 1};
    portssm_ssd_chunk_scan_fwd_args of = f;
    of.x = th_view(pick(&x, NULL, 4, ox, ox_s, h0 * P));
    of.dt = th_view(pick(&dt, NULL, 3, odt, odt_s, h0));
    of.A = th_view(pick(&A, NULL, 1, oh, oh_s, h0));
    of.B = th_view(pick(&Bm, NULL, 4, obc, obc_s, g * N));
    of.C = th_view(pick(&Cm, NULL, 4, obc, obc_s, g * N));
    of.D = th_view(pick(&Dv, NULL, 2, ohp, ohp_s, h0 * P));
    of.z = th_view(pick(&z, NULL, 4, ox, ox_s, h0 * P));
    of.dt_bias = th_view(pick(&bias, NULL, 1, oh, oh_s, h0));
    th_tensor *rout = th_oracle_out(act, 4, ox), *rfin = th_oracle_out(PORTSSM_F32, 4, os);
    of.out = th_view(rout), of.final_states = th_view(rfin);
    memset(&of.workspace, 0, sizeof of.workspace);
    assert_int_equal(portssm_ssd_chunk_scan_fwd(th_oracle, &of), PORTSSM_OK);
    portssm_ssd_chunk_scan_bwd_args ob = b;
    ob.x = of.x, ob.dt = of.dt, ob.A = of.A, ob.B = of.B, ob.C = of.C, ob.D = of.D, ob.z = of.z;
    ob.dt_bias = of.dt_bias;
    ob.dout = th_view(pick(&dout, NULL, 4, ox, ox_s, h0 * P));
    th_tensor *rdx = th_oracle_out(act, 4, ox), *rddt = th_oracle_out(act, 3, odt);
    th_tensor *rdA = th_oracle_out(PORTSSM_F32, 1, oh), *rdB = th_oracle_out(act, 4, obc);
    th_tensor *rdC = th_oracle_out(act, 4, obc), *rdD = th_oracle_out(PORTSSM_F32, 2, ohp);
    th_tensor *rdz = th_oracle_out(act, 4, ox), *rdb = th_oracle_out(PORTSSM_F32, 1, oh);
    ob.dx = th_view(rdx), ob.ddt = th_view(rddt), ob.dA = th_view(rdA), ob.dB = th_view(rdB);
    ob.dC = th_view(rdC), ob.dD = th_view(rdD), ob.dz = th_view(rdz), ob.ddt_bias = th_view(rdb);
    memset(&ob.workspace, 0, sizeof ob.workspace);
    assert_int_equal(portssm_ssd_chunk_scan_bwd(th_oracle, &ob), PORTSSM_OK);

    /* the GPU's values of those heads (the tolerances of test_ssd) */
    const th_tol t = th_tol_for(act), w = {fmax(1e-3, t.rtol), fmax(1e-3, t.atol)};
    const th_tol st = th_tol_for(PORTSSM_F16);
    struct {
        const big *got;
        th_tensor *ref;
        int ndim;
        const int64_t *shape, *stride;
        int64_t first;
        th_tol tol;
        const char *name;
        int sum; /* a sum over every token of a head: its error grows with L, its value may not */
    } checks[] = {
        {&out, rout, 4, ox, ox_s, h0 * P, t, "ssd fwd out", 0},
        {&fin, rfin, 4, os, os_s, h0 * P * N, st, "ssd fwd final_states", 0},
        {&dx, rdx, 4, ox, ox_s, h0 * P, (th_tol){2 * t.rtol, 2 * t.atol}, "ssd bwd dx", 0},
        {&ddt, rddt, 3, odt, odt_s, h0, (th_tol){5 * t.rtol, 10 * t.atol}, "ssd bwd ddt", 0},
        {&dA, rdA, 1, oh, oh_s, h0, (th_tol){w.rtol, 5 * w.atol}, "ssd bwd dA", 1},
        {&dB, rdB, 4, obc, obc_s, g * N, t, "ssd bwd dB", 0},
        {&dC, rdC, 4, obc, obc_s, g * N, t, "ssd bwd dC", 0},
        {&dD, rdD, 2, ohp, ohp_s, h0 * P, w, "ssd bwd dD", 1},
        {&dz, rdz, 4, ox, ox_s, h0 * P, t, "ssd bwd dz", 0},
        {&dbias, rdb, 1, oh, oh_s, h0, w, "ssd bwd ddt_bias", 1},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        th_download(checks[i].ref);
        th_tol tol = checks[i].tol;
        if (checks[i].sum) { /* atol from the largest of the group's sums (rtol of it) */
            double most = 0;
            int64_t idx[PORTSSM_MAX_DIMS];
            for (int64_t k = 0; k < th_numel(checks[i].ref); k++) {
                th_unravel(checks[i].ref, k, idx);
                most = fmax(most, fabs(th_get(checks[i].ref, idx)));
            }
            tol.atol = fmax(tol.atol, tol.rtol * most);
        }
        unsigned char *bits = big_download(checks[i].got);
        th_tensor *got = pick(checks[i].got, bits, checks[i].ndim, checks[i].shape,
                              checks[i].stride, checks[i].first);
        free(bits);
        int64_t last = checks[i].first;
        for (int k = 0; k < checks[i].ndim; k++)
            last += (checks[i].shape[k] - 1) * checks[i].stride[k];
        char what[128];
        snprintf(what, sizeof what, "%s, heads %lld..%lld (last offset %s)", checks[i].name,
                 (long long)h0, (long long)(h0 + hg - 1), past(last));
        th_assert_close(got, checks[i].ref, tol, what);
    }
    th_free_all();
    big *all[] = {&x, &dt, &A, &Bm, &Cm, &Dv, &z, &bias, &dout, &out, &fin, &dx, &ddt, &dA,
                  &dB, &dC, &dD, &dz, &dbias};
    big_free_all(all, sizeof all / sizeof all[0]);
    portssm_free(th_ctx, ws);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_scan_past_2g, th_teardown),
        cmocka_unit_test_teardown(test_conv_past_2g, th_teardown),
        cmocka_unit_test_teardown(test_conv_update_past_2g, th_teardown),
        cmocka_unit_test_teardown(test_state_update_past_2g, th_teardown),
        cmocka_unit_test_teardown(test_state_update_heads_past_2g, th_teardown),
        cmocka_unit_test_teardown(test_ssd_past_2g, th_teardown),
    };
    return th_main(argc, argv, "test_large", tests, sizeof tests / sizeof tests[0]);
}
