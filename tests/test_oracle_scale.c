/*
 * test_oracle_scale.c - the cpu oracle at sizes its scratch used to forbid (issue #12 item 4).
 * The oracle reads inputs where they lie and writes outputs once; its scratch follows what an
 * op addresses, never a tensor's logical extent:
 *  - conv_fwd_past_2g: conv1d forward, bf16, x (1, D, L) with D*L past 2^31 elements (8 GiB of
 *    tensors, no scratch): every output written, and the rows of sampled channels - the last one
 *    starting at element 2^31 - equal to an independent computation within half a bf16 ulp.
 *    About 100 s of cpu time: CTest runs it as test_oracle_scale.huge.cpu (label huge), only in
 *    builds configured with -DPORTSSM_TEST_HUGE=ON; the default test_oracle_scale.cpu omits it;
 *  - conv_update_pool_past_2g: a conv1d decode step on a bf16 state pool past 2^31 elements
 *    (4 GiB, calloc'ed) under a 1 MiB scratch cap: the two rows in use, one past 2^31, updated
 *    and their outputs right, other rows untouched;
 *  - broadcast: a scan whose B and C (1,1,N,L) are broadcast over N (stride 0; 2^24 logical
 *    elements each) runs under a scratch cap of 1 MiB (PORTSSM_CPU_SCRATCH_LIMIT), where one
 *    double copy of B alone would take 128 MiB; checked against the recurrence in double;
 *  - pool: a state update on a 32 MiB state pool under the same cap copies only the two rows
 *    in use, updates them as the definition says and leaves every other byte as it was;
 *  - over_cap: above the cap an op fails with OUT_OF_MEMORY, says how many bytes it asked for,
 *    and writes nothing.
 * cpu only: the other backends skip (their memory is the device's, not this oracle's).
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP "1048576" /* bytes: far below any double copy the tests below would once make */

static void skip_unless_cpu(void)
{
    if (portssm_get_backend(th_ctx) != PORTSSM_BACKEND_CPU)
        th_skip_test("skipped: checks the cpu oracle's memory (this is %s)", th_backend_label);
}

static int teardown(void **state)
{
    unsetenv("PORTSSM_CPU_SCRATCH_LIMIT"); /* also after a failed test */
    return th_teardown(state);
}

/* Bytes of host memory available now (MemAvailable), 0 if unknown. */
static unsigned long long mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024ull;
}

/* ---------------------------------------------------------------- past 2^31 elements */

#define BIG_D 8193
#define BIG_L 262144 /* D * L = 2^31 + 2^18: channel D-1 starts at element 2^31 */
#define BIG_W 4
#define TILE ((1 << 20) + 7) /* odd: each channel sees another stretch of the tile */

static double bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* |got - want| within half an ulp of bf16 (8 significant bits) at want's binade. */
static int within_half_ulp(double got, double want)
{
    if (want == 0.0)
        return got == 0.0;
    return fabs(got - want) <= ldexp(1.0, ilogb(want) - 8);
}

static void test_conv_fwd_past_2g(void **state)
{
    (void)state;
    skip_unless_cpu();
    const int64_t D = BIG_D, L = BIG_L, W = BIG_W, n = D * L;
    const size_t bytes = (size_t)n * 2;
    if (mem_available() < 2 * bytes + (1ull << 30))
        th_skip_test("skipped: needs %.1f GiB of free host memory, %.1f available",
                     (2.0 * (double)bytes + (1 << 30)) / (1 << 30),
                     (double)mem_available() / (1 << 30));
    th_rng r = th_rng_for(4001);
    uint16_t *tile = malloc(TILE * sizeof *tile);
    float *weight = malloc((size_t)(D * W) * sizeof *weight), *bias = malloc(D * sizeof *bias);
    void *x = NULL, *out = NULL;
    assert_non_null(tile);
    assert_non_null(weight);
    assert_non_null(bias);
    for (int64_t i = 0; i < TILE; i++) { /* bf16 values exactly: a float's upper half */
        float f = (float)th_uniform(&r, -1, 1);
        uint32_t u;
        memcpy(&u, &f, 4);
        tile[i] = (uint16_t)(u >> 16);
    }
    for (int64_t i = 0; i < D * W; i++)
        weight[i] = (float)th_uniform(&r, -1, 1);
    for (int64_t i = 0; i < D; i++)
        bias[i] = (float)th_uniform(&r, -1, 1);
    assert_int_equal(portssm_malloc(th_ctx, &x, bytes), PORTSSM_OK);
    assert_int_equal(portssm_malloc(th_ctx, &out, bytes), PORTSSM_OK);
    for (int64_t i = 0; i < n; i += TILE) /* the cpu backend's memory is the host's */
        memcpy((uint16_t *)x + i, tile, (size_t)(i + TILE <= n ? TILE : n - i) * 2);
    memset(out, 0xff, bytes); /* NaN: an element nobody wrote fails below */

    portssm_causal_conv1d_fwd_args a = {0};
    a.x = (portssm_tensor){x, PORTSSM_BF16, 3, {1, D, L}, {n, L, 1}};
    a.weight = (portssm_tensor){weight, PORTSSM_F32, 2, {D, W}, {W, 1}};
    a.bias = (portssm_tensor){bias, PORTSSM_F32, 1, {D}, {1}};
    a.out = (portssm_tensor){out, PORTSSM_BF16, 3, {1, D, L}, {n, L, 1}};
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a));

    const uint16_t *o = out;
    for (int64_t i = 0; i < n; i++)
        if ((o[i] & 0x7fff) > 0x7f80)
            fail_msg("out element %lld (of %lld) is NaN: not written", (long long)i, (long long)n);
    const int64_t sampled[] = {0, D / 2 + 1, D - 1};
    for (int s = 0; s < 3; s++) {
        const int64_t d = sampled[s];
        for (int64_t t = 0; t < L; t++) {
            double want = bias[d];
            for (int64_t w = 0; w < W; w++) {
                const int64_t tap = t - (W - 1) + w; /* before 0: the zero initial states */
                if (tap >= 0)
                    want += (double)weight[d * W + w] * bf16_value(tile[(d * L + tap) % TILE]);
            }
            const double got = bf16_value(o[d * L + t]);
            if (!within_half_ulp(got, want))
                fail_msg("out[0,%lld,%lld] (element %lld) = %.9g, want %.12g", (long long)d,
                         (long long)t, (long long)(d * L + t), got, want);
        }
    }
    portssm_free(th_ctx, x);
    portssm_free(th_ctx, out);
    free(tile);
    free(weight);
    free(bias);
}

/* A decode pool past 2^31 elements: the rows in use are copied, the pool's size costs nothing
 * (the old oracle's double copy of it would take 16 GiB).  The pool is calloc'ed: pages nobody
 * touches take no memory. */
#define POOL2G_D 64
#define POOL2G_S 3 /* W - 1 */
#define POOL2G_ROWS (((int64_t)1 << 31) / (POOL2G_D * POOL2G_S) + 2)

static uint16_t bf16_bits(th_rng *r)
{
    float f = (float)th_uniform(r, -1, 1);
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static void test_conv_update_pool_past_2g(void **state)
{
    (void)state;
    skip_unless_cpu();
    const int64_t D = POOL2G_D, S = POOL2G_S, W = S + 1, Bp = POOL2G_ROWS, B = 2;
    const int64_t per_row = D * S, n = Bp * per_row;
    uint16_t *pool = calloc((size_t)n, sizeof *pool);
    if (!pool)
        th_skip_test("skipped: no %.1f GiB of address space for the pool", (double)n * 2 / (1 << 30));
    th_rng r = th_rng_for(4005);
    const int32_t rows[2] = {(int32_t)(Bp - 1), 7}; /* row Bp-1 lies past element 2^31 */
    assert_true((Bp - 1) * per_row > INT32_MAX);
    uint16_t x[2 * POOL2G_D], out[2 * POOL2G_D], before[2][POOL2G_D * POOL2G_S];
    float weight[POOL2G_D * (POOL2G_S + 1)];
    int32_t idx[2] = {rows[0], rows[1]};
    for (int b = 0; b < 2; b++)
        for (int64_t i = 0; i < per_row; i++)
            before[b][i] = pool[rows[b] * per_row + i] = bf16_bits(&r);
    for (int64_t i = 0; i < B * D; i++)
        x[i] = bf16_bits(&r);
    for (int64_t i = 0; i < D * W; i++)
        weight[i] = (float)th_uniform(&r, -1, 1);
    memset(out, 0xff, sizeof out);
    portssm_causal_conv1d_update_args a = {0};
    a.x = (portssm_tensor){x, PORTSSM_BF16, 2, {B, D}, {D, 1}};
    a.conv_state = (portssm_tensor){pool, PORTSSM_BF16, 3, {Bp, D, S}, {per_row, S, 1}};
    a.weight = (portssm_tensor){weight, PORTSSM_F32, 2, {D, W}, {W, 1}};
    a.conv_state_indices = (portssm_tensor){idx, PORTSSM_I32, 1, {B}, {1}};
    a.out = (portssm_tensor){out, PORTSSM_BF16, 2, {B, D}, {D, 1}};
    setenv("PORTSSM_CPU_SCRATCH_LIMIT", CAP, 1);
    const portssm_status st = portssm_causal_conv1d_update(th_ctx, &a);
    unsetenv("PORTSSM_CPU_SCRATCH_LIMIT");
    if (st != PORTSSM_OK) {
        free(pool);
        fail_msg("causal_conv1d_update -> %s: %s", portssm_status_name(st),
                 portssm_last_error(th_ctx));
    }
    for (int b = 0; b < 2; b++)
        for (int64_t d = 0; d < D; d++) {
            const uint16_t *old = before[b] + d * S, *now = pool + rows[b] * per_row + d * S;
            double want = 0.0; /* window: the S state entries, then x */
            for (int64_t w = 0; w < W; w++)
                want += (double)weight[d * W + w] *
                        bf16_value(w < S ? old[w] : x[b * D + d]);
            const double got = bf16_value(out[b * D + d]);
            if (!within_half_ulp(got, want))
                fail_msg("out[%d,%lld] = %.9g, want %.12g", b, (long long)d, got, want);
            for (int64_t k = 0; k < S; k++) /* shifted left by one, x entering at the end */
                if (now[k] != (k + 1 < S ? old[k + 1] : x[b * D + d]))
                    fail_msg("state[%d,%lld,%lld] = 0x%04x, want 0x%04x", (int)rows[b],
                             (long long)d, (long long)k, now[k],
                             k + 1 < S ? old[k + 1] : x[b * D + d]);
        }
    const int64_t others[] = {0, 6, 8, Bp - 2}; /* rows nobody uses stay as calloc left them */
    for (int i = 0; i < 4; i++)
        for (int64_t k = 0; k < per_row; k++)
            if (pool[others[i] * per_row + k] != 0)
                fail_msg("row %lld of the pool was written", (long long)others[i]);
    free(pool);
}

/* ---------------------------------------------------------------- broadcast inputs */

#define BC_N 256
#define BC_L 65536 /* B and C: (1,1,N,L) = 2^24 logical elements each, L distinct */

static void test_broadcast_scan_under_cap(void **state)
{
    (void)state;
    skip_unless_cpu();
    th_rng r = th_rng_for(4002);
    const int64_t N = BC_N, L = BC_L;
    const int64_t *bdl = (const int64_t[]){1, 1, L}, *bc = (const int64_t[]){1, 1, N, L};
    th_tensor *u = th_new(th_ctx, PORTSSM_F32, 3, bdl, NULL);
    th_tensor *delta = th_new(th_ctx, PORTSSM_F32, 3, bdl, NULL);
    th_tensor *A = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){1, N},
                          (const int64_t[]){0, 0}); /* one value for every n */
    th_tensor *Bm = th_new(th_ctx, PORTSSM_F32, 4, bc, (const int64_t[]){0, 0, 0, 1});
    th_tensor *Cm = th_new(th_ctx, PORTSSM_F32, 4, bc, (const int64_t[]){0, 0, 0, 1});
    th_tensor *out = th_new(th_ctx, PORTSSM_F32, 3, bdl, NULL);
    th_fill_uniform(u, &r, -1, 1);
    th_fill_uniform(delta, &r, 0.01, 0.1);
    th_fill_uniform(A, &r, -1.5, -0.5);
    th_fill_uniform(Bm, &r, -1, 1);
    th_fill_uniform(Cm, &r, -1, 1);
    th_poison(out);
    portssm_selective_scan_fwd_args a = {0};
    a.u = th_view(u);
    a.delta = th_view(delta);
    a.A = th_view(A);
    a.B = th_view(Bm);
    a.C = th_view(Cm);
    a.out = th_view(out);
    setenv("PORTSSM_CPU_SCRATCH_LIMIT", CAP, 1);
    TH_CHECK_OP(th_ctx, portssm_selective_scan_fwd(th_ctx, &a));
    unsetenv("PORTSSM_CPU_SCRATCH_LIMIT");
    th_download(out);
    th_assert_guards(out, "out");

    /* every state index sees the same B, C and A: x_t[n] is one number s_t, y_t = N c_t s_t */
    const double A0 = th_get(A, (const int64_t[]){0, 0});
    double s = 0.0;
    for (int64_t t = 0; t < L; t++) {
        const int64_t i3[3] = {0, 0, t}, i4[4] = {0, 0, 0, t};
        const double dt = th_get(delta, i3), uv = th_get(u, i3);
        s = exp(dt * A0) * s + dt * th_get(Bm, i4) * uv;
        const double want = (double)N * th_get(Cm, i4) * s, got = th_get(out, i3);
        if (!(fabs(got - want) <= 1e-6 * fabs(want) + 1e-30))
            fail_msg("out[0,0,%lld] = %.9g, want %.12g", (long long)t, got, want);
    }
    th_free_all();
}

/* ---------------------------------------------------------------- decode pool */

#define POOL_ROWS 32768
#define POOL_D 16
#define POOL_N 16 /* the pool: 32768 x 16 x 16 f32 = 32 MiB */

static void test_pool_rows_under_cap(void **state)
{
    (void)state;
    skip_unless_cpu();
    th_rng r = th_rng_for(4003);
    const int64_t Bp = POOL_ROWS, D = POOL_D, N = POOL_N, B = 2;
    const size_t bytes = (size_t)(Bp * D * N) * sizeof(float);
    float *pool = malloc(bytes), *before = malloc(bytes);
    assert_non_null(pool);
    assert_non_null(before);
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        pool[i] = (float)th_uniform(&r, -1, 1);
    memcpy(before, pool, bytes);
    th_tensor *x = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){B, D}, NULL);
    th_tensor *dt = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){B, D}, NULL);
    th_tensor *A = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){D, N}, NULL);
    th_tensor *Bm = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){B, N}, NULL);
    th_tensor *Cm = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){B, N}, NULL);
    th_tensor *idx = th_new(th_ctx, PORTSSM_I32, 1, (const int64_t[]){B}, NULL);
    th_tensor *out = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){B, D}, NULL);
    th_fill_uniform(x, &r, -1, 1);
    th_fill_uniform(dt, &r, 0.01, 0.5);
    th_fill_uniform(A, &r, -1.5, -0.5);
    th_fill_uniform(Bm, &r, -1, 1);
    th_fill_uniform(Cm, &r, -1, 1);
    const int32_t rows[2] = {(int32_t)(Bp - 1), 5};
    for (int64_t b = 0; b < B; b++)
        th_set(idx, (const int64_t[]){b}, rows[b]);
    th_upload(idx);
    th_poison(out);
    portssm_selective_state_update_args a = {0};
    a.state = (portssm_tensor){pool, PORTSSM_F32, 3, {Bp, D, N}, {D * N, N, 1}};
    a.x = th_view(x);
    a.dt = th_view(dt);
    a.A = th_view(A);
    a.B = th_view(Bm);
    a.C = th_view(Cm);
    a.state_batch_indices = th_view(idx);
    a.out = th_view(out);
    setenv("PORTSSM_CPU_SCRATCH_LIMIT", CAP, 1);
    TH_CHECK_OP(th_ctx, portssm_selective_state_update(th_ctx, &a));
    unsetenv("PORTSSM_CPU_SCRATCH_LIMIT");
    th_download(out);

    for (int64_t b = 0; b < B; b++)
        for (int64_t d = 0; d < D; d++) {
            const double xv = th_get(x, (const int64_t[]){b, d});
            const double dv = th_get(dt, (const int64_t[]){b, d});
            const int64_t base = ((int64_t)rows[b] * D + d) * N;
            double y = 0.0;
            for (int64_t k = 0; k < N; k++) {
                const double s = exp(th_get(A, (const int64_t[]){d, k}) * dv) * before[base + k] +
                                 th_get(Bm, (const int64_t[]){b, k}) * dv * xv;
                if (pool[base + k] != (float)s)
                    fail_msg("state[%d,%lld,%lld] = %.9g, want %.9g", (int)rows[b], (long long)d,
                             (long long)k, pool[base + k], (float)s);
                pool[base + k] = before[base + k]; /* so that the comparison below is whole */
                y += s * th_get(Cm, (const int64_t[]){b, k});
            }
            const double got = th_get(out, (const int64_t[]){b, d});
            if (!(fabs(got - y) <= 1e-6 * fabs(y) + 1e-30))
                fail_msg("out[%lld,%lld] = %.9g, want %.12g", (long long)b, (long long)d, got, y);
        }
    assert_memory_equal(pool, before, bytes); /* the rows nobody uses: untouched */
    free(pool);
    free(before);
    th_free_all();
}

/* ---------------------------------------------------------------- over the cap */

static void test_over_cap_writes_nothing(void **state)
{
    (void)state;
    skip_unless_cpu();
    th_rng r = th_rng_for(4004);
    const int64_t B = 1, D = 3, L = 9, W = 4;
    const int64_t *bdl = (const int64_t[]){B, D, L}, *dw = (const int64_t[]){D, W};
    th_tensor *x = th_new(th_ctx, PORTSSM_F32, 3, bdl, NULL);
    th_tensor *w = th_new(th_ctx, PORTSSM_F32, 2, dw, NULL);
    th_tensor *dout = th_new(th_ctx, PORTSSM_F32, 3, bdl, NULL);
    th_tensor *dx = th_new(th_ctx, PORTSSM_F32, 3, bdl, NULL);
    th_tensor *dwt = th_new(th_ctx, PORTSSM_F32, 2, dw, NULL);
    th_fill_uniform(x, &r, -1, 1);
    th_fill_uniform(w, &r, -1, 1);
    th_fill_uniform(dout, &r, -1, 1);
    th_poison(dx);
    th_poison(dwt);
    th_snapshot sx = th_snap(dx), sw = th_snap(dwt);
    portssm_causal_conv1d_bwd_args a = {0};
    a.x = th_view(x);
    a.weight = th_view(w);
    a.dout = th_view(dout);
    a.dx = th_view(dx);
    a.dweight = th_view(dwt);
    setenv("PORTSSM_CPU_SCRATCH_LIMIT", "16", 1); /* dweight's sums alone take 96 bytes */
    const portssm_status s = portssm_causal_conv1d_bwd(th_ctx, &a);
    unsetenv("PORTSSM_CPU_SCRATCH_LIMIT");
    const char *msg = portssm_last_error(th_ctx);
    assert_int_equal(s, PORTSSM_ERR_OUT_OF_MEMORY);
    if (!strstr(msg, "96 bytes") || !strstr(msg, "PORTSSM_CPU_SCRATCH_LIMIT = 16 bytes"))
        fail_msg("the message does not say what was asked and why it failed: %s", msg);
    assert_true(th_unchanged(dx, &sx));
    assert_true(th_unchanged(dwt, &sw));
    th_free_all();
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_conv_fwd_past_2g, teardown),
        cmocka_unit_test_teardown(test_conv_update_pool_past_2g, teardown),
        cmocka_unit_test_teardown(test_broadcast_scan_under_cap, teardown),
        cmocka_unit_test_teardown(test_pool_rows_under_cap, teardown),
        cmocka_unit_test_teardown(test_over_cap_writes_nothing, teardown),
    };
    return th_main(argc, argv, "test_oracle_scale", tests, sizeof tests / sizeof tests[0]);
}
