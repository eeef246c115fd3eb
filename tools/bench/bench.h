/*
 * bench.h - the portssm benchmark, shared by the portssm_bench program and `portssm bench`.
 *
 * Each case is an op at a model-sized shape (the shapes of /work/shared/ANCHORS.md by default)
 * with the reference time and the portssm target beside it.  A case is timed with the context's
 * events after a warm-up, over many samples (median, min, max), rotating among input sets whose
 * total exceeds the L2 cache, and its minimal traffic (each input read once, each output
 * written once) is set against the device-to-device copy bandwidth measured in the same run.
 */
#ifndef PSSM_BENCH_H
#define PSSM_BENCH_H

#include <stdio.h>

#include "opcase.h"

/* The entry point of both programs; prog names the command in messages. */
int pssm_bench_main(const char *prog, int argc, char **argv);

/* ---------------------------------------------------------------- internals */

typedef struct pssm_bcase {
    pssm_opcase c;
    double ref_us;    /* reference time from ANCHORS.md, 0 if none        */
    double target_us; /* portssm target from ANCHORS.md, 0 if none        */
} pssm_bcase;

/* The case list: ANCHORS.md shapes (quick: tiny versions of them for cpu/sim/CI), plus with
 * sweep a conv and scan fwd sweep over L for bench/plot.py.  Returns the count; *out stays
 * valid until the next call. */
int pssm_bench_cases(int quick, int sweep, const pssm_bcase **out);

typedef struct pssm_bopts {
    int reps;            /* timed samples                                     */
    int warmup;          /* untimed runs first                                */
    double min_sample_us; /* launches are batched until a sample is this long */
    double rotate_bytes; /* input sets rotate until their total exceeds this  */
    double mem_budget;   /* bytes the input sets may take in all              */
    uint64_t seed;
    struct vs_vendor *graphs; /* non-NULL: time CUDA-graph replays on graph_stream (--graph) */
    void *graph_stream;
} pssm_bopts;

typedef struct pssm_bresult {
    const pssm_bcase *bc;
    portssm_status status; /* OK: the figures below are set                  */
    char message[384];     /* why not, when status != OK                      */
    double median_us, min_us, max_us;
    int reps, batch, sets;
    double bytes;          /* minimal bytes of one call                       */
    double exps;           /* exp evaluations of one call (scan)              */
} pssm_bresult;

/* Times one case on ctx.  scratch (scratch_bytes, may be NULL) is device memory the timer may
 * overwrite to give the host a head start over the device. */
pssm_bresult pssm_bench_case(portssm_context *ctx, const pssm_bcase *bc, const pssm_bopts *o,
                             void *scratch, size_t scratch_bytes);

/* Device-to-device copy bandwidth over `bytes` buffers, read + write counted: GB/s (median of
 * reps), or a negative value with the status in *st. */
double pssm_bench_copy_gbps(portssm_context *ctx, void *dst, const void *src, size_t bytes,
                            int reps, portssm_status *st);

/* ---------------------------------------------------------------- report */

typedef struct pssm_breport {
    const char *backend;  /* "cuda:0"                                       */
    const char *device;   /* device name                                    */
    const char *arch;
    const char *command;  /* the command line                               */
    int quick;
    double copy_gbps;     /* < 0 when not measured                          */
    double copy_bytes;
    double exp_rate;      /* exp/s for the scan bound, 0: not shown         */
    const char *timing;   /* "stream launches" or "CUDA-graph replay"       */
} pssm_breport;

/* The markdown table (with a legend of options and footnotes for failed cases). */
void pssm_bench_print_table(FILE *f, const pssm_breport *r, const pssm_bresult *res, int n);
/* The JSON document; 0, or -1 when the file cannot be written. */
int pssm_bench_write_json(const char *path, const pssm_breport *r, const pssm_bresult *res,
                          int n);

#endif /* PSSM_BENCH_H */
