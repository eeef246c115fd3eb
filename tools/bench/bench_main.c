/* bench_main.c - options, the case loop and the outputs of the benchmark. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tool.h"
#include "vendor_stream.h"

#define MAX_FILTERS 16
#define H200_EXP_RATE 4.1e12 /* MUFU.EX2, measured (ANCHORS.md) */

typedef struct cli {
    const char *backend, *json;
    const char *filter[MAX_FILTERS];
    int nfilter, quick, full, sweep, list, reps, warmup, graph;
    double exp_rate, l2_mb, copy_mb;
    uint64_t seed;
} cli;

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [options]\n"
            "\n"
            "Times each op at the model-sized shapes of ANCHORS.md (B4 D4096 W4 N16 unless\n"
            "stated; decode at B64; Mamba-2 decode B1/B64/B256 H80 P64 N128; the SSD B4\n"
            "H80 or H24 P64 N128) with the context's events: warm-up, then the median (and\n"
            "min, max) of many samples, rotating among input sets larger together than the\n"
            "L2 cache.  Prints a markdown table with the reference time and target beside\n"
            "each case; --json writes the same as JSON.\n"
            "\n"
            "  --backend B    %s (default auto)\n"
            "  --filter S     only cases whose \"op dtype shape\" contains S (repeatable: any)\n"
            "  --quick        tiny shapes (cpu, sim, CI smoke); the default on cpu and sim\n"
            "  --full         the model-sized shapes even on cpu/sim (hours)\n"
            "  --sweep        add conv1d/scan fwd bf16 at more lengths (512..16k) for plot.py\n"
            "  --reps N       timed samples per case (default 100; quick 5)\n"
            "  --warmup N     untimed calls first (default 10; quick 1)\n"
            "  --json FILE    write the results as JSON\n"
            "  --graph        cuda: time CUDA-graph replays of each sample's batch of calls (on\n"
            "                 a stream of the bench's own), as the reference timings were taken;\n"
            "                 without it the launch gaps a C caller sees are included\n"
            "  --exp-rate R   exp/s for the scan's exp bound (default %.2g on GPUs, the H200's\n"
            "                 measured rate; 0 hides it)\n"
            "  --l2-mb M      inputs rotate until they exceed 4 x M MB (default 60, the H200)\n"
            "  --copy-mb M    size of the copy-bandwidth buffers (default 1024 on GPUs, else 64)\n"
            "  --seed N       input seed (default 1)\n"
            "  --list         print the cases and exit\n"
            "\n"
            "min MB counts each input read once and each output written once (in/out states\n"
            "twice, broadcast elements once, fwd+bwd both passes); GB/s = min MB / median;\n"
            "%% copy = GB/s over the device-to-device copy bandwidth measured in the same run.\n"
            "A case whose op fails prints UNSUPPORTED or FAILED with the message, never a time.\n"
            "Exit status: 0 unless a case FAILED (1) or the usage was wrong (2).\n",
            prog, PSSM_TOOL_BACKEND_LABELS, H200_EXP_RATE);
}

/* 1 parsed, 0 usage error (reported). */
static int parse(const char *prog, int argc, char **argv, cli *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        char name[32];
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), a);
        int takes = strcmp(name, "--backend") == 0 || strcmp(name, "--filter") == 0 ||
                    strcmp(name, "--reps") == 0 || strcmp(name, "--warmup") == 0 ||
                    strcmp(name, "--json") == 0 || strcmp(name, "--exp-rate") == 0 ||
                    strcmp(name, "--l2-mb") == 0 || strcmp(name, "--copy-mb") == 0 ||
                    strcmp(name, "--seed") == 0;
        const char *v = NULL;
        if (takes) {
            if (eq)
                v = eq + 1;
            else if (i + 1 < argc)
                v = argv[++i];
            else {
                fprintf(stderr, "%s: %s needs a value\n", prog, name);
                return 0;
            }
        } else if (eq) {
            fprintf(stderr, "%s: %s takes no value\n", prog, name);
            return 0;
        }
        char *end = NULL;
        if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) {
            usage(stdout, prog);
            exit(0);
        } else if (strcmp(name, "--backend") == 0)
            o->backend = v;
        else if (strcmp(name, "--json") == 0)
            o->json = v;
        else if (strcmp(name, "--filter") == 0) {
            if (o->nfilter == MAX_FILTERS) {
                fprintf(stderr, "%s: at most %d --filter\n", prog, MAX_FILTERS);
                return 0;
            }
            o->filter[o->nfilter++] = v;
        } else if (strcmp(name, "--quick") == 0)
            o->quick = 1;
        else if (strcmp(name, "--full") == 0)
            o->full = 1;
        else if (strcmp(name, "--sweep") == 0)
            o->sweep = 1;
        else if (strcmp(name, "--list") == 0)
            o->list = 1;
        else if (strcmp(name, "--graph") == 0)
            o->graph = 1;
        else if (strcmp(name, "--reps") == 0 || strcmp(name, "--warmup") == 0) {
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < (name[2] == 'r' ? 1 : 0) || n > 100000) {
                fprintf(stderr, "%s: %s needs a whole number, got '%s'\n", prog, name, v);
                return 0;
            }
            *(name[2] == 'r' ? &o->reps : &o->warmup) = (int)n;
        } else if (strcmp(name, "--exp-rate") == 0 || strcmp(name, "--l2-mb") == 0 ||
                   strcmp(name, "--copy-mb") == 0) {
            double x = strtod(v, &end);
            if (!*v || *end || x < 0) {
                fprintf(stderr, "%s: %s needs a non-negative number, got '%s'\n", prog, name, v);
                return 0;
            }
            *(name[2] == 'e' ? &o->exp_rate : name[2] == 'l' ? &o->l2_mb : &o->copy_mb) = x;
        } else if (strcmp(name, "--seed") == 0) {
            o->seed = strtoull(v, &end, 0);
            if (!*v || *end) {
                fprintf(stderr, "%s: --seed needs a number, got '%s'\n", prog, v);
                return 0;
            }
        } else {
            fprintf(stderr, "%s: unknown argument '%s'\nTry '%s --help'.\n", prog, a, prog);
            return 0;
        }
    }
    if (o->quick && o->full) {
        fprintf(stderr, "%s: --quick and --full exclude each other\n", prog);
        return 0;
    }
    return 1;
}

static int selected(const cli *o, const pssm_bcase *bc)
{
    if (o->nfilter == 0)
        return 1;
    char shape[64], key[160];
    pssm_opcase_shape(&bc->c, shape, sizeof shape);
    snprintf(key, sizeof key, "%s %s %s", pssm_op_name(bc->c.op),
             portssm_dtype_name(bc->c.dtype), shape);
    for (int i = 0; i < o->nfilter; i++)
        if (strstr(key, o->filter[i]))
            return 1;
    return 0;
}

static void join_args(char *buf, size_t n, const char *prog, int argc, char **argv)
{
    size_t len = (size_t)snprintf(buf, n, "%s", prog);
    for (int i = 1; i < argc && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, " %s", argv[i]);
}

int pssm_bench_main(const char *prog, int argc, char **argv)
{
    cli o;
    memset(&o, 0, sizeof o);
    o.backend = "auto";
    o.reps = -1;
    o.warmup = -1;
    o.exp_rate = -1;
    o.l2_mb = 60;
    o.copy_mb = -1;
    o.seed = 1;
    if (!parse(prog, argc, argv, &o))
        return 2;
    portssm_backend want;
    int32_t dev;
    if (!pssm_tool_parse_backend(o.backend, &want, &dev)) {
        fprintf(stderr, "%s: unknown backend '%s' (expected one of %s)\n", prog, o.backend,
                PSSM_TOOL_BACKEND_LABELS);
        return 2;
    }

    if (o.list) { /* no context needed; the shapes of a cpu/sim run need --quick */
        const pssm_bcase *cases;
        int n = pssm_bench_cases(o.quick, o.sweep, &cases);
        for (int i = 0; i < n; i++) {
            if (!selected(&o, &cases[i]))
                continue;
            char shape[64], opts[160];
            pssm_opcase_shape(&cases[i].c, shape, sizeof shape);
            pssm_opcase_options(&cases[i].c, opts, sizeof opts);
            printf("%-23s %-5s %-20s %s\n", pssm_op_name(cases[i].c.op),
                   portssm_dtype_name(cases[i].c.dtype), shape, opts);
        }
        return 0;
    }

    portssm_context *ctx = pssm_tool_open(prog, o.backend);
    if (!ctx)
        return 1;
    portssm_backend b = portssm_get_backend(ctx);
    int gpu = b == PORTSSM_BACKEND_CUDA || b == PORTSSM_BACKEND_HIP;
    char label[32];
    pssm_tool_ctx_label(ctx, label, sizeof label);
    portssm_device_info di;
    memset(&di, 0, sizeof di);
    portssm_get_device_info(ctx, &di);

    int quick = o.quick || (!gpu && !o.full);
    if (quick && !o.quick)
        fprintf(stderr, "%s: %s runs on the host: using the --quick shapes (the full shapes "
                        "would take hours; --full forces them)\n", prog, label);
    pssm_bopts bo;
    bo.reps = o.reps > 0 ? o.reps : quick ? 5 : 100;
    bo.warmup = o.warmup >= 0 ? o.warmup : quick ? 1 : 10;
    bo.min_sample_us = gpu ? 50 : 0;
    bo.rotate_bytes = 4 * o.l2_mb * 1e6;
    double mem = di.total_memory ? (double)di.total_memory : 4e9;
    bo.mem_budget = gpu ? 0.4 * mem : (mem / 8 < 2e9 ? mem / 8 : 2e9);
    bo.seed = o.seed;
    bo.graphs = NULL;
    bo.graph_stream = NULL;
    if (o.graph) { /* the ops go to a stream of our own, which can be captured */
        char why[256] = "graph replay needs the cuda backend";
        void *stream = NULL;
        vs_vendor *v = b == PORTSSM_BACKEND_CUDA
                           ? vs_open(b, portssm_get_device(ctx), why, sizeof why)
                           : NULL;
        if (v)
            stream = vs_stream_create(v, why, sizeof why);
        if (v && !vs_has_graphs(v))
            snprintf(why, sizeof why, "the CUDA driver has no stream capture (needs CUDA 11.4+)");
        else if (stream && portssm_set_stream(ctx, stream) != PORTSSM_OK)
            snprintf(why, sizeof why, "set_stream: %s", portssm_last_error(ctx));
        if (!stream || !vs_has_graphs(v) || portssm_get_stream(ctx) != stream) {
            fprintf(stderr, "%s: --graph: %s\n", prog, why);
            vs_stream_destroy(v, stream);
            vs_close(v);
            portssm_destroy(ctx);
            return 1;
        }
        bo.graphs = v;
        bo.graph_stream = stream;
    }
    double exp_rate = o.exp_rate >= 0 ? o.exp_rate : gpu ? H200_EXP_RATE : 0;

    /* the copy ceiling of this run; its destination doubles as the timer's head-start buffer */
    double copy_mb = o.copy_mb >= 0 ? o.copy_mb : gpu ? 1024 : 64;
    if (gpu && copy_mb * 1e6 * 16 > mem)
        copy_mb = mem / 16 / 1e6;
    size_t copy_bytes = (size_t)(copy_mb * 1e6) / 256 * 256;
    void *src = NULL, *dst = NULL;
    double copy_gbps = -1;
    if (copy_bytes && portssm_malloc(ctx, &src, copy_bytes) == PORTSSM_OK &&
        portssm_malloc(ctx, &dst, copy_bytes) == PORTSSM_OK) {
        portssm_status st = portssm_memset(ctx, src, 0x5a, copy_bytes);
        if (st == PORTSSM_OK)
            copy_gbps = pssm_bench_copy_gbps(ctx, dst, src, copy_bytes, quick ? 5 : 20, &st);
        if (st != PORTSSM_OK)
            fprintf(stderr, "%s: copy bandwidth not measured: %s: %s\n", prog,
                    portssm_status_name(st), portssm_last_error(ctx));
        else
            fprintf(stderr, "%s: copy bandwidth %.0f GB/s (read + write, %.0f MB buffers)\n",
                    prog, copy_gbps, copy_bytes / 1e6);
    } else
        fprintf(stderr, "%s: copy bandwidth not measured: no memory for 2 x %.0f MB\n", prog,
                copy_bytes / 1e6);
    portssm_free(ctx, src);

    const pssm_bcase *cases;
    int ncases = pssm_bench_cases(quick, o.sweep, &cases), nsel = 0, k = 0, failed = 0;
    for (int i = 0; i < ncases; i++)
        nsel += selected(&o, &cases[i]);
    pssm_bresult *res = calloc((size_t)(nsel ? nsel : 1), sizeof *res);
    if (!res) {
        portssm_destroy(ctx);
        return 1;
    }
    for (int i = 0; i < ncases; i++) {
        if (!selected(&o, &cases[i]))
            continue;
        char shape[64];
        pssm_opcase_shape(&cases[i].c, shape, sizeof shape);
        fprintf(stderr, "%s: [%d/%d] %s %s %s ... ", prog, k + 1, nsel,
                pssm_op_name(cases[i].c.op), portssm_dtype_name(cases[i].c.dtype), shape);
        fflush(stderr);
        double t0 = pssm_tool_now();
        res[k] = pssm_bench_case(ctx, &cases[i], &bo, dst, dst ? copy_bytes : 0);
        if (res[k].status == PORTSSM_OK)
            fprintf(stderr, "%.2f us (median of %d x %d, %d input sets; %.1f s)\n",
                    res[k].median_us, res[k].reps, res[k].batch, res[k].sets,
                    pssm_tool_now() - t0);
        else
            fprintf(stderr, "%s: %s\n", portssm_status_name(res[k].status), res[k].message);
        failed += res[k].status != PORTSSM_OK && res[k].status != PORTSSM_ERR_UNSUPPORTED;
        k++;
    }
    portssm_free(ctx, dst);

    char command[1024];
    join_args(command, sizeof command, prog, argc, argv);
    pssm_breport rep = {label,     di.name,   di.arch,
                        command,   quick,     copy_gbps,
                        (double)copy_bytes, exp_rate,
                        bo.graphs ? "CUDA-graph replay" : "stream launches"};
    pssm_bench_print_table(stdout, &rep, res, k);
    fflush(stdout);
    int rc = failed ? 1 : 0;
    if (o.json) {
        if (pssm_bench_write_json(o.json, &rep, res, k) != 0) {
            fprintf(stderr, "%s: cannot write %s\n", prog, o.json);
            rc = 1;
        } else
            fprintf(stderr, "%s: wrote %s\n", prog, o.json);
    }
    free(res);
    portssm_destroy(ctx); /* before the stream it uses */
    if (bo.graphs) {
        vs_stream_destroy(bo.graphs, bo.graph_stream);
        vs_close(bo.graphs);
    }
    return rc;
}
