/*
 * registry.c - the backends: cpu and sim are linked in, cuda and hip are modules loaded from
 * the directory of libportssm itself (never the current directory, never the loader's search
 * path).  Each backend is probed once per process; a backend that cannot run keeps the exact
 * reason, which selection reports and portssm_backend_probe returns.
 */
#define _GNU_SOURCE /* dladdr */
#include "core.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct pssm_slot {
    pthread_once_t once;
    pssm_probe result;
    char reason[PSSM_ERROR_CAPACITY];
} pssm_slot;

static pssm_slot slots[PORTSSM_BACKEND_SIM + 1] = {
    {PTHREAD_ONCE_INIT}, {PTHREAD_ONCE_INIT}, {PTHREAD_ONCE_INIT},
    {PTHREAD_ONCE_INIT}, {PTHREAD_ONCE_INIT},
};

int pssm_backend_is_concrete(portssm_backend b)
{
    return b == PORTSSM_BACKEND_CPU || b == PORTSSM_BACKEND_CUDA || b == PORTSSM_BACKEND_HIP ||
           b == PORTSSM_BACKEND_SIM;
}

PORTSSM_API const char *portssm_backend_name(portssm_backend b)
{
    switch (b) {
    case PORTSSM_BACKEND_AUTO: return "auto";
    case PORTSSM_BACKEND_CPU: return "cpu";
    case PORTSSM_BACKEND_CUDA: return "cuda";
    case PORTSSM_BACKEND_HIP: return "hip";
    case PORTSSM_BACKEND_SIM: return "sim";
    }
    return NULL;
}

static void set_result(pssm_slot *s, const pssm_backend *table, portssm_status status,
                       int32_t num_devices, const char *fmt, ...) PSSM_PRINTF(5, 6);
static void set_result(pssm_slot *s, const pssm_backend *table, portssm_status status,
                       int32_t num_devices, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->reason, sizeof s->reason, fmt, ap);
    va_end(ap);
    s->result.table = status == PORTSSM_OK ? table : NULL;
    s->result.status = status;
    s->result.num_devices = status == PORTSSM_OK ? num_devices : 0;
    s->result.reason = s->reason;
}

/* The slots without which a context cannot work; the rest may be NULL (unsupported). */
static const char *missing_slot(const pssm_backend *t)
{
#define PSSM_REQUIRE(slot)                                                                      \
    if (!t->slot)                                                                               \
        return #slot;
    PSSM_REQUIRE(probe)
    PSSM_REQUIRE(device_info)
    PSSM_REQUIRE(open)
    PSSM_REQUIRE(close)
    PSSM_REQUIRE(synchronize)
    PSSM_REQUIRE(mem_alloc)
    PSSM_REQUIRE(mem_free)
    PSSM_REQUIRE(mem_copy)
    PSSM_REQUIRE(mem_set)
#undef PSSM_REQUIRE
    return NULL;
}

/* Checks a table and runs its probe; `what` names it in messages ("cpu backend", a path). */
static void probe_table(pssm_slot *s, const pssm_backend *t, const char *what)
{
    if (t->abi != PSSM_BACKEND_ABI) {
        set_result(s, NULL, PORTSSM_ERR_NO_BACKEND,
                   0, "%s was built for backend ABI %d, this libportssm needs ABI %d", what,
                   (int)t->abi, PSSM_BACKEND_ABI);
        return;
    }
    const char *missing = missing_slot(t);
    if (missing) {
        set_result(s, NULL, PORTSSM_ERR_NO_BACKEND, 0, "%s has no '%s' entry", what, missing);
        return;
    }
    int32_t n = 0;
    const char *why = NULL;
    portssm_status st = t->probe(&n, &why);
    if (st == PORTSSM_OK && n < 1) {
        set_result(s, NULL, PORTSSM_ERR_NO_DEVICE, 0, "%s: %s", what,
                   why && *why ? why : "no device found");
        return;
    }
    if (st == PORTSSM_OK)
        set_result(s, t, st, n, "%s", why && *why ? why : "available");
    else
        set_result(s, NULL, st, 0, "%s: %s", what,
                   why && *why ? why : portssm_status_string(st));
}

/* Something defined in libportssm, so that dladdr names libportssm's own file. */
static const char anchor;

/* The directory libportssm was loaded from, symlinks resolved.  0 on failure, with `err`. */
static int library_dir(char *dir, size_t size, char *err, size_t err_size)
{
    Dl_info info;
    if (!dladdr(&anchor, &info) || !info.dli_fname || !*info.dli_fname) {
        snprintf(err, err_size, "cannot locate the file of libportssm (dladdr failed)");
        return 0;
    }
    char *real = realpath(info.dli_fname, NULL);
    const char *path = real ? real : info.dli_fname;
    const char *slash = strrchr(path, '/');
    if (path[0] != '/' || !slash) {
        /* A relative name would make the lookup depend on the current directory. */
        snprintf(err, err_size, "cannot resolve the directory of libportssm ('%s')", path);
        free(real);
        return 0;
    }
    size_t len = (size_t)(slash - path);
    if (len == 0)
        len = 1; /* the root directory */
    if (len >= size) {
        snprintf(err, err_size, "the directory of libportssm is too long");
        free(real);
        return 0;
    }
    memcpy(dir, path, len);
    dir[len] = '\0';
    free(real);
    return 1;
}

/* Resolved once, when libportssm is loaded: if it was loaded by a relative path, dladdr gives
 * that relative path back, and only the current directory of that moment resolves it to the
 * right file; resolved later, a chdir in between would make a module of the new current
 * directory load. */
static char loaded_dir[PATH_MAX];
static char loaded_dir_err[PSSM_ERROR_CAPACITY];
static int loaded_dir_ok;

__attribute__((constructor)) static void remember_library_dir(void)
{
    loaded_dir_ok = library_dir(loaded_dir, sizeof loaded_dir, loaded_dir_err,
                                sizeof loaded_dir_err);
}

static void probe_module(pssm_slot *s, const char *name)
{
    char path[PATH_MAX + 64];
    const char *dir = loaded_dir;
    if (!loaded_dir_ok) {
        set_result(s, NULL, PORTSSM_ERR_NO_BACKEND, 0, "%s backend: %s", name, loaded_dir_err);
        return;
    }
    snprintf(path, sizeof path, "%s%slibportssm_%s.so", dir, strcmp(dir, "/") ? "/" : "", name);
    if (access(path, F_OK) != 0) {
        set_result(s, NULL, PORTSSM_ERR_NO_BACKEND, 0,
                   "no module %s (portssm was built or installed without the %s backend)", path,
                   name);
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        set_result(s, NULL, PORTSSM_ERR_NO_BACKEND, 0, "cannot load %s: %s", path,
                   e ? e : "unknown dlopen error");
        return;
    }
    pssm_module_entry_fn entry;
    void *sym = dlsym(h, PSSM_MODULE_ENTRY_NAME);
    if (!sym) {
        const char *e = dlerror();
        set_result(s, NULL, PORTSSM_ERR_NO_BACKEND, 0,
                   "%s is not a portssm module: it does not export %s (%s)", path,
                   PSSM_MODULE_ENTRY_NAME, e ? e : "symbol not found");
        dlclose(h);
        return;
    }
    memcpy(&entry, &sym, sizeof entry); /* object pointer -> function pointer, as POSIX allows */
    const char *why = NULL;
    const pssm_backend *t = entry(PSSM_BACKEND_ABI, &why);
    if (!t) {
        /* Kept loaded: a module that ran code (driver libraries) is not safe to unload. */
        set_result(s, NULL, PORTSSM_ERR_NO_BACKEND, 0,
                   "%s does not support backend ABI %d: %s", path, PSSM_BACKEND_ABI,
                   why && *why ? why : "no reason given");
        return;
    }
    probe_table(s, t, path);
}

static void probe_slot(portssm_backend b)
{
    pssm_slot *s = &slots[b];
    switch (b) {
    case PORTSSM_BACKEND_CPU: probe_table(s, &pssm_cpu_backend, "cpu backend"); break;
    case PORTSSM_BACKEND_SIM: probe_table(s, &pssm_sim_backend, "sim backend"); break;
    case PORTSSM_BACKEND_CUDA: probe_module(s, "cuda"); break;
    case PORTSSM_BACKEND_HIP: probe_module(s, "hip"); break;
    default: set_result(s, NULL, PORTSSM_ERR_INTERNAL, 0, "not a concrete backend"); break;
    }
}

/* pthread_once takes no argument: one trampoline per backend. */
static void probe_cpu(void) { probe_slot(PORTSSM_BACKEND_CPU); }
static void probe_cuda(void) { probe_slot(PORTSSM_BACKEND_CUDA); }
static void probe_hip(void) { probe_slot(PORTSSM_BACKEND_HIP); }
static void probe_sim(void) { probe_slot(PORTSSM_BACKEND_SIM); }

const pssm_probe *pssm_registry_probe(portssm_backend b)
{
    static void (*const init[])(void) = {
        [PORTSSM_BACKEND_CPU] = probe_cpu,
        [PORTSSM_BACKEND_CUDA] = probe_cuda,
        [PORTSSM_BACKEND_HIP] = probe_hip,
        [PORTSSM_BACKEND_SIM] = probe_sim,
    };
    if (!pssm_backend_is_concrete(b))
        return NULL;
    pthread_once(&slots[b].once, init[b]);
    return &slots[b].result;
}

PORTSSM_API portssm_status portssm_backend_probe(portssm_backend b, int32_t *num_devices,
                                                 const char **reason)
{
    if (num_devices)
        *num_devices = 0;
    if (!pssm_backend_is_concrete(b)) {
        if (reason)
            *reason = b == PORTSSM_BACKEND_AUTO
                          ? "AUTO is not a backend: probe cpu, cuda, hip or sim"
                          : "not a portssm_backend value";
        return PORTSSM_ERR_INVALID_ARGUMENT;
    }
    const pssm_probe *p = pssm_registry_probe(b);
    if (num_devices)
        *num_devices = p->num_devices;
    if (reason)
        *reason = p->reason;
    return p->status;
}

PORTSSM_API portssm_status portssm_device_get_info(portssm_backend b, int32_t device,
                                                   portssm_device_info *info)
{
    pssm_thread_clear();
    if (!info)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_device_get_info: 'info' is NULL");
    if (!pssm_backend_is_concrete(b))
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_device_get_info: 'backend' must be cpu, cuda, hip or "
                                "sim, got %d",
                                (int)b);
    const pssm_probe *p = pssm_registry_probe(b);
    if (p->status != PORTSSM_OK)
        return pssm_thread_fail(p->status, "portssm_device_get_info: %s", p->reason);
    if (device < 0 || device >= p->num_devices)
        return pssm_thread_fail(PORTSSM_ERR_NO_DEVICE,
                                "portssm_device_get_info: 'device' %d does not exist: the %s "
                                "backend has %d device(s)",
                                (int)device, portssm_backend_name(b), (int)p->num_devices);
    portssm_device_info got; /* *info is written only on success */
    memset(&got, 0, sizeof got);
    portssm_status st = p->table->device_info(device, &got);
    if (st != PORTSSM_OK)
        return pssm_thread_fail(st, "portssm_device_get_info: the %s backend could not describe "
                                    "device %d: %s",
                                portssm_backend_name(b), (int)device, portssm_status_string(st));
    got.name[sizeof got.name - 1] = '\0';
    got.arch[sizeof got.arch - 1] = '\0';
    *info = got;
    return PORTSSM_OK;
}
