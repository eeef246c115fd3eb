/* backend_parse.c - backend strings ("cuda:1", "sim64"), as PORTSSM_BACKEND and bindings take
 * them: one parser, so the environment variable and portssm_backend_parse cannot disagree. */
#include "core.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char pssm_backend_values[] =
    "cpu, cuda, hip, sim, sim32, sim64 or auto, optionally followed by ':N' (device N)";

int pssm_parse_backend(const char *text, portssm_backend *kind, int32_t *device, char *why,
                       size_t why_size)
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
    const char *colon = strchr(text, ':');
    size_t name_len = colon ? (size_t)(colon - text) : strlen(text);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].name) != name_len || strncasecmp(text, names[i].name, name_len))
            continue;
        if (!colon) {
            *kind = names[i].kind;
            *device = names[i].fixed_device;
            return 1;
        }
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
        *kind = names[i].kind;
        *device = (int32_t)n;
        return 1;
    }
    snprintf(why, why_size, "expected %s", pssm_backend_values);
    return 0;
}

PORTSSM_API portssm_status portssm_backend_parse(const char *text, portssm_backend *backend,
                                                 int32_t *device)
{
    pssm_thread_clear();
    if (!text)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT, "portssm_backend_parse: 'text' is NULL");
    if (!backend || !device)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT, "portssm_backend_parse: '%s' is NULL",
                                !backend ? "backend" : "device");
    portssm_backend kind;
    int32_t dev;
    char why[256];
    if (!pssm_parse_backend(text, &kind, &dev, why, sizeof why))
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_backend_parse: 'text' \"%.200s\" is not a backend: %s",
                                text, why);
    *backend = kind;
    *device = dev;
    return PORTSSM_OK;
}
