/* harness.c - see harness.h. */
#include "harness.h"

#include <execinfo.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/pssm_float16.h"

#define PSSM_TH_MSG 1200

portssm_context *th_ctx;
portssm_context *th_oracle;
const char *th_backend_label = "cpu";

#define TH_GUARD_BYTE 0xA5
#define TH_GAP_BYTE 0x5A

/* ---------------------------------------------------------------- setup */

static int parse_backend(const char *label, portssm_backend *b, int32_t *dev)
{
    static const struct {
        const char *label;
        portssm_backend b;
        int32_t dev;
    } map[] = {{"cpu", PORTSSM_BACKEND_CPU, 0},   {"sim32", PORTSSM_BACKEND_SIM, 0},
               {"sim64", PORTSSM_BACKEND_SIM, 1}, {"cuda", PORTSSM_BACKEND_CUDA, 0},
               {"hip", PORTSSM_BACKEND_HIP, 0}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(label, map[i].label) == 0) {
            *b = map[i].b;
            *dev = map[i].dev;
            return 1;
        }
    return 0;
}

int th_skipped_tests;
static int th_started_tests;

/* PORTSSM_TEST_BACKTRACE=1: a crash prints the faulting thread's return addresses and the
 * process's mappings (for addr2line against the same build) instead of cmocka's one line;
 * for machines without a debugger.  cmocka installs its handlers before each test function,
 * so a test that wants this calls th_crash_reports() first. */
static void th_crash_report(int sig)
{
    static const char head[] = "\n*** crash: signal ";
    void *frames[64];
    char num[8] = {(char)('0' + sig / 10 % 10), (char)('0' + sig % 10), '\n', 0};
    (void)!write(2, head, sizeof head - 1);
    (void)!write(2, num, 3);
    const int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, 2);
    const int maps = open("/proc/self/maps", O_RDONLY);
    char buf[4096];
    ssize_t got;
    while (maps >= 0 && (got = read(maps, buf, sizeof buf)) > 0)
        (void)!write(2, buf, (size_t)got);
    _exit(128 + sig);
}

void th_crash_reports(void)
{
    const char *bt = getenv("PORTSSM_TEST_BACKTRACE");
    if (bt && *bt && *bt != '0') {
        signal(SIGSEGV, th_crash_report);
        signal(SIGBUS, th_crash_report);
        signal(SIGABRT, th_crash_report);
    }
}

static int count_start(void **state)
{
    (void)state;
    th_started_tests++;
    return 0;
}

int th_is_oracle(void) { return portssm_get_backend(th_ctx) == PORTSSM_BACKEND_CPU; }

/* Does the test's name match one of PORTSSM_TEST_OMIT's comma-separated fnmatch patterns? */
static int th_omitted(const char *name)
{
    const char *list = getenv("PORTSSM_TEST_OMIT");
    if (!list || !*list)
        return 0;
    char pat[256];
    while (*list) {
        size_t len = strcspn(list, ",");
        if (len > 0 && len < sizeof pat) {
            memcpy(pat, list, len);
            pat[len] = '\0';
            if (fnmatch(pat, name, 0) == 0)
                return 1;
        }
        list += len;
        if (*list == ',')
            list++;
    }
    return 0;
}

void th_case_room(const char *suite, size_t n, size_t max)
{
    if (n < max)
        return;
    fprintf(stderr, "%s: more than %zu cases to register: raise its MAX_CASES\n", suite, max);
    exit(1);
}

int th_main(int argc, char **argv, const char *suite, const struct CMUnitTest *tests, size_t n)
{
    const char *label = "cpu";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            label = argv[++i];
        else if (strncmp(argv[i], "--backend=", 10) == 0)
            label = argv[i] + 10;
    }
    portssm_backend b;
    int32_t dev;
    if (!parse_backend(label, &b, &dev)) {
        fprintf(stderr, "%s: unknown backend '%s' (cpu, sim32, sim64, cuda, hip)\n", suite, label);
        return 2;
    }
    th_backend_label = label;
    int32_t ndev = 0;
    const char *why = NULL;
    portssm_status s = portssm_backend_probe(b, &ndev, &why);
    if (s != PORTSSM_OK || dev >= ndev) {
        printf("%s [%s]: SKIPPED: backend not available here: %s\n", suite, label,
               why ? why : "no such device");
        return TH_SKIP;
    }
    s = portssm_create(&th_ctx, b, dev);
    if (s != PORTSSM_OK) {
        fprintf(stderr, "%s [%s]: portssm_create failed: %s: %s\n", suite, label,
                portssm_status_name(s), portssm_last_error(NULL));
        return 1;
    }
    s = portssm_create(&th_oracle, PORTSSM_BACKEND_CPU, 0);
    if (s != PORTSSM_OK) {
        fprintf(stderr, "%s: cpu oracle context failed: %s\n", suite, portssm_last_error(NULL));
        return 1;
    }
    char group[256];
    snprintf(group, sizeof group, "%s[%s]", suite, label);
    printf("%s: seed %llu (set PORTSSM_TEST_SEED to repeat)\n", group,
           (unsigned long long)th_seed());
    const char *filter = getenv("PORTSSM_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const char *skip_filter = getenv("PORTSSM_TEST_SKIP");
    if (skip_filter && *skip_filter)
        cmocka_set_skip_filter(skip_filter);
    /* Count the tests that start, to tell "every test skipped" from "some passed".  Tests
     * matching one of PORTSSM_TEST_OMIT's comma-separated patterns are left out (the slow
     * runs, valgrind's, keep the small cases). */
    struct CMUnitTest *counted = malloc(n * sizeof *counted);
    assert_non_null(counted);
    int counting = 1;
    size_t kept = 0, omitted = 0;
    for (size_t i = 0; i < n; i++) {
        if (th_omitted(tests[i].name)) {
            omitted++;
            continue;
        }
        counted[kept] = tests[i];
        if (counted[kept].setup_func == NULL)
            counted[kept].setup_func = count_start;
        else
            counting = 0;
        kept++;
    }
    if (omitted)
        printf("%s: %zu of %zu tests omitted (PORTSSM_TEST_OMIT)\n", group, omitted, n);
    int failed = _cmocka_run_group_tests(group, counted, kept, NULL, NULL);
    free(counted);
    if (th_skipped_tests > 0)
        printf("%s: %d of %d tests skipped\n", group, th_skipped_tests, th_started_tests);
    if (!failed && counting && th_started_tests > 0 && th_skipped_tests == th_started_tests) {
        printf("%s: SKIPPED: every test was skipped\n", group);
        failed = -1;
    }
    th_free_all();
    portssm_destroy(th_ctx);
    portssm_destroy(th_oracle);
    return failed < 0 ? TH_SKIP : failed ? 1 : 0;
}

/* ---------------------------------------------------------------- random numbers */

uint64_t th_seed(void)
{
    static uint64_t seed;
    static int have;
    if (!have) {
        const char *e = getenv("PORTSSM_TEST_SEED");
        if (e && *e)
            seed = strtoull(e, NULL, 0);
        else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
        }
        have = 1;
    }
    return seed;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

th_rng th_rng_for(uint64_t salt)
{
    uint64_t x = th_seed() ^ (salt * 0x2545f4914f6cdd1dull);
    th_rng r;
    r.s[0] = splitmix(&x);
    r.s[1] = splitmix(&x);
    return r;
}

uint64_t th_next(th_rng *r) /* xorshift128+ */
{
    uint64_t a = r->s[0], b = r->s[1];
    r->s[0] = b;
    a ^= a << 23;
    r->s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return r->s[1] + b;
}

double th_uniform(th_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(th_next(r) >> 11) * (1.0 / 9007199254740992.0));
}

int64_t th_randint(th_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(th_next(r) % (uint64_t)(hi - lo + 1));
}

/* ---------------------------------------------------------------- tensors */

#define TH_MAX_LIVE 4096
static th_tensor *live[TH_MAX_LIVE];
static int nlive;

static size_t esize(portssm_dtype d) { return portssm_dtype_size(d); }

/* shift: elements the data sits past the 256-byte aligned guard (a deliberate misalignment) */
static th_tensor *new_tensor(portssm_context *ctx, portssm_dtype dtype, int32_t ndim,
                             const int64_t *shape, const int64_t *stride, size_t shift)
{
    th_tensor *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_true(ndim >= 1 && ndim <= PORTSSM_MAX_DIMS);
    t->ctx = ctx;
    t->dtype = dtype;
    t->ndim = ndim;
    int64_t acc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = stride ? stride[i] : acc;
        acc *= shape[i] > 0 ? shape[i] : 1;
    }
    int64_t lo = 0, hi = 0;
    for (int i = 0; i < ndim; i++) {
        int64_t reach = (t->shape[i] - 1) * t->stride[i];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    t->base = -lo;
    t->span = hi - lo + 1;
    /* 256 also keeps device pointers 256-byte aligned relative to the allocation */
    t->guard = 256 + shift * esize(dtype);
    size_t bytes = 2 * t->guard + (size_t)t->span * esize(dtype);
    t->host = malloc(bytes);
    assert_non_null(t->host);
    void *d = NULL;
    portssm_status s = portssm_malloc(ctx, &d, bytes);
    if (s != PORTSSM_OK)
        fail_msg("portssm_malloc(%zu): %s", bytes, portssm_last_error(ctx));
    t->dev = d;
    memset(t->host, TH_GAP_BYTE, bytes);
    memset(t->host, TH_GUARD_BYTE, t->guard);
    memset(t->host + t->guard + (size_t)t->span * esize(dtype), TH_GUARD_BYTE, t->guard);
    th_upload(t);
    if (nlive < TH_MAX_LIVE)
        live[nlive++] = t;
    return t;
}

th_tensor *th_new(portssm_context *ctx, portssm_dtype dtype, int32_t ndim, const int64_t *shape,
                  const int64_t *stride)
{
    return new_tensor(ctx, dtype, ndim, shape, stride, 0);
}

th_tensor *th_twin(portssm_context *ctx, const th_tensor *src)
{
    th_tensor *t = th_new(ctx, src->dtype, src->ndim, src->shape, src->stride);
    memcpy(t->host, src->host, 2 * t->guard + (size_t)t->span * esize(t->dtype));
    th_upload(t);
    return t;
}

void th_free(th_tensor *t)
{
    if (!t)
        return;
    for (int i = 0; i < nlive; i++)
        if (live[i] == t) {
            live[i] = live[--nlive];
            break;
        }
    portssm_free(t->ctx, t->dev);
    free(t->host);
    free(t);
}

void th_free_all(void)
{
    while (nlive > 0)
        th_free(live[nlive - 1]);
}

static size_t total_bytes(const th_tensor *t) { return 2 * t->guard + (size_t)t->span * esize(t->dtype); }

portssm_tensor th_view(const th_tensor *t)
{
    portssm_tensor v;
    memset(&v, 0, sizeof v);
    v.data = t->dev + t->guard + (size_t)t->base * esize(t->dtype);
    v.dtype = t->dtype;
    v.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        v.shape[i] = t->shape[i];
        v.stride[i] = t->stride[i];
    }
    return v;
}

portssm_tensor th_absent(void)
{
    portssm_tensor v;
    memset(&v, 0, sizeof v);
    return v;
}

void th_upload(th_tensor *t)
{
    portssm_status s = portssm_memcpy(t->ctx, t->dev, t->host, total_bytes(t), PORTSSM_HOST_TO_DEVICE);
    if (s != PORTSSM_OK)
        fail_msg("upload: %s", portssm_last_error(t->ctx));
}

void th_download(th_tensor *t)
{
    portssm_status s = portssm_synchronize(t->ctx);
    if (s != PORTSSM_OK)
        fail_msg("synchronize: %s: %s", portssm_status_name(s), portssm_last_error(t->ctx));
    s = portssm_memcpy(t->ctx, t->host, t->dev, total_bytes(t), PORTSSM_DEVICE_TO_HOST);
    if (s != PORTSSM_OK)
        fail_msg("download: %s", portssm_last_error(t->ctx));
}

static unsigned char *elem_ptr(const th_tensor *t, const int64_t *idx)
{
    int64_t off = t->base;
    for (int i = 0; i < t->ndim; i++)
        off += idx[i] * t->stride[i];
    return t->host + t->guard + (size_t)off * esize(t->dtype);
}

double th_get(const th_tensor *t, const int64_t *idx)
{
    const unsigned char *p = elem_ptr(t, idx);
    uint16_t h;
    float f;
    int32_t i;
    switch (t->dtype) {
    case PORTSSM_F32: memcpy(&f, p, 4); return f;
    case PORTSSM_F16: memcpy(&h, p, 2); return pssm_f16_to_f32(h);
    case PORTSSM_BF16: memcpy(&h, p, 2); return pssm_bf16_to_f32(h);
    case PORTSSM_I32: memcpy(&i, p, 4); return i;
    }
    return NAN;
}

void th_set(th_tensor *t, const int64_t *idx, double v)
{
    unsigned char *p = elem_ptr(t, idx);
    uint16_t h;
    float f = (float)v;
    int32_t i;
    switch (t->dtype) {
    case PORTSSM_F32: memcpy(p, &f, 4); break;
    case PORTSSM_F16: h = pssm_f32_to_f16(f); memcpy(p, &h, 2); break;
    case PORTSSM_BF16: h = pssm_f32_to_bf16(f); memcpy(p, &h, 2); break;
    case PORTSSM_I32: i = (int32_t)v; memcpy(p, &i, 4); break;
    }
}

int64_t th_numel(const th_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

void th_unravel(const th_tensor *t, int64_t linear, int64_t *idx)
{
    for (int i = t->ndim - 1; i >= 0; i--) {
        idx[i] = linear % t->shape[i];
        linear /= t->shape[i];
    }
}

void th_fill_uniform(th_tensor *t, th_rng *r, double lo, double hi)
{
    size_t span_bytes = (size_t)t->span * esize(t->dtype);
    for (size_t i = 0; i < span_bytes; i++) /* gaps hold noise too: reads of them show */
        t->host[t->guard + i] = (unsigned char)th_next(r);
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(t);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(t, k, idx);
        th_set(t, idx, th_uniform(r, lo, hi));
    }
    th_upload(t);
}

void th_fill_int(th_tensor *t, th_rng *r, int64_t lo, int64_t hi)
{
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(t);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(t, k, idx);
        th_set(t, idx, (double)th_randint(r, lo, hi));
    }
    th_upload(t);
}

void th_poison(th_tensor *t)
{
    size_t span_bytes = (size_t)t->span * esize(t->dtype);
    memset(t->host, TH_GUARD_BYTE, t->guard);
    memset(t->host + t->guard, TH_GAP_BYTE, span_bytes);
    memset(t->host + t->guard + span_bytes, TH_GUARD_BYTE, t->guard);
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(t);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(t, k, idx);
        unsigned char *p = elem_ptr(t, idx);
        if (t->dtype == PORTSSM_I32) {
            int32_t v = INT32_MIN;
            memcpy(p, &v, 4);
        } else
            memset(p, 0xff, esize(t->dtype)); /* a NaN in every float format */
    }
    th_upload(t);
}

th_snapshot th_snap(th_tensor *t)
{
    th_download(t);
    th_snapshot s;
    s.bytes = total_bytes(t);
    s.data = malloc(s.bytes);
    assert_non_null(s.data);
    memcpy(s.data, t->host, s.bytes);
    return s;
}

int th_unchanged(th_tensor *t, const th_snapshot *s)
{
    th_download(t);
    int same = s->bytes == total_bytes(t) && memcmp(s->data, t->host, s->bytes) == 0;
    free(s->data);
    return same;
}

/* Is byte offset b of the span part of an element?  (Brute force: tests use small tensors.) */
static void mark_elements(const th_tensor *t, unsigned char *is_elem)
{
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(t);
    size_t es = esize(t->dtype);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(t, k, idx);
        size_t off = (size_t)(elem_ptr(t, idx) - (t->host + t->guard));
        memset(is_elem + off, 1, es);
    }
}

void th_assert_guards(th_tensor *t, const char *name)
{
    th_download(t);
    size_t span_bytes = (size_t)t->span * esize(t->dtype);
    for (size_t i = 0; i < t->guard; i++) {
        if (t->host[i] != TH_GUARD_BYTE)
            fail_msg("%s: guard byte %zu before the tensor was overwritten", name, t->guard - i);
        if (t->host[t->guard + span_bytes + i] != TH_GUARD_BYTE)
            fail_msg("%s: guard byte %zu after the tensor was overwritten", name, i);
    }
    unsigned char *is_elem = calloc(span_bytes, 1);
    assert_non_null(is_elem);
    mark_elements(t, is_elem);
    for (size_t i = 0; i < span_bytes; i++)
        if (!is_elem[i] && t->host[t->guard + i] != TH_GAP_BYTE) {
            free(is_elem);
            fail_msg("%s: byte %zu between strided elements was overwritten", name, i);
        }
    free(is_elem);
}

/* ---------------------------------------------------------------- comparison */

th_tol th_tol_for(portssm_dtype dtype)
{
    th_tol t = {6e-4, 2e-3};
    if (dtype == PORTSSM_F16) {
        t.rtol = 3e-3;
        t.atol = 5e-3;
    } else if (dtype == PORTSSM_BF16) {
        t.rtol = 3e-2;
        t.atol = 5e-2;
    }
    return t;
}

double th_norm_error(const th_tensor *got, const th_tensor *ref)
{
    double num = 0, den = 0;
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(ref);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(ref, k, idx);
        double a = th_get(got, idx), b = th_get(ref, idx);
        num += (a - b) * (a - b);
        den += b * b;
    }
    return den > 0 ? num / den : num;
}

static void format_index(const th_tensor *t, const int64_t *idx, char *buf, size_t n)
{
    int len = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim && (size_t)len < n; i++)
        len += snprintf(buf + len, n - (size_t)len, i ? ",%lld" : "%lld", (long long)idx[i]);
}

static void format_shape(const th_tensor *t, char *buf, size_t n)
{
    int len = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim && (size_t)len < n; i++)
        len += snprintf(buf + len, n - (size_t)len, i ? "x%lld" : "%lld", (long long)t->shape[i]);
}

/* got against either a tensor (ref_t) or row-major values (ref_v); both already on the host. */
static void close_core(const th_tensor *got, const th_tensor *ref_t, const double *ref_v,
                       th_tol tol, int norm_check, const char *name)
{
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(got), bad = 0, first = -1, worst_k = -1;
    double worst = 0, num = 0, den = 0;
    for (int64_t k = 0; k < n; k++) {
        th_unravel(got, k, idx);
        double a = th_get(got, idx), b = ref_t ? th_get(ref_t, idx) : ref_v[k];
        double lim = tol.atol + tol.rtol * fabs(b);
        double err = fabs(a - b);
        if (!(err <= lim)) { /* NaN fails here */
            if (first < 0)
                first = k;
            bad++;
        }
        double ratio = isnan(err) ? INFINITY : err / lim;
        if (worst_k < 0 || ratio > worst) {
            worst = ratio;
            worst_k = k;
        }
        num += (a - b) * (a - b);
        den += b * b;
    }
    double ne = den > 0 ? num / den : num;
    char shape[96], where[96], wworst[96];
    format_shape(got, shape, sizeof shape);
    if (bad) {
        th_unravel(got, first, idx);
        format_index(got, idx, where, sizeof where);
        double a = th_get(got, idx), b = ref_t ? th_get(ref_t, idx) : ref_v[first];
        th_unravel(got, worst_k, idx);
        format_index(got, idx, wworst, sizeof wworst);
        double wa = th_get(got, idx), wb = ref_t ? th_get(ref_t, idx) : ref_v[worst_k];
        fail_msg("%s (%s %s): %lld of %lld elements outside atol %.1e + rtol %.1e; first at [%s]:"
                 " got %.9g, expected %.9g; worst at [%s]: got %.9g, expected %.9g;"
                 " normalised error %.3e",
                 name, portssm_dtype_name(got->dtype), shape, (long long)bad, (long long)n,
                 tol.atol, tol.rtol, where, a, b, wworst, wa, wb, ne);
    }
    /* an error well inside tolerance per element can still be a systematic bias: bound it too */
    double ne_lim = tol.rtol * tol.rtol;
    if (norm_check && !(ne <= ne_lim))
        fail_msg("%s (%s %s): normalised error %.3e above %.3e", name,
                 portssm_dtype_name(got->dtype), shape, ne, ne_lim);
}

static void close_tensors(th_tensor *got, th_tensor *ref, th_tol tol, int norm_check,
                          const char *name)
{
    assert_int_equal(got->ndim, ref->ndim);
    for (int i = 0; i < ref->ndim; i++)
        assert_int_equal(got->shape[i], ref->shape[i]);
    th_download(got);
    th_download(ref);
    close_core(got, ref, NULL, tol, norm_check, name);
}

void th_assert_close(th_tensor *got, th_tensor *ref, th_tol tol, const char *name)
{
    close_tensors(got, ref, tol, 1, name);
}

void th_assert_close_values(th_tensor *got, const double *ref, th_tol tol, const char *name)
{
    th_download(got);
    close_core(got, NULL, ref, tol, 1, name);
}

void th_assert_same(th_tensor *got, th_tensor *ref, const char *name)
{
    assert_int_equal(got->ndim, ref->ndim);
    assert_int_equal(got->dtype, ref->dtype);
    for (int i = 0; i < ref->ndim; i++)
        assert_int_equal(got->shape[i], ref->shape[i]);
    th_download(got);
    th_download(ref);
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(ref), bad = 0, first = -1;
    size_t es = esize(ref->dtype);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(ref, k, idx);
        double a = th_get(got, idx);
        if (memcmp(elem_ptr(got, idx), elem_ptr(ref, idx), es) != 0 || isnan(a)) {
            if (first < 0)
                first = k;
            bad++;
        }
    }
    if (bad) {
        char shape[96], where[96];
        format_shape(ref, shape, sizeof shape);
        th_unravel(ref, first, idx);
        format_index(ref, idx, where, sizeof where);
        fail_msg("%s (%s %s): %lld of %lld elements not bit-identical; first at [%s]: got %.9g,"
                 " expected %.9g",
                 name, portssm_dtype_name(ref->dtype), shape, (long long)bad, (long long)n, where,
                 th_get(got, idx), th_get(ref, idx));
    }
}

double *th_values(const th_tensor *t)
{
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(t, k, idx);
        v[k] = th_get(t, idx);
    }
    return v;
}

portssm_tensor th_view_opt(const th_tensor *t) { return t ? th_view(t) : th_absent(); }

/* ---------------------------------------------------------------- layouts */

void th_layout_strides(int32_t ndim, const int64_t *shape, unsigned layout, const int64_t *keep,
                       int64_t *stride)
{
    int order[PORTSSM_MAX_DIMS]; /* innermost first */
    for (int i = 0; i < ndim; i++)
        order[i] = ndim - 1 - i;
    if ((layout & TH_L_CL) && ndim >= 2) {
        order[0] = ndim - 2;
        order[1] = ndim - 1;
    }
    int64_t acc = (layout & TH_L_GAP) ? 2 : 1;
    for (int k = 0; k < ndim; k++) {
        int d = order[k];
        if (keep && keep[d] == 0) {
            stride[d] = 0;
            continue;
        }
        stride[d] = acc;
        acc *= shape[d];
        if (layout & TH_L_PAD)
            acc += (acc % 2 == 0) ? 3 : 2; /* odd: no stride stays a multiple of a vector */
    }
    /* dim 0 is the outermost unless cl swapped it inside (2-D) */
    if ((layout & TH_L_PADB) && ndim >= 2 && stride[0] != 0 && order[ndim - 1] == 0)
        stride[0] += (stride[0] % 2 == 0) ? 1 : 2;
    if ((layout & TH_L_NEGL) && ndim >= 1)
        stride[ndim - 1] = -stride[ndim - 1];
    if ((layout & TH_L_NEGB) && ndim >= 2)
        stride[0] = -stride[0];
}

const char *th_layout_name(unsigned layout, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s%s%s%s%s%s", (layout & TH_L_CL) ? "cl" : "cf",
             (layout & TH_L_PAD) ? "+pad" : "", (layout & TH_L_PADB) ? "+padB" : "",
             (layout & TH_L_GAP) ? "+gap" : "", (layout & TH_L_NEGL) ? "+negL" : "",
             (layout & TH_L_NEGB) ? "+negB" : "", (layout & TH_L_SHIFT) ? "+shift" : "",
             (layout & TH_L_SHIFTO) ? "+shiftOut" : "", (layout & TH_L_XOUT) ? "+xOut" : "");
    return buf;
}

th_tensor *th_relayout(portssm_context *ctx, const th_tensor *src, unsigned layout, int copy,
                       th_rng *r)
{
    int64_t stride[PORTSSM_MAX_DIMS];
    th_layout_strides(src->ndim, src->shape, layout, src->stride, stride);
    size_t shift = ((layout & TH_L_SHIFT) ? 1 : 0) + ((layout & TH_L_SHIFTO) ? 1 : 0);
    th_tensor *t = new_tensor(ctx, src->dtype, src->ndim, src->shape, stride, shift);
    if (!copy) {
        th_poison(t);
        return t;
    }
    size_t es = esize(t->dtype);
    if (r) /* gaps hold noise, as th_fill_uniform leaves them */
        for (size_t i = 0; i < (size_t)t->span * es; i++)
            t->host[t->guard + i] = (unsigned char)th_next(r);
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(t);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(t, k, idx);
        memcpy(elem_ptr(t, idx), elem_ptr(src, idx), es);
    }
    th_upload(t);
    return t;
}

/* ---------------------------------------------------------------- bundles */

th_tensor *th_slot_set(th_bundle *b, int i, const char *name, th_role role, th_tensor *t,
                       th_tol tol)
{
    assert_true(i >= 0 && i < TH_MAX_SLOTS);
    b->s[i].name = name;
    b->s[i].role = role;
    b->s[i].t = t;
    b->s[i].tol = tol;
    b->s[i].exact = 0;
    b->s[i].per_element = 0;
    b->s[i].terms_of = 0;
    b->s[i].terms_k = 0;
    b->s[i].dense = 0;
    if (i >= b->n)
        b->n = i + 1;
    return t;
}

void th_slot_terms(th_bundle *b, int i, int terms, double k)
{
    assert_true(i >= 0 && i < b->n && terms >= 0 && terms < b->n);
    b->s[i].terms_of = terms + 1;
    b->s[i].terms_k = k;
}

/* slot i's tolerance against ref (th_slot.terms_of: atol from the size of the summed terms) */
static th_tol slot_tol(const th_bundle *ref, int i)
{
    const th_slot *s = &ref->s[i];
    th_tol tol = s->tol;
    if (s->terms_of < 1 || !ref->s[s->terms_of - 1].t || !s->t)
        return tol;
    const th_tensor *terms = ref->s[s->terms_of - 1].t;
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(terms), per = th_numel(s->t);
    double sq = 0;
    for (int64_t k = 0; k < n; k++) {
        th_unravel(terms, k, idx);
        const double v = th_get(terms, idx);
        sq += v * v;
    }
    const double a = s->terms_k * sqrt(sq / (double)(per > 0 ? per : 1));
    if (a > tol.atol)
        tol.atol = a;
    return tol;
}

portssm_tensor th_slot_view(const th_bundle *b, int i) { return th_view_opt(b->s[i].t); }

/* The same call on ctx in `layout`: inputs and in/out tensors copied, outputs poisoned. */
static void bundle_clone(th_bundle *dst, portssm_context *ctx, const th_bundle *src,
                         unsigned layout, th_rng *r)
{
    *dst = *src;
    for (int i = 0; i < src->n; i++) {
        const th_slot *s = &src->s[i];
        if (!s->t)
            continue;
        unsigned lay = layout & ~(unsigned)(TH_L_SHIFTO | TH_L_XOUT);
        if (s->role != TH_IN)
            lay |= layout & TH_L_SHIFTO;
        if (s->role == TH_OUT && (layout & TH_L_XOUT))
            lay ^= TH_L_CL;
        if (s->dense)
            lay = TH_L_CONTIG;
        /* in/out tensors keep the gap pattern: their guards are checked after the run */
        dst->s[i].t = th_relayout(ctx, s->t, lay, s->role != TH_OUT, s->role == TH_IN ? r : NULL);
    }
}

static void bundle_guards(th_bundle *b, const char *who)
{
    char name[400];
    for (int i = 0; i < b->n; i++)
        if (b->s[i].t && b->s[i].role != TH_IN) {
            snprintf(name, sizeof name, "%s (%s)", b->s[i].name, who);
            th_assert_guards(b->s[i].t, name);
        }
}

typedef struct bundle_snaps {
    th_snapshot s[TH_MAX_SLOTS];
} bundle_snaps;

static void bundle_snap_inputs(th_bundle *b, bundle_snaps *sn)
{
    for (int i = 0; i < b->n; i++)
        if (b->s[i].t && b->s[i].role == TH_IN)
            sn->s[i] = th_snap(b->s[i].t);
}

static void bundle_inputs_unchanged(th_bundle *b, bundle_snaps *sn, const char *who)
{
    for (int i = 0; i < b->n; i++)
        if (b->s[i].t && b->s[i].role == TH_IN && !th_unchanged(b->s[i].t, &sn->s[i]))
            fail_msg("%s: input %s (or its guards or gaps) was modified", who, b->s[i].name);
}

/* exact: bitwise for every output; else each slot's tolerance (or bitwise for exact slots). */
static void bundle_compare(th_bundle *got, th_bundle *ref, int exact, const char *what)
{
    char name[400];
    for (int i = 0; i < ref->n; i++) {
        th_slot *s = &ref->s[i];
        if (!s->t || s->role == TH_IN)
            continue;
        snprintf(name, sizeof name, "%s: %s", s->name, what);
        if (exact || s->exact)
            th_assert_same(got->s[i].t, s->t, name);
        else
            close_tensors(got->s[i].t, s->t, slot_tol(ref, i), !s->per_element, name);
    }
}

typedef struct probe_cache {
    const th_op *op;
    int supported;
} probe_cache;

/* Does the backend under test implement op at all?  Its answer to the op's plain probe case. */
static int op_supported(const th_op *op)
{
    static probe_cache cache[16];
    static int ncache;
    for (int i = 0; i < ncache; i++)
        if (cache[i].op == op)
            return cache[i].supported;
    th_rng r = th_rng_for(0x9e0be);
    th_bundle canon, b;
    memset(&canon, 0, sizeof canon);
    op->build(&canon, op->probe, &r);
    bundle_clone(&b, th_ctx, &canon, TH_L_CONTIG, NULL);
    portssm_status s = op->run(th_ctx, &b, op->probe);
    int supported = s != PORTSSM_ERR_UNSUPPORTED;
    if (ncache < 16) {
        cache[ncache].op = op;
        cache[ncache++].supported = supported;
    }
    return supported;
}

void th_cross_check(const th_op *op, const void *cas, unsigned layout, unsigned alt, uint64_t salt)
{
    th_rng r = th_rng_for(salt);
    char lname[96], aname[96], what[240];
    th_layout_name(layout, lname, sizeof lname);
    th_layout_name(alt, aname, sizeof aname);
    const char *be = th_backend_label;

    th_bundle canon, init, a, a2, x;
    memset(&canon, 0, sizeof canon);
    op->build(&canon, cas, &r);
    bundle_clone(&init, th_oracle, &canon, TH_L_CONTIG, NULL);
    bundle_clone(&a, th_ctx, &canon, layout, &r);
    bundle_clone(&a2, th_ctx, &canon, layout, &r);
    bundle_clone(&x, th_ctx, &canon, alt, &r);

    bundle_snaps sn;
    bundle_snap_inputs(&a, &sn);
    portssm_status s = op->run(th_ctx, &a, cas);
    if (s == PORTSSM_ERR_UNSUPPORTED) {
        char msg[PSSM_TH_MSG];
        snprintf(msg, sizeof msg, "%s", portssm_last_error(th_ctx));
        if (!op_supported(op))
            th_skip_test("skipped: %s is not implemented by %s: %s", op->name, be, msg);
        fail_msg("%s [%s, %s]: UNSUPPORTED for a case the design requires (the backend runs the"
                 " op's plain case): %s", op->name, be, lname, msg);
    }
    if (s != PORTSSM_OK)
        fail_msg("%s [%s, %s] -> %s: %s", op->name, be, lname, portssm_status_name(s),
                 portssm_last_error(th_ctx));
    s = op->run(th_oracle, &canon, cas);
    if (s != PORTSSM_OK)
        fail_msg("%s [cpu oracle, cf] -> %s: %s", op->name, portssm_status_name(s),
                 portssm_last_error(th_oracle));

    snprintf(what, sizeof what, "%s %s", be, lname);
    bundle_guards(&a, what);
    bundle_inputs_unchanged(&a, &sn, what);
    bundle_guards(&canon, "cpu oracle cf");
    snprintf(what, sizeof what, "%s %s vs cpu oracle cf", be, lname);
    bundle_compare(&a, &canon, th_is_oracle(), what);

    if (op->verify)
        op->verify(&a, &init, cas);

    s = op->run(th_ctx, &a2, cas);
    if (s != PORTSSM_OK)
        fail_msg("%s [%s, %s], second run -> %s: %s", op->name, be, lname, portssm_status_name(s),
                 portssm_last_error(th_ctx));
    snprintf(what, sizeof what, "%s %s, second run", be, lname);
    bundle_guards(&a2, what);
    snprintf(what, sizeof what, "%s %s: second run vs first (determinism)", be, lname);
    bundle_compare(&a2, &a, 1, what);

    s = op->run(th_ctx, &x, cas);
    if (s != PORTSSM_OK)
        fail_msg("%s [%s] in layout %s (the design accepts any strides) -> %s: %s", op->name, be,
                 aname, portssm_status_name(s), portssm_last_error(th_ctx));
    snprintf(what, sizeof what, "%s %s", be, aname);
    bundle_guards(&x, what);
    snprintf(what, sizeof what, "%s %s vs cpu oracle cf", be, aname);
    bundle_compare(&x, &canon, th_is_oracle(), what);
}

/* ---------------------------------------------------------------- independent references */

double th_ulp(portssm_dtype dtype)
{
    return dtype == PORTSSM_F16 ? 0x1p-10 : dtype == PORTSSM_BF16 ? 0x1p-7 : 0x1p-23;
}

th_tol th_tol_ref(portssm_dtype dtype)
{
    th_tol t = {th_ulp(dtype) + 1e-5, 1e-6};
    return t;
}

double *th_random_dir(th_rng *r, int64_t n)
{
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = th_uniform(r, -1, 1);
    return v;
}

double th_fd_dir(double (*loss)(void *), void *ctx, double *p, const double *v, int64_t n,
                 double h)
{
    double *save = malloc((size_t)(n > 0 ? n : 1) * sizeof *save);
    assert_non_null(save);
    memcpy(save, p, (size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = save[i] + h * v[i];
    double up = loss(ctx);
    for (int64_t i = 0; i < n; i++)
        p[i] = save[i] - h * v[i];
    double down = loss(ctx);
    memcpy(p, save, (size_t)n * sizeof *p);
    free(save);
    return (up - down) / (2 * h);
}

void th_assert_grad_dir(th_tensor *grad, const double *v, double fd, const char *name)
{
    th_download(grad);
    double *g = th_values(grad);
    int64_t n = th_numel(grad);
    long double dot = 0, mag = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        long double term = (long double)g[i] * v[i];
        dot += term;
        mag += fabsl(term);
        sq += term * term;
    }
    free(g);
    double tol = 8 * th_ulp(grad->dtype) * sqrt((double)sq) + 1e-6 * (double)mag + 1e-6;
    double err = fabs((double)dot - fd);
    if (!(err <= tol)) {
        char shape[96];
        format_shape(grad, shape, sizeof shape);
        fail_msg("%s (%s %s): sum(grad * v) = %.9g but the finite difference of the double"
                 " reference along v is %.9g (difference %.3g, allowed %.3g)",
                 name, portssm_dtype_name(grad->dtype), shape, (double)dot, fd, err, tol);
    }
}

th_tensor *th_oracle_in(portssm_dtype dt, int ndim, const int64_t *shape, const int64_t *stride,
                        th_rng *r, double lo, double hi)
{
    th_tensor *t = th_new(th_oracle, dt, ndim, shape, stride);
    th_fill_uniform(t, r, lo, hi);
    return t;
}

th_tensor *th_oracle_out(portssm_dtype dt, int ndim, const int64_t *shape)
{
    th_tensor *t = th_new(th_oracle, dt, ndim, shape, NULL);
    th_poison(t);
    return t;
}

unsigned th_alt_layout(unsigned layout) { return (layout ^ (TH_L_CL | TH_L_NEGL)) | TH_L_PAD; }

void th_check_grads_fd(th_bundle *got, const th_grad_param *g, size_t n,
                       double (*loss)(void *), void *ctx, th_rng *r)
{
    for (size_t i = 0; i < n; i++) {
        th_tensor *grad = got->s[g[i].slot].t;
        if (!grad)
            continue;
        double *v = th_random_dir(r, g[i].n);
        double fd = th_fd_dir(loss, ctx, g[i].param, v, g[i].n, 1e-6);
        char name[96];
        snprintf(name, sizeof name, "%s: cpu vs finite differences", got->s[g[i].slot].name);
        th_assert_grad_dir(grad, v, fd, name);
        free(v);
    }
}

int th_teardown(void **state)
{
    (void)state;
    th_free_all();
    /* A device fault (an illegal address) is sticky for the whole process on CUDA and HIP: every
     * later call on the device would fail too and bury the one real failure under consequences.
     * Stop the suite here, loudly. */
    portssm_status s = portssm_synchronize(th_ctx);
    if (s == PORTSSM_ERR_DEVICE) {
        print_error("%s: the device reported a fault (%s); the fault is sticky, so the suite "
                    "stops here: the test just run (or one before it) caused it\n",
                    th_backend_label, portssm_last_error(th_ctx));
        exit(1);
    }
    return 0;
}
