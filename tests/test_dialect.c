/*
 * test_dialect.c - the kernel dialect on the backend under test, through the self-test kernels
 * of kernels/selftest.h: portssm_device_selftest passes on every device that runs kernels and is
 * UNSUPPORTED on cpu.
 *
 * On the sim labels it also drives the sim backend directly (its objects are linked into this
 * program; see the end of tests/CMakeLists.txt): the misuse modes of the self-test must each be
 * reported as PORTSSM_ERR_DEVICE, promptly, naming the source line; the warp width must really
 * differ between device 0 and device 1 in kernel results; bad launches and concurrent launches
 * from several threads must behave.  Probe kernels defined here check the runtime's shared
 * memory (0xff fill per block, mismatched and oversized declarations), partial warps, mixed
 * waits, and that a failing launch reports its lowest failing block.
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../backends/gpu/gpu.h"
#include "../backends/sim/sim_launch.h"
#include "../kernels/params.h"

/* Probe kernels of this file, for the sim runtime only (warp 32): what the self-test kernels,
 * which must also be valid GPU code, cannot do on purpose. */
#define PSSM_SIM_WARP 32
#define PSSM_SIM_PREFIX pssm_probe32_
#include "../kernels/pssm_dialect.h"
#include "../kernels/pssm_mma.h"

static int is_label(const char *label) { return strcmp(th_backend_label, label) == 0; }
static int is_sim(void) { return is_label("sim32") || is_label("sim64"); }
static int32_t label_warp(void) { return is_label("sim64") ? 64 : 32; }

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---------------------------------------------------------------- public API */

static void test_device_selftest(void **state)
{
    (void)state;
    const portssm_status s = portssm_device_selftest(th_ctx);
    if (is_label("cpu")) {
        assert_int_equal(s, PORTSSM_ERR_UNSUPPORTED);
        assert_true(strlen(portssm_last_error(th_ctx)) > 0);
        return;
    }
    if (s != PORTSSM_OK)
        fail_msg("portssm_device_selftest -> %s: %s", portssm_status_name(s),
                 portssm_last_error(th_ctx));
    /* again: the second run reuses the simulator's parked fibers / the loaded kernels */
    assert_int_equal(portssm_device_selftest(th_ctx), PORTSSM_OK);
}

static void test_device_warp_width(void **state)
{
    (void)state;
    portssm_device_info info;
    assert_int_equal(portssm_get_device_info(th_ctx, &info), PORTSSM_OK);
    if (is_sim()) {
        char name[32], arch[16];
        snprintf(name, sizeof name, "sim (warp %d)", (int)label_warp());
        snprintf(arch, sizeof arch, "sim%d", (int)label_warp());
        assert_int_equal(info.warp_size, label_warp());
        assert_string_equal(info.name, name);
        assert_string_equal(info.arch, arch);
        assert_true(info.multiprocessors >= 1 && info.multiprocessors <= 64);
    } else if (is_label("cpu")) {
        assert_int_equal(info.warp_size, 1);
    } else if (is_label("cuda")) {
        assert_int_equal(info.warp_size, 32);
    } else {
        assert_true(info.warp_size == 32 || info.warp_size == 64);
    }
}

/* ---------------------------------------------------------------- the sim, directly */

typedef struct sim_ctx {
    pssm_bctx b;
    pssm_gpu *g;
} sim_ctx;

static void sim_open(sim_ctx *s, int32_t device)
{
    memset(s, 0, sizeof *s);
    const portssm_status st = pssm_sim_backend.open(&s->b, device);
    if (st != PORTSSM_OK)
        fail_msg("sim open(%d): %s", (int)device, s->b.error);
    s->g = pssm_gpu_of(&s->b);
}

static void sim_close(sim_ctx *s) { pssm_sim_backend.close(&s->b); }

static void require_sim(void)
{
    if (!is_sim()) {
        print_message("skipped: drives the sim backend directly (labels sim32, sim64)\n");
        skip();
    }
}

/* Expected pieces of the message of each misuse mode at warp width w. */
static void misuse_expectation(int mode, int w, char *want, size_t cap)
{
    switch (mode) {
    case PSSM_SELFTEST_MISUSE_SHUFFLE_HALF_WARP:
        snprintf(want, cap, "reached by %d of %d lanes (the others finished)", w / 2, w);
        break;
    case PSSM_SELFTEST_MISUSE_BARRIER_HALF_BLOCK:
        snprintf(want, cap, "threads at different barriers");
        break;
    case PSSM_SELFTEST_MISUSE_SHUFFLE_SITES:
        snprintf(want, cap, "lanes at different shuffles");
        break;
    case PSSM_SELFTEST_MISUSE_DYNAMIC_PAST_END:
        snprintf(want, cap, "(%d bytes): a write past its end (byte +0 ", PSSM_SELFTEST_MISUSE_DYNAMIC);
        break;
    default:
        snprintf(want, cap, "barrier at kernels/selftest.h:");
        break;
    }
}

static void test_sim_misuse(void **state)
{
    (void)state;
    require_sim();
    sim_ctx s;
    sim_open(&s, label_warp() == 32 ? 0 : 1);
    for (int mode = 1; mode <= PSSM_SELFTEST_MISUSE_MODES; mode++) {
        s.b.error[0] = '\0';
        const double t0 = seconds();
        const portssm_status st = pssm_sim_backend.selftest(&s.b, mode);
        const double dt = seconds() - t0;
        print_message("mode %d: %s in %.1f ms: %s\n", mode, portssm_status_name(st), dt * 1e3,
                      s.b.error);
        if (st != PORTSSM_ERR_DEVICE)
            fail_msg("misuse mode %d: got %s (%s), expected PORTSSM_ERR_DEVICE", mode,
                     portssm_status_name(st), s.b.error);
        assert_true(dt < 5.0); /* reported, not waited out */
        char want[128];
        misuse_expectation(mode, label_warp(), want, sizeof want);
        if (!strstr(s.b.error, want))
            fail_msg("misuse mode %d: message '%s' lacks '%s'", mode, s.b.error, want);
        if (!strstr(s.b.error, "pssm_selftest_misuse") || !strstr(s.b.error, "block (0,0,0)"))
            fail_msg("misuse mode %d: message '%s' names no kernel or block", mode, s.b.error);
        const char *site = strstr(s.b.error, "kernels/selftest.h:");
        if (!site || site[strlen("kernels/selftest.h:")] < '1' ||
            site[strlen("kernels/selftest.h:")] > '9')
            fail_msg("misuse mode %d: message '%s' names no source line", mode, s.b.error);
        /* the abandoned block leaves the simulator usable */
        if (pssm_sim_backend.selftest(&s.b, 0) != PORTSSM_OK)
            fail_msg("selftest after misuse mode %d: %s", mode, s.b.error);
    }
    sim_close(&s);
}

static void test_sim_mode_checks(void **state)
{
    (void)state;
    require_sim();
    sim_ctx s;
    sim_open(&s, 0);
    assert_int_equal(pssm_sim_backend.selftest(&s.b, -1), PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(pssm_sim_backend.selftest(&s.b, PSSM_SELFTEST_MISUSE_MODES + 1),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    /* what cuda and hip answer for a misuse mode: their pssm_gpu has is_simulator == 0 */
    s.g->is_simulator = 0;
    assert_int_equal(pssm_sim_backend.selftest(&s.b, PSSM_SELFTEST_MISUSE_SHUFFLE_HALF_WARP),
                     PORTSSM_ERR_UNSUPPORTED);
    assert_non_null(strstr(s.b.error, "sim"));
    assert_int_equal(pssm_sim_backend.selftest(&s.b, 0), PORTSSM_OK);
    sim_close(&s);
}

/* Runs pssm_selftest_block on a fresh sim context of `device`; out_i planes land in `out`. */
static void run_block_kernel(int32_t device, int32_t *out, int64_t n)
{
    sim_ctx s;
    sim_open(&s, device);
    float *in = NULL;
    int32_t *dout = NULL;
    float *fout = NULL;
    assert_int_equal(s.g->alloc(s.g, (void **)&in, (size_t)n * sizeof *in), PORTSSM_OK);
    assert_int_equal(s.g->alloc(s.g, (void **)&fout,
                                (size_t)n * PSSM_SELFTEST_BLOCK_F_OUTPUTS * sizeof *fout),
                     PORTSSM_OK);
    assert_int_equal(s.g->alloc(s.g, (void **)&dout,
                                (size_t)n * PSSM_SELFTEST_BLOCK_I_OUTPUTS * sizeof *dout),
                     PORTSSM_OK);
    for (int64_t i = 0; i < n; i++)
        in[i] = (float)(i % 7);
    pssm_selftest_params p = {.in_f = in, .out_f = fout, .out_i = dout, .n = n};
    const pssm_dim3 grid = {(uint32_t)(n / PSSM_SELFTEST_BLOCK), 1, 1};
    const pssm_dim3 block = {PSSM_SELFTEST_BLOCK_X, PSSM_SELFTEST_BLOCK_Y, 1};
    if (pssm_gpu_launch(s.g, PSSM_KID_pssm_selftest_block, grid, block, 0, &p, sizeof p) !=
        PORTSSM_OK)
        fail_msg("launch: %s", s.b.error);
    memcpy(out, dout, (size_t)n * PSSM_SELFTEST_BLOCK_I_OUTPUTS * sizeof *dout);
    s.g->free(s.g, in);
    s.g->free(s.g, fout);
    s.g->free(s.g, dout);
    sim_close(&s);
}

static void test_sim_warp_width_in_kernels(void **state)
{
    (void)state;
    require_sim();
    enum { N = 2 * PSSM_SELFTEST_BLOCK, PLANES = PSSM_SELFTEST_BLOCK_I_OUTPUTS };
    static int32_t w32[N * PLANES], w64[N * PLANES];
    run_block_kernel(0, w32, N);
    run_block_kernel(1, w64, N);
    /* planes: 4 lane, 5 warp, 6 warp width; thread 40 of a block is (0,5) in the 8 x 16 block */
    assert_int_equal(w32[6 * N + 40], 32);
    assert_int_equal(w64[6 * N + 40], 64);
    assert_int_equal(w32[4 * N + 40], 8);
    assert_int_equal(w64[4 * N + 40], 40);
    assert_int_equal(w32[5 * N + 40], 1);
    assert_int_equal(w64[5 * N + 40], 0);
    assert_int_equal(w32[5 * N + 127], 3);
    assert_int_equal(w64[5 * N + 127], 1);
}

static void test_sim_bad_launch(void **state)
{
    (void)state;
    require_sim();
    sim_ctx s;
    sim_open(&s, label_warp() == 32 ? 0 : 1);
    pssm_selftest_params p = {.n = 0};
    /* straight to the device's launch, past pssm_gpu_launch's checks: the sim checks too */
    const pssm_dim3 grid = {1, 1, 1}, big = {1024, 2, 1}, deep = {1, 1, 128};
    assert_int_equal(s.g->launch(s.g, PSSM_KID_pssm_selftest_misuse, grid, big, 0, &p, sizeof p),
                     PORTSSM_ERR_INTERNAL);
    assert_non_null(strstr(s.b.error, "1024 threads"));
    assert_int_equal(s.g->launch(s.g, PSSM_KID_pssm_selftest_misuse, grid, deep, 0, &p, sizeof p),
                     PORTSSM_ERR_INTERNAL);
    assert_int_equal(s.g->launch(s.g, PSSM_KERNEL_COUNT, grid, grid, 0, &p, sizeof p),
                     PORTSSM_ERR_INTERNAL);
    /* dynamic shared memory past the device's, or not in 16-byte units */
    const pssm_dim3 ok = {PSSM_SELFTEST_BLOCK, 1, 1};
    assert_int_equal(s.g->launch(s.g, PSSM_KID_pssm_selftest_misuse, grid, ok,
                                 s.g->max_shared_per_block + 16, &p, sizeof p),
                     PORTSSM_ERR_INTERNAL);
    assert_non_null(strstr(s.b.error, "dynamic shared memory"));
    assert_int_equal(s.g->launch(s.g, PSSM_KID_pssm_selftest_misuse, grid, ok, 20, &p, sizeof p),
                     PORTSSM_ERR_INTERNAL);
    /* ... and pssm_gpu_launch says so before the device sees it */
    s.b.error[0] = '\0';
    assert_int_equal(pssm_gpu_launch(s.g, PSSM_KID_pssm_selftest_misuse, grid, ok,
                                     s.g->max_shared_per_block + 16, &p, sizeof p),
                     PORTSSM_ERR_INTERNAL);
    assert_non_null(strstr(s.b.error, "past the"));
    sim_close(&s);
}

/* Several host threads, each with its own context, launching at the same time. */
static void *selftest_thread(void *arg)
{
    sim_ctx s;
    memset(&s, 0, sizeof s);
    const int32_t device = (int32_t)(intptr_t)arg % 2;
    portssm_status st = pssm_sim_backend.open(&s.b, device);
    for (int rep = 0; rep < 3 && st == PORTSSM_OK; rep++)
        st = pssm_sim_backend.selftest(&s.b, rep == 1 ? PSSM_SELFTEST_MISUSE_SHUFFLE_SITES : 0) ==
                     (rep == 1 ? PORTSSM_ERR_DEVICE : PORTSSM_OK)
                 ? PORTSSM_OK
                 : PORTSSM_ERR_INTERNAL;
    pssm_sim_backend.close(&s.b);
    return (void *)(intptr_t)st;
}

static void test_sim_concurrent_contexts(void **state)
{
    (void)state;
    require_sim();
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    for (intptr_t k = 0; k < THREADS; k++)
        assert_int_equal(pthread_create(&t[k], NULL, selftest_thread, (void *)k), 0);
    for (int k = 0; k < THREADS; k++) {
        void *ret = NULL;
        pthread_join(t[k], &ret);
        assert_int_equal((intptr_t)ret, PORTSSM_OK);
    }
}

/* ---------------------------------------------------------------- warp matrix multiply */

/* The arrangement (lane, i) -> (row, col) of a warp of `warp` lanes with 256 / warp elements
 * each: every element of the 16x16 tile exactly once. */
typedef int (*mma_map_fn)(int lane, int i);
static void expect_bijection(const char *what, int warp, const int32_t *entry)
{
    const int acc = 256 / warp;
    int owner[256];
    for (int e = 0; e < 256; e++)
        owner[e] = -1;
    for (int j = 0; j < 256; j++) {
        const int32_t e = entry[j];
        if (e < 0 || e >= 256)
            fail_msg("%s: lane %d acc[%d] -> element %ld, outside the tile", what, j / acc,
                     j % acc, (long)e);
        if (owner[e] >= 0)
            fail_msg("%s: lane %d acc[%d] and lane %d acc[%d] both -> row %d, col %d", what,
                     owner[e] / acc, owner[e] % acc, j / acc, j % acc, (int)(e / 16),
                     (int)(e % 16));
        owner[e] = j;
    }
}

static void expect_map_bijection(const char *what, int warp, mma_map_fn row, mma_map_fn col,
                                 int fma_warp)
{
    int32_t entry[256];
    const int acc = 256 / warp;
    for (int lane = 0; lane < warp; lane++)
        for (int i = 0; i < acc; i++) {
            const int r = row ? row(lane, i) : pssm_mma_fma_row(fma_warp, lane, i);
            const int c = col ? col(lane, i) : pssm_mma_fma_col(fma_warp, lane, i);
            entry[lane * acc + i] = r >= 0 && r < 16 && c >= 0 && c < 16 ? r * 16 + c : -1;
        }
    expect_bijection(what, warp, entry);
}

/* Every arrangement of pssm_mma.h, as host arithmetic: the FMA form at warps 32 and 64, the
 * mma.sync one (warp 32) and the MFMA one (wave 64), whichever the device under test uses. */
static void test_mma_arrangements(void **state)
{
    (void)state;
    require_sim();
    expect_map_bijection("FMA arrangement, warp 32", 32, NULL, NULL, 32);
    expect_map_bijection("FMA arrangement, warp 64", 64, NULL, NULL, 64);
    expect_map_bijection("mma.sync arrangement (warp 32)", 32, pssm_mma_nv_row, pssm_mma_nv_col, 0);
    expect_map_bijection("MFMA arrangement (wave 64)", 64, pssm_mma_cdna_row, pssm_mma_cdna_col,
                         0);
    /* this file's own sim target (warp 32): the FMA arrangement, no tensor forms */
    expect_map_bijection("pssm_mma_row/col (sim, warp 32)", 32, pssm_mma_row, pssm_mma_col, 0);
    assert_int_equal(PSSM_MMA_TENSOR16, 0);
    assert_int_equal(PSSM_MMA_ACC, 8);
}

/* The map the device's own kernel code produces: pssm_selftest_mma writes (lane, i) -> row *
 * 16 + col for each tile.  On the sim labels the kernel is launched here at the label's warp
 * width, and its results are checked against a plain product as well; on cuda and hip the
 * same checks run inside portssm_device_selftest (the module's kernels are not reachable from
 * here), so there the test is that call. */
static void test_mma_device_map(void **state)
{
    (void)state;
    if (is_label("cpu")) {
        print_message("skipped: the cpu backend runs no kernels\n");
        skip();
    }
    if (!is_sim()) {
        const portssm_status st = portssm_device_selftest(th_ctx);
        if (st != PORTSSM_OK)
            fail_msg("portssm_device_selftest (its pssm_mma checks included) -> %s: %s",
                     portssm_status_name(st), portssm_last_error(th_ctx));
        return;
    }
    enum { K = PSSM_SELFTEST_MMA_K, T = 2 * PSSM_SELFTEST_MMA_FORMS }; /* each form twice */
    const int warp = label_warp(), per_block = PSSM_SELFTEST_BLOCK / warp;
    sim_ctx s;
    sim_open(&s, warp == 32 ? 0 : 1);
    float *in_f = NULL, *out_f = NULL;
    uint16_t *in_h = NULL;
    int32_t *out_i = NULL;
    assert_int_equal(s.g->alloc(s.g, (void **)&in_f, sizeof(float) * T * PSSM_SELFTEST_MMA_IN_F),
                     PORTSSM_OK);
    assert_int_equal(s.g->alloc(s.g, (void **)&in_h,
                                sizeof(uint16_t) * T * PSSM_SELFTEST_MMA_IN_H),
                     PORTSSM_OK);
    assert_int_equal(s.g->alloc(s.g, (void **)&out_f, sizeof(float) * T * 256), PORTSSM_OK);
    assert_int_equal(s.g->alloc(s.g, (void **)&out_i,
                                sizeof(int32_t) * (T * 256 + PSSM_SELFTEST_MMA_FLAGS)),
                     PORTSSM_OK);
    memset(out_i, 0xff, sizeof(int32_t) * (T * 256 + PSSM_SELFTEST_MMA_FLAGS));
    /* small integers (exact in every form and in every summation order) */
    for (int t = 0; t < T; t++) {
        float *f = in_f + t * PSSM_SELFTEST_MMA_IN_F;
        uint16_t *h = in_h + t * PSSM_SELFTEST_MMA_IN_H;
        for (int e = 0; e < PSSM_SELFTEST_MMA_IN_F; e++)
            f[e] = (float)((e * 7 + t * 3) % 9 - 4);
        for (int e = 0; e < PSSM_SELFTEST_MMA_IN_H; e++)
            h[e] = PSSM_SELFTEST_MMA_DTYPE(t % PSSM_SELFTEST_MMA_FORMS) == 1 ? pssm_f32_to_bf16(f[e])
                                                                       : pssm_f32_to_f16(f[e]);
    }
    pssm_selftest_params p = {.in_f = in_f, .in_h = in_h, .out_f = out_f, .out_i = out_i, .n = T};
    const pssm_dim3 grid = {(uint32_t)((T + per_block - 1) / per_block), 1, 1};
    const pssm_dim3 block = {PSSM_SELFTEST_BLOCK, 1, 1};
    if (pssm_gpu_launch(s.g, PSSM_KID_pssm_selftest_mma, grid, block, 0, &p, sizeof p) !=
        PORTSSM_OK)
        fail_msg("launch: %s", s.b.error);
    for (int t = 0; t < T; t++) {
        char what[64];
        snprintf(what, sizeof what, "pssm_mma_row/col in kernels (sim, warp %d), tile %d", warp,
                 t);
        expect_bijection(what, warp, out_i + t * 256);
        const float *a = in_f + t * PSSM_SELFTEST_MMA_IN_F, *b = a + 16 * K, *c = b + 16 * K;
        for (int e = 0; e < 256; e++) {
            const int row = e / 16, col = e % 16;
            double want = c[e];
            for (int k = 0; k < K; k++) {
                if (k == 16)
                    want *= PSSM_SELFTEST_MMA_SCALE(row, col);
                want += (double)a[row * K + k] * b[col * K + k];
            }
            if (out_f[t * 256 + e] != (float)want)
                fail_msg("tile %d (form %d), row %d, col %d: got %.9g, expected %.9g", t, t % PSSM_SELFTEST_MMA_FORMS,
                         row, col, (double)out_f[t * 256 + e], want);
        }
    }
    /* the sim has no tensor instructions: every form is the FMA loop */
    for (int k = 0; k < PSSM_SELFTEST_MMA_FLAGS; k++)
        assert_int_equal(out_i[T * 256 + k], 0);
    s.g->free(s.g, in_f);
    s.g->free(s.g, in_h);
    s.g->free(s.g, out_f);
    s.g->free(s.g, out_i);
    sim_close(&s);
}

/* ---------------------------------------------------------------- sim runtime probes */

typedef struct probe_params {
    int32_t *out;
    int64_t fail_from;   /* probe_late_failure: first block that misbehaves */
    const int32_t *in;   /* probe_copies */
} probe_params;

/* Reads shared memory before writing it: every block must see the 0xff fill. */
PSSM_KERNEL(probe_shared_fill, probe_params, p)
{
    PSSM_SHARED(uint32_t, s, 64);
    const int tid = PSSM_TID;
    p.out[PSSM_BLOCK_X * 64 + tid] = (int32_t)s[tid];
    PSSM_SYNC();
    s[tid] = (uint32_t)tid;
    PSSM_SYNC();
}

/* Thread 0 and the others reach different shared declarations. */
PSSM_KERNEL(probe_shared_mismatch, probe_params, p)
{
    if (PSSM_TID == 0) {
        PSSM_SHARED(float, a, 8);
        a[0] = 1.0f;
    } else {
        PSSM_SHARED(float, b, 16);
        b[0] = 1.0f;
    }
}

/* More static shared memory than a CUDA block may declare (48 KiB). */
PSSM_KERNEL(probe_shared_overflow, probe_params, p)
{
    PSSM_SHARED(float, big, 12 * 1024 + 1);
    big[PSSM_TID] = 0.0f;
}

/* Thread 63 writes one element past the end of the second shared array (the sim's red zones
 * must catch it at the next barrier, as a GPU would not); thread 0 writes before the first. */
PSSM_KERNEL(probe_shared_past_end, probe_params, p)
{
    PSSM_SHARED(float, a, 64);
    PSSM_SHARED(float, b, 64);
    const int tid = PSSM_TID;
    a[tid] = 1.0f;
    b[tid + (tid == 63 && p.fail_from == 0)] = 2.0f;
    if (tid == 0 && p.fail_from == 1)
        a[-1] = 3.0f;
    PSSM_SYNC();
    p.out[tid] = (int32_t)(a[tid] + b[tid]);
}

/* 64 ints of dynamic shared memory beside a static array: each thread writes both, reads the
 * dynamic one reversed; fail_from 1: thread 0 writes before the dynamic memory's start. */
PSSM_KERNEL(probe_dynamic, probe_params, p)
{
    PSSM_SHARED(float, a, 64);
    PSSM_SHARED_DYNAMIC(int32_t, d);
    const int tid = PSSM_TID;
    a[tid] = (float)tid;
    d[tid] = 2 * tid;
    if (tid == 0 && p.fail_from == 1)
        d[-1] = 5;
    PSSM_SYNC();
    p.out[PSSM_BLOCK_X * 64 + tid] = d[63 - tid] + (int32_t)a[tid] + 1000 * (int32_t)PSSM_BLOCK_X;
}

/* Asynchronous copies: thread t copies in[4t..4t+3] to a, then in[256 + 4t..] to b in a second
 * group, reading both at four points: before any wait, after PSSM_COPY_WAIT(1) (the first
 * group landed, the second may fly), after PSSM_COPY_WAIT(0), and after a third copy left
 * uncommitted and PSSM_COPY_WAIT_ALL(). */
PSSM_KERNEL(probe_copies, probe_params, p)
{
    PSSM_SHARED(int32_t, a, 256);
    PSSM_SHARED(int32_t, b, 256);
    const int tid = PSSM_TID;
    for (int k = 0; k < 4; k++)
        a[4 * tid + k] = b[4 * tid + k] = -1;
    pssm_copy_async16(a + 4 * tid, p.in + 4 * tid, 1);
    PSSM_COPY_COMMIT();
    pssm_copy_async16(b + 4 * tid, p.in + 256 + 4 * tid, 1);
    PSSM_COPY_COMMIT();
    p.out[tid] = a[4 * tid] + b[4 * tid];
    PSSM_COPY_WAIT(1);
    p.out[64 + tid] = a[4 * tid] + b[4 * tid];
    PSSM_COPY_WAIT(0);
    p.out[128 + tid] = a[4 * tid] + b[4 * tid];
    pssm_copy_async16(a + 4 * tid, p.in + 512 + 4 * tid, 0); /* zeros */
    p.out[192 + tid] = a[4 * tid];
    PSSM_COPY_WAIT_ALL();
    p.out[256 + tid] = a[4 * tid];
}

/* A block of 48 threads: warp 1 has 16 lanes; reading a missing lane gives the own value. */
PSSM_KERNEL(probe_partial_warp, probe_params, p)
{
    const int tid = PSSM_TID;
    p.out[tid] = PSSM_SHFL_XOR_I32(tid, 16);
    p.out[64 + tid] = PSSM_SHFL_IDX_I32(tid, PSSM_LANE + 8);
}

/* Lane 0 waits at a barrier while the rest of its warp waits at a shuffle. */
PSSM_KERNEL(probe_mixed_wait, probe_params, p)
{
    float v = (float)PSSM_TID;
    if (PSSM_LANE == 0)
        PSSM_SYNC();
    else
        v = PSSM_SHFL_XOR_F32(v, 1);
    p.out[PSSM_TID] = (int32_t)v;
}

/* From block fail_from on, thread 5 skips the barrier. */
PSSM_KERNEL(probe_late_failure, probe_params, p)
{
    const int tid = PSSM_TID;
    if (PSSM_BLOCK_X >= p.fail_from && tid == 5)
        return;
    PSSM_SYNC();
    p.out[PSSM_BLOCK_X * 64 + tid] = 1;
}

/* A launch of `blocks` blocks of `threads`, `dynamic` bytes of dynamic shared memory each, on a
 * device that gives a block `limit` bytes in all. */
static int probe_defer_copies; /* the next probe_run's pssm_sim_launch.defer_copies */

static portssm_status probe_run(pssm_sim_kernel_fn fn, const char *name, uint32_t blocks,
                                uint32_t threads, size_t dynamic, size_t limit,
                                const probe_params *p, char *err, size_t cap)
{
    const pssm_sim_launch l = {.fn = fn, .name = name, .params = p, .grid = {blocks, 1, 1},
                               .block = {threads, 1, 1}, .warp = 32, .dynamic_shared = dynamic,
                               .shared_limit = limit, .defer_copies = probe_defer_copies};
    err[0] = '\0';
    return pssm_sim_run(&l, err, cap);
}
#define PROBE_RUN(kernel, blocks, threads, p, err)                                              \
    probe_run(pssm_probe32_##kernel, #kernel, blocks, threads, 0, PSSM_SIM_SHARED_MAX, p, err,  \
              sizeof err)
#define PROBE_RUN_DYNAMIC(kernel, blocks, threads, dynamic, limit, p, err)                      \
    probe_run(pssm_probe32_##kernel, #kernel, blocks, threads, dynamic, limit, p, err, sizeof err)

static void expect_error(portssm_status st, const char *err, const char *want)
{
    print_message("%s\n", err);
    assert_int_equal(st, PORTSSM_ERR_DEVICE);
    if (!strstr(err, want))
        fail_msg("message '%s' lacks '%s'", err, want);
    if (!strstr(err, "test_dialect.c:"))
        fail_msg("message '%s' names no source line", err);
}

static void test_sim_shared_memory(void **state)
{
    (void)state;
    require_sim();
    static int32_t out[3 * 64];
    char err[PSSM_ERROR_CAPACITY];
    probe_params p = {.out = out};
    assert_int_equal(PROBE_RUN(probe_shared_fill, 3, 64, &p, err), PORTSSM_OK);
    for (int i = 0; i < 3 * 64; i++)
        assert_int_equal(out[i], -1);
    expect_error(PROBE_RUN(probe_shared_mismatch, 1, 64, &p, err), err,
                 "thread 1: shared declaration #1 at ");
    expect_error(PROBE_RUN(probe_shared_overflow, 1, 64, &p, err), err,
                 "(49156 bytes) takes the block past 49152 bytes");
    p.fail_from = 0;
    expect_error(PROBE_RUN(probe_shared_past_end, 1, 64, &p, err), err,
                 "shared array #2 declared at ");
    assert_non_null(strstr(err, "past the end of it (byte +0 after its end)"));
    p.fail_from = 1;
    expect_error(PROBE_RUN(probe_shared_past_end, 1, 64, &p, err), err,
                 "before the start of it");
    p.fail_from = 2; /* in bounds: fine */
    assert_int_equal(PROBE_RUN(probe_shared_past_end, 1, 64, &p, err), PORTSSM_OK);
    for (int i = 0; i < 64; i++)
        assert_int_equal(out[i], 3);
}

static void test_sim_copies(void **state)
{
    (void)state;
    require_sim();
    static int32_t in[768], out[5 * 64];
    char err[PSSM_ERROR_CAPACITY];
    th_rng r = th_rng_for(17); /* positive values: -1 marks a slot no copy reached */
    for (int i = 0; i < 768; i++)
        in[i] = (int32_t)(th_next(&r) % 1000000) + 1;
    probe_params p = {.out = out, .in = in};
    for (int defer = 0; defer <= 1; defer++) {
        probe_defer_copies = defer;
        memset(out, 0x7f, sizeof out); /* poisoned: every slot must be written */
        assert_int_equal(PROBE_RUN(probe_copies, 1, 64, &p, err), PORTSSM_OK);
        for (int t = 0; t < 64; t++) {
            const int32_t va = in[4 * t], vb = in[256 + 4 * t];
            /* at once: every copy has landed when it is read; deferred: only what a wait
             * covered (the second group after WAIT(1) is still in flight) */
            assert_int_equal(out[t], defer ? -2 : va + vb);
            assert_int_equal(out[64 + t], defer ? va - 1 : va + vb);
            assert_int_equal(out[128 + t], va + vb);
            assert_int_equal(out[192 + t], defer ? va : 0); /* uncommitted: until WAIT_ALL */
            assert_int_equal(out[256 + t], 0);
        }
    }
    probe_defer_copies = 0;
}

static void test_sim_dynamic_shared_memory(void **state)
{
    (void)state;
    require_sim();
    static int32_t out[3 * 64];
    char err[PSSM_ERROR_CAPACITY];
    probe_params p = {.out = out, .fail_from = 0};
    /* apart from the static array, holding what each thread wrote, in every block */
    memset(out, 0x7f, sizeof out); /* poisoned: every slot must be written */
    assert_int_equal(PROBE_RUN_DYNAMIC(probe_dynamic, 3, 64, 256, PSSM_SIM_SHARED_MAX, &p, err),
                     PORTSSM_OK);
    for (int i = 0; i < 3 * 64; i++)
        assert_int_equal(out[i], 2 * (63 - i % 64) + i % 64 + 1000 * (i / 64));
    /* as much as the device gives, less the static array */
    memset(out, 0x7f, sizeof out);
    assert_int_equal(PROBE_RUN_DYNAMIC(probe_dynamic, 2, 64, PSSM_SIM_SHARED_MAX - 256,
                                       PSSM_SIM_SHARED_MAX, &p, err),
                     PORTSSM_OK);
    for (int i = 0; i < 2 * 64; i++)
        assert_int_equal(out[i], 2 * (63 - i % 64) + i % 64 + 1000 * (i / 64));
    /* a write before its start */
    p.fail_from = 1;
    expect_error(PROBE_RUN_DYNAMIC(probe_dynamic, 1, 64, 256, PSSM_SIM_SHARED_MAX, &p, err), err,
                 "dynamic shared memory declared at ");
    assert_non_null(strstr(err, "(256 bytes): a write before its start (byte -4 from it)"));
    /* one byte of static memory past the device's limit */
    p.fail_from = 0;
    expect_error(PROBE_RUN_DYNAMIC(probe_dynamic, 1, 64, 256, 256 + 255, &p, err), err,
                 "takes the block past the device's 511 bytes of shared memory (0 static before "
                 "it, 256 dynamic)");
    /* more dynamic memory than the device has, or than the sim holds: a bad launch */
    assert_int_equal(PROBE_RUN_DYNAMIC(probe_dynamic, 1, 64, 512, 256, &p, err),
                     PORTSSM_ERR_INTERNAL);
    assert_int_equal(PROBE_RUN_DYNAMIC(probe_dynamic, 1, 64, 256, PSSM_SIM_SHARED_MAX + 16, &p,
                                       err),
                     PORTSSM_ERR_INTERNAL);
    assert_non_null(strstr(err, "dynamic shared memory"));
}

static void test_sim_partial_warp(void **state)
{
    (void)state;
    require_sim();
    static int32_t out[128];
    char err[PSSM_ERROR_CAPACITY];
    probe_params p = {.out = out};
    assert_int_equal(PROBE_RUN(probe_partial_warp, 1, 48, &p, err), PORTSSM_OK);
    for (int t = 0; t < 48; t++) {
        const int lane = t % 32, base = t - lane, m = t < 32 ? 32 : 16;
        const int xor_src = lane ^ 16, idx_src = (lane + 8) % 32;
        assert_int_equal(out[t], xor_src < m ? base + xor_src : t);
        assert_int_equal(out[64 + t], idx_src < m ? base + idx_src : t);
    }
}

static void test_sim_mixed_wait(void **state)
{
    (void)state;
    require_sim();
    static int32_t out[64];
    char err[PSSM_ERROR_CAPACITY];
    probe_params p = {.out = out};
    expect_error(PROBE_RUN(probe_mixed_wait, 2, 64, &p, err), err,
                 "warp 0: shuffle (xor) at ");
    assert_non_null(strstr(err, "reached by 31 of 32 lanes (lane 0 waits at the barrier at "));
}

/* 64 blocks of 64 threads: enough to be spread over the host threads; the report is still the
 * lowest failing block, and every block before it ran. */
static void test_sim_lowest_failing_block(void **state)
{
    (void)state;
    require_sim();
    static int32_t out[64 * 64];
    char err[PSSM_ERROR_CAPACITY];
    for (int rep = 0; rep < 3; rep++) {
        memset(out, 0, sizeof out);
        probe_params p = {.out = out, .fail_from = 40};
        expect_error(PROBE_RUN(probe_late_failure, 64, 64, &p, err), err,
                     "block (40,0,0): barrier at ");
        assert_non_null(strstr(err, "reached by 63 of 64 threads (the others finished)"));
        for (int i = 0; i < 40 * 64; i++)
            assert_int_equal(out[i], 1);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_selftest),
        cmocka_unit_test(test_device_warp_width),
        cmocka_unit_test(test_mma_arrangements),
        cmocka_unit_test(test_mma_device_map),
        cmocka_unit_test(test_sim_misuse),
        cmocka_unit_test(test_sim_mode_checks),
        cmocka_unit_test(test_sim_warp_width_in_kernels),
        cmocka_unit_test(test_sim_bad_launch),
        cmocka_unit_test(test_sim_concurrent_contexts),
        cmocka_unit_test(test_sim_shared_memory),
        cmocka_unit_test(test_sim_dynamic_shared_memory),
        cmocka_unit_test(test_sim_copies),
        cmocka_unit_test(test_sim_partial_warp),
        cmocka_unit_test(test_sim_mixed_wait),
        cmocka_unit_test(test_sim_lowest_failing_block),
    };
    return th_main(argc, argv, "test_dialect", tests, sizeof tests / sizeof tests[0]);
}
