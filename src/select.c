/*
 * select.c - which backend and device a new context gets.  An explicit backend is taken as
 * asked; AUTO takes PORTSSM_BACKEND if set (a value naming an unusable backend is an error,
 * never a silent fall-back), else the first usable of cuda, hip, cpu.  The report says why.
 */
#include "core.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void report_add(pssm_selection *sel, const char *fmt, ...) PSSM_PRINTF(2, 3);
static void report_add(pssm_selection *sel, const char *fmt, ...)
{
    size_t len = strlen(sel->report);
    if (len + 1 >= sizeof sel->report)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sel->report + len, sizeof sel->report - len, fmt, ap);
    va_end(ap);
}

/* A parsed PORTSSM_BACKEND value. */
typedef struct env_choice {
    portssm_backend kind;
    int32_t device; /* -1: not given */
} env_choice;

static const char env_values[] =
    "cpu, cuda, hip, sim, sim32, sim64 or auto, optionally followed by ':N' (device N)";

/* 1 and *out on success; 0 with the problem written to `why`. */
static int parse_env(const char *value, env_choice *out, char *why, size_t why_size)
{
    static const struct {
        const char *name;
        portssm_backend kind;
        int32_t fixed_device; /* -1: any */
    } names[] = {
        {"auto", PORTSSM_BACKEND_AUTO, -1}, {"cpu", PORTSSM_BACKEND_CPU, -1},
        {"cuda", PORTSSM_BACKEND_CUDA, -1}, {"hip", PORTSSM_BACKEND_HIP, -1},
        {"sim", PORTSSM_BACKEND_SIM, -1},   {"sim32", PORTSSM_BACKEND_SIM, 0},
        {"sim64", PORTSSM_BACKEND_SIM, 1},
    };
    const char *colon = strchr(value, ':');
    size_t name_len = colon ? (size_t)(colon - value) : strlen(value);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].name) != name_len || strncasecmp(value, names[i].name, name_len))
            continue;
        out->kind = names[i].kind;
        out->device = names[i].fixed_device;
        if (!colon)
            return 1;
        if (names[i].fixed_device >= 0 || names[i].kind == PORTSSM_BACKEND_AUTO) {
            snprintf(why, why_size, "'%s' takes no device suffix%s", names[i].name,
                     names[i].fixed_device >= 0 ? " (use sim:N to pick a sim device)" : "");
            return 0;
        }
        const char *digits = colon + 1;
        long long n = 0;
        int ok = *digits != '\0';
        for (const char *p = digits; ok && *p; p++) {
            ok = isdigit((unsigned char)*p) != 0;
            n = n * 10 + (*p - '0');
            if (n > INT32_MAX)
                ok = 0;
        }
        if (!ok) {
            snprintf(why, why_size, "the device after ':' must be a number from 0 to %d",
                     INT32_MAX);
            return 0;
        }
        out->device = (int32_t)n;
        return 1;
    }
    snprintf(why, why_size, "expected %s", env_values);
    return 0;
}

/* Takes backend `kind` at `device` or explains, into this thread's error, why it cannot. */
static portssm_status take(pssm_selection *sel, portssm_backend kind, int32_t device,
                           const char *origin)
{
    const pssm_probe *p = pssm_registry_probe(kind);
    if (p->status != PORTSSM_OK)
        return pssm_thread_fail(p->status, "portssm_create: %s: the %s backend is not usable: %s",
                                origin, portssm_backend_name(kind), p->reason);
    if (device >= p->num_devices)
        return pssm_thread_fail(PORTSSM_ERR_NO_DEVICE,
                                "portssm_create: %s: device %d does not exist: the %s backend "
                                "has %d device(s)",
                                origin, (int)device, portssm_backend_name(kind),
                                (int)p->num_devices);
    sel->kind = kind;
    sel->device = device;
    sel->table = p->table;
    report_add(sel, "%s: %s device %d", origin, portssm_backend_name(kind), (int)device);
    return PORTSSM_OK;
}

/* AUTO without PORTSSM_BACKEND: the first usable GPU backend, else the cpu. */
static portssm_status automatic(pssm_selection *sel, int32_t device, const char *origin)
{
    static const portssm_backend order[] = {PORTSSM_BACKEND_CUDA, PORTSSM_BACKEND_HIP};
    report_add(sel, "%s: ", origin);
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const pssm_probe *p = pssm_registry_probe(order[i]);
        const char *name = portssm_backend_name(order[i]);
        if (p->status == PORTSSM_OK && device < p->num_devices)
            return take(sel, order[i], device, "chose the first usable GPU backend");
        if (p->status != PORTSSM_OK)
            report_add(sel, "%s skipped (%s: %s); ", name, portssm_status_name(p->status),
                       p->reason);
        else
            report_add(sel, "%s skipped (device %d requested, %d present); ", name, (int)device,
                       (int)p->num_devices);
    }
    portssm_status s = take(sel, PORTSSM_BACKEND_CPU, device, "no usable GPU backend, chose");
    if (s != PORTSSM_OK) {
        char why[PSSM_ERROR_CAPACITY];
        snprintf(why, sizeof why, "%s", pssm_thread_error());
        return pssm_thread_fail(s, "%s (%s)", why, sel->report);
    }
    return s;
}

portssm_status pssm_select(portssm_backend backend, int32_t device, pssm_selection *sel)
{
    memset(sel, 0, sizeof *sel);
    if (backend != PORTSSM_BACKEND_AUTO && !pssm_backend_is_concrete(backend))
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_create: 'backend' must be a portssm_backend (AUTO, CPU, "
                                "CUDA, HIP or SIM: 0 to 4), got %d",
                                (int)backend);
    if (device < 0)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_create: 'device' must be >= 0, got %d", (int)device);
    const char *env = getenv("PORTSSM_BACKEND");
    if (env && !*env)
        env = NULL;
    if (backend != PORTSSM_BACKEND_AUTO) {
        portssm_status s = take(sel, backend, device, "requested");
        if (s == PORTSSM_OK && env)
            report_add(sel, " (PORTSSM_BACKEND=%s ignored: it only applies to AUTO)", env);
        return s;
    }
    if (!env)
        return automatic(sel, device, "auto (PORTSSM_BACKEND not set)");

    env_choice choice;
    char why[256];
    if (!parse_env(env, &choice, why, sizeof why))
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_create: environment variable PORTSSM_BACKEND='%s' is "
                                "invalid: %s",
                                env, why);
    char origin[160];
    snprintf(origin, sizeof origin, "PORTSSM_BACKEND=%s", env);
    int32_t dev = choice.device >= 0 ? choice.device : device;
    if (choice.kind == PORTSSM_BACKEND_AUTO)
        return automatic(sel, dev, origin);
    return take(sel, choice.kind, dev, origin);
}
