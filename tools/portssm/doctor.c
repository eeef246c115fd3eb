/*
 * doctor.c - `portssm doctor`: info, the device self-test, then every op at a small random shape
 * with many options on, on the chosen backend and on the cpu oracle, compared with the design's
 * tolerances.  One line per case; UNSUPPORTED is reported, not a failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "opcase.h"
#include "tool.h"
#include "tset.h"

typedef enum verdict { V_PASS, V_FAIL, V_UNSUPPORTED } verdict;

#define C_OPTS_CONV (PSSM_O_BIAS | PSSM_O_SILU)
#define C_OPTS_SCAN (PSSM_O_DSKIP | PSSM_O_Z | PSSM_O_DELTA_BIAS | PSSM_O_SOFTPLUS)

/* Small enough for the sim backend, odd enough to cross block and chunk edges (L 300). */
static const pssm_opcase cases[] = {
    {.op = PSSM_OP_CONV1D_FWD, .dtype = PORTSSM_F32, .B = 2, .D = 64, .L = 300, .W = 4,
     .opts = C_OPTS_CONV | PSSM_O_W_F32 | PSSM_O_STATES | PSSM_O_SEQ_IDX},
    {.op = PSSM_OP_CONV1D_FWD, .dtype = PORTSSM_BF16, .B = 2, .D = 64, .L = 300, .W = 4,
     .opts = C_OPTS_CONV | PSSM_O_STATES | PSSM_O_CHANNEL_LAST},
    {.op = PSSM_OP_CONV1D_FWD, .dtype = PORTSSM_F16, .B = 2, .D = 64, .L = 300, .W = 3,
     .opts = PSSM_O_BIAS | PSSM_O_W_F32},
    {.op = PSSM_OP_CONV1D_BWD, .dtype = PORTSSM_F32, .B = 2, .D = 64, .L = 300, .W = 4,
     .opts = C_OPTS_CONV | PSSM_O_W_F32 | PSSM_O_STATES | PSSM_O_SEQ_IDX},
    {.op = PSSM_OP_CONV1D_BWD, .dtype = PORTSSM_BF16, .B = 2, .D = 64, .L = 300, .W = 4,
     .opts = C_OPTS_CONV | PSSM_O_STATES | PSSM_O_CHANNEL_LAST},
    {.op = PSSM_OP_CONV1D_UPDATE, .dtype = PORTSSM_BF16, .B = 3, .D = 64, .W = 4,
     .opts = C_OPTS_CONV | PSSM_O_INDICES},
    {.op = PSSM_OP_CONV1D_UPDATE, .dtype = PORTSSM_F32, .B = 3, .D = 64, .W = 4, .T = 3,
     .S = 8, .opts = C_OPTS_CONV | PSSM_O_W_F32 | PSSM_O_RING | PSSM_O_INDICES},
    {.op = PSSM_OP_SCAN_FWD, .dtype = PORTSSM_BF16, .B = 2, .D = 64, .L = 300, .N = 16, .G = 2,
     .opts = C_OPTS_SCAN | PSSM_O_VAR_BC},
    {.op = PSSM_OP_SCAN_FWD, .dtype = PORTSSM_F32, .B = 2, .D = 64, .L = 300, .N = 16,
     .opts = C_OPTS_SCAN | PSSM_O_STATES},
    {.op = PSSM_OP_SCAN_FWD, .dtype = PORTSSM_F16, .B = 2, .D = 32, .L = 300, .N = 64,
     .opts = C_OPTS_SCAN | PSSM_O_VAR_BC | PSSM_O_STATES},
    {.op = PSSM_OP_SCAN_BWD, .dtype = PORTSSM_BF16, .B = 2, .D = 64, .L = 300, .N = 16, .G = 2,
     .opts = C_OPTS_SCAN | PSSM_O_VAR_BC},
    {.op = PSSM_OP_SCAN_BWD, .dtype = PORTSSM_F32, .B = 2, .D = 64, .L = 300, .N = 16,
     .opts = C_OPTS_SCAN | PSSM_O_STATES},
    {.op = PSSM_OP_STATE_UPDATE, .dtype = PORTSSM_BF16, .B = 3, .D = 64, .N = 16,
     .opts = C_OPTS_SCAN | PSSM_O_INDICES},
    {.op = PSSM_OP_STATE_UPDATE, .dtype = PORTSSM_BF16, .B = 3, .H = 4, .P = 16, .N = 32,
     .G = 2, .opts = PSSM_O_HEADS | PSSM_O_TIED | C_OPTS_SCAN | PSSM_O_INDICES},
    {.op = PSSM_OP_STATE_UPDATE, .dtype = PORTSSM_F32, .B = 2, .H = 4, .P = 16, .N = 16,
     .opts = PSSM_O_HEADS | PSSM_O_DSKIP | PSSM_O_DELTA_BIAS},
    {.op = PSSM_OP_SSD_FWD, .dtype = PORTSSM_BF16, .B = 2, .L = 300, .H = 4, .P = 16, .N = 32,
     .G = 2, .opts = C_OPTS_SCAN | PSSM_O_D_PER_HEAD | PSSM_O_STATES | PSSM_O_SEQ_IDX},
    {.op = PSSM_OP_SSD_BWD, .dtype = PORTSSM_BF16, .B = 2, .L = 300, .H = 4, .P = 16, .N = 32,
     .G = 2, .opts = C_OPTS_SCAN | PSSM_O_STATES | PSSM_O_SEQ_IDX},
    {.op = PSSM_OP_SSD_BWD, .dtype = PORTSSM_F32, .B = 1, .L = 200, .H = 2, .P = 64, .N = 128,
     .opts = PSSM_O_DSKIP | PSSM_O_D_PER_HEAD | PSSM_O_DELTA_BIAS | PSSM_O_SOFTPLUS},
    /* the norms: Mamba-1's prenorm RMSNorm (residual in f32), a LayerNorm with bias, and
     * Mamba-2's gated RMSNorm over groups */
    {.op = PSSM_OP_NORM_FWD, .dtype = PORTSSM_BF16, .B = 2, .L = 37, .D = 520,
     .opts = PSSM_O_RMS | PSSM_O_RESIDUAL | PSSM_O_RES_F32 | PSSM_O_W_F32},
    {.op = PSSM_OP_NORM_FWD, .dtype = PORTSSM_F16, .B = 2, .L = 37, .D = 520,
     .opts = PSSM_O_BIAS | PSSM_O_RESIDUAL},
    {.op = PSSM_OP_NORM_FWD, .dtype = PORTSSM_F32, .B = 2, .L = 37, .D = 256, .G = 4,
     .opts = PSSM_O_RMS | PSSM_O_Z},
    {.op = PSSM_OP_NORM_BWD, .dtype = PORTSSM_BF16, .B = 2, .L = 37, .D = 520,
     .opts = PSSM_O_RMS | PSSM_O_RESIDUAL | PSSM_O_RES_F32 | PSSM_O_W_F32},
    {.op = PSSM_OP_NORM_BWD, .dtype = PORTSSM_F32, .B = 2, .L = 37, .D = 520,
     .opts = PSSM_O_BIAS | PSSM_O_RESIDUAL | PSSM_O_Z | PSSM_O_NORM_BEFORE_GATE},
    {.op = PSSM_OP_NORM_BWD, .dtype = PORTSSM_BF16, .B = 2, .L = 37, .D = 256, .G = 4,
     .opts = PSSM_O_RMS | PSSM_O_Z | PSSM_O_W_F32},
};

typedef struct outcome {
    verdict v;
    char what[512];      /* the failing tensor / status and message                */
    double norm_err, max_abs, max_rel, ms;
    pssm_tol tol;        /* of the worst output                                    */
    int compared;        /* the error figures above are set                         */
} outcome;

/* Compares every output and in/out tensor of the two instances; keeps the worst. */
static void compare_outputs(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *got,
                            const pssm_tdev *ref, outcome *o)
{
    o->v = V_PASS;
    o->compared = 1;
    o->tol = pssm_tol_for(c->dtype);
    for (int i = 0; i < s->n; i++) {
        const pssm_tspec *t = &s->t[i];
        if (t->role == PSSM_IN)
            continue;
        size_t bytes = pssm_tspec_bytes(t);
        void *a = malloc(bytes), *b = malloc(bytes);
        portssm_status sa = PORTSSM_ERR_OUT_OF_MEMORY, sb = PORTSSM_ERR_OUT_OF_MEMORY;
        if (a && b) {
            sa = pssm_tdev_fetch(got, s, i, a);
            sb = pssm_tdev_fetch(ref, s, i, b);
        }
        if (sa != PORTSSM_OK || sb != PORTSSM_OK) {
            o->v = V_FAIL;
            snprintf(o->what, sizeof o->what, "download of %s: %s", t->name,
                     portssm_status_name(sa != PORTSSM_OK ? sa : sb));
            free(a);
            free(b);
            return;
        }
        /* a gradient or state in F32 of a bf16 call inherits the call's tolerance */
        pssm_tol tol = pssm_tol_max(pssm_tol_for(t->dtype), pssm_tol_for(c->dtype));
        pssm_cmp r = pssm_compare(t->dtype, a, b, t->span, tol);
        if (!(r.norm_err <= o->norm_err))
            o->norm_err = r.norm_err;
        if (!(r.max_abs <= o->max_abs))
            o->max_abs = r.max_abs;
        if (!(r.max_rel <= o->max_rel)) {
            o->max_rel = r.max_rel;
            o->tol = tol;
        }
        if (!r.pass && o->v == V_PASS) {
            o->v = V_FAIL;
            o->tol = tol;
            if (r.first_bad >= 0)
                snprintf(o->what, sizeof o->what,
                         "%s: %lld of %lld elements outside tolerance; first at flat %lld: "
                         "got %.7g, oracle %.7g",
                         t->name, (long long)r.bad, (long long)r.n, (long long)r.first_bad,
                         pssm_tool_get(t->dtype, a, r.first_bad),
                         pssm_tool_get(t->dtype, b, r.first_bad));
            else
                snprintf(o->what, sizeof o->what, "%s: normalised error %.2e above %.2e",
                         t->name, r.norm_err, tol.rtol * tol.rtol);
        }
        free(a);
        free(b);
    }
}

/* Runs the op once on ctx, timed with the context's events (ms < 0 when timing failed). */
static portssm_status run_timed(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d,
                                double *ms)
{
    portssm_event *e0 = NULL, *e1 = NULL;
    *ms = -1;
    int timed = portssm_event_create(d->ctx, &e0) == PORTSSM_OK &&
                portssm_event_create(d->ctx, &e1) == PORTSSM_OK &&
                portssm_event_record(d->ctx, e0) == PORTSSM_OK;
    portssm_status st = pssm_opcase_run(c, s, d);
    if (st == PORTSSM_OK)
        st = portssm_synchronize(d->ctx); /* asynchronous faults show here */
    float f = 0;
    if (st == PORTSSM_OK && timed && portssm_event_record(d->ctx, e1) == PORTSSM_OK &&
        portssm_event_elapsed_ms(d->ctx, e0, e1, &f) == PORTSSM_OK)
        *ms = f;
    if (e0)
        portssm_event_destroy(d->ctx, e0);
    if (e1)
        portssm_event_destroy(d->ctx, e1);
    return st;
}

static outcome check_case(portssm_context *ctx, portssm_context *oracle, const pssm_opcase *c,
                          uint64_t seed)
{
    outcome o;
    memset(&o, 0, sizeof o);
    o.ms = -1;
    pssm_tset s;
    memset(&s, 0, sizeof s);
    pssm_rng r = pssm_rng_seeded(seed);
    pssm_tdev dt, dr;
    memset(&dt, 0, sizeof dt);
    memset(&dr, 0, sizeof dr);
    portssm_status st;
    o.v = V_FAIL;
    if (pssm_opcase_build(c, &s, &r) != 0) {
        snprintf(o.what, sizeof o.what, "out of host memory");
        goto done;
    }
    if ((st = pssm_tdev_alloc(&dt, ctx, &s)) != PORTSSM_OK ||
        (st = pssm_tdev_load(&dt, &s)) != PORTSSM_OK) {
        snprintf(o.what, sizeof o.what, "setup on the backend: %s: %s", portssm_status_name(st),
                 portssm_last_error(ctx));
        goto done;
    }
    if ((st = pssm_tdev_alloc(&dr, oracle, &s)) != PORTSSM_OK ||
        (st = pssm_tdev_load(&dr, &s)) != PORTSSM_OK) {
        snprintf(o.what, sizeof o.what, "setup on the oracle: %s: %s", portssm_status_name(st),
                 portssm_last_error(oracle));
        goto done;
    }
    st = run_timed(c, &s, &dt, &o.ms);
    if (st == PORTSSM_ERR_UNSUPPORTED) {
        o.v = V_UNSUPPORTED;
        snprintf(o.what, sizeof o.what, "%s", portssm_last_error(ctx));
        goto done;
    }
    if (st != PORTSSM_OK) {
        snprintf(o.what, sizeof o.what, "%s: %s", portssm_status_name(st),
                 portssm_last_error(ctx));
        goto done;
    }
    st = pssm_opcase_run(c, &s, &dr);
    if (st != PORTSSM_OK) {
        snprintf(o.what, sizeof o.what, "the cpu oracle failed: %s: %s",
                 portssm_status_name(st), portssm_last_error(oracle));
        goto done;
    }
    compare_outputs(c, &s, &dt, &dr, &o);
done:
    pssm_tdev_free(&dt, &s);
    pssm_tdev_free(&dr, &s);
    pssm_tset_release(&s);
    return o;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s doctor [--backend B] [--seed N]\n"
            "\n"
            "Prints `%s info`, runs the device self-test, then runs every op at a small random\n"
            "shape with many options on, on backend B (default auto) and on the cpu oracle, and\n"
            "compares: normalised error sum((a-b)^2)/sum(b^2) and per element\n"
            "|a-b| <= atol + rtol*|b| with f32 6e-4/2e-3, f16 3e-3/5e-3, bf16 3e-2/5e-2.\n"
            "One line per op: PASS, FAIL or UNSUPPORTED (not a failure).\n"
            "\n"
            "  --backend B  %s\n"
            "  --seed N     the inputs' seed (default: from the clock; printed)\n"
            "\n"
            "Exit status: 0 when nothing failed, 1 on any FAIL or error, 2 on a usage error.\n",
            prog, prog, PSSM_TOOL_BACKEND_LABELS);
}

static const char *verdict_name(verdict v)
{
    return v == V_PASS ? "PASS" : v == V_FAIL ? "FAIL" : "UNSUPPORTED";
}

int pssm_cli_doctor(const char *prog, int argc, char **argv)
{
    const char *label = "auto";
    uint64_t seed = pssm_tool_clock_seed();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout, prog);
            return 0;
        } else if ((strcmp(a, "--backend") == 0 || strcmp(a, "--seed") == 0) && i + 1 >= argc) {
            fprintf(stderr, "%s doctor: %s needs a value\n", prog, a);
            return 2;
        } else if (strcmp(a, "--backend") == 0)
            label = argv[++i];
        else if (strncmp(a, "--backend=", 10) == 0)
            label = a + 10;
        else if (strcmp(a, "--seed") == 0 || strncmp(a, "--seed=", 7) == 0) {
            const char *v = a[6] == '=' ? a + 7 : argv[++i];
            char *end = NULL;
            seed = strtoull(v, &end, 0);
            if (!*v || *end) {
                fprintf(stderr, "%s doctor: --seed needs a number, got '%s'\n", prog, v);
                return 2;
            }
        } else {
            fprintf(stderr, "%s doctor: unknown argument '%s'\nTry '%s doctor --help'.\n", prog,
                    a, prog);
            return 2;
        }
    }
    portssm_backend b;
    int32_t dev;
    if (!pssm_tool_parse_backend(label, &b, &dev)) {
        fprintf(stderr, "%s doctor: unknown backend '%s' (expected one of %s)\n", prog, label,
                PSSM_TOOL_BACKEND_LABELS);
        return 2;
    }

    int failed = 0;
    if (pssm_cli_print_info(stdout) != 0)
        failed++;
    printf("\n");
    fflush(stdout);
    portssm_context *ctx = pssm_tool_open(prog, label);
    if (!ctx)
        return 1;
    portssm_context *oracle = pssm_tool_open(prog, "cpu");
    if (!oracle) {
        portssm_destroy(ctx);
        return 1;
    }
    char clabel[32];
    pssm_tool_ctx_label(ctx, clabel, sizeof clabel);
    portssm_device_info di;
    memset(&di, 0, sizeof di);
    portssm_get_device_info(ctx, &di);
    printf("doctor: backend %s (%s), seed %llu (--seed repeats it)\n", clabel, di.name,
           (unsigned long long)seed);
    if (portssm_get_backend(ctx) == PORTSSM_BACKEND_CPU)
        printf("note: the backend is the oracle itself; this checks only that it runs and is "
               "deterministic\n");

    portssm_status st = portssm_device_selftest(ctx);
    if (st == PORTSSM_OK)
        printf("self-test: PASS\n");
    else if (st == PORTSSM_ERR_UNSUPPORTED)
        printf("self-test: n/a (%s)\n", portssm_last_error(ctx));
    else {
        printf("self-test: FAIL: %s: %s\n", portssm_status_name(st), portssm_last_error(ctx));
        failed++;
    }
    printf("\n%-11s %-23s %-5s %-24s %-9s %-9s %-9s %-10s %s\n", "result", "op", "dtype", "shape",
           "norm err", "max abs", "max rel", "ms", "options / tolerance / message");
    fflush(stdout);

    int npass = 0, nfail = 0, nunsup = 0;
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    const int tty = isatty(fileno(stderr));
    for (int k = 0; k < ncases; k++) {
        const pssm_opcase *c = &cases[k];
        char shape[64], opts[160];
        pssm_opcase_shape(c, shape, sizeof shape);
        pssm_opcase_options(c, opts, sizeof opts);
        /* on a terminal, what runs now (the sim backend takes seconds per case); a log gets
         * the result lines, one per case as it ends */
        if (tty) {
            fprintf(stderr, "doctor: [%d/%d] %s %s %s ...\r", k + 1, ncases,
                    pssm_op_name(c->op), portssm_dtype_name(c->dtype), shape);
            fflush(stderr);
        }
        outcome o = check_case(ctx, oracle, c, seed + 7919u * (uint64_t)k);
        if (tty)
            fprintf(stderr, "%*s\r", 78, "");
        char ms[32] = "-";
        if (o.ms >= 0)
            snprintf(ms, sizeof ms, "%.3f", o.ms);
        printf("%-11s %-23s %-5s %-24s ", verdict_name(o.v), pssm_op_name(c->op),
               portssm_dtype_name(c->dtype), shape);
        if (!o.compared)
            printf("%-9s %-9s %-9s %-10s [%s] %s\n", "-", "-", "-", ms, opts, o.what);
        else {
            printf("%-9.2e %-9.2e %-9.2e %-10s [%s] tol %.0e+%.0e|ref|%s%s\n", o.norm_err,
                   o.max_abs, o.max_rel, ms, opts, o.tol.atol, o.tol.rtol, o.what[0] ? "; " : "",
                   o.what);
        }
        fflush(stdout);
        npass += o.v == V_PASS;
        nfail += o.v == V_FAIL;
        nunsup += o.v == V_UNSUPPORTED;
    }
    printf("\ndoctor: %d passed, %d failed, %d unsupported on %s\n", npass, nfail, nunsup, clabel);
    portssm_destroy(oracle);
    portssm_destroy(ctx);
    return failed || nfail ? 1 : 0;
}
