/*
 * cpu_backend.c - the table of the cpu backend: the scalar oracle, always available, one device
 * (the host), synchronous, memory from the C heap.
 */
#include "backend.h"
#include "cpu_ops.h"
#include "../host/host_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

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
    info->total_memory = pssm_host_total_memory();
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

const pssm_backend pssm_cpu_backend = {
    .name = "cpu",
    .abi = PSSM_BACKEND_ABI,
    .runs_on_host = 1,
    .probe = cpu_probe,
    .device_info = cpu_device_info,
    .open = cpu_open,
    .close = cpu_close,
    PSSM_HOST_DEVICE_SLOTS,
    .causal_conv1d_fwd = pssm_cpu_causal_conv1d_fwd,
    .causal_conv1d_bwd = pssm_cpu_causal_conv1d_bwd,
    .causal_conv1d_update = pssm_cpu_causal_conv1d_update,
    .selective_scan_fwd = pssm_cpu_selective_scan_fwd,
    .selective_scan_bwd = pssm_cpu_selective_scan_bwd,
    .selective_state_update = pssm_cpu_selective_state_update,
    .ssd_chunk_scan_fwd = pssm_cpu_ssd_chunk_scan_fwd,
    .ssd_chunk_scan_bwd = pssm_cpu_ssd_chunk_scan_bwd,
    .norm_fwd = pssm_cpu_norm_fwd,
    .norm_bwd = pssm_cpu_norm_bwd,
    .selftest = NULL,
};
