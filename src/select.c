/*
 * select.c - which backend and device a new context gets.  An explicit backend is taken as
 * asked; AUTO takes PORTSSM_BACKEND if set (a value naming an unusable backend is an error,
 * never a silent fall-back), else the first usable of cuda, hip, cpu.  The report says why.
 */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Takes backend `kind` at `device` or explains, into this thread's error, why it cannot. */
static portssm_status take(pssm_selection *sel, portssm_backend kind, int32_t device,
                           const char *origin)
{
    const pssm_probe *p = pssm_registry_probe(kind);
    if (p->status != PORTSSM_OK)
        return pssm_thread_fail(p->status, "portssm_create: the %s backend is not usable (%s): %s",
                                portssm_backend_name(kind), origin, p->reason);
    if (device >= p->num_devices)
        return pssm_thread_fail(PORTSSM_ERR_NO_DEVICE,
                                "portssm_create: %s device %d does not exist (%s): the %s "
                                "backend has %d device(s)",
                                portssm_backend_name(kind), (int)device, origin,
                                portssm_backend_name(kind), (int)p->num_devices);
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
            return take(sel, order[i], device, "the first usable GPU backend");
        if (p->status != PORTSSM_OK)
            report_add(sel, "%s skipped (%s: %s); ", name, portssm_status_name(p->status),
                       p->reason);
        else
            report_add(sel, "%s skipped (device %d requested, %d present); ", name, (int)device,
                       (int)p->num_devices);
    }
    portssm_status s =
        take(sel, PORTSSM_BACKEND_CPU, device, "the fallback: no GPU backend is usable");
    if (s != PORTSSM_OK) {
        char why[PSSM_ERROR_CAPACITY];
        snprintf(why, sizeof why, "%s", pssm_thread_error());
        size_t len = strlen(sel->report); /* no dangling "; " before the closing parenthesis */
        while (len > 0 && (sel->report[len - 1] == ' ' || sel->report[len - 1] == ';'))
            sel->report[--len] = '\0';
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
        portssm_status s = take(sel, backend, device, "asked for by the caller");
        if (s == PORTSSM_OK && env)
            report_add(sel, " (PORTSSM_BACKEND=%s ignored: it only applies to AUTO)", env);
        return s;
    }
    if (!env)
        return automatic(sel, device, "auto (PORTSSM_BACKEND not set)");

    portssm_backend choice_kind;
    int32_t choice_device; /* -1: not given */
    char why[256];
    if (!pssm_parse_backend(env, &choice_kind, &choice_device, why, sizeof why))
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_create: environment variable PORTSSM_BACKEND='%s' is "
                                "invalid: %s",
                                env, why);
    char origin[160];
    snprintf(origin, sizeof origin, "PORTSSM_BACKEND=%s", env);
    int32_t dev = choice_device >= 0 ? choice_device : device;
    if (choice_kind == PORTSSM_BACKEND_AUTO)
        return automatic(sel, dev, origin);
    return take(sel, choice_kind, dev, origin);
}
