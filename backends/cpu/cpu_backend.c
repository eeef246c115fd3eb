/*
 * cpu_backend.c - the table of the cpu backend: the scalar oracle, always available, one device
 * (the host), synchronous, memory from the C heap.
 */
#include "backend.h"
#include "cpu_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define CPU_ALIGN 256

static portssm_status cpu_probe(int32_t *num_devices, const char **reason)
{
    if (num_devices)
        *num_devices = 1;
    if (reason)
        *reason = "always available";
    return PORTSSM_OK;
}

/* The value of the first /proc/cpuinfo line whose key is one of `keys` (x86 "model name",
 * others "Model", "Hardware", "cpu model", "uarch"), trimmed; 0 when none is readable. */
static int cpuinfo_model(char *dst, size_t cap)
{
    static const char *const keys[] = {"model name", "Model", "Hardware", "cpu model", "uarch"};
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[512];
    int found = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0] && !found; k++) {
        rewind(f);
        size_t klen = strlen(keys[k]);
        while (!found && fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon || strncmp(line, keys[k], klen) != 0)
                continue;
            char *key_end = line + klen; /* only blanks between the key and the colon */
            while (key_end < colon && (*key_end == ' ' || *key_end == '\t'))
                key_end++;
            if (key_end != colon)
                continue;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t n = strcspn(v, "\r\n");
            while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
            if (n == 0)
                continue;
            snprintf(dst, cap, "%.*s", (int)n, v);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static portssm_status cpu_device_info(int32_t device, portssm_device_info *info)
{
    if (device != 0)
        return PORTSSM_ERR_NO_DEVICE;
    memset(info, 0, sizeof *info);
    if (!cpuinfo_model(info->name, sizeof info->name))
        snprintf(info->name, sizeof info->name, "host CPU");
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(info->arch, sizeof info->arch, "%.63s", u.machine);
    else
        snprintf(info->arch, sizeof info->arch, "unknown");
    info->warp_size = 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    info->multiprocessors = cores > 0 ? (int32_t)cores : 1;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->total_memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    return PORTSSM_OK;
}

static portssm_status cpu_open(pssm_bctx *c, int32_t device)
{
    if (device != 0)
        return pssm_fail(c, PORTSSM_ERR_NO_DEVICE, "cpu backend: device %d requested, it has 1",
                         (int)device);
    c->state = NULL;
    return PORTSSM_OK;
}

static void cpu_close(pssm_bctx *c) { c->state = NULL; }

static portssm_status cpu_set_stream(pssm_bctx *c, void *stream)
{
    if (stream)
        return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT,
                         "the cpu backend runs synchronously and accepts only NULL, got %p",
                         stream);
    return PORTSSM_OK;
}

static portssm_status cpu_synchronize(pssm_bctx *c) { return PORTSSM_OK; }

static portssm_status cpu_mem_alloc(pssm_bctx *c, void **ptr, size_t bytes)
{
    *ptr = NULL;
    if (bytes == 0)
        return PORTSSM_OK;
    if (bytes > SIZE_MAX - (CPU_ALIGN - 1))
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY, "portssm_malloc: %zu bytes is too many",
                         bytes);
    size_t rounded = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN; /* aligned_alloc's rule */
    void *p = aligned_alloc(CPU_ALIGN, rounded);
    if (!p)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY,
                         "portssm_malloc: the host could not give %zu bytes", bytes);
    *ptr = p;
    return PORTSSM_OK;
}

static portssm_status cpu_mem_free(pssm_bctx *c, void *ptr)
{
    free(ptr);
    return PORTSSM_OK;
}

static portssm_status cpu_mem_copy(pssm_bctx *c, void *dst, const void *src, size_t bytes,
                                   portssm_memcpy_kind kind)
{
    if (bytes)
        memmove(dst, src, bytes);
    return PORTSSM_OK;
}

static portssm_status cpu_mem_set(pssm_bctx *c, void *ptr, int value, size_t bytes)
{
    if (bytes)
        memset(ptr, value, bytes);
    return PORTSSM_OK;
}

/* An event is the host's monotonic clock at its record. */
static portssm_status cpu_event_create(pssm_bctx *c, void **ev)
{
    struct timespec *t = calloc(1, sizeof *t);
    if (!t)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY, "event_create: out of host memory");
    *ev = t;
    return PORTSSM_OK;
}

static void cpu_event_destroy(pssm_bctx *c, void *ev) { free(ev); }

static portssm_status cpu_event_record(pssm_bctx *c, void *ev)
{
    if (clock_gettime(CLOCK_MONOTONIC, (struct timespec *)ev) != 0)
        return pssm_fail(c, PORTSSM_ERR_INTERNAL, "event_record: CLOCK_MONOTONIC unavailable");
    return PORTSSM_OK;
}

static portssm_status cpu_event_elapsed_ms(pssm_bctx *c, void *start, void *end, float *ms)
{
    const struct timespec *a = start, *b = end;
    double d = (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) * 1e-6;
    *ms = (float)d;
    return PORTSSM_OK;
}

const pssm_backend pssm_cpu_backend = {
    .name = "cpu",
    .abi = PSSM_BACKEND_ABI,
    .probe = cpu_probe,
    .device_info = cpu_device_info,
    .open = cpu_open,
    .close = cpu_close,
    .set_stream = cpu_set_stream,
    .synchronize = cpu_synchronize,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .mem_copy = cpu_mem_copy,
    .mem_set = cpu_mem_set,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .causal_conv1d_fwd = pssm_cpu_causal_conv1d_fwd,
    .causal_conv1d_bwd = pssm_cpu_causal_conv1d_bwd,
    .causal_conv1d_update = pssm_cpu_causal_conv1d_update,
    .selective_scan_fwd = pssm_cpu_selective_scan_fwd,
    .selective_scan_bwd = pssm_cpu_selective_scan_bwd,
    .selective_state_update = pssm_cpu_selective_state_update,
    .selftest = NULL,
};
