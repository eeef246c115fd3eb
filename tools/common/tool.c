/* tool.c - see tool.h. */
#include "tool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../kernels/pssm_float16.h"

int pssm_tool_parse_backend(const char *label, portssm_backend *backend, int32_t *device)
{
    static const struct {
        const char *name;
        portssm_backend b;
        int32_t dev;
        int takes_index; /* may be followed by ":N" */
    } map[] = {
        {"auto", PORTSSM_BACKEND_AUTO, 0, 0}, {"cpu", PORTSSM_BACKEND_CPU, 0, 1},
        {"sim", PORTSSM_BACKEND_SIM, 0, 1},   {"sim32", PORTSSM_BACKEND_SIM, 0, 0},
        {"sim64", PORTSSM_BACKEND_SIM, 1, 0}, {"cuda", PORTSSM_BACKEND_CUDA, 0, 1},
        {"hip", PORTSSM_BACKEND_HIP, 0, 1},
    };
    if (!label)
        return 0;
    const char *colon = strchr(label, ':');
    size_t len = colon ? (size_t)(colon - label) : strlen(label);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strlen(map[i].name) != len || strncmp(label, map[i].name, len) != 0)
            continue;
        int32_t dev = map[i].dev;
        if (colon) {
            char *end = NULL;
            long v = strtol(colon + 1, &end, 10);
            if (!map[i].takes_index || end == colon + 1 || *end != '\0' || v < 0 || v > 1 << 20)
                return 0;
            dev = (int32_t)v;
        }
        *backend = map[i].b;
        *device = dev;
        return 1;
    }
    return 0;
}

portssm_context *pssm_tool_open(const char *prog, const char *label)
{
    portssm_backend b;
    int32_t dev;
    if (!pssm_tool_parse_backend(label, &b, &dev)) {
        fprintf(stderr, "%s: unknown backend '%s' (expected one of %s)\n", prog, label,
                PSSM_TOOL_BACKEND_LABELS);
        return NULL;
    }
    if (b != PORTSSM_BACKEND_AUTO) {
        int32_t ndev = 0;
        const char *why = NULL;
        portssm_status s = portssm_backend_probe(b, &ndev, &why);
        if (s != PORTSSM_OK) {
            fprintf(stderr, "%s: backend %s is not available here: %s: %s\n", prog, label,
                    portssm_status_name(s), why ? why : "(no reason given)");
            return NULL;
        }
        if (dev >= ndev) {
            fprintf(stderr, "%s: backend %s has %d device(s); device %d does not exist\n", prog,
                    label, (int)ndev, (int)dev);
            return NULL;
        }
    }
    portssm_context *ctx = NULL;
    portssm_status s = portssm_create(&ctx, b, dev);
    if (s != PORTSSM_OK) {
        fprintf(stderr, "%s: cannot create a context on %s: %s: %s\n", prog, label,
                portssm_status_name(s), portssm_last_error(NULL));
        return NULL;
    }
    return ctx;
}

void pssm_tool_ctx_label(const portssm_context *ctx, char *buf, size_t n)
{
    portssm_backend b = portssm_get_backend(ctx);
    int32_t dev = portssm_get_device(ctx);
    const char *name = portssm_backend_name(b);
    if (b == PORTSSM_BACKEND_SIM && (dev == 0 || dev == 1))
        snprintf(buf, n, "sim%d", dev == 0 ? 32 : 64);
    else
        snprintf(buf, n, "%s:%d", name ? name : "?", (int)dev);
}

/* ---------------------------------------------------------------- random numbers */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

pssm_rng pssm_rng_seeded(uint64_t seed)
{
    pssm_rng r;
    r.s[0] = splitmix(&seed);
    r.s[1] = splitmix(&seed);
    return r;
}

uint64_t pssm_rng_next(pssm_rng *r)
{
    uint64_t a = r->s[0], b = r->s[1];
    r->s[0] = b;
    a ^= a << 23;
    r->s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return r->s[1] + b;
}

double pssm_rng_uniform(pssm_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(pssm_rng_next(r) >> 11) * (1.0 / 9007199254740992.0));
}

uint64_t pssm_tool_clock_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* small enough to retype from the log */
    return ((uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec) % 1000000007u;
}

/* ---------------------------------------------------------------- elements */

double pssm_tool_get(portssm_dtype dt, const void *base, int64_t i)
{
    const unsigned char *p = base;
    uint16_t h;
    float f;
    int32_t k;
    switch (dt) {
    case PORTSSM_F32: memcpy(&f, p + 4 * i, 4); return f;
    case PORTSSM_F16: memcpy(&h, p + 2 * i, 2); return pssm_f16_to_f32(h);
    case PORTSSM_BF16: memcpy(&h, p + 2 * i, 2); return pssm_bf16_to_f32(h);
    case PORTSSM_I32: memcpy(&k, p + 4 * i, 4); return k;
    }
    return NAN;
}

void pssm_tool_set(portssm_dtype dt, void *base, int64_t i, double v)
{
    unsigned char *p = base;
    float f = (float)v;
    uint16_t h;
    int32_t k;
    switch (dt) {
    case PORTSSM_F32: memcpy(p + 4 * i, &f, 4); break;
    case PORTSSM_F16: h = pssm_f32_to_f16(f); memcpy(p + 2 * i, &h, 2); break;
    case PORTSSM_BF16: h = pssm_f32_to_bf16(f); memcpy(p + 2 * i, &h, 2); break;
    case PORTSSM_I32: k = (int32_t)v; memcpy(p + 4 * i, &k, 4); break;
    }
}

double pssm_tool_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
