/*
 * device_module.c - a GPU backend module (libportssm_cuda.so, libportssm_hip.so), written once
 * for both vendors (device_module.h): the driver, the devices, probe and the entry point.
 * The module
 *  - opens the driver library with dlopen, so it needs no runtime of an exact version and the
 *    core can load it on a machine without any GPU software (the probe then says why not);
 *  - loads the device code embedded in the module (device_images.h) with the driver's module
 *    API: the load itself is the exact test of "is there a kernel image for this device".  The
 *    images are offered in the order their targets suggest (machine code for the device, then
 *    of its major version, then the newest PTX not newer than it, then the rest: image_order.c),
 *    a packed image inflated only when offered (image_unpack.c);
 *    PORTSSM_CUDA_IMAGE / PORTSSM_HIP_IMAGE=<name> (read when a device is first used) allows
 *    only that one, e.g. to run the sm_60 PTX on a newer GPU;
 *  - works in the device's primary context (CUDA) / current device (HIP), made current around
 *    each call and put back after, so it shares memory and streams with a caller who uses the
 *    vendor's runtime API and never changes the caller's own context state;
 *  - exports one symbol, portssm_module_backend (PSSM_MODULE_ENTRY_NAME in src/backend.h).
 *
 * The loaded code of a device is kept for the life of the process and shared by every context
 * on that device (a primary context is per device and per process anyway).  Two consequences
 * callers must know (README, "Errors"): a kernel fault (an illegal address) is sticky in the
 * driver, so every later call on that device fails and only a new process recovers; and a
 * caller that resets the device (cudaDeviceReset) destroys the loaded code with it.
 */
#include "device_module.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The driver's entry points (device_api.h), filled when the driver is opened. */
pssm_api_table pssm_api;

static pthread_mutex_t pssm_dm_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
    int initialized;
    portssm_status status;
    char reason[PSSM_DM_MESSAGE]; /* why the driver is unusable, or what it is */
    char probe_reason[8 * PSSM_DM_MESSAGE]; /* the images' list can be long */
    char abi_reason[128];
    const char *library;
    char version[32];
    int count;
    pssm_dm_device *devices;
} pssm_dm;

void pssm_dm_format(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

portssm_status pssm_dm_status_of(pssm_api_result r)
{
    return r == PSSM_API_ERR_OUT_OF_MEMORY ? PORTSSM_ERR_OUT_OF_MEMORY : PORTSSM_ERR_DEVICE;
}

portssm_status pssm_dm_fail(pssm_bctx *c, pssm_api_result r, const char *fmt, ...)
{
    char what[PSSM_DM_MESSAGE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return pssm_fail(c, pssm_dm_status_of(r), "%s failed: %s", what, pssm_api_error_name(r));
}

/* ================================================================= the driver */

static void *dm_dlsym(void *lib, const char *symbol, const char *fallback)
{
    void *sym = dlsym(lib, symbol);
    if (sym == NULL && fallback != NULL)
        sym = dlsym(lib, fallback);
    return sym;
}

/* Resolves every entry point; false with the reason when a required one is missing. */
static int dm_load_symbols(void *lib)
{
    void *sym;
#define PSSM_DM_RESOLVE_(member, ret, params, symbol, fallback, required)                          \
    sym = dm_dlsym(lib, symbol, fallback);                                                         \
    if (sym == NULL && (required)) {                                                               \
        pssm_dm_format(pssm_dm.reason, sizeof pssm_dm.reason,                                      \
                       "%s has no %s: the " PSSM_API_PRODUCT " driver is too old",                 \
                       pssm_dm.library, symbol);                                                   \
        return 0;                                                                                  \
    }                                                                                              \
    memcpy(&pssm_api.member, &sym, sizeof sym);
    PSSM_API_FUNCTIONS(PSSM_DM_RESOLVE_)
#undef PSSM_DM_RESOLVE_
    return 1;
}

static portssm_status dm_driver_init(void)
{
    static const char *const libraries[] = PSSM_API_LIBRARIES;
    const size_t n_libraries = sizeof libraries / sizeof libraries[0];
    char first_error[256] = "";
    void *lib = NULL;
    for (size_t i = 0; i < n_libraries && lib == NULL; i++) {
        /* RTLD_LOCAL: the driver's symbols stay out of the caller's namespace. */
        lib = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL) {
            pssm_dm.library = libraries[i];
        } else if (i == 0) {
            const char *e = dlerror();
            pssm_dm_format(first_error, sizeof first_error, "%s", e ? e : "unknown dlopen error");
        }
    }
    if (lib == NULL) {
        if (n_libraries > 1)
            pssm_dm_format(pssm_dm.reason, sizeof pssm_dm.reason,
                           "%s not found (%s), nor %zu versioned names (%s...)", libraries[0],
                           first_error, n_libraries - 1, libraries[1]);
        else
            pssm_dm_format(pssm_dm.reason, sizeof pssm_dm.reason, "%s not found (%s)", libraries[0],
                           first_error);
        return PORTSSM_ERR_NO_BACKEND;
    }
    if (!dm_load_symbols(lib))
        return PORTSSM_ERR_NO_BACKEND;

    pssm_api_result r = pssm_api.init(0);
    if (r != PSSM_API_SUCCESS) {
        pssm_dm_format(pssm_dm.reason, sizeof pssm_dm.reason, "%s failed: %s", pssm_api_symbol.init,
                       pssm_api_error_name(r));
        return PSSM_API_INIT_NO_DEVICE(r) ? PORTSSM_ERR_NO_DEVICE : PORTSSM_ERR_NO_BACKEND;
    }
    int version = 0;
    if (pssm_api.driver_version(&version) == PSSM_API_SUCCESS)
        pssm_api_version_string(version, pssm_dm.version, sizeof pssm_dm.version);
    else
        pssm_dm_format(pssm_dm.version, sizeof pssm_dm.version, "(unknown version)");

    int count = 0;
    r = pssm_api.device_count(&count);
    if (r == PSSM_API_ERR_NO_DEVICE || (r == PSSM_API_SUCCESS && count <= 0)) {
        pssm_dm_format(pssm_dm.reason, sizeof pssm_dm.reason, "no " PSSM_API_PRODUCT " device");
        return PORTSSM_ERR_NO_DEVICE;
    }
    if (r != PSSM_API_SUCCESS) {
        pssm_dm_format(pssm_dm.reason, sizeof pssm_dm.reason, "%s failed: %s",
                       pssm_api_symbol.device_count, pssm_api_error_name(r));
        return PORTSSM_ERR_NO_BACKEND;
    }
    pssm_dm.devices = (pssm_dm_device *)calloc((size_t)count, sizeof *pssm_dm.devices);
    if (pssm_dm.devices == NULL) {
        pssm_dm_format(pssm_dm.reason, sizeof pssm_dm.reason, "out of host memory");
        return PORTSSM_ERR_OUT_OF_MEMORY;
    }
    pssm_dm.count = count;
    pssm_dm_format(pssm_dm.reason, sizeof pssm_dm.reason, PSSM_API_PRODUCT " %s (%s), %d device%s",
                   pssm_dm.version, pssm_dm.library, count, count == 1 ? "" : "s");
    return PORTSSM_OK;
}

/* Opens the driver once per process; later calls return the first answer. Lock held. */
static portssm_status dm_driver_locked(void)
{
    if (!pssm_dm.initialized) {
        pssm_dm.initialized = 1;
        pssm_dm.status = dm_driver_init();
    }
    return pssm_dm.status;
}

/* ================================================================= loading a device's code */

/* Name, arch and launch limits: what needs no context. */
static pssm_api_result dm_query(pssm_dm_device *d, int32_t index)
{
    int warp = 0, sms = 0, gy = 0, gz = 0, shared = 0;
    pssm_api_result r = pssm_api.device_get(&d->dev, index);
    if (r == PSSM_API_SUCCESS)
        r = pssm_api.device_name(d->name, (int)sizeof d->name, d->dev);
    if (r == PSSM_API_SUCCESS)
        r = pssm_api_arch(d->dev, d->arch, sizeof d->arch);
    if (r == PSSM_API_SUCCESS)
        r = pssm_api.device_attribute(&warp, PSSM_API_ATTR_WARP_SIZE, d->dev);
    if (r == PSSM_API_SUCCESS)
        r = pssm_api.device_attribute(&sms, PSSM_API_ATTR_MULTIPROCESSORS, d->dev);
    if (r == PSSM_API_SUCCESS)
        r = pssm_api.device_attribute(&gy, PSSM_API_ATTR_MAX_GRID_Y, d->dev);
    if (r == PSSM_API_SUCCESS)
        r = pssm_api.device_attribute(&gz, PSSM_API_ATTR_MAX_GRID_Z, d->dev);
    /* A driver that cannot tell gets the limit every device has: plans then stay within it. */
    if (r == PSSM_API_SUCCESS &&
        pssm_api.device_attribute(&shared, PSSM_API_ATTR_MAX_SHARED_PER_BLOCK, d->dev) !=
            PSSM_API_SUCCESS)
        shared = 0;
    d->max_shared_per_block =
        shared > (int)PSSM_GPU_SHARED_PLAIN ? (uint32_t)shared : PSSM_GPU_SHARED_PLAIN;
    d->name[sizeof d->name - 1] = 0;
    d->warp_size = warp;
    d->multiprocessors = sms;
    d->max_grid_y = gy > 0 ? (uint32_t)gy : 1;
    d->max_grid_z = gz > 0 ? (uint32_t)gz : 1;
    return r;
}

/* Is `arch` one of the space-separated words of `list`? */
static int dm_word_in(const char *list, const char *arch)
{
    size_t n = strlen(arch);
    for (const char *p = strstr(list, arch); p != NULL; p = strstr(p + 1, arch))
        if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' '))
            return 1;
    return 0;
}

static void dm_unload_parts(pssm_api_module *modules, int n)
{
    for (int i = 0; i < n; i++)
        pssm_api.module_unload(modules[i]);
}

/* Looks every kernel up in the freshly loaded parts of `img`, each in the part the kernel list
 * names for it (a lookup in a part without the kernel would be a failed driver call, which
 * compute-sanitizer reports as an error).  False, with the parts unloaded, if one is missing. */
static int dm_resolve_kernels(pssm_dm_device *d, pssm_api_module *modules, const pssm_image *img)
{
    pssm_api_result r = PSSM_API_SUCCESS;
    int k = 0, at = 0;
    for (; k < PSSM_KERNEL_COUNT; k++) {
        const char *part = pssm_gpu_kernel_part(k);
        if (strcmp(img->parts[at].name, part) != 0) /* neighbours share a part: rarely taken */
            for (at = 0; at < img->part_count && strcmp(img->parts[at].name, part) != 0; at++)
                ;
        if (at == img->part_count) {
            pssm_dm_format(d->error, sizeof d->error, "image '%s' has no part %s (kernel %s)",
                           img->name, part, pssm_gpu_kernel_name(k));
            break;
        }
        r = pssm_api.module_function(&d->fn[k], modules[at], pssm_gpu_kernel_name(k));
        if (r != PSSM_API_SUCCESS) {
            pssm_dm_format(d->error, sizeof d->error,
                           "image '%s' has no kernel %s in part %s (%s: %s)", img->name,
                           pssm_gpu_kernel_name(k), part, pssm_api_symbol.module_function,
                           pssm_api_error_name(r));
            break;
        }
    }
    if (k < PSSM_KERNEL_COUNT) {
        d->status = PORTSSM_ERR_INTERNAL;
        dm_unload_parts(modules, img->part_count);
        return 0;
    }
    for (int i = 0; i < img->part_count; i++)
        d->modules[i] = modules[i];
    d->image = img;
    return 1;
}

/* Loads every part of `img` (its loadable bytes in `parts`); on failure unloads those loaded
 * and returns the first error, with the failing part's name in *failed. */
static pssm_api_result dm_load_parts(const pssm_image *img, const pssm_image_part *parts,
                                     pssm_api_module *modules, const char **failed)
{
    for (int i = 0; i < img->part_count; i++) {
        modules[i] = NULL;
        pssm_api_result r = pssm_api.module_load(&modules[i], parts[i].begin);
        if (r != PSSM_API_SUCCESS) {
            dm_unload_parts(modules, i);
            *failed = parts[i].name;
            return r;
        }
    }
    return PSSM_API_SUCCESS;
}

/* Tries the images in order (or only the one named by the env var) in the current context. */
static portssm_status dm_load_image(pssm_dm_device *d, int32_t index)
{
    const char *only = getenv(PSSM_API_IMAGE_ENV);
    char tried[PSSM_DM_MESSAGE] = "";
    size_t used = 0;
    int all_no_binary = 1, matched = 0;
    if (only != NULL && only[0] == 0)
        only = NULL;

    int order[PSSM_MAX_IMAGES];
    const int count = pssm_image_order(d->arch, order);
    for (int t = 0; t < count; t++) {
        const int i = order[t];
        const pssm_image *img = &pssm_images[i];
        if (only != NULL && strcmp(only, img->name) != 0)
            continue;
        matched = 1;
        if (img->part_count != PSSM_PART_COUNT) { /* a module and kernels of different builds */
            pssm_dm_format(d->error, sizeof d->error, "image '%s' has %d parts, the kernels %d",
                           img->name, img->part_count, PSSM_PART_COUNT);
            return d->status = PORTSSM_ERR_INTERNAL;
        }
        const pssm_image_part *parts = pssm_image_parts(i, d->error, sizeof d->error);
        if (parts == NULL)
            return d->status = PORTSSM_ERR_INTERNAL;
        pssm_api_module modules[PSSM_PART_COUNT];
        const char *part = "";
        pssm_api_result r = dm_load_parts(img, parts, modules, &part);
        if (r == PSSM_API_SUCCESS)
            return dm_resolve_kernels(d, modules, img) ? PORTSSM_OK : d->status;
        if (!PSSM_API_IS_IMAGE_ERROR(r)) {
            pssm_dm_format(d->error, sizeof d->error,
                           "%s of image '%s' (part %s) on device %d (%s, %s) failed: %s",
                           pssm_api_symbol.module_load, img->name, part, (int)index, d->name,
                           d->arch, pssm_api_error_name(r));
            return pssm_dm_status_of(r);
        }
        all_no_binary &= r == PSSM_API_ERR_NO_BINARY_FOR_GPU;
        if (used < sizeof tried) {
            int w = snprintf(tried + used, sizeof tried - used, "%s%s: %s", used ? "; " : "",
                             img->name, pssm_api_error_name(r));
            used += w > 0 ? (size_t)w : 0;
        }
    }

    d->state = -1; /* final: the images do not change while the process runs */
    if (!matched) {
        char names[1024] = "";
        for (int i = 0; i < pssm_image_count; i++)
            pssm_dm_format(names + strlen(names), sizeof names - strlen(names), "%s%s",
                           i ? ", " : "", pssm_images[i].name);
        pssm_dm_format(d->error, sizeof d->error,
                       "%s=%s names no kernel image of this build (it has: %s)", PSSM_API_IMAGE_ENV,
                       only, names);
        return PORTSSM_ERR_NO_KERNEL_IMAGE;
    }
    pssm_dm_format(d->error, sizeof d->error, "no kernel image for %s in this build (built for %s)",
                   d->arch, pssm_images_built_for);
    size_t len = strlen(d->error);
    /* The driver's own words only when they say more than "no binary for this GPU" (an old
     * driver rejecting newer PTX, say). */
    if (!all_no_binary)
        pssm_dm_format(d->error + len, sizeof d->error - len, ": %s", tried);
    len = strlen(d->error);
    if (pssm_images_dropped[0] && dm_word_in(pssm_images_dropped, d->arch))
        pssm_dm_format(d->error + len, sizeof d->error - len, "; %s was dropped: %s", d->arch,
                       pssm_images_dropped_hint);
    return PORTSSM_ERR_NO_KERNEL_IMAGE;
}

/* Makes device `index` ready (context + code), once per process.  Lock held. */
static portssm_status dm_device_locked(int32_t index, pssm_dm_device **out)
{
    pssm_dm_device *d = &pssm_dm.devices[index];
    *out = d;
    if (d->state == 1)
        return PORTSSM_OK;
    if (d->state == -1)
        return d->status;

    pssm_api_result r = dm_query(d, index);
    if (r != PSSM_API_SUCCESS) {
        pssm_dm_format(d->error, sizeof d->error, "querying device %d failed: %s", (int)index,
                       pssm_api_error_name(r));
        return d->status = pssm_dm_status_of(r);
    }
    if (!d->activated) {
        r = pssm_api_activate(d->dev, &d->ctx);
        if (r != PSSM_API_SUCCESS) {
            pssm_dm_format(d->error, sizeof d->error, "activating device %d (%s, %s) failed: %s",
                           (int)index, d->name, d->arch, pssm_api_error_name(r));
            return d->status = pssm_dm_status_of(r);
        }
        d->activated = 1;
    }
    int saved;
    r = pssm_api_enter(d->dev, d->ctx, &saved);
    if (r != PSSM_API_SUCCESS) {
        pssm_dm_format(d->error, sizeof d->error, "making device %d current failed: %s", (int)index,
                       pssm_api_error_name(r));
        return d->status = pssm_dm_status_of(r);
    }
    d->status = dm_load_image(d, index);
    pssm_api_leave(d->dev, saved);
    if (d->status == PORTSSM_OK)
        d->state = 1;
    else if (d->status == PORTSSM_ERR_INTERNAL) /* an image without all kernels stays so */
        d->state = -1;
    return d->status;
}

/* ================================================================= probe, device info */

/* "main (sm_75 ... + compute_90 PTX, 13.4 MB), legacy (...)": every image of the module. */
static void dm_images_text(char *out, size_t n)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < pssm_image_count && used < n; i++) {
        double bytes, inflated;
        pssm_image_sizes(i, &bytes, &inflated);
        char packed[48] = "";
        if (inflated != bytes)
            pssm_dm_format(packed, sizeof packed, " packed, %.1f MB inflated", inflated / 1e6);
        int w = snprintf(out + used, n - used, "%s%s (%s, %.1f MB%s)", i ? ", " : "",
                         pssm_images[i].name, pssm_images[i].targets, bytes / 1e6, packed);
        used += w > 0 ? (size_t)w : 0;
    }
}

static portssm_status dm_probe(int32_t *num_devices, const char **reason)
{
    pthread_mutex_lock(&pssm_dm_lock);
    portssm_status s = dm_driver_locked();
    char images[6 * PSSM_DM_MESSAGE];
    dm_images_text(images, sizeof images);
    if (s == PORTSSM_OK) {
        /* The first device stands for the machine: its code is what a default context uses.
         * Which code of the image the driver took: machine code for the device's own target
         * when the image lists it, else the JIT of the image's PTX. */
        pssm_dm_device *d;
        s = dm_device_locked(0, &d);
        if (s == PORTSSM_OK)
            pssm_dm_format(pssm_dm.probe_reason, sizeof pssm_dm.probe_reason,
                           "%s; device 0: %s (%s) runs image '%s' (%s), %s; images: %s",
                           pssm_dm.reason, d->name, d->arch, d->image->name, d->image->targets,
                           dm_word_in(d->image->targets, d->arch)
                               ? "its machine code for this target"
                               : "its PTX compiled by the driver (no machine code for this target)",
                           images);
        else
            pssm_dm_format(pssm_dm.probe_reason, sizeof pssm_dm.probe_reason, "%s; images: %s",
                           d->error, images);
    } else
        pssm_dm_format(pssm_dm.probe_reason, sizeof pssm_dm.probe_reason, "%s; images: %s",
                       pssm_dm.reason, images);
    const char *why = pssm_dm.probe_reason;
    if (num_devices)
        *num_devices = s == PORTSSM_OK ? pssm_dm.count : 0;
    if (reason)
        *reason = why;
    pthread_mutex_unlock(&pssm_dm_lock);
    return s;
}

/* The driver, and `device` in range; lock held. */
static portssm_status dm_check_device_locked(int32_t device, char *msg, size_t n)
{
    portssm_status s = dm_driver_locked();
    if (s != PORTSSM_OK) {
        pssm_dm_format(msg, n, "%s", pssm_dm.reason);
        return s;
    }
    if (device < 0 || device >= pssm_dm.count) {
        pssm_dm_format(msg, n, "device %d does not exist: " PSSM_API_PRODUCT " has %d device%s",
                       (int)device, pssm_dm.count, pssm_dm.count == 1 ? "" : "s");
        return PORTSSM_ERR_NO_DEVICE;
    }
    return PORTSSM_OK;
}

portssm_status pssm_dm_acquire(int32_t device, pssm_dm_device **out, char *msg, size_t n)
{
    pthread_mutex_lock(&pssm_dm_lock);
    portssm_status s = dm_check_device_locked(device, msg, n);
    if (s == PORTSSM_OK) {
        s = dm_device_locked(device, out);
        if (s != PORTSSM_OK)
            pssm_dm_format(msg, n, "%s", (*out)->error);
    }
    pthread_mutex_unlock(&pssm_dm_lock);
    return s;
}

static portssm_status dm_device_info(int32_t device, portssm_device_info *info)
{
    char msg[PSSM_DM_MESSAGE];
    pthread_mutex_lock(&pssm_dm_lock);
    portssm_status s = dm_check_device_locked(device, msg, sizeof msg);
    pthread_mutex_unlock(&pssm_dm_lock);
    if (s != PORTSSM_OK)
        return s;

    /* Only queries that need no context: asking about a device must not claim memory on it. */
    pssm_dm_device q;
    size_t bytes = 0;
    memset(&q, 0, sizeof q);
    pssm_api_result r = dm_query(&q, device);
    if (r == PSSM_API_SUCCESS)
        r = pssm_api.device_total_mem(&bytes, q.dev);
    if (r != PSSM_API_SUCCESS)
        return pssm_dm_status_of(r);
    memset(info, 0, sizeof *info);
    pssm_dm_format(info->name, sizeof info->name, "%s", q.name);
    pssm_dm_format(info->arch, sizeof info->arch, "%s", q.arch);
    info->warp_size = q.warp_size;
    info->multiprocessors = q.multiprocessors;
    info->total_memory = bytes;
    return PORTSSM_OK;
}

/* ================================================================= the table, the entry */

static const pssm_backend pssm_dm_backend = {
    .name = PSSM_API_BACKEND,
    .abi = PSSM_BACKEND_ABI,
    .probe = dm_probe,
    .device_info = dm_device_info,
    .open = pssm_dm_open,
    .close = pssm_dm_close,
    .set_stream = pssm_dm_set_stream,
    .synchronize = pssm_dm_synchronize,
    .stream_capturing = pssm_dm_stream_capturing,
    .mem_alloc = pssm_dm_mem_alloc,
    .mem_free = pssm_dm_mem_free,
    .mem_copy = pssm_dm_mem_copy,
    .mem_set = pssm_dm_mem_set,
    .event_create = pssm_dm_event_create,
    .event_destroy = pssm_dm_event_destroy,
    .event_record = pssm_dm_event_record,
    .event_elapsed_ms = pssm_dm_event_elapsed_ms,
    PSSM_GPU_OPS,
};

__attribute__((visibility("default"))) const pssm_backend *
portssm_module_backend(int32_t abi, const char **reason);

/* Cheap on purpose: the core may load a module only to list it; the driver is opened by probe. */
const pssm_backend *portssm_module_backend(int32_t abi, const char **reason)
{
    /* Checks the entry's own type against the contract at compile time. */
    pssm_module_entry_fn self = portssm_module_backend;
    (void)self;
    if (abi != PSSM_BACKEND_ABI) {
        pthread_mutex_lock(&pssm_dm_lock);
        pssm_dm_format(pssm_dm.abi_reason, sizeof pssm_dm.abi_reason,
                       "libportssm_" PSSM_API_BACKEND
                       ".so was built for backend ABI %d, the library "
                       "expects %d: install the module of the same portssm build",
                       PSSM_BACKEND_ABI, (int)abi);
        pthread_mutex_unlock(&pssm_dm_lock);
        if (reason)
            *reason = pssm_dm.abi_reason;
        return NULL;
    }
    if (reason)
        *reason = "";
    return &pssm_dm_backend;
}
