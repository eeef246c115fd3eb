/*
 * test_large.c - ops whose element offsets pass 2^31 (B*D*L > 2^31), on a GPU with the memory
 * for them: the scan forward (with checkpoints) and backward, the conv forward and backward.
 * 32-bit offsets silently corrupt such tensors (mamba-ssm #884); here every output row of a few
 * sampled channels - the last one among them, whose rows lie past 2^31 elements - is checked
 * against the cpu oracle run on that channel alone, as are the channel's parameter gradients.
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
#else
#define NEED_BYTES 0ull
#endif

static const int64_t sampled_d[] = {0, BIG_D / 2 + 1, BIG_D - 1};
#define NSAMPLED (int)(sizeof sampled_d / sizeof sampled_d[0])

static void skip_unless_big_gpu(void)
{
    portssm_backend be = portssm_get_backend(th_ctx);
#ifdef BIG_SMALL
    be = PORTSSM_BACKEND_CUDA;
#endif
    if (be != PORTSSM_BACKEND_CUDA && be != PORTSSM_BACKEND_HIP)
        th_skip_test("skipped: tensors past 2^31 elements are checked on GPUs (this is %s)",
                     th_backend_label);
    portssm_device_info info;
    assert_int_equal(portssm_get_device_info(th_ctx, &info), PORTSSM_OK);
    if (info.total_memory < NEED_BYTES)
        th_skip_test("skipped: needs a GPU with %llu GiB, %s has %llu", NEED_BYTES >> 30,
                     info.name, (unsigned long long)(info.total_memory >> 30));
}

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
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        big_free(all[i]);
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
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        big_free(all[i]);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_scan_past_2g, th_teardown),
        cmocka_unit_test_teardown(test_conv_past_2g, th_teardown),
    };
    return th_main(argc, argv, "test_large", tests, sizeof tests / sizeof tests[0]);
}
