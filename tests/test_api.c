/*
 * test_api.c - the non-op API: status codes, version, backend probing and selection (explicit,
 * AUTO, PORTSSM_BACKEND), contexts, last-error rules, memory, events, streams, device info and
 * the device self-test.  Run once per backend label; the module-loader tests (fresh copies of
 * libportssm next to fake modules) run on the cpu label only, since they test the core.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "vendor_stream.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

#define ASSERT_HAS(haystack, needle)                                                            \
    do {                                                                                        \
        const char *h_ = (haystack);                                                            \
        if (!h_ || !strstr(h_, (needle)))                                                       \
            fail_msg("expected \"%s\" in the message \"%s\"", (needle), h_ ? h_ : "(null)");    \
    } while (0)

/* The backend and device of the label under test. */
static portssm_backend label_backend(void) { return portssm_get_backend(th_ctx); }
static int32_t label_device(void) { return portssm_get_device(th_ctx); }
static int label_is_host(void)
{
    return label_backend() == PORTSSM_BACKEND_CPU || label_backend() == PORTSSM_BACKEND_SIM;
}

/* PORTSSM_BACKEND is process-wide: tests set it and restore what the environment had. */
static char *saved_env;
static int had_env;

static void env_save(void)
{
    const char *e = getenv("PORTSSM_BACKEND");
    had_env = e != NULL;
    free(saved_env);
    saved_env = e ? strdup(e) : NULL;
}

static void env_restore(void)
{
    if (had_env)
        setenv("PORTSSM_BACKEND", saved_env, 1);
    else
        unsetenv("PORTSSM_BACKEND");
}

/* portssm_create with PORTSSM_BACKEND=value (NULL: unset) and backend AUTO. */
static portssm_status create_env(const char *value, portssm_context **ctx)
{
    if (value)
        setenv("PORTSSM_BACKEND", value, 1);
    else
        unsetenv("PORTSSM_BACKEND");
    return portssm_create(ctx, PORTSSM_BACKEND_AUTO, 0);
}

static void fill_random(unsigned char *p, size_t n, th_rng *r)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)th_next(r);
}

/* ---------------------------------------------------------------- status, version, names */

static void test_status_names(void **state)
{
    static const char *const names[] = {
        "PORTSSM_OK", "PORTSSM_ERR_INVALID_ARGUMENT", "PORTSSM_ERR_UNSUPPORTED",
        "PORTSSM_ERR_NO_BACKEND", "PORTSSM_ERR_NO_DEVICE", "PORTSSM_ERR_NO_KERNEL_IMAGE",
        "PORTSSM_ERR_OUT_OF_MEMORY", "PORTSSM_ERR_DEVICE", "PORTSSM_ERR_INTERNAL"};
    /* the enum values are pinned */
    assert_int_equal(PORTSSM_OK, 0);
    assert_int_equal(PORTSSM_ERR_INVALID_ARGUMENT, 1);
    assert_int_equal(PORTSSM_ERR_UNSUPPORTED, 2);
    assert_int_equal(PORTSSM_ERR_NO_BACKEND, 3);
    assert_int_equal(PORTSSM_ERR_NO_DEVICE, 4);
    assert_int_equal(PORTSSM_ERR_NO_KERNEL_IMAGE, 5);
    assert_int_equal(PORTSSM_ERR_OUT_OF_MEMORY, 6);
    assert_int_equal(PORTSSM_ERR_DEVICE, 7);
    assert_int_equal(PORTSSM_ERR_INTERNAL, 8);
    for (int s = 0; s < 9; s++) {
        assert_string_equal(portssm_status_name((portssm_status)s), names[s]);
        const char *text = portssm_status_string((portssm_status)s);
        assert_non_null(text);
        assert_true(strlen(text) > 3);
        for (int t = 0; t < s; t++)
            assert_string_not_equal(text, portssm_status_string((portssm_status)t));
    }
    assert_string_equal(portssm_status_string(PORTSSM_ERR_INVALID_ARGUMENT), "invalid argument");
    const int unknown[] = {-1, 9, 10, 1000, -2147483647 - 1, 2147483647};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_string_equal(portssm_status_name((portssm_status)unknown[i]),
                            "PORTSSM_UNKNOWN_STATUS");
        const char *text = portssm_status_string((portssm_status)unknown[i]);
        assert_non_null(text);
        assert_true(strlen(text) > 0);
    }
}

static void test_version(void **state)
{
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", PORTSSM_VERSION_MAJOR, PORTSSM_VERSION_MINOR,
             PORTSSM_VERSION_PATCH);
    assert_string_equal(PORTSSM_VERSION_STRING, expect);
    assert_string_equal(portssm_version_string(), PORTSSM_VERSION_STRING);
    assert_int_equal(portssm_version(), PORTSSM_VERSION);
    assert_int_equal(PORTSSM_VERSION, PORTSSM_VERSION_MAJOR * 10000 +
                                          PORTSSM_VERSION_MINOR * 100 + PORTSSM_VERSION_PATCH);
}

static void test_names(void **state)
{
    assert_string_equal(portssm_backend_name(PORTSSM_BACKEND_AUTO), "auto");
    assert_string_equal(portssm_backend_name(PORTSSM_BACKEND_CPU), "cpu");
    assert_string_equal(portssm_backend_name(PORTSSM_BACKEND_CUDA), "cuda");
    assert_string_equal(portssm_backend_name(PORTSSM_BACKEND_HIP), "hip");
    assert_string_equal(portssm_backend_name(PORTSSM_BACKEND_SIM), "sim");
    assert_null(portssm_backend_name((portssm_backend)5));
    assert_null(portssm_backend_name((portssm_backend)-1));

    assert_int_equal(portssm_dtype_size(PORTSSM_F32), 4);
    assert_int_equal(portssm_dtype_size(PORTSSM_F16), 2);
    assert_int_equal(portssm_dtype_size(PORTSSM_BF16), 2);
    assert_int_equal(portssm_dtype_size(PORTSSM_I32), 4);
    assert_int_equal(portssm_dtype_size((portssm_dtype)4), 0);
    assert_int_equal(portssm_dtype_size((portssm_dtype)-1), 0);
    assert_string_equal(portssm_dtype_name(PORTSSM_F32), "f32");
    assert_string_equal(portssm_dtype_name(PORTSSM_F16), "f16");
    assert_string_equal(portssm_dtype_name(PORTSSM_BF16), "bf16");
    assert_string_equal(portssm_dtype_name(PORTSSM_I32), "i32");
    assert_null(portssm_dtype_name((portssm_dtype)4));
}

static void test_tensor_contiguous(void **state)
{
    int dummy;
    const int64_t shape[4] = {2, 3, 5, 7};
    portssm_tensor t = portssm_tensor_contiguous(&dummy, PORTSSM_BF16, 4, shape);
    assert_ptr_equal(t.data, &dummy);
    assert_int_equal(t.dtype, PORTSSM_BF16);
    assert_int_equal(t.ndim, 4);
    const int64_t strides[4] = {105, 35, 7, 1};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t.shape[i], shape[i]);
        assert_int_equal(t.stride[i], strides[i]);
    }
    t = portssm_tensor_contiguous(&dummy, PORTSSM_F32, 1, shape + 2);
    assert_int_equal(t.ndim, 1);
    assert_int_equal(t.shape[0], 5);
    assert_int_equal(t.stride[0], 1);
    /* bad ndims give a tensor no op accepts (checked in test_validation); here: no crash */
    t = portssm_tensor_contiguous(&dummy, PORTSSM_F32, 0, shape);
    assert_true(t.ndim < 1 || t.ndim > 4);
    t = portssm_tensor_contiguous(&dummy, PORTSSM_F32, 5, shape);
    assert_true(t.ndim < 1 || t.ndim > 4);
    t = portssm_tensor_contiguous(&dummy, PORTSSM_F32, 2, NULL);
    assert_true(t.ndim < 1 || t.ndim > 4);
    /* strides that do not fit int64 saturate rather than wrap */
    const int64_t huge[3] = {4, INT64_C(1) << 40, INT64_C(1) << 40};
    t = portssm_tensor_contiguous(&dummy, PORTSSM_F32, 3, huge);
    assert_int_equal(t.stride[2], 1);
    assert_int_equal(t.stride[1], INT64_C(1) << 40);
    assert_int_equal(t.stride[0], INT64_MAX);
}

/* ---------------------------------------------------------------- probing */

static void test_probe(void **state)
{
    int32_t n = -1;
    const char *why = NULL, *why2 = NULL;
    assert_int_equal(portssm_backend_probe(label_backend(), &n, &why), PORTSSM_OK);
    assert_true(n > label_device());
    assert_non_null(why);
    assert_true(strlen(why) > 0);
    /* once per process: the same answer, the same string */
    int32_t n2 = -1;
    assert_int_equal(portssm_backend_probe(label_backend(), &n2, &why2), PORTSSM_OK);
    assert_int_equal(n, n2);
    assert_ptr_equal(why, why2);
    /* the cpu is always there, with exactly one device */
    assert_int_equal(portssm_backend_probe(PORTSSM_BACKEND_CPU, &n, NULL), PORTSSM_OK);
    assert_int_equal(n, 1);
    assert_int_equal(portssm_backend_probe(PORTSSM_BACKEND_CPU, NULL, NULL), PORTSSM_OK);
    /* every backend answers with a reason, usable or not */
    for (int b = PORTSSM_BACKEND_CPU; b <= PORTSSM_BACKEND_SIM; b++) {
        why = NULL;
        portssm_status s = portssm_backend_probe((portssm_backend)b, &n, &why);
        assert_non_null(why);
        assert_true(strlen(why) > 0);
        if (s != PORTSSM_OK) {
            assert_int_equal(n, 0);
            assert_true(s == PORTSSM_ERR_NO_BACKEND || s == PORTSSM_ERR_NO_DEVICE ||
                        s == PORTSSM_ERR_NO_KERNEL_IMAGE || s == PORTSSM_ERR_DEVICE);
        }
    }
    why = NULL;
    assert_int_equal(portssm_backend_probe(PORTSSM_BACKEND_AUTO, &n, &why),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_non_null(why);
    assert_int_equal(portssm_backend_probe((portssm_backend)42, &n, &why),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(n, 0);
}

typedef struct probe_result {
    portssm_backend b;
    portssm_status s;
    int32_t n;
    const char *why;
} probe_result;

static void *probe_thread(void *arg)
{
    probe_result *r = arg;
    r->s = portssm_backend_probe(r->b, &r->n, &r->why);
    return NULL;
}

static void test_probe_threads(void **state)
{
    enum { T = 8 };
    pthread_t th[T];
    probe_result r[T];
    for (int i = 0; i < T; i++) {
        r[i].b = (portssm_backend)(PORTSSM_BACKEND_CPU + i % 4);
        assert_int_equal(pthread_create(&th[i], NULL, probe_thread, &r[i]), 0);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++) {
        probe_result again = {r[i].b, 0, 0, NULL};
        probe_thread(&again);
        assert_int_equal(r[i].s, again.s);
        assert_int_equal(r[i].n, again.n);
        assert_ptr_equal(r[i].why, again.why);
    }
}

/* ---------------------------------------------------------------- contexts */

static void test_create_destroy(void **state)
{
    portssm_context *ctx = (portssm_context *)1;
    assert_int_equal(portssm_create(&ctx, label_backend(), label_device()), PORTSSM_OK);
    assert_non_null(ctx);
    assert_int_equal(portssm_get_backend(ctx), label_backend());
    assert_int_equal(portssm_get_device(ctx), label_device());
    assert_string_equal(portssm_last_error(ctx), "");
    assert_string_equal(portssm_last_error(NULL), "");
    const char *report = portssm_selection_report(ctx);
    assert_non_null(report);
    ASSERT_HAS(report, portssm_backend_name(label_backend()));
    assert_null(portssm_get_stream(ctx));
    assert_int_equal(portssm_synchronize(ctx), PORTSSM_OK);
    portssm_destroy(ctx);
    portssm_destroy(NULL);

    /* many contexts at once are independent */
    portssm_context *many[6];
    for (int i = 0; i < 6; i++)
        assert_int_equal(portssm_create(&many[i], label_backend(), label_device()), PORTSSM_OK);
    for (int i = 0; i < 6; i++)
        portssm_destroy(many[i]);

    assert_int_equal(portssm_create(NULL, PORTSSM_BACKEND_CPU, 0), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(NULL), "'ctx'");
}

static void test_bad_backend(void **state)
{
    const int bad[] = {5, 99, -1, 1 << 20};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        portssm_context *ctx = (portssm_context *)1;
        assert_int_equal(portssm_create(&ctx, (portssm_backend)bad[i], 0),
                         PORTSSM_ERR_INVALID_ARGUMENT);
        assert_null(ctx);
        ASSERT_HAS(portssm_last_error(NULL), "'backend'");
    }
}

static void test_bad_device(void **state)
{
    int32_t n = 0;
    assert_int_equal(portssm_backend_probe(label_backend(), &n, NULL), PORTSSM_OK);
    portssm_context *ctx = (portssm_context *)1;
    assert_int_equal(portssm_create(&ctx, label_backend(), -1), PORTSSM_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    ASSERT_HAS(portssm_last_error(NULL), "'device'");
    const int32_t missing[] = {n, n + 1, 1 << 30};
    for (size_t i = 0; i < 3; i++) {
        ctx = (portssm_context *)1;
        assert_int_equal(portssm_create(&ctx, label_backend(), missing[i]), PORTSSM_ERR_NO_DEVICE);
        assert_null(ctx);
        ASSERT_HAS(portssm_last_error(NULL), "device");
    }
}

/* The PORTSSM_BACKEND value that names the label's backend and device. */
static const char *label_env_value(void)
{
    if (strcmp(th_backend_label, "cpu") == 0)
        return "cpu";
    return th_backend_label; /* sim32, sim64, cuda, hip */
}

static void expect_env_ok(const char *value, portssm_backend b, int32_t dev)
{
    portssm_context *ctx = NULL;
    portssm_status s = create_env(value, &ctx);
    if (s != PORTSSM_OK)
        fail_msg("PORTSSM_BACKEND=%s: %s: %s", value, portssm_status_name(s),
                 portssm_last_error(NULL));
    assert_int_equal(portssm_get_backend(ctx), b);
    assert_int_equal(portssm_get_device(ctx), dev);
    ASSERT_HAS(portssm_selection_report(ctx), "PORTSSM_BACKEND");
    portssm_destroy(ctx);
}

static void expect_env_fails(const char *value, portssm_status want, const char *needle)
{
    portssm_context *ctx = (portssm_context *)1;
    portssm_status s = create_env(value, &ctx);
    if (s != want)
        fail_msg("PORTSSM_BACKEND=%s: expected %s, got %s (%s)", value, portssm_status_name(want),
                 portssm_status_name(s), portssm_last_error(NULL));
    assert_null(ctx);
    ASSERT_HAS(portssm_last_error(NULL), needle);
}

static void test_env_backend(void **state)
{
    env_save();
    expect_env_ok(label_env_value(), label_backend(), label_device());
    expect_env_ok("cpu", PORTSSM_BACKEND_CPU, 0);
    expect_env_ok("CPU", PORTSSM_BACKEND_CPU, 0);
    expect_env_ok("cpu:0", PORTSSM_BACKEND_CPU, 0);
    if (portssm_backend_probe(PORTSSM_BACKEND_SIM, NULL, NULL) == PORTSSM_OK) {
        expect_env_ok("sim32", PORTSSM_BACKEND_SIM, 0);
        expect_env_ok("sim64", PORTSSM_BACKEND_SIM, 1);
        expect_env_ok("sim:1", PORTSSM_BACKEND_SIM, 1);
        expect_env_ok("sim", PORTSSM_BACKEND_SIM, 0);
    }
    expect_env_fails("cpu:1", PORTSSM_ERR_NO_DEVICE, "device 1");
    const char *invalid[] = {"bogus", "cpu:", "cpu:x", "cpu:-1", "cpu:1x", ":0", "sim64:0",
                             "sim32:1", "cpu:99999999999", "cpu cuda", "auto:0", "gpu"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        expect_env_fails(invalid[i], PORTSSM_ERR_INVALID_ARGUMENT, "PORTSSM_BACKEND");
        ASSERT_HAS(portssm_last_error(NULL), invalid[i]);
    }
    /* naming an unusable backend is an error with the probe's reason, never a fall-back */
    const portssm_backend gpus[] = {PORTSSM_BACKEND_CUDA, PORTSSM_BACKEND_HIP};
    for (int i = 0; i < 2; i++) {
        const char *why = NULL;
        portssm_status s = portssm_backend_probe(gpus[i], NULL, &why);
        if (s != PORTSSM_OK)
            expect_env_fails(portssm_backend_name(gpus[i]), s, why);
    }
    /* only AUTO reads the variable */
    setenv("PORTSSM_BACKEND", "bogus", 1);
    portssm_context *ctx = NULL;
    assert_int_equal(portssm_create(&ctx, PORTSSM_BACKEND_CPU, 0), PORTSSM_OK);
    ASSERT_HAS(portssm_selection_report(ctx), "ignored");
    portssm_destroy(ctx);
    /* empty means unset */
    ctx = NULL;
    assert_int_equal(create_env("", &ctx), PORTSSM_OK);
    ASSERT_HAS(portssm_selection_report(ctx), "auto");
    portssm_destroy(ctx);
    env_restore();
}

static void test_auto_report(void **state)
{
    env_save();
    portssm_context *ctx = NULL;
    assert_int_equal(create_env(NULL, &ctx), PORTSSM_OK);
    const char *report = portssm_selection_report(ctx);
    assert_true(strlen(report) > 0);
    portssm_backend chosen = portssm_get_backend(ctx);
    assert_true(chosen == PORTSSM_BACKEND_CUDA || chosen == PORTSSM_BACKEND_HIP ||
                chosen == PORTSSM_BACKEND_CPU);
    /* every GPU backend before the chosen one is listed with its reason */
    const portssm_backend order[] = {PORTSSM_BACKEND_CUDA, PORTSSM_BACKEND_HIP};
    for (int i = 0; i < 2 && order[i] != chosen; i++) {
        const char *why = NULL;
        portssm_status s = portssm_backend_probe(order[i], NULL, &why);
        assert_int_not_equal(s, PORTSSM_OK);
        char skipped[64];
        snprintf(skipped, sizeof skipped, "%s skipped", portssm_backend_name(order[i]));
        ASSERT_HAS(report, skipped);
        ASSERT_HAS(report, why);
        ASSERT_HAS(report, portssm_status_name(s));
    }
    ASSERT_HAS(report, portssm_backend_name(chosen));
    portssm_destroy(ctx);
    /* AUTO never picks sim */
    assert_int_not_equal(chosen, PORTSSM_BACKEND_SIM);
    env_restore();
}

/* ---------------------------------------------------------------- last error */

static void *failing_create(void *arg)
{
    portssm_context *ctx;
    portssm_create(&ctx, (portssm_backend)77, 0);
    const char *msg = portssm_last_error(NULL);
    *(int *)arg = strstr(msg, "'backend'") != NULL;
    return NULL;
}

static void test_last_error(void **state)
{
    portssm_context *a = NULL, *b = NULL;
    assert_int_equal(portssm_create(&a, label_backend(), label_device()), PORTSSM_OK);
    assert_int_equal(portssm_create(&b, label_backend(), label_device()), PORTSSM_OK);
    assert_string_equal(portssm_last_error(a), "");
    char byte = 1;
    assert_int_equal(portssm_memcpy(a, &byte, &byte, 1, (portssm_memcpy_kind)9),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(a), "'kind'");
    assert_string_equal(portssm_last_error(b), ""); /* per context */
    assert_int_equal(portssm_synchronize(a), PORTSSM_OK);
    assert_string_equal(portssm_last_error(a), ""); /* lives until the next call */

    /* without a context: this thread's last failed call, untouched by other threads */
    portssm_context *none = NULL;
    assert_int_equal(portssm_create(&none, PORTSSM_BACKEND_CPU, -5),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    char mine[1024];
    snprintf(mine, sizeof mine, "%s", portssm_last_error(NULL));
    ASSERT_HAS(mine, "'device'");
    int other_saw_backend = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, failing_create, &other_saw_backend), 0);
    pthread_join(t, NULL);
    assert_true(other_saw_backend);
    assert_string_equal(portssm_last_error(NULL), mine);
    /* a NULL ctx is reported on the thread too */
    assert_int_equal(portssm_synchronize(NULL), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(NULL), "'ctx'");
    portssm_destroy(a);
    portssm_destroy(b);
    /* a successful create clears this thread's message */
    assert_int_equal(portssm_create(&a, PORTSSM_BACKEND_CPU, 0), PORTSSM_OK);
    assert_string_equal(portssm_last_error(NULL), "");
    portssm_destroy(a);
}

/* Two threads hammering one context: each call either runs (OK) or, while the other thread is
 * inside a call, is refused with a message on the calling thread; never another outcome. */
typedef struct shared_ctx_run {
    portssm_context *ctx;
    void *buf;
    size_t bytes;
    pthread_barrier_t *start;
    int ok, refused, other; /* counts */
    char refusal[1024];
} shared_ctx_run;

static void *hammer_shared_ctx(void *arg)
{
    shared_ctx_run *r = arg;
    pthread_barrier_wait(r->start);
    /* a refused call returns at once, so it spins while the other thread's call runs */
    for (long i = 0; i < 1000000 && r->ok < 5; i++) {
        portssm_status s = portssm_memset(r->ctx, r->buf, i & 0xff, r->bytes);
        if (s == PORTSSM_OK)
            r->ok++;
        else if (s == PORTSSM_ERR_INVALID_ARGUMENT &&
                 strstr(portssm_last_error(NULL), "another thread")) {
            r->refused++;
            snprintf(r->refusal, sizeof r->refusal, "%s", portssm_last_error(NULL));
        } else
            r->other++;
    }
    return NULL;
}

static void test_shared_context_threads(void **state)
{
    (void)state;
    portssm_context *ctx = NULL;
    assert_int_equal(portssm_create(&ctx, PORTSSM_BACKEND_CPU, 0), PORTSSM_OK);
    const size_t bytes = (size_t)32 << 20; /* a few ms per memset: the calls overlap */
    void *buf = NULL;
    assert_int_equal(portssm_malloc(ctx, &buf, bytes), PORTSSM_OK);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    shared_ctx_run r[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].ctx = ctx;
        r[i].buf = buf;
        r[i].bytes = bytes;
        r[i].start = &start;
        assert_int_equal(pthread_create(&th[i], NULL, hammer_shared_ctx, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r[i].other, 0);
        assert_true(r[i].ok > 0);
    }
    /* overlapping calls happened and were refused, by name */
    assert_true(r[0].refused + r[1].refused > 0);
    const char *why = r[0].refused ? r[0].refusal : r[1].refusal;
    ASSERT_HAS(why, "portssm_memset");
    ASSERT_HAS(why, "'ctx'");
    /* one thread after another is fine, and the context works on */
    assert_int_equal(portssm_memset(ctx, buf, 7, 16), PORTSSM_OK);
    assert_int_equal(((unsigned char *)buf)[15], 7);
    assert_int_equal(portssm_free(ctx, buf), PORTSSM_OK);
    portssm_destroy(ctx);
}

static void test_null_ctx(void **state)
{
    void *p = NULL;
    portssm_event *ev = NULL;
    float ms;
    portssm_device_info info;
#define EXPECT_NULL_CTX(call)                                                                   \
    do {                                                                                        \
        assert_int_equal((call), PORTSSM_ERR_INVALID_ARGUMENT);                                 \
        ASSERT_HAS(portssm_last_error(NULL), "'ctx'");                                          \
    } while (0)
    EXPECT_NULL_CTX(portssm_malloc(NULL, &p, 16));
    EXPECT_NULL_CTX(portssm_free(NULL, &p));
    EXPECT_NULL_CTX(portssm_memcpy(NULL, &p, &p, 1, PORTSSM_HOST_TO_DEVICE));
    EXPECT_NULL_CTX(portssm_memset(NULL, &p, 0, 1));
    EXPECT_NULL_CTX(portssm_event_create(NULL, &ev));
    EXPECT_NULL_CTX(portssm_event_record(NULL, ev));
    EXPECT_NULL_CTX(portssm_event_elapsed_ms(NULL, ev, ev, &ms));
    EXPECT_NULL_CTX(portssm_set_stream(NULL, NULL));
    EXPECT_NULL_CTX(portssm_synchronize(NULL));
    EXPECT_NULL_CTX(portssm_device_selftest(NULL));
    EXPECT_NULL_CTX(portssm_get_device_info(NULL, &info));
    portssm_causal_conv1d_fwd_args cf = {0};
    portssm_causal_conv1d_bwd_args cb = {0};
    portssm_causal_conv1d_update_args cu = {0};
    portssm_selective_scan_fwd_args sf = {0};
    portssm_selective_scan_bwd_args sb = {0};
    portssm_selective_state_update_args su = {0};
    EXPECT_NULL_CTX(portssm_causal_conv1d_fwd(NULL, &cf));
    EXPECT_NULL_CTX(portssm_causal_conv1d_bwd(NULL, &cb));
    EXPECT_NULL_CTX(portssm_causal_conv1d_update(NULL, &cu));
    EXPECT_NULL_CTX(portssm_selective_scan_fwd(NULL, &sf));
    EXPECT_NULL_CTX(portssm_selective_scan_bwd(NULL, &sb));
    EXPECT_NULL_CTX(portssm_selective_state_update(NULL, &su));
#undef EXPECT_NULL_CTX
    assert_null(ev);
    portssm_event_destroy(NULL, NULL);
    assert_int_equal(portssm_get_backend(NULL), PORTSSM_BACKEND_AUTO);
    assert_int_equal(portssm_get_device(NULL), -1);
    assert_null(portssm_get_stream(NULL));
    assert_non_null(portssm_selection_report(NULL));
}

/* ---------------------------------------------------------------- memory */

static void test_memory_roundtrip(void **state)
{
    th_rng r = th_rng_for(11);
    const size_t sizes[] = {1, 3, 255, 1000, 65537};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *src = malloc(n), *dst = malloc(n);
        assert_non_null(src);
        assert_non_null(dst);
        fill_random(src, n, &r);
        memset(dst, 0, n);
        void *d1 = NULL, *d2 = NULL;
        assert_int_equal(portssm_malloc(th_ctx, &d1, n), PORTSSM_OK);
        assert_int_equal(portssm_malloc(th_ctx, &d2, n), PORTSSM_OK);
        assert_non_null(d1);
        assert_int_equal((uintptr_t)d1 % 256, 0);
        assert_int_equal((uintptr_t)d2 % 256, 0);
        assert_int_equal(portssm_memcpy(th_ctx, d1, src, n, PORTSSM_HOST_TO_DEVICE), PORTSSM_OK);
        assert_int_equal(portssm_memcpy(th_ctx, d2, d1, n, PORTSSM_DEVICE_TO_DEVICE), PORTSSM_OK);
        assert_int_equal(portssm_memcpy(th_ctx, dst, d2, n, PORTSSM_DEVICE_TO_HOST), PORTSSM_OK);
        assert_memory_equal(src, dst, n);
        /* an unaligned sub-range */
        if (n > 8) {
            memset(dst, 0, n);
            assert_int_equal(portssm_memcpy(th_ctx, (char *)d2 + 1, src + 3, n - 5,
                                            PORTSSM_HOST_TO_DEVICE),
                             PORTSSM_OK);
            assert_int_equal(portssm_memcpy(th_ctx, dst, (char *)d2 + 1, n - 5,
                                            PORTSSM_DEVICE_TO_HOST),
                             PORTSSM_OK);
            assert_memory_equal(src + 3, dst, n - 5);
        }
        assert_int_equal(portssm_free(th_ctx, d1), PORTSSM_OK);
        assert_int_equal(portssm_free(th_ctx, d2), PORTSSM_OK);
        free(src);
        free(dst);
    }
}

static void test_memset(void **state)
{
    th_rng r = th_rng_for(12);
    const size_t n = 777;
    unsigned char host[777], back[777];
    fill_random(host, n, &r);
    void *d = NULL;
    assert_int_equal(portssm_malloc(th_ctx, &d, n), PORTSSM_OK);
    assert_int_equal(portssm_memcpy(th_ctx, d, host, n, PORTSSM_HOST_TO_DEVICE), PORTSSM_OK);
    /* only the low byte of the value counts, as for memset */
    assert_int_equal(portssm_memset(th_ctx, (char *)d + 13, 0x1AB, 500), PORTSSM_OK);
    memset(host + 13, 0xAB, 500);
    assert_int_equal(portssm_memset(th_ctx, d, 0, 0), PORTSSM_OK);
    assert_int_equal(portssm_memcpy(th_ctx, back, d, n, PORTSSM_DEVICE_TO_HOST), PORTSSM_OK);
    assert_memory_equal(host, back, n);
    assert_int_equal(portssm_memset(th_ctx, NULL, 0, 4), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'ptr'");
    assert_int_equal(portssm_free(th_ctx, d), PORTSSM_OK);
}

static void test_malloc_edges(void **state)
{
    void *p = (void *)1;
    assert_int_equal(portssm_malloc(th_ctx, &p, 0), PORTSSM_OK);
    assert_null(p);
    assert_int_equal(portssm_free(th_ctx, NULL), PORTSSM_OK);
    assert_int_equal(portssm_malloc(th_ctx, NULL, 16), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'ptr'");
    p = (void *)1;
    portssm_status s = portssm_malloc(th_ctx, &p, SIZE_MAX - 4096);
    assert_int_not_equal(s, PORTSSM_OK);
    assert_null(p);
    assert_true(strlen(portssm_last_error(th_ctx)) > 0);
}

static void test_memcpy_errors(void **state)
{
    void *d = NULL;
    char host[64] = {1};
    assert_int_equal(portssm_malloc(th_ctx, &d, 64), PORTSSM_OK);
    const int kinds[] = {3, -1, 100};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(portssm_memcpy(th_ctx, d, host, 8, (portssm_memcpy_kind)kinds[i]),
                         PORTSSM_ERR_INVALID_ARGUMENT);
        ASSERT_HAS(portssm_last_error(th_ctx), "'kind'");
    }
    assert_int_equal(portssm_memcpy(th_ctx, NULL, host, 8, PORTSSM_HOST_TO_DEVICE),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'dst'");
    assert_int_equal(portssm_memcpy(th_ctx, host, NULL, 8, PORTSSM_DEVICE_TO_HOST),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'src'");
    assert_int_equal(portssm_memcpy(th_ctx, NULL, NULL, 0, PORTSSM_HOST_TO_DEVICE), PORTSSM_OK);
    assert_int_equal(portssm_memcpy(th_ctx, (char *)d + 8, d, 16, PORTSSM_DEVICE_TO_DEVICE),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "overlap");
    assert_int_equal(portssm_free(th_ctx, d), PORTSSM_OK);
}

/* ---------------------------------------------------------------- events, stream, device */

static void test_events(void **state)
{
    portssm_event *a = NULL, *b = NULL;
    float ms = -1;
    assert_int_equal(portssm_event_create(th_ctx, &a), PORTSSM_OK);
    assert_int_equal(portssm_event_create(th_ctx, &b), PORTSSM_OK);
    assert_non_null(a);
    assert_int_equal(portssm_event_elapsed_ms(th_ctx, a, b, &ms), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "recorded");
    assert_int_equal(portssm_event_record(th_ctx, a), PORTSSM_OK);
    void *d = NULL;
    assert_int_equal(portssm_malloc(th_ctx, &d, 1 << 20), PORTSSM_OK);
    assert_int_equal(portssm_memset(th_ctx, d, 7, 1 << 20), PORTSSM_OK);
    assert_int_equal(portssm_event_record(th_ctx, b), PORTSSM_OK);
    assert_int_equal(portssm_event_elapsed_ms(th_ctx, a, b, &ms), PORTSSM_OK);
    assert_true(isfinite(ms) && ms >= 0.0f && ms < 60000.0f);
    assert_int_equal(portssm_event_elapsed_ms(th_ctx, a, b, NULL), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'ms'");
    assert_int_equal(portssm_event_record(th_ctx, NULL), PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(portssm_event_create(th_ctx, NULL), PORTSSM_ERR_INVALID_ARGUMENT);
    /* an event belongs to its context */
    portssm_context *other = NULL;
    assert_int_equal(portssm_create(&other, label_backend(), label_device()), PORTSSM_OK);
    assert_int_equal(portssm_event_record(other, a), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(other), "another context");
    portssm_destroy(other);
    portssm_event_destroy(th_ctx, a);
    portssm_event_destroy(th_ctx, b);
    portssm_event_destroy(th_ctx, NULL);
    assert_int_equal(portssm_free(th_ctx, d), PORTSSM_OK);
}

static void test_stream(void **state)
{
    assert_int_equal(portssm_set_stream(th_ctx, NULL), PORTSSM_OK);
    assert_null(portssm_get_stream(th_ctx));
    if (!label_is_host())
        skip(); /* a real stream needs the vendor runtime, which tests do not link */
    int not_a_stream;
    assert_int_equal(portssm_set_stream(th_ctx, &not_a_stream), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'stream'");
    assert_null(portssm_get_stream(th_ctx));
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
}

/* A GPU backend runs on the caller's stream: work queued there waits behind the caller's earlier
 * work (a host-callback gate) and nothing goes to the default stream; a stream of another context
 * is refused and the context keeps its stream. */
static void test_user_stream(void **state)
{
    (void)state;
    if (label_is_host())
        skip(); /* cpu and sim accept only NULL: test_stream */
    char why[256];
    vs_vendor *v = vs_open(label_backend(), label_device(), why, sizeof why);
    if (!v)
        fail_msg("the %s backend runs but its driver cannot be opened here: %s",
                 th_backend_label, why);
    void *s = vs_stream_create(v, why, sizeof why);
    if (!s)
        fail_msg("%s", why);

    const int64_t D = 96, L = 1000;
    th_rng r = th_rng_for(41);
    th_tensor *x = th_new(th_ctx, PORTSSM_F32, 3, (int64_t[]){1, D, L}, NULL);
    th_tensor *w = th_new(th_ctx, PORTSSM_F32, 2, (int64_t[]){D, 1}, NULL);
    th_tensor *out = th_new(th_ctx, PORTSSM_F32, 3, (int64_t[]){1, D, L}, NULL);
    th_fill_uniform(x, &r, -4, 4);
    th_fill_uniform(w, &r, -2, 2); /* width 1, no bias: out = w * x, one f32 rounding */
    th_upload(x);
    th_upload(w);
    th_poison(out);
    th_upload(out);
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);

    assert_int_equal(portssm_set_stream(th_ctx, s), PORTSSM_OK);
    assert_ptr_equal(portssm_get_stream(th_ctx), s);
    assert_int_equal(vs_gate_close(v, s), 0);
    portssm_causal_conv1d_fwd_args a = {0};
    a.x = th_view(x);
    a.weight = th_view(w);
    a.out = th_view(out);
    int rc = portssm_causal_conv1d_fwd(th_ctx, &a);
    size_t bytes = (size_t)(D * L) * 4;
    unsigned char *seen = malloc(bytes);
    assert_non_null(seen);
    int done = vs_stream_done(v, s), peek = vs_peek(v, seen, th_view(out).data, bytes);
    vs_gate_open(v);
    assert_int_equal(rc, PORTSSM_OK);
    assert_int_equal(done, 0); /* the gate still held the stream */
    assert_int_equal(peek, 0);
    /* Behind the gate the output is untouched: the kernel was not on the default stream. */
    assert_memory_equal(seen, out->host + out->guard, bytes);
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
    assert_int_equal(vs_stream_done(v, s), 1);
    th_download(out);
    const float *xs = (const float *)(x->host + x->guard);
    const float *ws = (const float *)(w->host + w->guard);
    const float *os = (const float *)(out->host + out->guard);
    for (int64_t i = 0; i < D * L; i++)
        if (!(os[i] == ws[i / L] * xs[i]))
            fail_msg("out[%lld] = %.9g, expected w * x = %.9g", (long long)i, os[i],
                     ws[i / L] * xs[i]);
    th_assert_guards(out, "out");
    free(seen);

    /* A stream of another context on the same device (CUDA) is refused, naming the reason. */
    void *foreign = vs_foreign_stream_create(v);
    if (foreign) {
        assert_int_equal(portssm_set_stream(th_ctx, foreign), PORTSSM_ERR_INVALID_ARGUMENT);
        ASSERT_HAS(portssm_last_error(th_ctx), "another device or context");
        assert_ptr_equal(portssm_get_stream(th_ctx), s);
        vs_foreign_stream_destroy(v, foreign);
    } else if (label_backend() == PORTSSM_BACKEND_CUDA)
        print_message("note: no second CUDA context could be made; foreign-stream check not run\n");
    assert_int_equal(portssm_set_stream(th_ctx, NULL), PORTSSM_OK);
    assert_null(portssm_get_stream(th_ctx));
    vs_stream_destroy(v, s);
    vs_close(v);
    th_free_all();
}

static void check_info(const portssm_device_info *info)
{
    assert_non_null(memchr(info->name, '\0', sizeof info->name));
    assert_non_null(memchr(info->arch, '\0', sizeof info->arch));
    assert_true(strlen(info->name) > 0);
    assert_true(strlen(info->arch) > 0);
    assert_true(info->multiprocessors >= 1);
    assert_true(info->total_memory > 0);
    int w = info->warp_size;
    if (strcmp(th_backend_label, "cpu") == 0)
        assert_int_equal(w, 1);
    else if (strcmp(th_backend_label, "sim32") == 0)
        assert_int_equal(w, 32);
    else if (strcmp(th_backend_label, "sim64") == 0)
        assert_int_equal(w, 64);
    else
        assert_true(w == 32 || w == 64);
}

static void test_device_info(void **state)
{
    portssm_device_info a, b;
    memset(&a, 0x7f, sizeof a); /* no terminator anywhere unless the library writes one */
    assert_int_equal(portssm_get_device_info(th_ctx, &a), PORTSSM_OK);
    check_info(&a);
    assert_int_equal(portssm_device_get_info(label_backend(), label_device(), &b), PORTSSM_OK);
    check_info(&b);
    assert_string_equal(a.name, b.name);
    assert_string_equal(a.arch, b.arch);
    assert_int_equal(a.warp_size, b.warp_size);
    assert_int_equal(portssm_get_device_info(th_ctx, NULL), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'info'");
    int32_t n = 0;
    portssm_backend_probe(label_backend(), &n, NULL);
    assert_int_equal(portssm_device_get_info(label_backend(), n, &b), PORTSSM_ERR_NO_DEVICE);
    ASSERT_HAS(portssm_last_error(NULL), "'device'");
    assert_int_equal(portssm_device_get_info(label_backend(), -1, &b), PORTSSM_ERR_NO_DEVICE);
    assert_int_equal(portssm_device_get_info(PORTSSM_BACKEND_AUTO, 0, &b),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(portssm_device_get_info(label_backend(), 0, NULL),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    /* an absent backend answers with its probe status */
    for (int k = PORTSSM_BACKEND_CUDA; k <= PORTSSM_BACKEND_HIP; k++) {
        portssm_status s = portssm_backend_probe((portssm_backend)k, NULL, NULL);
        if (s != PORTSSM_OK)
            assert_int_equal(portssm_device_get_info((portssm_backend)k, 0, &b), s);
    }
}

static void test_selftest(void **state)
{
    portssm_status s = portssm_device_selftest(th_ctx);
    if (label_backend() == PORTSSM_BACKEND_CPU) {
        assert_true(s == PORTSSM_OK || s == PORTSSM_ERR_UNSUPPORTED);
        if (s == PORTSSM_ERR_UNSUPPORTED)
            assert_true(strlen(portssm_last_error(th_ctx)) > 0);
        return;
    }
    if (s == PORTSSM_ERR_UNSUPPORTED) {
        print_message("skipped: %s\n", portssm_last_error(th_ctx));
        skip();
    }
    if (s != PORTSSM_OK)
        fail_msg("selftest: %s: %s", portssm_status_name(s), portssm_last_error(th_ctx));
    assert_string_equal(portssm_last_error(th_ctx), "");
}

/* ---------------------------------------------------------------- module loader
 *
 * Each scenario copies libportssm into a fresh directory, puts (or not) a module beside it and
 * loads that copy with RTLD_LOCAL: a separate instance whose probes have not run yet. */

#if defined(PSSM_TEST_LIBPORTSSM) && defined(PSSM_TEST_FAKE_MODULE)
#define HAVE_LOADER_TESTS 1

typedef struct instance {
    char dir[256];
    void *h;
    portssm_status (*probe)(portssm_backend, int32_t *, const char **);
    portssm_status (*create)(portssm_context **, portssm_backend, int32_t);
    void (*destroy)(portssm_context *);
    const char *(*report)(const portssm_context *);
    const char *(*last_error)(const portssm_context *);
    portssm_status (*malloc_)(portssm_context *, void **, size_t);
    portssm_status (*free_)(portssm_context *, void *);
} instance;

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    if (!in || !out)
        fail_msg("copy %s -> %s: %s", from, to, strerror(errno));
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void make_dir(char *dir, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, size, "%s/pssm_loader_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        fail_msg("mkdtemp: %s", strerror(errno));
}

/* A directory holding a copy of libportssm; cuda/hip: file to put beside it, or NULL. */
static void stage(instance *in, const char *cuda_from, const char *hip_from)
{
    char path[512];
    memset(in, 0, sizeof *in);
    make_dir(in->dir, sizeof in->dir);
    snprintf(path, sizeof path, "%s/libportssm.so.0", in->dir);
    copy_file(PSSM_TEST_LIBPORTSSM, path);
    if (cuda_from) {
        snprintf(path, sizeof path, "%s/libportssm_cuda.so", in->dir);
        copy_file(cuda_from, path);
    }
    if (hip_from) {
        snprintf(path, sizeof path, "%s/libportssm_hip.so", in->dir);
        copy_file(hip_from, path);
    }
}

static void load(instance *in)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libportssm.so.0", in->dir);
    in->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!in->h)
        fail_msg("dlopen %s: %s", path, dlerror());
#define SYM(field, name)                                                                        \
    do {                                                                                        \
        void *s_ = dlsym(in->h, name);                                                          \
        assert_non_null(s_);                                                                    \
        memcpy(&in->field, &s_, sizeof s_);                                                     \
    } while (0)
    SYM(probe, "portssm_backend_probe");
    SYM(create, "portssm_create");
    SYM(destroy, "portssm_destroy");
    SYM(report, "portssm_selection_report");
    SYM(last_error, "portssm_last_error");
    SYM(malloc_, "portssm_malloc");
    SYM(free_, "portssm_free");
#undef SYM
}

static void unstage(instance *in)
{
    const char *names[] = {"libportssm.so.0", "libportssm_cuda.so", "libportssm_hip.so", "junk"};
    if (in->h)
        dlclose(in->h);
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", in->dir, names[i]);
        unlink(path);
    }
    rmdir(in->dir);
}

static void loader_only_on_cpu(void)
{
    if (strcmp(th_backend_label, "cpu") != 0) {
        print_message("skipped: the module loader is tested on the cpu label\n");
        skip();
    }
}

static void test_loader_missing_and_garbage(void **state)
{
    loader_only_on_cpu();
    instance in;
    char junk[512];
    stage(&in, NULL, NULL);
    snprintf(junk, sizeof junk, "%s/junk", in.dir);
    write_file(junk, "this is not a shared object\n");
    char cuda[512];
    snprintf(cuda, sizeof cuda, "%s/libportssm_cuda.so", in.dir);
    copy_file(junk, cuda);
    load(&in);
    const char *why = NULL;
    int32_t n = 7;
    /* garbage: dlopen's own words, and the path, are in the reason */
    assert_int_equal(in.probe(PORTSSM_BACKEND_CUDA, &n, &why), PORTSSM_ERR_NO_BACKEND);
    assert_int_equal(n, 0);
    ASSERT_HAS(why, "cannot load");
    ASSERT_HAS(why, cuda);
    assert_true(strstr(why, "ELF") || strstr(why, "too short") || strstr(why, "header"));
    /* missing: named as such */
    assert_int_equal(in.probe(PORTSSM_BACKEND_HIP, &n, &why), PORTSSM_ERR_NO_BACKEND);
    ASSERT_HAS(why, "libportssm_hip.so");
    ASSERT_HAS(why, in.dir);
    unstage(&in);
}

static void test_loader_not_a_module(void **state)
{
    loader_only_on_cpu();
    instance in;
    stage(&in, PSSM_TEST_LIBPORTSSM, NULL); /* a real shared object without the entry */
    load(&in);
    const char *why = NULL;
    assert_int_equal(in.probe(PORTSSM_BACKEND_CUDA, NULL, &why), PORTSSM_ERR_NO_BACKEND);
    ASSERT_HAS(why, "portssm_module_backend");
    unstage(&in);
}

/* The fake module as libportssm_hip.so in `mode`; returns the probe's status and reason. */
static portssm_status probe_fake(instance *in, const char *mode, const char **why)
{
    setenv("PSSM_FAKE_MODULE_MODE", mode, 1);
    stage(in, NULL, PSSM_TEST_FAKE_MODULE);
    load(in);
    portssm_status s = in->probe(PORTSSM_BACKEND_HIP, NULL, why);
    unsetenv("PSSM_FAKE_MODULE_MODE");
    return s;
}

static void test_loader_abi_and_probe(void **state)
{
    loader_only_on_cpu();
    instance in;
    const char *why = NULL;
    assert_int_equal(probe_fake(&in, "abi", &why), PORTSSM_ERR_NO_BACKEND);
    ASSERT_HAS(why, "ABI");
    ASSERT_HAS(why, "fake module built for ABI 0");
    unstage(&in);
    assert_int_equal(probe_fake(&in, "table_abi", &why), PORTSSM_ERR_NO_BACKEND);
    ASSERT_HAS(why, "ABI");
    unstage(&in);
    assert_int_equal(probe_fake(&in, "no_open", &why), PORTSSM_ERR_NO_BACKEND);
    ASSERT_HAS(why, "'open'");
    unstage(&in);
    assert_int_equal(probe_fake(&in, "probe", &why), PORTSSM_ERR_NO_DEVICE);
    ASSERT_HAS(why, "fake: no device present");
    /* the copy's explicit create reports the same */
    portssm_context *ctx = (portssm_context *)1;
    assert_int_equal(in.create(&ctx, PORTSSM_BACKEND_HIP, 0), PORTSSM_ERR_NO_DEVICE);
    assert_null(ctx);
    ASSERT_HAS(in.last_error(NULL), "fake: no device present");
    unstage(&in);
}

typedef struct thread_probe {
    instance *in;
    portssm_status s;
    const char *why;
} thread_probe;

static void *probe_in_thread(void *arg)
{
    thread_probe *t = arg;
    t->s = t->in->probe(PORTSSM_BACKEND_HIP, NULL, &t->why);
    return NULL;
}

static void test_loader_usable_module(void **state)
{
    loader_only_on_cpu();
    env_save();
    unsetenv("PORTSSM_BACKEND");
    instance in;
    setenv("PSSM_FAKE_MODULE_MODE", "ok", 1);
    stage(&in, NULL, PSSM_TEST_FAKE_MODULE);
    load(&in);
    /* concurrent first probes: the module's probe runs exactly once */
    enum { T = 6 };
    pthread_t th[T];
    thread_probe tp[T];
    for (int i = 0; i < T; i++) {
        tp[i].in = &in;
        assert_int_equal(pthread_create(&th[i], NULL, probe_in_thread, &tp[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(tp[i].s, PORTSSM_OK);
        assert_ptr_equal(tp[i].why, tp[0].why);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/libportssm_hip.so", in.dir);
    void *mod = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(mod); /* loaded by the library, from its own directory */
    int *calls = dlsym(mod, "pssm_fake_probe_calls");
    assert_non_null(calls);
    assert_int_equal(*calls, 1);
    dlclose(mod);

    /* AUTO: cuda is absent, so the (fake) hip module is the first usable GPU backend */
    portssm_context *ctx = NULL;
    portssm_status s = in.create(&ctx, PORTSSM_BACKEND_AUTO, 0);
    if (s != PORTSSM_OK)
        fail_msg("AUTO with a usable hip module: %s", in.last_error(NULL));
    const char *report = in.report(ctx);
    ASSERT_HAS(report, "cuda skipped");
    ASSERT_HAS(report, "hip device 0");
    void *p = NULL;
    assert_int_equal(in.malloc_(ctx, &p, 1000), PORTSSM_OK);
    assert_int_equal((uintptr_t)p % 256, 0);
    assert_int_equal(in.free_(ctx, p), PORTSSM_OK);
    in.destroy(ctx);
    setenv("PORTSSM_BACKEND", "hip:1", 1);
    ctx = (portssm_context *)1;
    assert_int_equal(in.create(&ctx, PORTSSM_BACKEND_AUTO, 0), PORTSSM_ERR_NO_DEVICE);
    assert_null(ctx);
    ASSERT_HAS(in.last_error(NULL), "device 1");
    unsetenv("PSSM_FAKE_MODULE_MODE");
    env_restore();
    unstage(&in);
}

static void test_loader_not_from_cwd(void **state)
{
    loader_only_on_cpu();
    instance lib, cwd;
    stage(&lib, NULL, NULL);               /* libportssm alone */
    stage(&cwd, NULL, PSSM_TEST_FAKE_MODULE); /* a usable module in the current directory */
    char old[1024];
    assert_non_null(getcwd(old, sizeof old));
    assert_int_equal(chdir(cwd.dir), 0);
    setenv("PSSM_FAKE_MODULE_MODE", "ok", 1);
    load(&lib);
    const char *why = NULL;
    portssm_status s = lib.probe(PORTSSM_BACKEND_HIP, NULL, &why);
    unsetenv("PSSM_FAKE_MODULE_MODE");
    assert_int_equal(chdir(old), 0);
    assert_int_equal(s, PORTSSM_ERR_NO_BACKEND);
    ASSERT_HAS(why, lib.dir);
    unstage(&lib);
    unstage(&cwd);
}
#endif

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_tensor_contiguous),
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_probe_threads),
        cmocka_unit_test(test_create_destroy),
        cmocka_unit_test(test_bad_backend),
        cmocka_unit_test(test_bad_device),
        cmocka_unit_test(test_env_backend),
        cmocka_unit_test(test_auto_report),
        cmocka_unit_test(test_last_error),
        cmocka_unit_test(test_null_ctx),
        cmocka_unit_test(test_shared_context_threads),
        cmocka_unit_test(test_memory_roundtrip),
        cmocka_unit_test(test_memset),
        cmocka_unit_test(test_malloc_edges),
        cmocka_unit_test(test_memcpy_errors),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_user_stream),
        cmocka_unit_test(test_device_info),
        cmocka_unit_test(test_selftest),
#ifdef HAVE_LOADER_TESTS
        cmocka_unit_test(test_loader_missing_and_garbage),
        cmocka_unit_test(test_loader_not_a_module),
        cmocka_unit_test(test_loader_abi_and_probe),
        cmocka_unit_test(test_loader_usable_module),
        cmocka_unit_test(test_loader_not_from_cwd),
#endif
    };
    return th_main(argc, argv, "test_api", tests, sizeof tests / sizeof tests[0]);
}
