/*
 * hip_api.h - the HIP flavour of backends/gpu/device_module.c.
 *
 * Declares the few HIP types, constants and entry points the module uses, so the module builds
 * without ROCm headers and loads with any ROCm from 5.x on: libamdhip64 is opened with dlopen.
 * The error codes and hipDeviceAttribute_t values below are the same in ROCm 5.0 to 7.x (the
 * attribute enum was made CUDA-shaped in 5.0 and has only grown at the end since).  Below the
 * list are the few operations whose shape differs between HIP and the CUDA driver.
 */
#ifndef PSSM_HIP_API_H
#define PSSM_HIP_API_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PSSM_API_BACKEND "hip"
#define PSSM_API_PRODUCT "HIP"
/* The unversioned name comes with a ROCm install or its -dev package; the versioned ones are
 * what a runtime-only install has. */
#define PSSM_API_LIBRARIES                                                                      \
    {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"}
#define PSSM_API_IMAGE_ENV "PORTSSM_HIP_IMAGE"

typedef int pssm_api_result; /* hipError_t */
typedef int pssm_api_device; /* hipDevice_t */
typedef void *pssm_api_dptr; /* hipDeviceptr_t */
typedef void *pssm_api_ctx;  /* unused: HIP selects the device per thread */
typedef struct ihipModule_t *pssm_api_module;
typedef struct ihipModuleSymbol_t *pssm_api_function;
typedef struct ihipStream_t *pssm_api_stream;
typedef struct ihipEvent_t *pssm_api_event;

enum {
    PSSM_API_SUCCESS = 0,
    PSSM_API_ERR_OUT_OF_MEMORY = 2,      /* hipErrorOutOfMemory */
    PSSM_API_ERR_NO_DEVICE = 100,        /* hipErrorNoDevice */
    PSSM_API_ERR_NO_BINARY_FOR_GPU = 209 /* hipErrorNoBinaryForGpu */
};

/* hipInit's answer when the runtime loads but finds no GPU: hipErrorNoDevice, or (ROCm 5 without
 * /dev/kfd) hipErrorInvalidDevice (101). */
#define PSSM_API_INIT_NO_DEVICE(r) ((r) == PSSM_API_ERR_NO_DEVICE || (r) == 101)

/* hipModuleLoadData failures that mean "no code object in this bundle runs on this device":
 * hipErrorInvalidImage (200), hipErrorNoBinaryForGpu (209), hipErrorInvalidKernelFile (218),
 * hipErrorSharedObjectInitFailed (303: the code object did not load on this agent). */
#define PSSM_API_IS_IMAGE_ERROR(r) ((r) == 200 || (r) == 209 || (r) == 218 || (r) == 303)

enum {
    PSSM_API_ATTR_MAX_GRID_Y = 30,        /* hipDeviceAttributeMaxGridDimY */
    PSSM_API_ATTR_MAX_GRID_Z = 31,        /* hipDeviceAttributeMaxGridDimZ */
    PSSM_API_ATTR_WARP_SIZE = 87,         /* hipDeviceAttributeWarpSize */
    PSSM_API_ATTR_MULTIPROCESSORS = 63,   /* hipDeviceAttributeMultiprocessorCount */
    PSSM_API_ATTR_MAX_SHARED_PER_BLOCK = 74 /* hipDeviceAttributeMaxSharedMemoryPerBlock */
};
/* A workgroup may use its whole LDS (64 KB on CDNA and RDNA) with no opt-in. */
#define PSSM_API_SHARED_OPT_IN 0

#define PSSM_API_EVENT_DEFAULT 0u /* hipEventDefault: timing enabled */
/* hipModuleLaunchKernel's `extra` array (HIP's END marker is 3, not CUDA's 0). */
#define PSSM_API_LAUNCH_BUFFER_POINTER ((void *)1)
#define PSSM_API_LAUNCH_BUFFER_SIZE ((void *)2)
#define PSSM_API_LAUNCH_END ((void *)3)
/* An AMD dispatch packet counts the grid in work-items, 32 bits per dimension. */
#define PSSM_API_MAX_GRID_THREADS_X UINT64_C(0xffffffff)

/* X(member, return type, (parameters), symbol, fallback symbol, required) */
#define PSSM_API_FUNCTIONS(X)                                                                   \
    X(init, pssm_api_result, (unsigned flags), "hipInit", NULL, 1)                              \
    X(driver_version, pssm_api_result, (int *version), "hipDriverGetVersion", NULL, 1)          \
    X(device_count, pssm_api_result, (int *count), "hipGetDeviceCount", NULL, 1)                \
    X(device_get, pssm_api_result, (pssm_api_device * dev, int ordinal), "hipDeviceGet", NULL,  \
      1)                                                                                        \
    X(device_name, pssm_api_result, (char *name, int len, pssm_api_device dev),                 \
      "hipDeviceGetName", NULL, 1)                                                              \
    X(device_attribute, pssm_api_result, (int *value, int attribute, pssm_api_device dev),      \
      "hipDeviceGetAttribute", NULL, 1)                                                         \
    X(device_total_mem, pssm_api_result, (size_t * bytes, pssm_api_device dev),                 \
      "hipDeviceTotalMem", NULL, 1)                                                             \
    /* ROCm 6 renamed the entry point with a new struct layout; 5.x has only the plain name */  \
    X(device_properties, pssm_api_result, (void *props, int dev),                               \
      "hipGetDevicePropertiesR0600", "hipGetDeviceProperties", 1)                               \
    X(get_device, pssm_api_result, (int *dev), "hipGetDevice", NULL, 1)                         \
    X(set_device, pssm_api_result, (int dev), "hipSetDevice", NULL, 1)                          \
    X(stream_device, pssm_api_result, (pssm_api_stream stream, pssm_api_device * dev),          \
      "hipStreamGetDevice", NULL, 0)                                                            \
    X(module_load, pssm_api_result, (pssm_api_module * module, const void *image),              \
      "hipModuleLoadData", NULL, 1)                                                             \
    X(module_unload, pssm_api_result, (pssm_api_module module), "hipModuleUnload", NULL, 1)     \
    X(module_function, pssm_api_result,                                                         \
      (pssm_api_function * fn, pssm_api_module module, const char *name),                       \
      "hipModuleGetFunction", NULL, 1)                                                          \
    X(launch, pssm_api_result,                                                                  \
      (pssm_api_function fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,   \
       unsigned bz, unsigned shared_bytes, pssm_api_stream stream, void **params,               \
       void **extra),                                                                           \
      "hipModuleLaunchKernel", NULL, 1)                                                         \
    /* blocks of a kernel resident on one multiprocessor at once (launch planning's waves) */ \
    X(occupancy_blocks, pssm_api_result,                                                        \
      (int *blocks, pssm_api_function fn, int block_threads, size_t dynamic_shared),            \
      "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", NULL, 0)                            \
    X(mem_alloc, pssm_api_result, (pssm_api_dptr * ptr, size_t bytes), "hipMalloc", NULL, 1)    \
    X(mem_free, pssm_api_result, (pssm_api_dptr ptr), "hipFree", NULL, 1)                       \
    X(copy_htod, pssm_api_result,                                                               \
      (pssm_api_dptr dst, void *src, size_t bytes, pssm_api_stream stream),                     \
      "hipMemcpyHtoDAsync", NULL, 1)                                                            \
    X(copy_dtoh, pssm_api_result,                                                               \
      (void *dst, pssm_api_dptr src, size_t bytes, pssm_api_stream stream),                     \
      "hipMemcpyDtoHAsync", NULL, 1)                                                            \
    X(copy_dtod, pssm_api_result,                                                               \
      (pssm_api_dptr dst, pssm_api_dptr src, size_t bytes, pssm_api_stream stream),             \
      "hipMemcpyDtoDAsync", NULL, 1)                                                            \
    X(memset8, pssm_api_result,                                                                 \
      (pssm_api_dptr dst, unsigned char value, size_t bytes, pssm_api_stream stream),           \
      "hipMemsetD8Async", NULL, 1)                                                              \
    X(stream_sync, pssm_api_result, (pssm_api_stream stream), "hipStreamSynchronize", NULL, 1)  \
    /* graph capture status of a stream (0: none); absent in old drivers, then never */       \
    X(stream_capturing, pssm_api_result, (pssm_api_stream stream, int *status),            \
      "hipStreamIsCapturing", NULL, 0)                                                        \
    X(event_create, pssm_api_result, (pssm_api_event * ev, unsigned flags),                     \
      "hipEventCreateWithFlags", NULL, 1)                                                       \
    X(event_destroy, pssm_api_result, (pssm_api_event ev), "hipEventDestroy", NULL, 1)          \
    X(event_record, pssm_api_result, (pssm_api_event ev, pssm_api_stream stream),               \
      "hipEventRecord", NULL, 1)                                                                \
    X(event_sync, pssm_api_result, (pssm_api_event ev), "hipEventSynchronize", NULL, 1)         \
    X(event_elapsed, pssm_api_result, (float *ms, pssm_api_event start, pssm_api_event end),    \
      "hipEventElapsedTime", NULL, 1)                                                           \
    X(error_name, const char *, (pssm_api_result r), "hipGetErrorName", NULL, 1)

#include "../gpu/device_api.h"

/* ---------------------------------------------------------------- where HIP differs */

static inline pssm_api_dptr pssm_api_dptr_of(void *p) { return p; }
static inline void *pssm_api_ptr_of(pssm_api_dptr p) { return p; }

static inline const char *pssm_api_error_name(pssm_api_result r)
{
    const char *name = pssm_api.error_name ? pssm_api.error_name(r) : NULL;
    return name ? name : "hipError(unknown)";
}

/* HIP_VERSION encoding: major * 10^7 + minor * 10^5 + patch; 50221153 -> "5.2.21153". */
static inline void pssm_api_version_string(int v, char *buf, size_t n)
{
    snprintf(buf, n, "%d.%d.%d", v / 10000000, v / 100000 % 100, v % 100000);
}

/* HIP has one implicit context per device, chosen per thread with hipSetDevice. */
static inline pssm_api_result pssm_api_activate(pssm_api_device dev, pssm_api_ctx *ctx)
{
    (void)dev;
    *ctx = NULL;
    return PSSM_API_SUCCESS;
}

/* Makes the device current on the calling thread for one call, and puts back the caller's. */
static inline pssm_api_result pssm_api_enter(pssm_api_device dev, pssm_api_ctx ctx, int *saved)
{
    pssm_api_result r = pssm_api.get_device(saved);
    (void)ctx;
    if (r != PSSM_API_SUCCESS)
        return r;
    return *saved == dev ? PSSM_API_SUCCESS : pssm_api.set_device(dev);
}

static inline void pssm_api_leave(pssm_api_device dev, int saved)
{
    if (saved != dev)
        pssm_api.set_device(saved);
}

/* Are the dialect's copies to shared memory asynchronous here?  Not on HIP: they copy at once
 * (kernels/pssm_dialect.h). */
static inline int pssm_api_async_copies(const char *arch)
{
    (void)arch;
    return 0;
}

/*
 * "gfx90a" from hipDeviceProp_t.gcnArchName ("gfx90a:sramecc+:xnack-").  The struct's layout
 * differs between ROCm 5 and 6 (6 inserted fields before gcnArchName and renamed the entry point
 * to hipGetDevicePropertiesR0600), so instead of declaring either layout the properties are
 * written into a zeroed buffer far larger than any version's struct and the name is found by
 * its content: the first "gfx" followed by hex digits after the 256-byte `name` field, which
 * starts every layout.  A deliberate trade of elegance for working with every ROCm.
 */
#define PSSM_HIP_PROPS_BYTES 65536
static inline pssm_api_result pssm_api_arch(pssm_api_device dev, char *buf, size_t n)
{
    unsigned char *props = (unsigned char *)calloc(1, PSSM_HIP_PROPS_BYTES);
    if (props == NULL)
        return PSSM_API_ERR_OUT_OF_MEMORY;
    pssm_api_result r = pssm_api.device_properties(props, dev);
    snprintf(buf, n, "gfx(unknown)");
    for (size_t i = 256; r == PSSM_API_SUCCESS && i + 4 < PSSM_HIP_PROPS_BYTES; i++) {
        if (memcmp(props + i, "gfx", 3) != 0 || !strchr("0123456789abcdef", props[i + 3]) ||
            props[i + 3] == 0)
            continue;
        size_t len = 3;
        while (i + len < PSSM_HIP_PROPS_BYTES && props[i + len] != 0 && props[i + len] != ':' &&
               len + 1 < n)
            len++;
        memcpy(buf, props + i, len);
        buf[len] = 0;
        break;
    }
    free(props);
    return r;
}

/* Does `stream` belong to this device?  *known = 0 when this ROCm cannot tell (before 5.3). */
static inline pssm_api_result pssm_api_stream_on_device(pssm_api_stream stream,
                                                        pssm_api_device dev, pssm_api_ctx ctx,
                                                        int *known, int *same)
{
    pssm_api_device owner = -1;
    pssm_api_result r;
    (void)ctx;
    *known = 0;
    *same = 1;
    if (pssm_api.stream_device == NULL || stream == NULL)
        return PSSM_API_SUCCESS;
    r = pssm_api.stream_device(stream, &owner);
    if (r == PSSM_API_SUCCESS) {
        *known = 1;
        *same = owner == dev;
    }
    return r;
}

#endif /* PSSM_HIP_API_H */
