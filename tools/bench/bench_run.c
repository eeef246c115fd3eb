/*
 * bench_run.c - timing one case, and the copy bandwidth it is measured against.
 *
 * Samples are intervals between consecutive events recorded back to back on the stream (one
 * sample = `batch` launches, batch chosen so a sample lasts at least min_sample_us), read only
 * after the last one: the host never waits inside the timed region, so as long as it queues
 * launches faster than the device runs them the device never idles between them.  A large
 * memset queued first gives the host that head start.  Without graph capture this is the time
 * a C caller's stream really sees, launch gaps included when a kernel is shorter than a launch.
 * With --graph each sample is one replay of a CUDA graph holding the batch of calls (the
 * rotation over input sets continues from graph to graph), as the reference timings were taken.
 */

static int gcd_int(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "vendor_stream.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void fail(pssm_bresult *r, portssm_status st, portssm_context *ctx, const char *what)
{
    r->status = st;
    snprintf(r->message, sizeof r->message, "%s: %s: %s", what, portssm_status_name(st),
             ctx ? portssm_last_error(ctx) : "");
}

/* One pass of `count` launches rotating over the sets, starting at *next. */
static portssm_status launch(const pssm_bcase *bc, const pssm_tset *s, const pssm_tdev *sets,
                             int nsets, int *next, int count)
{
    for (int i = 0; i < count; i++) {
        portssm_status st = pssm_opcase_run(&bc->c, s, &sets[*next]);
        *next = (*next + 1) % nsets;
        if (st != PORTSSM_OK)
            return st;
    }
    return PORTSSM_OK;
}

static int choose_sets(const pssm_tset *s, const pssm_bopts *o, pssm_bresult *r)
{
    double per_set = (double)pssm_tset_alloc_bytes(s);
    int want = (int)ceil(o->rotate_bytes / per_set);
    if (want < 2) /* even a set larger than L2 leaves its tail there for the next run */
        want = 2;
    if (want > 64)
        want = 64;
    int fit = (int)floor(o->mem_budget / per_set);
    if (fit < 1) {
        r->status = PORTSSM_ERR_OUT_OF_MEMORY;
        snprintf(r->message, sizeof r->message,
                 "one input set takes %.0f MB, over the benchmark's memory budget of %.0f MB",
                 per_set / 1e6, o->mem_budget / 1e6);
        return 0;
    }
    return want < fit ? want : fit;
}

pssm_bresult pssm_bench_case(portssm_context *ctx, const pssm_bcase *bc, const pssm_bopts *o,
                             void *scratch, size_t scratch_bytes)
{
    pssm_bresult r;
    memset(&r, 0, sizeof r);
    r.bc = bc;
    r.exps = pssm_opcase_exps(&bc->c);
    pssm_tset s;
    memset(&s, 0, sizeof s);
    pssm_rng rng = pssm_rng_seeded(o->seed);
    pssm_tdev *sets = NULL;
    portssm_event **ev = NULL;
    double *samples = NULL;
    void **graphs = NULL;
    int nsets = 0, nev = 0, ngraphs = 0;

    if (pssm_opcase_build(&bc->c, &s, &rng) != 0) {
        r.status = PORTSSM_ERR_OUT_OF_MEMORY;
        snprintf(r.message, sizeof r.message, "out of host memory for the inputs");
        goto done;
    }
    r.bytes = pssm_tset_min_bytes(&s);
    int want = choose_sets(&s, o, &r);
    if (!want)
        goto done;
    sets = calloc((size_t)want, sizeof *sets);
    if (!sets) {
        r.status = PORTSSM_ERR_OUT_OF_MEMORY;
        goto done;
    }
    /* the sets hold the same values at distinct addresses: the addresses defeat the cache */
    for (; nsets < want; nsets++) {
        portssm_status st = pssm_tdev_alloc(&sets[nsets], ctx, &s);
        if (st == PORTSSM_OK && (st = pssm_tdev_load(&sets[nsets], &s)) != PORTSSM_OK)
            pssm_tdev_free(&sets[nsets], &s);
        if (st == PORTSSM_OK)
            continue;
        if (nsets == 0) {
            fail(&r, st, ctx, "allocating the inputs");
            goto done;
        }
        break; /* rotate over fewer sets */
    }
    pssm_tset_release(&s); /* device copies are all that is needed now */
    r.sets = nsets;

    /* first call alone: an unsupported case or a bad launch says so before any timing */
    int next = 0;
    portssm_status st = launch(bc, &s, sets, nsets, &next, 1);
    if (st == PORTSSM_OK)
        st = portssm_synchronize(ctx);
    if (st != PORTSSM_OK) {
        r.status = st;
        snprintf(r.message, sizeof r.message, "%s", portssm_last_error(ctx));
        goto done;
    }

    /* warm-up, which also estimates one call to size the batches */
    nev = o->reps + 1;
    ev = calloc((size_t)nev, sizeof *ev);
    samples = calloc((size_t)o->reps, sizeof *samples);
    if (!ev || !samples) {
        r.status = PORTSSM_ERR_OUT_OF_MEMORY;
        goto done;
    }
    for (int i = 0; i < nev; i++)
        if ((st = portssm_event_create(ctx, &ev[i])) != PORTSSM_OK) {
            fail(&r, st, ctx, "event_create");
            goto done;
        }
    int warm = o->warmup > 1 ? o->warmup : 1;
    float ms = 0;
    if ((st = portssm_event_record(ctx, ev[0])) != PORTSSM_OK ||
        (st = launch(bc, &s, sets, nsets, &next, warm)) != PORTSSM_OK ||
        (st = portssm_event_record(ctx, ev[1])) != PORTSSM_OK ||
        (st = portssm_event_elapsed_ms(ctx, ev[0], ev[1], &ms)) != PORTSSM_OK) {
        fail(&r, st, ctx, "warm-up");
        goto done;
    }
    double one_us = 1e3 * ms / warm;
    int batch = one_us > 0 ? (int)ceil(o->min_sample_us / one_us) : 64;
    batch = batch < 1 ? 1 : batch > 64 ? 64 : batch;
    r.batch = batch;

    /* --graph: graphs of `batch` calls each, enough of them for the rotation over the input
     * sets to come round (set i * batch % nsets starts graph i) */
    if (o->graphs) {
        ngraphs = nsets / gcd_int(nsets, batch);
        graphs = calloc((size_t)ngraphs, sizeof *graphs);
        if (!graphs) {
            r.status = PORTSSM_ERR_OUT_OF_MEMORY;
            goto done;
        }
        for (int g = 0; g < ngraphs; g++) {
            if (vs_capture_begin(o->graphs, o->graph_stream) != 0) {
                r.status = PORTSSM_ERR_DEVICE;
                snprintf(r.message, sizeof r.message, "stream capture could not begin");
                goto done;
            }
            st = launch(bc, &s, sets, nsets, &next, batch);
            graphs[g] = vs_capture_end(o->graphs, o->graph_stream); /* ends it in any case */
            if (st != PORTSSM_OK || !graphs[g]) {
                r.status = st != PORTSSM_OK ? st : PORTSSM_ERR_DEVICE;
                snprintf(r.message, sizeof r.message, "capturing the calls into a graph: %s",
                         st != PORTSSM_OK ? portssm_last_error(ctx) : "no graph");
                goto done;
            }
        }
    }
    if (scratch && scratch_bytes)
        portssm_memset(ctx, scratch, 0x3c, scratch_bytes);
    if ((st = portssm_event_record(ctx, ev[0])) != PORTSSM_OK) {
        fail(&r, st, ctx, "event_record");
        goto done;
    }
    for (int i = 0; i < o->reps; i++) {
        if (graphs) {
            if (vs_graph_launch(o->graphs, graphs[i % ngraphs], o->graph_stream) != 0) {
                r.status = PORTSSM_ERR_DEVICE;
                snprintf(r.message, sizeof r.message, "graph launch failed");
                goto done;
            }
        } else if ((st = launch(bc, &s, sets, nsets, &next, batch)) != PORTSSM_OK) {
            r.status = st;
            snprintf(r.message, sizeof r.message, "%s", portssm_last_error(ctx));
            goto done;
        }
        if ((st = portssm_event_record(ctx, ev[i + 1])) != PORTSSM_OK) {
            fail(&r, st, ctx, "event_record");
            goto done;
        }
    }
    if ((st = portssm_synchronize(ctx)) != PORTSSM_OK) { /* a fault in any timed launch */
        fail(&r, st, ctx, "after the timed runs");
        goto done;
    }
    for (int i = 0; i < o->reps; i++) {
        if ((st = portssm_event_elapsed_ms(ctx, ev[i], ev[i + 1], &ms)) != PORTSSM_OK) {
            fail(&r, st, ctx, "event_elapsed_ms");
            goto done;
        }
        samples[i] = 1e3 * ms / batch;
    }
    r.reps = o->reps;
    r.min_us = r.max_us = samples[0];
    for (int i = 1; i < o->reps; i++) {
        r.min_us = fmin(r.min_us, samples[i]);
        r.max_us = fmax(r.max_us, samples[i]);
    }
    r.median_us = median_of(samples, o->reps);
    r.status = PORTSSM_OK;
done:
    for (int g = 0; graphs && g < ngraphs; g++)
        vs_graph_destroy(o->graphs, graphs[g]);
    free(graphs);
    for (int i = 0; ev && i < nev; i++)
        if (ev[i])
            portssm_event_destroy(ctx, ev[i]);
    free(ev);
    free(samples);
    for (int i = 0; i < nsets; i++)
        pssm_tdev_free(&sets[i], &s);
    free(sets);
    pssm_tset_release(&s);
    return r;
}

double pssm_bench_copy_gbps(portssm_context *ctx, void *dst, const void *src, size_t bytes,
                            int reps, portssm_status *st)
{
    portssm_event *e0 = NULL, *e1 = NULL;
    double *t = calloc((size_t)reps, sizeof *t);
    double gbps = -1;
    *st = PORTSSM_ERR_OUT_OF_MEMORY;
    if (!t)
        return -1;
    if ((*st = portssm_event_create(ctx, &e0)) != PORTSSM_OK ||
        (*st = portssm_event_create(ctx, &e1)) != PORTSSM_OK)
        goto done;
    /* one untimed copy: first touch of the pages */
    if ((*st = portssm_memcpy(ctx, dst, src, bytes, PORTSSM_DEVICE_TO_DEVICE)) != PORTSSM_OK)
        goto done;
    for (int i = 0; i < reps; i++) {
        float ms = 0;
        if ((*st = portssm_event_record(ctx, e0)) != PORTSSM_OK ||
            (*st = portssm_memcpy(ctx, dst, src, bytes, PORTSSM_DEVICE_TO_DEVICE)) !=
                PORTSSM_OK ||
            (*st = portssm_event_record(ctx, e1)) != PORTSSM_OK ||
            (*st = portssm_event_elapsed_ms(ctx, e0, e1, &ms)) != PORTSSM_OK)
            goto done;
        t[i] = 1e-3 * ms;
    }
    double sec = median_of(t, reps);
    gbps = sec > 0 ? 2.0 * (double)bytes / sec / 1e9 : -1;
done:
    if (e0)
        portssm_event_destroy(ctx, e0);
    if (e1)
        portssm_event_destroy(ctx, e1);
    free(t);
    return gbps;
}
