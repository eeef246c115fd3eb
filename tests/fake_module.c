/*
 * fake_module.c - a stand-in GPU module for test_api's module-loader tests.  It exports the
 * module entry like libportssm_cuda.so does; PSSM_FAKE_MODULE_MODE picks its behaviour when the
 * entry is called:
 *   abi        the entry refuses the ABI (returns NULL with a reason)
 *   table_abi  the entry returns a table stamped with another ABI
 *   no_open    the table lacks its 'open' entry
 *   probe      the probe reports no device
 *   ok         a working one-device backend on host memory (ops: none)
 */
#include "../src/backend.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Read by the test through dlsym: how often the probe ran in this copy of the module. */
__attribute__((visibility("default"))) int pssm_fake_probe_calls;

static portssm_status probe_none(int32_t *n, const char **reason)
{
    pssm_fake_probe_calls++;
    *n = 0;
    *reason = "fake: no device present";
    return PORTSSM_ERR_NO_DEVICE;
}

static portssm_status probe_one(int32_t *n, const char **reason)
{
    pssm_fake_probe_calls++;
    *n = 1;
    *reason = "fake: one device";
    return PORTSSM_OK;
}

static portssm_status info(int32_t device, portssm_device_info *i)
{
    strcpy(i->name, "fake device");
    strcpy(i->arch, "fake_arch");
    i->warp_size = 32;
    i->multiprocessors = 1;
    i->total_memory = 1u << 20;
    return PORTSSM_OK;
}

static portssm_status open_ctx(pssm_bctx *c, int32_t device) { return PORTSSM_OK; }
static void close_ctx(pssm_bctx *c) {}
static portssm_status sync_ctx(pssm_bctx *c) { return PORTSSM_OK; }

static portssm_status alloc(pssm_bctx *c, void **p, size_t bytes)
{
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *p ? PORTSSM_OK : pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY, "fake: out of memory");
}

static portssm_status release(pssm_bctx *c, void *p)
{
    free(p);
    return PORTSSM_OK;
}

static portssm_status copy(pssm_bctx *c, void *d, const void *s, size_t n, portssm_memcpy_kind k)
{
    memcpy(d, s, n);
    return PORTSSM_OK;
}

static portssm_status fill(pssm_bctx *c, void *p, int v, size_t n)
{
    memset(p, v, n);
    return PORTSSM_OK;
}

static pssm_backend table = {
    .name = "hip",
    .abi = PSSM_BACKEND_ABI,
    .probe = probe_one,
    .device_info = info,
    .open = open_ctx,
    .close = close_ctx,
    .synchronize = sync_ctx,
    .mem_alloc = alloc,
    .mem_free = release,
    .mem_copy = copy,
    .mem_set = fill,
};

__attribute__((visibility("default"))) const pssm_backend *portssm_module_backend(
    int32_t abi, const char **reason)
{
    const char *mode = getenv("PSSM_FAKE_MODULE_MODE");
    mode = mode ? mode : "ok";
    if (strcmp(mode, "abi") == 0) {
        *reason = "fake module built for ABI 0";
        return NULL;
    }
    if (strcmp(mode, "table_abi") == 0)
        table.abi = abi + 1;
    else if (strcmp(mode, "no_open") == 0)
        table.open = NULL;
    else if (strcmp(mode, "probe") == 0)
        table.probe = probe_none;
    return &table;
}
