/*
 * ops_selftest.c - host side of the dialect self-test (kernels/selftest.h), shared by the cuda,
 * hip and sim backends: portssm_device_selftest() and the sim's misuse modes.
 *
 * Each check fills inputs from a fixed-seed generator, runs one self-test kernel, and compares
 * every result with a value computed here from the documented semantics (CUDA's __shfl_*_sync
 * at width = the warp, the reductions' definitions, IEEE rounding), at the device's warp width.
 */
#include "gpu.h"

#include "../../kernels/params.h"
#include "../../kernels/pssm_float16.h"

#include <math.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>

/* ---------------------------------------------------------------- staging buffers */

/* One kernel's arrays: inputs in_f/in_i/in_h and outputs out_f/out_i/out_h, on the host. */
enum { IO_IN_F, IO_IN_I, IO_IN_H, IO_OUT_F, IO_OUT_I, IO_OUT_H, IO_COUNT };
static const size_t io_elem[IO_COUNT] = {4, 4, 2, 4, 4, 2};

typedef struct st_io {
    void *host[IO_COUNT];
    size_t count[IO_COUNT];
} st_io;

static void io_free(st_io *io)
{
    for (int k = 0; k < IO_COUNT; k++)
        free(io->host[k]);
    memset(io, 0, sizeof *io);
}

/* Element counts of the six arrays (0: absent). */
static portssm_status io_alloc(pssm_bctx *c, st_io *io, size_t in_f, size_t in_i, size_t in_h,
                               size_t out_f, size_t out_i, size_t out_h)
{
    const size_t count[IO_COUNT] = {in_f, in_i, in_h, out_f, out_i, out_h};
    memset(io, 0, sizeof *io);
    for (int k = 0; k < IO_COUNT; k++) {
        io->count[k] = count[k];
        if (count[k] && !(io->host[k] = calloc(count[k], io_elem[k]))) {
            io_free(io);
            return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY, "selftest: out of host memory");
        }
    }
    return PORTSSM_OK;
}

#define IO_F(io, k) ((float *)(io)->host[k])
#define IO_I(io, k) ((int32_t *)(io)->host[k])
#define IO_H(io, k) ((uint16_t *)(io)->host[k])

/* Uploads the inputs, poisons the outputs (all bits set), runs the kernel, downloads. */
static portssm_status io_run(pssm_gpu *g, int kernel, pssm_dim3 grid, pssm_dim3 block,
                             uint32_t shared_bytes, pssm_selftest_params p, st_io *io)
{
    size_t offset[IO_COUNT], total = 0;
    for (int k = 0; k < IO_COUNT; k++) {
        offset[k] = total;
        total += (io->count[k] * io_elem[k] + 255) & ~(size_t)255;
    }
    unsigned char *dev = NULL;
    portssm_status s = g->alloc(g, (void **)&dev, total);
    if (s != PORTSSM_OK)
        return s;
    void *ptr[IO_COUNT];
    for (int k = 0; k < IO_COUNT && s == PORTSSM_OK; k++) {
        ptr[k] = io->count[k] ? dev + offset[k] : NULL;
        if (!io->count[k])
            continue;
        if (k >= IO_OUT_F)
            memset(io->host[k], 0xff, io->count[k] * io_elem[k]);
        s = g->copy_to_device(g, ptr[k], io->host[k], io->count[k] * io_elem[k]);
    }
    if (s == PORTSSM_OK) {
        p.in_f = (const float *)ptr[IO_IN_F];
        p.in_i = (const int32_t *)ptr[IO_IN_I];
        p.in_h = (const uint16_t *)ptr[IO_IN_H];
        p.out_f = (float *)ptr[IO_OUT_F];
        p.out_i = (int32_t *)ptr[IO_OUT_I];
        p.out_h = (uint16_t *)ptr[IO_OUT_H];
        s = pssm_gpu_launch(g, kernel, grid, block, shared_bytes, &p, sizeof p);
    }
    if (s == PORTSSM_OK)
        s = g->sync(g);
    for (int k = IO_OUT_F; k < IO_COUNT && s == PORTSSM_OK; k++)
        if (io->count[k])
            s = g->copy_to_host(g, io->host[k], ptr[k], io->count[k] * io_elem[k]);
    if (s == PORTSSM_OK)
        return g->free(g, dev);
    char first[sizeof g->ctx->error]; /* the failure to report, not the free's after it */
    memcpy(first, g->ctx->error, sizeof first);
    g->free(g, dev);
    memcpy(g->ctx->error, first, sizeof first);
    return s;
}

/* ---------------------------------------------------------------- inputs */

typedef struct st_rng {
    uint64_t x;
} st_rng;

static uint64_t rng_next(st_rng *r) /* splitmix64 */
{
    uint64_t z = (r->x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static float rng_uniform(st_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(rng_next(r) >> 11) * 0x1p-53);
}

/* A small integer in [-64, 64] as a float: sums of a few thousand are exact in any order. */
static float rng_small_int(st_rng *r) { return (float)((int)(rng_next(r) % 129) - 64); }

/* ---------------------------------------------------------------- reporting */

/* Names thread i of 1-D blocks of PSSM_SELFTEST_BLOCK threads: "thread T (block B, lane L)". */
static portssm_status mismatch_f32(pssm_gpu *g, const char *check, int64_t i, float got,
                                   float want)
{
    const int64_t t = i % PSSM_SELFTEST_BLOCK;
    return pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                     "selftest (warp %d): %s: thread %lld (block %lld, lane %lld): got %.9g "
                     "(0x%08x), expected %.9g (0x%08x)",
                     (int)g->warp_size, check, (long long)t, (long long)(i / PSSM_SELFTEST_BLOCK),
                     (long long)(t % g->warp_size), (double)got, (unsigned)pssm_f32_bits(got),
                     (double)want, (unsigned)pssm_f32_bits(want));
}

static portssm_status mismatch_i32(pssm_gpu *g, const char *check, int64_t i, int32_t got,
                                   int32_t want)
{
    const int64_t t = i % PSSM_SELFTEST_BLOCK;
    return pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                     "selftest (warp %d): %s: thread %lld (block %lld, lane %lld): got %ld, "
                     "expected %ld",
                     (int)g->warp_size, check, (long long)t, (long long)(i / PSSM_SELFTEST_BLOCK),
                     (long long)(t % g->warp_size), (long)got, (long)want);
}

static int same_bits(float a, float b) { return pssm_f32_bits(a) == pssm_f32_bits(b); }

/* ---------------------------------------------------------------- shuffles */

#define ST_BLOCKS 3
#define ST_THREADS (ST_BLOCKS * PSSM_SELFTEST_BLOCK)

/* The lane whose value lane `lane` receives in shuffle form k of pssm_selftest_shuffle. */
static int shuffle_expected_lane(int k, int lane, int warp)
{
    const int half = warp / 2;
    switch (k) {
    case 0: return lane ^ 1;
    case 1: return lane ^ half;
    case 2: return lane >= 1 ? lane - 1 : lane;
    case 3: return lane >= 3 ? lane - 3 : lane;
    case 4: return lane + 1 < warp ? lane + 1 : lane;
    case 5: return lane + half + 1 < warp ? lane + half + 1 : lane;
    case 6: return (lane * 7 + 3) % warp;
    default: return 0;
    }
}

static const char *const shuffle_checks[2][PSSM_SELFTEST_SHUFFLE_OUTPUTS] = {
    {"PSSM_SHFL_XOR_F32(v, 1)", "PSSM_SHFL_XOR_F32(v, warp/2)", "PSSM_SHFL_UP_F32(v, 1)",
     "PSSM_SHFL_UP_F32(v, 3)", "PSSM_SHFL_DOWN_F32(v, 1)", "PSSM_SHFL_DOWN_F32(v, warp/2+1)",
     "PSSM_SHFL_IDX_F32(v, lane*7+3)", "PSSM_SHFL_IDX_F32(v, 0)"},
    {"PSSM_SHFL_XOR_I32(v, 1)", "PSSM_SHFL_XOR_I32(v, warp/2)", "PSSM_SHFL_UP_I32(v, 1)",
     "PSSM_SHFL_UP_I32(v, 3)", "PSSM_SHFL_DOWN_I32(v, 1)", "PSSM_SHFL_DOWN_I32(v, warp/2+1)",
     "PSSM_SHFL_IDX_I32(v, lane*7+3)", "PSSM_SHFL_IDX_I32(v, 0)"}};

static portssm_status check_shuffle(pssm_gpu *g)
{
    const int64_t n = ST_THREADS;
    const int warp = g->warp_size;
    st_io io;
    portssm_status s = io_alloc(g->ctx, &io, n, n, 0, n * PSSM_SELFTEST_SHUFFLE_OUTPUTS,
                                n * PSSM_SELFTEST_SHUFFLE_OUTPUTS, 0);
    if (s != PORTSSM_OK)
        return s;
    st_rng r = {1};
    for (int64_t i = 0; i < n; i++) {
        IO_F(&io, IO_IN_F)[i] = rng_uniform(&r, -1000.0f, 1000.0f);
        IO_I(&io, IO_IN_I)[i] = (int32_t)(uint32_t)rng_next(&r);
    }
    pssm_selftest_params p = {.n = n};
    s = io_run(g, PSSM_KID_pssm_selftest_shuffle, (pssm_dim3){ST_BLOCKS, 1, 1},
               (pssm_dim3){PSSM_SELFTEST_BLOCK, 1, 1}, 0, p, &io);
    for (int k = 0; k < PSSM_SELFTEST_SHUFFLE_OUTPUTS && s == PORTSSM_OK; k++)
        for (int64_t i = 0; i < n && s == PORTSSM_OK; i++) {
            const int lane = (int)(i % warp);
            const int64_t src = i - lane + shuffle_expected_lane(k, lane, warp);
            const float got_f = IO_F(&io, IO_OUT_F)[k * n + i], want_f = IO_F(&io, IO_IN_F)[src];
            const int32_t got_i = IO_I(&io, IO_OUT_I)[k * n + i], want_i = IO_I(&io, IO_IN_I)[src];
            if (!same_bits(got_f, want_f))
                s = mismatch_f32(g, shuffle_checks[0][k], i, got_f, want_f);
            else if (got_i != want_i)
                s = mismatch_i32(g, shuffle_checks[1][k], i, got_i, want_i);
        }
    io_free(&io);
    return s;
}

/* ---------------------------------------------------------------- warp collectives */

static const char *const reduce_checks[PSSM_SELFTEST_REDUCE_OUTPUTS] = {
    "pssm_warp_sum",         "pssm_warp_max",         "pssm_warp_scan_sum",
    "pssm_team_sum(v, 1)",   "pssm_team_sum(v, 4)",   "pssm_team_sum(v, 16)"};

/* Result k for thread i, from the definitions (the inputs are small integers: exact). */
static float reduce_expected(int k, const float *v, int64_t i, int warp)
{
    static const int teams[3] = {1, 4, 16};
    const int lane = (int)(i % warp);
    const int64_t w0 = i - lane;
    int64_t lo = w0, hi = w0 + warp; /* the lanes whose values combine */
    if (k == 2)
        hi = i + 1;
    else if (k >= 3) {
        const int team = teams[k - 3];
        lo = w0 + lane / team * team;
        hi = lo + team;
    }
    double acc = k == 1 ? -INFINITY : 0.0;
    for (int64_t j = lo; j < hi; j++)
        acc = k == 1 ? fmax(acc, v[j]) : acc + v[j];
    return (float)acc;
}

static portssm_status check_reduce(pssm_gpu *g)
{
    const int64_t n = ST_THREADS;
    st_io io;
    portssm_status s = io_alloc(g->ctx, &io, n, 0, 0, n * PSSM_SELFTEST_REDUCE_OUTPUTS, 0, 0);
    if (s != PORTSSM_OK)
        return s;
    st_rng r = {2};
    for (int64_t i = 0; i < n; i++)
        IO_F(&io, IO_IN_F)[i] = rng_small_int(&r);
    pssm_selftest_params p = {.n = n};
    s = io_run(g, PSSM_KID_pssm_selftest_reduce, (pssm_dim3){ST_BLOCKS, 1, 1},
               (pssm_dim3){PSSM_SELFTEST_BLOCK, 1, 1}, 0, p, &io);
    for (int k = 0; k < PSSM_SELFTEST_REDUCE_OUTPUTS && s == PORTSSM_OK; k++)
        for (int64_t i = 0; i < n && s == PORTSSM_OK; i++) {
            const float got = IO_F(&io, IO_OUT_F)[k * n + i];
            const float want = reduce_expected(k, IO_F(&io, IO_IN_F), i, g->warp_size);
            if (!same_bits(got, want))
                s = mismatch_f32(g, reduce_checks[k], i, got, want);
        }
    io_free(&io);
    return s;
}

/* ---------------------------------------------------------------- blocks, shared memory */

#define ST_GRID_X 3
#define ST_GRID_Y 2

static const char *const block_f_checks[PSSM_SELFTEST_BLOCK_F_OUTPUTS] = {
    "shared line reversed across the block", "shifted read of a 2-D shared tile",
    "three rounds of neighbour sums between barriers", "block sum through shared memory"};
static const char *const block_i_checks[PSSM_SELFTEST_BLOCK_I_OUTPUTS] = {
    "PSSM_THREAD_X", "PSSM_THREAD_Y", "PSSM_BLOCK_X",   "PSSM_BLOCK_Y",
    "PSSM_LANE",     "PSSM_WARP_ID",  "PSSM_WARP_SIZE", "PSSM_BLOCKDIM_X/Y, PSSM_GRIDDIM_X/Y"};

/* Expected out_f planes of one block (values v, results out[plane][t]). */
static void block_expected(const float *v,
                           float out[PSSM_SELFTEST_BLOCK_F_OUTPUTS][PSSM_SELFTEST_BLOCK])
{
    enum { T = PSSM_SELFTEST_BLOCK, BX = PSSM_SELFTEST_BLOCK_X, BY = PSSM_SELFTEST_BLOCK_Y };
    float line[T], next[T];
    double total = 0.0;
    for (int t = 0; t < T; t++) {
        const int tx = t % BX, ty = t / BX;
        out[0][t] = v[T - 1 - t];
        out[1][t] = 2.0f * v[(ty + 5) % BY * BX + (tx + 3) % BX];
        line[t] = v[t];
        total += v[t];
    }
    for (int round = 1; round <= 3; round++) {
        for (int t = 0; t < T; t++)
            next[t] = line[(t + round) % T];
        for (int t = 0; t < T; t++)
            line[t] += next[t];
    }
    for (int t = 0; t < T; t++) {
        out[2][t] = line[t];
        out[3][t] = (float)total;
    }
}

static portssm_status check_block(pssm_gpu *g)
{
    enum { T = PSSM_SELFTEST_BLOCK, BX = PSSM_SELFTEST_BLOCK_X, BY = PSSM_SELFTEST_BLOCK_Y };
    const int64_t n = (int64_t)ST_GRID_X * ST_GRID_Y * T;
    const int warp = g->warp_size;
    st_io io;
    portssm_status s = io_alloc(g->ctx, &io, n, 0, 0, n * PSSM_SELFTEST_BLOCK_F_OUTPUTS,
                                n * PSSM_SELFTEST_BLOCK_I_OUTPUTS, 0);
    if (s != PORTSSM_OK)
        return s;
    st_rng r = {3};
    for (int64_t i = 0; i < n; i++)
        IO_F(&io, IO_IN_F)[i] = rng_small_int(&r);
    pssm_selftest_params p = {.n = n};
    s = io_run(g, PSSM_KID_pssm_selftest_block, (pssm_dim3){ST_GRID_X, ST_GRID_Y, 1},
               (pssm_dim3){BX, BY, 1}, 0, p, &io);
    for (int64_t b = 0; b < ST_GRID_X * ST_GRID_Y && s == PORTSSM_OK; b++) {
        float want[PSSM_SELFTEST_BLOCK_F_OUTPUTS][T];
        block_expected(IO_F(&io, IO_IN_F) + b * T, want);
        for (int t = 0; t < T && s == PORTSSM_OK; t++) {
            const int64_t i = b * T + t;
            const int32_t want_i[PSSM_SELFTEST_BLOCK_I_OUTPUTS] = {
                t % BX,    t / BX,        (int32_t)(b % ST_GRID_X), (int32_t)(b / ST_GRID_X),
                t % warp,  t / warp,      warp,
                BX * 1000000 + BY * 10000 + ST_GRID_X * 100 + ST_GRID_Y};
            for (int k = 0; k < PSSM_SELFTEST_BLOCK_F_OUTPUTS && s == PORTSSM_OK; k++) {
                const float got = IO_F(&io, IO_OUT_F)[k * n + i];
                if (!same_bits(got, want[k][t]))
                    s = mismatch_f32(g, block_f_checks[k], i, got, want[k][t]);
            }
            for (int k = 0; k < PSSM_SELFTEST_BLOCK_I_OUTPUTS && s == PORTSSM_OK; k++) {
                const int32_t got = IO_I(&io, IO_OUT_I)[k * n + i];
                if (got != want_i[k])
                    s = mismatch_i32(g, block_i_checks[k], i, got, want_i[k]);
            }
        }
    }
    io_free(&io);
    return s;
}

/* ---------------------------------------------------------------- 16-bit floats */

/* Rounding edges of both formats; the rest of the store inputs are random bit patterns. */
static const uint32_t f16_edges[] = {
    0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u, /* 0, -0, 1, -1                       */
    0x477fe000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u, /* 65504, just below / at 65520 (inf) */
    0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, /* inf, -inf, NaNs                    */
    0x7f800001u, 0x7fbfffffu,                           /* signalling NaNs                    */
    0x38800000u, 0x387fc000u, 0x387fe000u,              /* 2^-14, largest f16 subnormal, tie  */
    0x33800000u, 0x33000000u, 0x33000001u, 0x33400000u, /* 2^-24, 2^-25 (tie), above, 1.5*2^-25 */
    0xb3000000u, 0x32ffffffu, 0x00000001u, 0x807fffffu, /* -2^-25, below, f32 subnormals       */
    0x3f801000u, 0x3f803000u, 0x3f801001u,              /* f16 ties to even, down and up      */
    0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, /* bf16 ties to even, above, below    */
    0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu, /* FLT_MAX, bf16 overflow tie/below   */
    0x3dcccccdu, 0xc0490fdbu, 0x42f6e979u, 0x4479ffffu, /* 0.1, -pi, 123.456, 999.99994       */
};

static int f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
static int bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

static portssm_status mismatch_h(pssm_gpu *g, const char *check, uint32_t in, unsigned got,
                                 unsigned want)
{
    return pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                     "selftest (warp %d): %s of %.9g (0x%08x): got 0x%04x, expected 0x%04x",
                     (int)g->warp_size, check, (double)pssm_bits_f32(in), (unsigned)in, got, want);
}

static portssm_status mismatch_load(pssm_gpu *g, const char *check, unsigned in, float got,
                                    float want)
{
    return pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                     "selftest (warp %d): %s of 0x%04x: got %.9g (0x%08x), expected %.9g "
                     "(0x%08x)",
                     (int)g->warp_size, check, in, (double)got, (unsigned)pssm_f32_bits(got),
                     (double)want, (unsigned)pssm_f32_bits(want));
}

static portssm_status check_f16(pssm_gpu *g)
{
    const int64_t n = 4096, n2 = 65536; /* stores; loads of every 16-bit pattern */
    const int64_t nedge = (int64_t)(sizeof f16_edges / sizeof f16_edges[0]);
    st_io io;
    portssm_status s = io_alloc(g->ctx, &io, n, 0, n2, n2 * PSSM_SELFTEST_F16_LOADS, 0,
                                n * PSSM_SELFTEST_F16_STORES);
    if (s != PORTSSM_OK)
        return s;
    st_rng r = {4};
    for (int64_t i = 0; i < n; i++)
        IO_F(&io, IO_IN_F)[i] = pssm_bits_f32(i < nedge ? f16_edges[i] : (uint32_t)rng_next(&r));
    for (int64_t i = 0; i < n2; i++)
        IO_H(&io, IO_IN_H)[i] = (uint16_t)i;
    pssm_selftest_params p = {.n = n, .n2 = n2};
    s = io_run(g, PSSM_KID_pssm_selftest_f16,
               (pssm_dim3){(uint32_t)(n2 / PSSM_SELFTEST_BLOCK), 1, 1},
               (pssm_dim3){PSSM_SELFTEST_BLOCK, 1, 1}, 0, p, &io);
    for (int64_t i = 0; i < n && s == PORTSSM_OK; i++) {
        const float f = IO_F(&io, IO_IN_F)[i];
        const uint16_t got16 = IO_H(&io, IO_OUT_H)[i], gotb = IO_H(&io, IO_OUT_H)[n + i];
        const uint16_t want16 = pssm_f32_to_f16(f), wantb = pssm_f32_to_bf16(f);
        if (isnan(f) ? !f16_is_nan(got16) : got16 != want16)
            s = mismatch_h(g, "pssm_store_f16", pssm_f32_bits(f), got16, want16);
        else if (isnan(f) ? !bf16_is_nan(gotb) : gotb != wantb)
            s = mismatch_h(g, "pssm_store_bf16", pssm_f32_bits(f), gotb, wantb);
    }
    static const char *const loads[PSSM_SELFTEST_F16_LOADS] = {
        "pssm_load_f16", "pssm_load_bf16", "pssm_load_any(PSSM_DT_F16)",
        "pssm_load_any(PSSM_DT_BF16)"};
    for (int k = 0; k < PSSM_SELFTEST_F16_LOADS && s == PORTSSM_OK; k++)
        for (int64_t i = 0; i < n2 && s == PORTSSM_OK; i++) {
            const uint16_t h = (uint16_t)i;
            const float want = k % 2 == 0 ? pssm_f16_to_f32(h) : pssm_bf16_to_f32(h);
            const float got = IO_F(&io, IO_OUT_F)[k * n2 + i];
            if (isnan(want) ? !isnan(got) : !same_bits(got, want))
                s = mismatch_load(g, loads[k], h, got, want);
        }
    io_free(&io);
    return s;
}

/* ---------------------------------------------------------------- math */

static const float math_edges[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-3f, -1e-3f, 20.0f,
                                   20.5f, 19.5f, -20.0f, 80.0f, -80.0f, 0x1p-20f, 3.14159265f,
                                   -125.7f, -126.0f, 0.4999f, -0.5001f};

static const char *const math_checks[PSSM_SELFTEST_MATH_OUTPUTS] = {
    "pssm_exp2f", "pssm_expf", "pssm_softplusf", "pssm_siluf", "pssm_exp2f_poly"};

/* Reference in double, and the relative tolerance: exp2 is the hardware approximation on
 * GPUs, exp2 by polynomial is within 2.4e-7; expf multiplies by log2(e) first, which costs
 * ~2^-24 relative in the exponent. */
static double math_expected(int k, double x, double *rtol)
{
    *rtol = 2e-6;
    switch (k) {
    case 0:
    case 4: return exp2(x);
    case 1: *rtol = 2e-6 + 1.2e-7 * fabs(x); return exp(x);
    case 2: return x <= 20.0 ? log1p(exp(x)) : x;
    default: return x / (1.0 + exp(-x));
    }
}

static portssm_status check_math(pssm_gpu *g)
{
    const int64_t n = 4096;
    const int64_t nedge = (int64_t)(sizeof math_edges / sizeof math_edges[0]);
    st_io io;
    portssm_status s = io_alloc(g->ctx, &io, n, 0, 0, n * PSSM_SELFTEST_MATH_OUTPUTS, 0, 0);
    if (s != PORTSSM_OK)
        return s;
    st_rng r = {5};
    for (int64_t i = 0; i < n; i++) /* results stay normal floats: no flush-to-zero question */
        IO_F(&io, IO_IN_F)[i] = i < nedge ? math_edges[i] : rng_uniform(&r, -80.0f, 80.0f);
    pssm_selftest_params p = {.n = n};
    s = io_run(g, PSSM_KID_pssm_selftest_math,
               (pssm_dim3){(uint32_t)(n / PSSM_SELFTEST_BLOCK), 1, 1},
               (pssm_dim3){PSSM_SELFTEST_BLOCK, 1, 1}, 0, p, &io);
    for (int k = 0; k < PSSM_SELFTEST_MATH_OUTPUTS && s == PORTSSM_OK; k++)
        for (int64_t i = 0; i < n && s == PORTSSM_OK; i++) {
            const float x = IO_F(&io, IO_IN_F)[i], got = IO_F(&io, IO_OUT_F)[k * n + i];
            double rtol;
            const double want = math_expected(k, x, &rtol);
            if (!(fabs(got - want) <= rtol * fabs(want) + 1e-37))
                s = pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                              "selftest (warp %d): %s(%.9g): got %.9g, expected %.9g "
                              "(relative tolerance %.1e)",
                              (int)g->warp_size, math_checks[k], (double)x, (double)got, want,
                              rtol);
        }
    io_free(&io);
    return s;
}

/* ---------------------------------------------------------------- warp matrix multiply */

#define ST_MMA_TILES 68 /* 4 per form; whole blocks at warp 32 (4 per block) and 64 (2) */

static const char *const mma_forms[PSSM_SELFTEST_MMA_FORMS] = {
    "pssm_mma16_f32",           "pssm_mma16_bf16",           "pssm_mma16_f16",
    "pssm_mma16t_f32 (at = bt = 0)", "pssm_mma16t_bf16 (at = bt = 0)", "pssm_mma16t_f16 (at = bt = 0)",
    "pssm_mma16t_f32 (at = bt = 1)", "pssm_mma16t_bf16 (at = bt = 1)", "pssm_mma16t_f16 (at = bt = 1)",
    "pssm_mma16s_f32 (at = bt = 0)", "pssm_mma16s_bf16 (at = bt = 0)", "pssm_mma16s_f16 (at = bt = 0)",
    "pssm_mma16s_f32 (at = bt = 1)", "pssm_mma16s_bf16 (at = bt = 1)", "pssm_mma16s_f16 (at = bt = 1)",
    "pssm_mma16rs_bf16 (bt = 1)", "pssm_mma16rs_f16 (bt = 1)"};

/* A random operand value exactly representable in the tile's form, normal in f16 (no
 * subnormal-input question): sign * [2^-6, 1) * 2^e, e in -2..2; *bits its 16-bit encoding. */
static float mma_operand(st_rng *r, int form, uint16_t *bits)
{
    const float mag = rng_uniform(r, 0.015625f, 1.0f) * (float)(1 << (rng_next(r) % 5)) * 0.25f;
    const float v = rng_next(r) & 1 ? -mag : mag;
    *bits = 0;
    if (form == 1) {
        *bits = pssm_f32_to_bf16(v);
        return pssm_bf16_to_f32(*bits);
    }
    if (form == 2) {
        *bits = pssm_f32_to_f16(v);
        return pssm_f16_to_f32(*bits);
    }
    return v;
}

/* The accumulator map of one tile: out_i entries (lane, i) -> row * 16 + col must cover the
 * 16x16 tile exactly once. */
static portssm_status mma_check_map(pssm_gpu *g, int64_t tile, const int32_t *map)
{
    const int acc = 256 / (int)g->warp_size;
    int owner[256];
    for (int e = 0; e < 256; e++)
        owner[e] = -1;
    for (int j = 0; j < 256; j++) {
        const int32_t e = map[j];
        if (e < 0 || e >= 256)
            return pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                             "selftest (warp %d): pssm_mma_row/col: tile %lld: lane %d acc[%d] "
                             "maps to element %ld, outside the 16x16 tile (or was not written)",
                             (int)g->warp_size, (long long)tile, j / acc, j % acc, (long)e);
        if (owner[e] >= 0)
            return pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                             "selftest (warp %d): pssm_mma_row/col: tile %lld: lane %d acc[%d] and "
                             "lane %d acc[%d] both map to row %d, col %d",
                             (int)g->warp_size, (long long)tile, owner[e] / acc, owner[e] % acc,
                             j / acc, j % acc, (int)(e / 16), (int)(e % 16));
        owner[e] = j;
    }
    return PORTSSM_OK;
}

/* Each result against the double product.  The 16-bit products are exact in f32, so what is
 * left is the f32 accumulation: K + 1 additions, each off by at most one unit of f32 rounding
 * (2^-24 relative, 2^-23 for a truncating tensor unit; f32 operands add a rounding of each
 * product), of partial sums bounded by the sum of |terms|: tolerance (K + 2) * 2^-22 * that
 * sum.  A product done in 16-bit or TF32 precision (2^-11) or a misplaced element is far off. */
static portssm_status check_mma(pssm_gpu *g)
{
    enum { K = PSSM_SELFTEST_MMA_K, T = ST_MMA_TILES };
    const int warps_per_block = PSSM_SELFTEST_BLOCK / (int)g->warp_size;
    st_io io;
    portssm_status s = io_alloc(g->ctx, &io, (size_t)T * PSSM_SELFTEST_MMA_IN_F, 0,
                                (size_t)T * PSSM_SELFTEST_MMA_IN_H, (size_t)T * 256,
                                (size_t)T * 256 + PSSM_SELFTEST_MMA_FLAGS, 0);
    if (s != PORTSSM_OK)
        return s;
    st_rng r = {6};
    for (int64_t t = 0; t < T; t++) {
        const int form = PSSM_SELFTEST_MMA_DTYPE((int)(t % PSSM_SELFTEST_MMA_FORMS));
        float *f = IO_F(&io, IO_IN_F) + t * PSSM_SELFTEST_MMA_IN_F;
        uint16_t *h = IO_H(&io, IO_IN_H) + t * PSSM_SELFTEST_MMA_IN_H;
        for (int e = 0; e < 2 * 16 * K; e++)
            f[e] = mma_operand(&r, form, &h[e]);
        for (int e = 0; e < 256; e++)
            f[2 * 16 * K + e] = rng_uniform(&r, -4.0f, 4.0f);
    }
    pssm_selftest_params p = {.n = T};
    s = io_run(g, PSSM_KID_pssm_selftest_mma, (pssm_dim3){(uint32_t)(T / warps_per_block), 1, 1},
               (pssm_dim3){PSSM_SELFTEST_BLOCK, 1, 1}, 0, p, &io);
    const int32_t *flags = IO_I(&io, IO_OUT_I) + (size_t)T * 256;
    for (int k = 0; k < PSSM_SELFTEST_MMA_FLAGS && s == PORTSSM_OK; k++)
        if (flags[k] != 0 && flags[k] != 1)
            s = pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                          "selftest (warp %d): pssm_selftest_mma wrote no tensor flags (%ld)",
                          (int)g->warp_size, (long)flags[k]);
    for (int64_t t = 0; t < T && s == PORTSSM_OK; t++)
        s = mma_check_map(g, t, IO_I(&io, IO_OUT_I) + t * 256);
    for (int64_t t = 0; t < T && s == PORTSSM_OK; t++) {
        const int form = (int)(t % PSSM_SELFTEST_MMA_FORMS), dtype = PSSM_SELFTEST_MMA_DTYPE(form);
        const float *a = IO_F(&io, IO_IN_F) + t * PSSM_SELFTEST_MMA_IN_F, *b = a + 16 * K;
        const float *c = a + 2 * 16 * K, *got = IO_F(&io, IO_OUT_F) + t * 256;
        const int tensor = dtype == 0 ? 0 : flags[dtype];
        for (int e = 0; e < 256 && s == PORTSSM_OK; e++) {
            const int row = e / 16, col = e % 16;
            double want = c[e], bound = fabs(c[e]);
            for (int k = 0; k < K; k++) {
                if (k == 16) { /* after the first step */
                    want *= PSSM_SELFTEST_MMA_SCALE(row, col);
                    bound *= PSSM_SELFTEST_MMA_SCALE(row, col);
                }
                const double term = (double)a[row * K + k] * (double)b[col * K + k];
                want += term;
                bound += fabs(term);
            }
            const double tol = (K + 2) * 0x1p-22 * bound;
            if (!(fabs((double)got[e] - want) <= tol))
                s = pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                              "selftest (warp %d): %s (%s): tile %lld, row %d, col %d: got %.9g, "
                              "expected %.9g (tolerance %.3g)",
                              (int)g->warp_size, mma_forms[form],
                              tensor ? "tensor instructions" : "FMA loop", (long long)t, row, col,
                              (double)got[e], want, tol);
        }
    }
    io_free(&io);
    return s;
}

/* ---------------------------------------------------------------- dynamic shared memory */

/* The dynamic shared memory the check gives each block: the device's limit less 4 KB for the
 * static array and the driver's own, in whole KB, at most 100 KB (so more than 48 KB, which
 * takes CUDA's opt-in, wherever the device allows it). */
static uint32_t dynamic_check_bytes(const pssm_gpu *g)
{
    uint32_t bytes = g->max_shared_per_block > 4096 ? g->max_shared_per_block - 4096 : 0;
    if (bytes > 100u * 1024u)
        bytes = 100u * 1024u;
    return bytes & ~1023u;
}

static portssm_status check_dynamic(pssm_gpu *g)
{
    enum { T = PSSM_SELFTEST_BLOCK, BLOCKS = 3 };
    const uint32_t bytes = dynamic_check_bytes(g);
    const int64_t m = bytes / sizeof(float), n = BLOCKS * m;
    if (m < T)
        return pssm_fail(g->ctx, PORTSSM_ERR_INTERNAL,
                         "selftest: the device gives a block %" PRIu32 " bytes of shared memory",
                         g->max_shared_per_block);
    st_io io;
    portssm_status s = io_alloc(g->ctx, &io, n, 0, 0, n, 0, 0);
    if (s != PORTSSM_OK)
        return s;
    st_rng r = {5};
    for (int64_t i = 0; i < n; i++)
        IO_F(&io, IO_IN_F)[i] = rng_small_int(&r);
    pssm_selftest_params p = {.n = n, .n2 = m};
    s = io_run(g, PSSM_KID_pssm_selftest_dynamic, (pssm_dim3){BLOCKS, 1, 1}, (pssm_dim3){T, 1, 1},
               bytes, p, &io);
    for (int64_t i = 0; i < n && s == PORTSSM_OK; i++) {
        const int64_t b = i / m, k = i % m;
        const float want = IO_F(&io, IO_IN_F)[b * m + m - 1 - k] - (float)(k % T + 1);
        const float got = IO_F(&io, IO_OUT_F)[i];
        if (!same_bits(got, want))
            s = pssm_fail(g->ctx, PORTSSM_ERR_DEVICE,
                          "selftest (warp %d): %" PRIu32 " bytes of dynamic shared memory beside "
                          "a static array: block %lld, value %lld: got %.9g, expected %.9g",
                          (int)g->warp_size, bytes, (long long)b, (long long)k, (double)got,
                          (double)want);
    }
    io_free(&io);
    return s;
}

/* ---------------------------------------------------------------- misuse (sim only) */

static portssm_status run_misuse(pssm_gpu *g, int32_t mode)
{
    const int64_t blocks = 2, n = blocks * PSSM_SELFTEST_BLOCK;
    st_io io;
    portssm_status s = io_alloc(g->ctx, &io, 0, 0, 0, n, 0, 0);
    if (s != PORTSSM_OK)
        return s;
    pssm_selftest_params p = {.n = n, .mode = mode};
    s = io_run(g, PSSM_KID_pssm_selftest_misuse, (pssm_dim3){(uint32_t)blocks, 1, 1},
               (pssm_dim3){PSSM_SELFTEST_BLOCK, 1, 1}, PSSM_SELFTEST_MISUSE_DYNAMIC, p, &io);
    io_free(&io);
    if (s == PORTSSM_OK)
        return pssm_fail(g->ctx, PORTSSM_ERR_INTERNAL,
                         "selftest: misuse mode %d ran without an error: the simulator missed it",
                         (int)mode);
    return s;
}

/* ---------------------------------------------------------------- entry */

portssm_status pssm_gpu_selftest(pssm_bctx *c, int32_t mode)
{
    pssm_gpu *g = pssm_gpu_of(c);
    if (mode < 0 || mode > PSSM_SELFTEST_MISUSE_MODES)
        return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT, "selftest mode: expected 0..%d, got %d",
                         PSSM_SELFTEST_MISUSE_MODES, (int)mode);
    if (mode > 0 && !g->is_simulator)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "selftest mode %d is a deliberate misuse that only the sim backend "
                         "reports; on a GPU it is undefined behaviour",
                         (int)mode);
    if (!g->alloc || !g->free || !g->copy_to_host || !g->copy_to_device || !g->sync)
        return pssm_fail(c, PORTSSM_ERR_UNSUPPORTED,
                         "selftest: this backend gives the GPU host code no memory functions");
    if (mode > 0)
        return run_misuse(g, mode);
    static portssm_status (*const checks[])(pssm_gpu *) = {
        check_shuffle, check_reduce, check_block, check_f16, check_math, check_mma, check_dynamic};
    for (size_t k = 0; k < sizeof checks / sizeof checks[0]; k++) {
        portssm_status s = checks[k](g);
        if (s != PORTSSM_OK)
            return s;
    }
    return PORTSSM_OK;
}
