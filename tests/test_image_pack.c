/*
 * test_image_pack.c - the GPU modules' packed device code (backends/gpu: pack_image.c,
 * image_unpack.c, lzma_decode.c), on fresh random data, with the build's own tools:
 *  - the LZMA decoder against `xz --format=lzma` at every preset shape of data (random bytes,
 *    text-like runs, zeros, machine-code-like records), sizes 0 to 3 MB, with the size in the
 *    header or left to the end marker; a wrong expected size, every truncation of a small stream
 *    and random byte flips give an error and never a fault (the sanitizer and valgrind runs);
 *  - portssm_pack_image + xz + pssm_image_parts: every part comes back byte for byte, NUL-ended
 *    and 4096-aligned; a damaged stream or index is refused with a message naming the image.
 * Needs no device: registered for the cpu label only (tests/CMakeLists.txt).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "device_images.h"
#include "image_pack.h"
#include "lzma_decode.h"

#ifndef PSSM_TEST_XZ
#error "PSSM_TEST_XZ: the xz the build packs with"
#endif
#ifndef PSSM_TEST_PACK_TOOL
#error "PSSM_TEST_PACK_TOOL: the path of portssm_pack_image"
#endif

static uint64_t rng_state;

static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static char tmpdir[256];

static void path_of(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const unsigned char *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    unsigned char *p = malloc((size_t)len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

static void run(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("`%s` exited with %d", cmd, rc);
}

/* xz --format=lzma of p[0..n) at `preset`: the stream (end marker, size "unknown"). */
static unsigned char *xz_lzma(const unsigned char *p, size_t n, const char *preset, size_t *out)
{
    char in[300], cmd[800], lz[320];
    path_of(in, sizeof in, "data");
    write_file(in, p, n);
    snprintf(lz, sizeof lz, "%s.lzma", in);
    snprintf(cmd, sizeof cmd, "'%s' --format=lzma %s -T1 -f '%s'", PSSM_TEST_XZ, preset, in);
    run(cmd);
    return read_file(lz, out);
}

/* Data of one kind: 0 random bytes, 1 words from a small vocabulary, 2 zeros, 3 records like
 * machine code (16-byte instructions from a few hundred distinct ones, with varying fields). */
static unsigned char *make_data(int kind, size_t n)
{
    unsigned char *p = malloc(n + 1);
    assert_non_null(p);
    static const char *words[] = {"ld.global", "fma.rn.f32", "bar.sync", " %r", "0x", "\n\t",
                                  "mma.sync", "shfl", ".reg", ";"};
    unsigned char ops[256][16];
    for (int i = 0; i < 256; i++)
        for (int k = 0; k < 16; k++)
            ops[i][k] = (unsigned char)rng();
    for (size_t i = 0; i < n;) {
        switch (kind) {
        case 0: p[i++] = (unsigned char)rng(); break;
        case 1: {
            const char *w = words[rng() % 10];
            for (size_t k = 0; w[k] && i < n; k++)
                p[i++] = (unsigned char)w[k];
            break;
        }
        case 2: p[i++] = 0; break;
        default: {
            const unsigned char *op = ops[rng() % (rng() % 7 ? 32 : 256)];
            for (size_t k = 0; k < 16 && i < n; k++)
                p[i++] = (unsigned char)(k == 4 ? rng() & 0xff : op[k]);
        }
        }
    }
    return p;
}

static void test_decoder_matches_xz(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 2, 17, 4095, 65536 + 3, 3u << 20};
    static const char *presets[] = {"-0", "-6", "-9e"};
    for (int kind = 0; kind < 4; kind++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            const size_t n = sizes[s];
            unsigned char *data = make_data(kind, n);
            size_t zn;
            unsigned char *z = xz_lzma(data, n, presets[(kind + s) % 3], &zn);
            unsigned char *out = malloc(n + 1);
            const char *why = NULL;
            memset(out, 0xa5, n + 1); /* poisoned: a byte the decoder skips fails (zeros too) */
            if (pssm_lzma_decode(z, zn, out, n, &why) != 0)
                fail_msg("kind %d, %zu bytes: %s", kind, n, why);
            assert_memory_equal(out, data, n);
            /* the size in the header instead of "unknown" (the end marker then ignored) */
            for (int i = 0; i < 8; i++)
                z[5 + i] = (unsigned char)((uint64_t)n >> (8 * i));
            memset(out, 0xa5, n + 1);
            assert_int_equal(pssm_lzma_decode(z, zn, out, n, &why), 0);
            assert_memory_equal(out, data, n);
            /* a declared size that differs from the expected one */
            assert_int_equal(pssm_lzma_decode(z, zn, out, n ? n - 1 : 0, &why), n ? -1 : 0);
            free(data);
            free(out);
            free(z);
        }
}

/* Expecting the wrong size, a cut stream and flipped bytes: an error or other bytes, no fault
 * (ASan, valgrind: every read and write stays inside the buffers). */
static void test_decoder_damage(void **state)
{
    (void)state;
    const size_t n = 20000;
    unsigned char *data = make_data(3, n);
    size_t zn;
    unsigned char *z = xz_lzma(data, n, "-6", &zn);
    unsigned char *out = malloc(n + 64);
    const char *why = NULL;
    assert_int_equal(pssm_lzma_decode(z, zn, out, n + 1, &why), -1);
    assert_non_null(why);
    assert_int_equal(pssm_lzma_decode(z, zn, out, n - 1, &why), -1);
    assert_non_null(strstr(why, "more than the expected size"));
    for (size_t cut = 0; cut < zn; cut += cut < 64 ? 1 : 97) {
        unsigned char *head = malloc(cut + 1); /* exactly `cut` bytes: reads past them fault */
        memcpy(head, z, cut);
        assert_int_equal(pssm_lzma_decode(head, cut, out, n, &why), -1);
        assert_non_null(why);
        free(head);
    }
    int refused = 0;
    for (int trial = 0; trial < 300; trial++) {
        unsigned char *bad = malloc(zn);
        memcpy(bad, z, zn);
        const int flips = 1 + (int)(rng() % 4);
        for (int f = 0; f < flips; f++)
            bad[13 + rng() % (zn - 13)] ^= (unsigned char)(1u << (rng() % 8));
        refused += pssm_lzma_decode(bad, zn, out, n, &why) != 0;
        free(bad);
    }
    /* (a flip can decode to other bytes of the right size; the module's hash catches those) */
    assert_true(refused > 150);
    static const unsigned char not_lzma[13] = {0xff, 0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff,
                                               0xff, 0xff, 0xff, 0xff};
    assert_int_equal(pssm_lzma_decode(not_lzma, sizeof not_lzma, out, 0, &why), -1);
    assert_non_null(strstr(why, "properties"));
    free(data);
    free(z);
    free(out);
}

/* ---------------------------------------------------------------- a packed image, end to end */

#define NPARTS 3
static const char *const part_names[NPARTS] = {"alpha", "beta", "gamma"};
static unsigned char index_buf[sizeof(pssm_pack_index_header) +
                               NPARTS * sizeof(pssm_pack_index_part)];
static unsigned char stream_buf[1 << 22];
static const pssm_image_part test_parts[NPARTS] = {
    {"alpha", NULL, NULL}, {"beta", NULL, NULL}, {"gamma", NULL, NULL}};
/* the table image_unpack.c reads: one packed image, whose stream ends where the buffer does
 * (the decoder stops at the end marker) */
const pssm_image pssm_images[1] = {{"test", "sm_90", test_parts, NPARTS, index_buf,
                                    index_buf + sizeof index_buf, stream_buf,
                                    stream_buf + sizeof stream_buf}};
const int pssm_image_count = 1;

static void test_pack_round_trip(void **state)
{
    (void)state;
    static const size_t sizes[NPARTS] = {70001, 0, 4096};
    unsigned char *data[NPARTS];
    char files[NPARTS][300], cmd[2048], index_path[300], raw_path[300], lzma_path[320];
    for (int k = 0; k < NPARTS; k++) {
        data[k] = make_data(k == 0 ? 3 : 1, sizes[k]);
        path_of(files[k], sizeof files[k], part_names[k]);
        write_file(files[k], data[k], sizes[k]);
    }
    path_of(index_path, sizeof index_path, "img.index");
    path_of(raw_path, sizeof raw_path, "img.raw");
    snprintf(lzma_path, sizeof lzma_path, "%s.lzma", raw_path);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s' '%s' '%s' && '%s' --format=lzma -9 -T1 -f '%s'",
             PSSM_TEST_PACK_TOOL, index_path, raw_path, files[0], files[1], files[2], PSSM_TEST_XZ,
             raw_path);
    run(cmd);
    size_t in, sn;
    unsigned char *idx = read_file(index_path, &in), *stream = read_file(lzma_path, &sn);
    assert_int_equal(in, sizeof index_buf);
    assert_true(sn <= sizeof stream_buf);
    memcpy(index_buf, idx, in);
    memset(stream_buf, 0, sizeof stream_buf);
    memcpy(stream_buf, stream, sn);
    double embedded, inflated;
    pssm_image_sizes(0, &embedded, &inflated);
    assert_true(inflated >= 70001 + 1 + 4096 + 1 && embedded == (double)(sizeof index_buf +
                                                                         sizeof stream_buf));

    /* damaged first (a refusal is not kept): a flipped byte in the stream, then in the index */
    char why[512];
    stream_buf[sn / 2] ^= 0x10;
    assert_null(pssm_image_parts(0, why, sizeof why));
    assert_non_null(strstr(why, "image 'test'"));
    stream_buf[sn / 2] ^= 0x10;
    index_buf[0] ^= 1;
    assert_null(pssm_image_parts(0, why, sizeof why));
    assert_non_null(strstr(why, "index"));
    index_buf[0] ^= 1;

    const pssm_image_part *parts = pssm_image_parts(0, why, sizeof why);
    if (parts == NULL)
        fail_msg("%s", why);
    for (int k = 0; k < NPARTS; k++) {
        assert_string_equal(parts[k].name, part_names[k]);
        assert_int_equal((size_t)(parts[k].end - parts[k].begin), sizes[k]);
        assert_memory_equal(parts[k].begin, data[k], sizes[k]);
        assert_int_equal(parts[k].end[0], 0); /* NUL-ended: PTX is a C string */
        assert_int_equal((uintptr_t)parts[k].begin % PSSM_PACK_ALIGN, 0);
    }
    /* once per process: the same parts again */
    assert_ptr_equal(pssm_image_parts(0, why, sizeof why), parts);
    for (int k = 0; k < NPARTS; k++)
        free(data[k]);
    free(idx);
    free(stream);
}

/* ---------------------------------------------------------------- the order of tries */

static void test_image_order(void **state)
{
    (void)state;
    static const pssm_image_part none[1] = {{"base", NULL, NULL}};
#define IMG(n, t) {n, t, none, 1, NULL, NULL, NULL, NULL}
    /* a packed build's images (backends/cuda/CMakeLists.txt): machine code per group, each PTX
     * on its own */
    const pssm_image cuda[] = {IMG("main_75", "sm_75"),
                               IMG("main_80", "sm_80 sm_86 sm_89"),
                               IMG("main_90", "sm_90"),
                               IMG("main_ptx90", "compute_90 PTX"),
                               IMG("main_100", "sm_100 sm_103"),
                               IMG("main_120", "sm_120 sm_121"),
                               IMG("main_ptx120", "compute_120 PTX"),
                               IMG("legacy", "sm_60 sm_61 sm_70 (clang + ptxas)"),
                               IMG("ptx_sm60", "compute_60 PTX")};
    const int n = (int)(sizeof cuda / sizeof cuda[0]);
    static const struct {
        const char *arch, *first, *second;
    } want[] = {
        {"sm_86", "main_80", "ptx_sm60"},      /* its own code; then the only PTX <= 86 */
        {"sm_87", "main_80", "ptx_sm60"},      /* sm_86 code runs on sm_87; then compute_60 PTX */
        {"sm_90", "main_90", "main_ptx90"},    /* then its own PTX (compute_120 is newer) */
        {"sm_103", "main_100", "main_ptx90"},  /* its own code, then the newest PTX <= 103 */
        {"sm_121", "main_120", "main_ptx120"},
        {"sm_110", "main_ptx90", "ptx_sm60"},  /* no code of major 11: the newest PTX <= 110 */
        {"sm_130", "main_ptx120", "main_ptx90"}, /* compute_120 PTX, then compute_90 */
        {"sm_61", "legacy", "ptx_sm60"},       /* legacy holds sm_61 */
        {"sm_52", "main_75", "main_80"},       /* nothing fits: the module's order */
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int first = -1, second = -1;
        long r1 = 0, r2 = 0;
        for (int i = 0; i < n; i++) { /* the two lowest ranks, ties in table order */
            const long r = pssm_image_rank(&cuda[i], want[k].arch);
            if (first < 0 || r < r1) {
                second = first, r2 = r1;
                first = i, r1 = r;
            } else if (second < 0 || r < r2) {
                second = i, r2 = r;
            }
        }
        assert_string_equal(cuda[first].name, want[k].first);
        assert_string_equal(cuda[second].name, want[k].second);
    }
    /* the exact class, the major class and PTX, as the header defines them */
    assert_int_equal(pssm_image_rank(&cuda[1], "sm_86"), PSSM_IMAGE_RANK_EXACT);
    assert_int_equal(pssm_image_rank(&cuda[1], "sm_87"), PSSM_IMAGE_RANK_MAJOR - 86);
    assert_int_equal(pssm_image_rank(&cuda[3], "sm_110"), PSSM_IMAGE_RANK_PTX - 90);
    assert_int_equal(pssm_image_rank(&cuda[2], "sm_110"), PSSM_IMAGE_RANK_OTHER);
    assert_int_equal(pssm_image_rank(&cuda[0], "sm_70"), PSSM_IMAGE_RANK_OTHER);
    /* AMD names: exact only */
    const pssm_image amd[] = {IMG("main_gfx90", "gfx906 gfx908 gfx90a"),
                              IMG("main_gfx94", "gfx940 gfx942")};
    assert_int_equal(pssm_image_rank(&amd[1], "gfx942"), PSSM_IMAGE_RANK_EXACT);
    assert_int_equal(pssm_image_rank(&amd[0], "gfx942"), PSSM_IMAGE_RANK_OTHER);
    assert_int_equal(pssm_image_rank(&amd[0], "gfx90"), PSSM_IMAGE_RANK_OTHER); /* whole words */
    /* pssm_image_order over this file's own one-image table */
    int order[PSSM_MAX_IMAGES];
    assert_int_equal(pssm_image_order("sm_90", order), 1);
    assert_int_equal(order[0], 0);
#undef IMG
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/pssm_pack_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const char *seed = getenv("PORTSSM_TEST_SEED");
    rng_state = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    printf("test_image_pack: seed %llu (set PORTSSM_TEST_SEED to repeat)\n",
           (unsigned long long)rng_state);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decoder_matches_xz),
        cmocka_unit_test(test_decoder_damage),
        cmocka_unit_test(test_pack_round_trip),
        cmocka_unit_test(test_image_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
