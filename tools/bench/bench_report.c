/* bench_report.c - the markdown table and the JSON file of a benchmark run. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define BYTES_RULE                                                                             \
    "each input read once + each output written once; in/out states counted twice; "          \
    "broadcast (stride-0) elements once; fwd+bwd: the sum of both passes"

static double gbps_of(const pssm_bresult *r) { return r->bytes / (r->median_us * 1e-6) / 1e9; }

/* ---------------------------------------------------------------- markdown */

/* A positive figure with about three significant digits (never fewer than `digits` decimals
 * dropped for large values); "-" when absent. */
static void cell_num(char *buf, size_t n, double v, int digits)
{
    if (!(v > 0))
        snprintf(buf, n, "-");
    else if (v >= 100 || digits == 0)
        snprintf(buf, n, "%.*f", v >= 100 ? 0 : digits, v);
    else
        snprintf(buf, n, "%.3g", v);
}

void pssm_bench_print_table(FILE *f, const pssm_breport *rep, const pssm_bresult *res, int n)
{
    fprintf(f, "\n## portssm bench: %s, %s (%s), portssm %s%s\n\n", rep->backend, rep->device,
            rep->arch, portssm_version_string(), rep->quick ? ", quick shapes" : "");
    fprintf(f, "command: `%s`\n\n", rep->command);
    fprintf(f, "timing: %s\n", rep->timing ? rep->timing : "stream launches");
    if (rep->copy_gbps > 0)
        fprintf(f, "copy bandwidth (device to device, read + write): %.0f GB/s over %.0f MB\n",
                rep->copy_gbps, rep->copy_bytes / 1e6);
    else
        fprintf(f, "copy bandwidth: not measured\n");
    if (rep->exp_rate > 0)
        fprintf(f, "scan exp bound: one exp per (b,d,t,n) per pass at %.3g exp/s\n",
                rep->exp_rate);
    fprintf(f, "min MB: %s\n\n", BYTES_RULE);
    fprintf(f, "| op | dtype | shape | median us | min-max us | min MB | GB/s | %% copy "
               "| exp bound us | ref us | target us | ref / median |\n");
    fprintf(f, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int note = 0;
    for (int i = 0; i < n; i++) {
        const pssm_bresult *r = &res[i];
        const pssm_opcase *c = &r->bc->c;
        char shape[64], med[64], range[48], mb[32], gb[32], pct[32], eb[32], ref[32], tgt[32],
            spd[32];
        pssm_opcase_shape(c, shape, sizeof shape);
        cell_num(mb, sizeof mb, r->bytes / 1e6, 1);
        cell_num(ref, sizeof ref, r->bc->ref_us, 1);
        cell_num(tgt, sizeof tgt, r->bc->target_us, 0);
        cell_num(eb, sizeof eb, rep->exp_rate > 0 ? 1e6 * r->exps / rep->exp_rate : 0, 1);
        if (r->status == PORTSSM_OK) {
            snprintf(med, sizeof med, "%.2f", r->median_us);
            snprintf(range, sizeof range, "%.1f-%.1f", r->min_us, r->max_us);
            cell_num(gb, sizeof gb, gbps_of(r), 1);
            cell_num(pct, sizeof pct, rep->copy_gbps > 0 ? 100 * gbps_of(r) / rep->copy_gbps : 0,
                     1);
            cell_num(spd, sizeof spd, r->bc->ref_us > 0 ? r->bc->ref_us / r->median_us : 0, 2);
        } else {
            snprintf(med, sizeof med, "%s [%d]",
                     r->status == PORTSSM_ERR_UNSUPPORTED ? "UNSUPPORTED" : "FAILED", ++note);
            snprintf(range, sizeof range, "-");
            snprintf(gb, sizeof gb, "-");
            snprintf(pct, sizeof pct, "-");
            snprintf(spd, sizeof spd, "-");
        }
        fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                pssm_op_name(c->op), portssm_dtype_name(c->dtype), shape, med, range, mb, gb, pct,
                eb, ref, tgt, spd);
    }
    /* the options of each op, once per distinct set */
    fprintf(f, "\noptions:\n");
    for (int i = 0; i < n; i++) {
        char o[160], p[160];
        pssm_opcase_options(&res[i].bc->c, o, sizeof o);
        int dup = 0;
        for (int k = 0; k < i && !dup; k++) {
            pssm_opcase_options(&res[k].bc->c, p, sizeof p);
            dup = res[k].bc->c.op == res[i].bc->c.op && strcmp(o, p) == 0;
        }
        if (!dup)
            fprintf(f, "- %s: %s\n", pssm_op_name(res[i].bc->c.op), o[0] ? o : "none");
    }
    fprintf(f, "\n");
    note = 0;
    for (int i = 0; i < n; i++)
        if (res[i].status != PORTSSM_OK)
            fprintf(f, "[%d] %s: %s\n", ++note, portssm_status_name(res[i].status),
                    res[i].message[0] ? res[i].message : "(no message)");
}

/* ---------------------------------------------------------------- JSON */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* A number, or null when absent (<= 0 or not finite). */
static void json_num(FILE *f, double v)
{
    if (v > 0 && isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void json_dims(FILE *f, const pssm_opcase *c)
{
    const struct {
        const char *k;
        int64_t v;
    } d[] = {{"B", c->B}, {"D", c->D}, {"L", c->L}, {"W", c->W}, {"N", c->N},
             {"G", c->G}, {"T", c->T}, {"S", c->S}, {"H", c->H}, {"P", c->P}};
    int first = 1;
    fputc('{', f);
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (d[i].v > 0) {
            fprintf(f, "%s\"%s\": %lld", first ? "" : ", ", d[i].k, (long long)d[i].v);
            first = 0;
        }
    fputc('}', f);
}

int pssm_bench_write_json(const char *path, const pssm_breport *rep, const pssm_bresult *res,
                          int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\n  \"tool\": \"portssm_bench\",\n  \"portssm_version\": ");
    json_str(f, portssm_version_string());
    fprintf(f, ",\n  \"backend\": ");
    json_str(f, rep->backend);
    fprintf(f, ",\n  \"device\": ");
    json_str(f, rep->device);
    fprintf(f, ",\n  \"arch\": ");
    json_str(f, rep->arch);
    fprintf(f, ",\n  \"command\": ");
    json_str(f, rep->command);
    fprintf(f, ",\n  \"timing\": ");
    json_str(f, rep->timing ? rep->timing : "stream launches");
    fprintf(f, ",\n  \"quick\": %s,\n  \"copy_gbps\": ", rep->quick ? "true" : "false");
    json_num(f, rep->copy_gbps);
    fprintf(f, ",\n  \"copy_bytes\": ");
    json_num(f, rep->copy_bytes);
    fprintf(f, ",\n  \"exp_rate\": ");
    json_num(f, rep->exp_rate);
    fprintf(f, ",\n  \"bytes_rule\": ");
    json_str(f, BYTES_RULE);
    fprintf(f, ",\n  \"results\": [");
    for (int i = 0; i < n; i++) {
        const pssm_bresult *r = &res[i];
        const pssm_opcase *c = &r->bc->c;
        char shape[64], opts[160];
        pssm_opcase_shape(c, shape, sizeof shape);
        pssm_opcase_options(c, opts, sizeof opts);
        int ok = r->status == PORTSSM_OK;
        fprintf(f, "%s\n    {\"op\": ", i ? "," : "");
        json_str(f, pssm_op_name(c->op));
        fprintf(f, ", \"backend\": ");
        json_str(f, rep->backend);
        fprintf(f, ", \"device\": ");
        json_str(f, rep->device);
        fprintf(f, ", \"dtype\": ");
        json_str(f, portssm_dtype_name(c->dtype));
        fprintf(f, ", \"shape\": ");
        json_str(f, shape);
        fprintf(f, ", \"dims\": ");
        json_dims(f, c);
        fprintf(f, ", \"options\": ");
        json_str(f, opts);
        fprintf(f, ",\n     \"status\": ");
        json_str(f, ok ? "OK" : portssm_status_name(r->status));
        fprintf(f, ", \"message\": ");
        json_str(f, r->message);
        fprintf(f, ",\n     \"median_us\": ");
        json_num(f, ok ? r->median_us : 0);
        fprintf(f, ", \"min_us\": ");
        json_num(f, ok ? r->min_us : 0);
        fprintf(f, ", \"max_us\": ");
        json_num(f, ok ? r->max_us : 0);
        fprintf(f, ", \"reps\": %d, \"batch\": %d, \"sets\": %d", r->reps, r->batch, r->sets);
        fprintf(f, ",\n     \"bytes\": ");
        json_num(f, r->bytes);
        fprintf(f, ", \"gbps\": ");
        json_num(f, ok ? gbps_of(r) : 0);
        fprintf(f, ", \"pct_copy\": ");
        json_num(f, ok && rep->copy_gbps > 0 ? 100 * gbps_of(r) / rep->copy_gbps : 0);
        fprintf(f, ", \"exps\": ");
        json_num(f, r->exps);
        fprintf(f, ", \"exp_bound_us\": ");
        json_num(f, rep->exp_rate > 0 ? 1e6 * r->exps / rep->exp_rate : 0);
        fprintf(f, ", \"ref_us\": ");
        json_num(f, r->bc->ref_us);
        fprintf(f, ", \"target_us\": ");
        json_num(f, r->bc->target_us);
        fputc('}', f);
    }
    fprintf(f, "\n  ]\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}
