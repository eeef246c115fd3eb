/*
 * test_contexts.c - two contexts side by side (issue #13): one per device where the backend has
 * two or more (devices 0 and 1), else both on device 0, which the output says.  Each context
 * is driven by a thread of its own and, on a GPU, queues on a stream of its own (a caller's
 * stream, vendor_stream.h); the two threads run every op at the same time, and every output of
 * every call must equal, bit for bit, what the same call gave on that context alone.  Also:
 * portssm_malloc of a context allocates on its device (CUDA: the pointer's device ordinal), and
 * a stream of the other device is refused with a message and the old stream kept.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "opcase.h"
#include "tset.h"
#include "vendor_stream.h"

#define C_CONV (PSSM_O_BIAS | PSSM_O_SILU)
#define C_SCAN (PSSM_O_DSKIP | PSSM_O_Z | PSSM_O_DELTA_BIAS | PSSM_O_SOFTPLUS)

/* Every op, forward, backward and decode; small enough for the sim, past one block or chunk. */
static const pssm_opcase cases[] = {
    {.op = PSSM_OP_CONV1D_FWD,
     .dtype = PORTSSM_BF16,
     .B = 2,
     .D = 64,
     .L = 150,
     .W = 4,
     .opts = C_CONV | PSSM_O_STATES | PSSM_O_SEQ_IDX},
    {.op = PSSM_OP_CONV1D_BWD,
     .dtype = PORTSSM_F32,
     .B = 2,
     .D = 64,
     .L = 150,
     .W = 4,
     .opts = C_CONV | PSSM_O_W_F32 | PSSM_O_STATES},
    {.op = PSSM_OP_CONV1D_UPDATE,
     .dtype = PORTSSM_BF16,
     .B = 3,
     .D = 64,
     .W = 4,
     .opts = C_CONV | PSSM_O_INDICES},
    {.op = PSSM_OP_SCAN_FWD,
     .dtype = PORTSSM_BF16,
     .B = 2,
     .D = 64,
     .L = 150,
     .N = 16,
     .G = 2,
     .opts = C_SCAN | PSSM_O_VAR_BC | PSSM_O_STATES},
    {.op = PSSM_OP_SCAN_BWD,
     .dtype = PORTSSM_F32,
     .B = 2,
     .D = 32,
     .L = 150,
     .N = 16,
     .opts = C_SCAN | PSSM_O_VAR_BC},
    {.op = PSSM_OP_STATE_UPDATE,
     .dtype = PORTSSM_BF16,
     .B = 3,
     .D = 64,
     .N = 16,
     .opts = C_SCAN | PSSM_O_INDICES},
    {.op = PSSM_OP_STATE_UPDATE,
     .dtype = PORTSSM_F16,
     .B = 3,
     .H = 4,
     .P = 16,
     .N = 32,
     .G = 2,
     .opts = PSSM_O_HEADS | PSSM_O_TIED | C_SCAN},
    {.op = PSSM_OP_STATE_UPDATE, /* a 16-bit state pool, as serving engines keep it */
     .dtype = PORTSSM_BF16,
     .state_dtype = PORTSSM_F16,
     .B = 3,
     .H = 4,
     .P = 16,
     .N = 32,
     .G = 2,
     .opts = PSSM_O_HEADS | PSSM_O_TIED | C_SCAN | PSSM_O_INDICES},
    {.op = PSSM_OP_SSD_FWD,
     .dtype = PORTSSM_BF16,
     .B = 2,
     .L = 150,
     .H = 4,
     .P = 16,
     .N = 32,
     .G = 2,
     .opts = C_SCAN | PSSM_O_STATES | PSSM_O_SEQ_IDX},
    {.op = PSSM_OP_SSD_BWD,
     .dtype = PORTSSM_F32,
     .B = 1,
     .L = 150,
     .H = 2,
     .P = 16,
     .N = 32,
     .opts = PSSM_O_DSKIP | PSSM_O_DELTA_BIAS | PSSM_O_SOFTPLUS | PSSM_O_STATES},
    {.op = PSSM_OP_NORM_FWDBWD,
     .dtype = PORTSSM_BF16,
     .B = 2,
     .L = 20,
     .D = 264,
     .opts = PSSM_O_RMS | PSSM_O_RESIDUAL | PSSM_O_RES_F32 | PSSM_O_W_F32},
    {.op = PSSM_OP_NORM_BWD,
     .dtype = PORTSSM_F32,
     .B = 2,
     .L = 20,
     .D = 96,
     .G = 3,
     .opts = PSSM_O_BIAS | PSSM_O_Z},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#define REPEATS 2 /* rounds of every op per thread while the other thread runs its own */

static pssm_tset sets[NCASES];

/* One context and everything it owns. */
typedef struct side {
    portssm_context *ctx;
    int32_t device;
    vs_vendor *v;
    void *stream;
    pssm_tdev dev[NCASES];
    unsigned char *solo[NCASES][PSSM_TSET_MAX]; /* each output as the call alone left it */
    char error[512];                            /* the thread's first failure, or ""     */
} side;

static void side_fail(side *s, const char *what, int c, portssm_status st)
{
    if (s->error[0])
        return;
    char shape[128];
    pssm_opcase_shape(&cases[c], shape, sizeof shape);
    snprintf(s->error, sizeof s->error, "device %d, %s %s: %s%s%s", (int)s->device,
             pssm_op_name(cases[c].op), shape, what, st != PORTSSM_OK ? ": " : "",
             st != PORTSSM_OK ? portssm_last_error(s->ctx) : "");
}

/* Runs case c once on s (fresh inputs, poisoned outputs) and leaves its outputs in `out` (or
 * compares them with the solo run's where out is NULL).  0 on success. */
static int run_case(side *s, int c, unsigned char **out)
{
    const pssm_tset *set = &sets[c];
    portssm_status st = pssm_tdev_load(&s->dev[c], set);
    if (st == PORTSSM_OK)
        st = pssm_opcase_run(&cases[c], set, &s->dev[c]);
    if (st == PORTSSM_OK)
        st = portssm_synchronize(s->ctx);
    if (st != PORTSSM_OK) {
        side_fail(s, "the call failed", c, st);
        return -1;
    }
    for (int i = 0; i < set->n; i++) {
        if (!(set->t[i].role & PSSM_OUT))
            continue;
        const size_t bytes = pssm_tspec_bytes(&set->t[i]);
        unsigned char *got = malloc(bytes ? bytes : 1);
        if (!got || (st = pssm_tdev_fetch(&s->dev[c], set, i, got)) != PORTSSM_OK) {
            free(got);
            side_fail(s, "download", c, got ? st : PORTSSM_OK);
            return -1;
        }
        if (out) {
            out[i] = got;
            continue;
        }
        const int same = memcmp(got, s->solo[c][i], bytes) == 0;
        free(got);
        if (!same) {
            char what[160];
            snprintf(what, sizeof what, "%s differs from the same call run alone", set->t[i].name);
            side_fail(s, what, c, PORTSSM_OK);
            return -1;
        }
    }
    return 0;
}

static void *side_thread(void *arg)
{
    side *s = arg;
    for (int r = 0; r < REPEATS && !s->error[0]; r++)
        for (int c = 0; c < NCASES && !s->error[0]; c++)
            run_case(s, c, NULL);
    return NULL;
}

static int is_gpu(portssm_backend b)
{
    return b == PORTSSM_BACKEND_CUDA || b == PORTSSM_BACKEND_HIP;
}

static void side_open(side *s, portssm_backend b, int32_t device)
{
    memset(s, 0, sizeof *s);
    s->device = device;
    portssm_status st = portssm_create(&s->ctx, b, device);
    if (st != PORTSSM_OK)
        fail_msg("portssm_create(%s, %d): %s", portssm_backend_name(b), (int)device,
                 portssm_last_error(NULL));
    if (is_gpu(b)) { /* a caller's stream per context, as an application would give it */
        char why[256];
        s->v = vs_open(b, device, why, sizeof why);
        if (!s->v)
            fail_msg("device %d: the driver cannot be opened here: %s", (int)device, why);
        s->stream = vs_stream_create(s->v, why, sizeof why);
        if (!s->stream)
            fail_msg("device %d: %s", (int)device, why);
        st = portssm_set_stream(s->ctx, s->stream);
        if (st != PORTSSM_OK)
            fail_msg("device %d: portssm_set_stream: %s", (int)device, portssm_last_error(s->ctx));
    }
    for (int c = 0; c < NCASES; c++) {
        st = pssm_tdev_alloc(&s->dev[c], s->ctx, &sets[c]);
        if (st != PORTSSM_OK)
            fail_msg("device %d: tensors of case %d: %s", (int)device, c,
                     portssm_last_error(s->ctx));
    }
}

static void side_close(side *s)
{
    for (int c = 0; c < NCASES; c++) {
        for (int i = 0; i < PSSM_TSET_MAX; i++)
            free(s->solo[c][i]);
        if (s->ctx)
            pssm_tdev_free(&s->dev[c], &sets[c]);
    }
    /* the context first: portssm_destroy waits on its stream, which must still exist */
    portssm_destroy(s->ctx);
    if (s->v) {
        if (s->stream)
            vs_stream_destroy(s->v, s->stream);
        vs_close(s->v);
    }
}

static void test_two_contexts_at_once(void **state)
{
    (void)state;
    th_crash_reports();
    const portssm_backend b = portssm_get_backend(th_ctx);
    int32_t ndev = 0;
    assert_int_equal(portssm_backend_probe(b, &ndev, NULL), PORTSSM_OK);
    const int32_t dev_b = ndev >= 2 ? 1 : 0;
    print_message("%s: %d device(s): contexts on devices 0 and %d%s\n", th_backend_label, (int)ndev,
                  (int)dev_b, ndev >= 2 ? "" : " (one device: both on device 0)");
    pssm_rng r = pssm_rng_seeded(0x5eed2c0u);
    for (int c = 0; c < NCASES; c++)
        if (pssm_opcase_build(&cases[c], &sets[c], &r) != 0)
            fail_msg("case %d: out of host memory", c);

    side sides[2];
    side_open(&sides[0], b, 0);
    side_open(&sides[1], b, dev_b);
    /* alone: each context in turn, every case once */
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < NCASES; c++)
            if (run_case(&sides[k], c, sides[k].solo[c]) != 0)
                fail_msg("alone: %s", sides[k].error);
    /* the two contexts alone agree with each other where their devices are of one kind (the
     * sim's two differ: warps of 32 and of 64 sum in other orders) */
    portssm_device_info i0, i1;
    assert_int_equal(portssm_get_device_info(sides[0].ctx, &i0), PORTSSM_OK);
    assert_int_equal(portssm_get_device_info(sides[1].ctx, &i1), PORTSSM_OK);
    const int alike = strcmp(i0.name, i1.name) == 0 && strcmp(i0.arch, i1.arch) == 0 &&
                      i0.warp_size == i1.warp_size;
    for (int c = 0; c < NCASES && alike; c++)
        for (int i = 0; i < sets[c].n; i++)
            if ((sets[c].t[i].role & PSSM_OUT) && memcmp(sides[0].solo[c][i], sides[1].solo[c][i],
                                                         pssm_tspec_bytes(&sets[c].t[i])) != 0)
                fail_msg("%s of case %d: device 0 and device %d disagree", sets[c].t[i].name, c,
                         (int)dev_b);
    /* together: one thread per context */
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(pthread_create(&th[k], NULL, side_thread, &sides[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++)
        if (sides[k].error[0])
            fail_msg("together: %s", sides[k].error);
    for (int k = 0; k < 2; k++)
        side_close(&sides[k]);
    for (int c = 0; c < NCASES; c++)
        pssm_tset_release(&sets[c]);
}

/* portssm_malloc of a context allocates on its device; a stream of another device is refused
 * (INVALID_ARGUMENT, a message, the old stream kept). */
static void test_device_of_memory_and_streams(void **state)
{
    (void)state;
    const portssm_backend b = portssm_get_backend(th_ctx);
    if (!is_gpu(b))
        th_skip_test("%s: memory is host memory and streams are NULL (test_api covers them)",
                     th_backend_label);
    int32_t ndev = 0;
    assert_int_equal(portssm_backend_probe(b, &ndev, NULL), PORTSSM_OK);
    for (int32_t d = 0; d < (ndev >= 2 ? 2 : 1); d++) {
        portssm_context *ctx = NULL;
        assert_int_equal(portssm_create(&ctx, b, d), PORTSSM_OK);
        char why[256];
        vs_vendor *v = vs_open(b, d, why, sizeof why);
        if (!v)
            fail_msg("device %d: %s", (int)d, why);
        void *p = NULL;
        assert_int_equal(portssm_malloc(ctx, &p, 4096), PORTSSM_OK);
        const int owner = vs_pointer_device(v, p);
        if (owner == -2)
            print_message("%s: the driver cannot name a pointer's device here: not checked\n",
                          th_backend_label);
        else
            assert_int_equal(owner, d);
        assert_int_equal(portssm_free(ctx, p), PORTSSM_OK);
        vs_close(v);
        portssm_destroy(ctx);
    }
    if (ndev < 2) {
        print_message("%s: one device: a stream of another device cannot be made here\n",
                      th_backend_label);
        return;
    }
    portssm_context *ctx0 = NULL;
    assert_int_equal(portssm_create(&ctx0, b, 0), PORTSSM_OK);
    char why[256];
    vs_vendor *v1 = vs_open(b, 1, why, sizeof why);
    if (!v1)
        fail_msg("device 1: %s", why);
    void *s1 = vs_stream_create(v1, why, sizeof why);
    if (!s1)
        fail_msg("device 1: %s", why);
    void *before = portssm_get_stream(ctx0);
    const portssm_status st = portssm_set_stream(ctx0, s1);
    assert_int_equal(st, PORTSSM_ERR_INVALID_ARGUMENT);
    assert_true(strlen(portssm_last_error(ctx0)) > 0);
    print_message("refused: %s\n", portssm_last_error(ctx0));
    assert_ptr_equal(portssm_get_stream(ctx0), before);
    portssm_destroy(ctx0);
    vs_stream_destroy(v1, s1);
    vs_close(v1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_contexts_at_once),
        cmocka_unit_test(test_device_of_memory_and_streams),
    };
    return th_main(argc, argv, "test_contexts", tests, sizeof tests / sizeof tests[0]);
}
