/*
 * cuda_api.h - the CUDA flavour of backends/gpu/device_module.c.
 *
 * Declares the few CUDA driver-API types, constants and entry points the module uses (values
 * from the driver API, which never renumbers them), so no CUDA header is needed to build the
 * module and no CUDA runtime is needed to run it: libcuda.so.1 comes with the driver.  Below the
 * list are the few operations whose shape differs between the CUDA driver and HIP.
 *
 * Symbol versions matter: plain "cuMemAlloc" is the 32-bit-pointer entry point of CUDA 3.1,
 * so the _v2 names that cuda.h maps to are spelt out.
 */
#ifndef PSSM_CUDA_API_H
#define PSSM_CUDA_API_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PSSM_API_BACKEND "cuda"
#define PSSM_API_PRODUCT "CUDA"
#define PSSM_API_LIBRARIES {"libcuda.so.1"}
#define PSSM_API_IMAGE_ENV "PORTSSM_CUDA_IMAGE"

typedef int pssm_api_result;              /* CUresult */
typedef int pssm_api_device;              /* CUdevice */
typedef unsigned long long pssm_api_dptr; /* CUdeviceptr on 64-bit hosts */
typedef struct CUctx_st *pssm_api_ctx;
typedef struct CUmod_st *pssm_api_module;
typedef struct CUfunc_st *pssm_api_function;
typedef struct CUstream_st *pssm_api_stream;
typedef struct CUevent_st *pssm_api_event;

enum {
    PSSM_API_SUCCESS = 0,
    PSSM_API_ERR_OUT_OF_MEMORY = 2,      /* CUDA_ERROR_OUT_OF_MEMORY */
    PSSM_API_ERR_NO_DEVICE = 100,        /* CUDA_ERROR_NO_DEVICE */
    PSSM_API_ERR_NO_BINARY_FOR_GPU = 209 /* CUDA_ERROR_NO_BINARY_FOR_GPU */
};

/* cuInit's answer on a machine whose driver works but has no device. */
#define PSSM_API_INIT_NO_DEVICE(r) ((r) == PSSM_API_ERR_NO_DEVICE)

/* cuModuleLoadData failures that mean "nothing in this image runs on this device (with this
 * driver)", as opposed to a device that is out of memory or broken: INVALID_IMAGE (200),
 * NO_BINARY_FOR_GPU (209), INVALID_PTX (218), JIT_COMPILER_NOT_FOUND (221),
 * UNSUPPORTED_PTX_VERSION (222: PTX newer than the driver), JIT_COMPILATION_DISABLED (223). */
#define PSSM_API_IS_IMAGE_ERROR(r)                                                              \
    ((r) == 200 || (r) == 209 || (r) == 218 || (r) == 221 || (r) == 222 || (r) == 223)

enum {
    PSSM_API_ATTR_MAX_GRID_Y = 6,     /* CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y */
    PSSM_API_ATTR_MAX_GRID_Z = 7,     /* CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z */
    PSSM_API_ATTR_WARP_SIZE = 10,     /* CU_DEVICE_ATTRIBUTE_WARP_SIZE */
    PSSM_API_ATTR_MULTIPROCESSORS = 16, /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    PSSM_API_ATTR_CC_MAJOR = 75,      /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
    PSSM_API_ATTR_CC_MINOR = 76,      /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
    /* CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: with the kernel's opt-in below */
    PSSM_API_ATTR_MAX_SHARED_PER_BLOCK = 97
};
/* A kernel may use more than 48 KB of shared memory only after
 * cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) raised its limit. */
#define PSSM_API_SHARED_OPT_IN 1
#define PSSM_API_FUNC_ATTR_MAX_DYNAMIC_SHARED 8 /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
#define PSSM_API_FUNC_ATTR_CARVEOUT 9 /* CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT */

#define PSSM_API_EVENT_DEFAULT 0u /* CU_EVENT_DEFAULT: timing enabled */
/* cuLaunchKernel's `extra` array: CU_LAUNCH_PARAM_BUFFER_POINTER, _SIZE, _END. */
#define PSSM_API_LAUNCH_BUFFER_POINTER ((void *)1)
#define PSSM_API_LAUNCH_BUFFER_SIZE ((void *)2)
#define PSSM_API_LAUNCH_END ((void *)0)
/* CUDA grids count blocks in 32 bits per dimension with no limit on blocks * threads. */
#define PSSM_API_MAX_GRID_THREADS_X UINT64_MAX

/* X(member, return type, (parameters), symbol, fallback symbol, required) */
#define PSSM_API_FUNCTIONS(X)                                                                   \
    X(init, pssm_api_result, (unsigned flags), "cuInit", NULL, 1)                               \
    X(driver_version, pssm_api_result, (int *version), "cuDriverGetVersion", NULL, 1)           \
    X(device_count, pssm_api_result, (int *count), "cuDeviceGetCount", NULL, 1)                 \
    X(device_get, pssm_api_result, (pssm_api_device * dev, int ordinal), "cuDeviceGet", NULL,   \
      1)                                                                                        \
    X(device_name, pssm_api_result, (char *name, int len, pssm_api_device dev),                 \
      "cuDeviceGetName", NULL, 1)                                                               \
    X(device_attribute, pssm_api_result, (int *value, int attribute, pssm_api_device dev),      \
      "cuDeviceGetAttribute", NULL, 1)                                                          \
    X(device_total_mem, pssm_api_result, (size_t * bytes, pssm_api_device dev),                 \
      "cuDeviceTotalMem_v2", NULL, 1)                                                           \
    X(primary_ctx_retain, pssm_api_result, (pssm_api_ctx * ctx, pssm_api_device dev),           \
      "cuDevicePrimaryCtxRetain", NULL, 1)                                                      \
    X(ctx_push, pssm_api_result, (pssm_api_ctx ctx), "cuCtxPushCurrent_v2", NULL, 1)            \
    X(ctx_pop, pssm_api_result, (pssm_api_ctx * ctx), "cuCtxPopCurrent_v2", NULL, 1)            \
    X(stream_ctx, pssm_api_result, (pssm_api_stream stream, pssm_api_ctx * ctx),                \
      "cuStreamGetCtx", NULL, 0)                                                                \
    X(module_load, pssm_api_result, (pssm_api_module * module, const void *image),              \
      "cuModuleLoadData", NULL, 1)                                                              \
    X(module_unload, pssm_api_result, (pssm_api_module module), "cuModuleUnload", NULL, 1)      \
    X(module_function, pssm_api_result,                                                         \
      (pssm_api_function * fn, pssm_api_module module, const char *name),                       \
      "cuModuleGetFunction", NULL, 1)                                                           \
    X(launch, pssm_api_result,                                                                  \
      (pssm_api_function fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,   \
       unsigned bz, unsigned shared_bytes, pssm_api_stream stream, void **params,               \
       void **extra),                                                                           \
      "cuLaunchKernel", NULL, 1)                                                                \
    X(func_set_attribute, pssm_api_result, (pssm_api_function fn, int attribute, int value),    \
      "cuFuncSetAttribute", NULL, 1)                                                            \
    /* blocks of a kernel resident on one multiprocessor at once (launch planning's waves) */ \
    X(occupancy_blocks, pssm_api_result,                                                        \
      (int *blocks, pssm_api_function fn, int block_threads, size_t dynamic_shared),            \
      "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL, 0)                                   \
    X(mem_alloc, pssm_api_result, (pssm_api_dptr * ptr, size_t bytes), "cuMemAlloc_v2", NULL,   \
      1)                                                                                        \
    X(mem_free, pssm_api_result, (pssm_api_dptr ptr), "cuMemFree_v2", NULL, 1)                  \
    X(copy_htod, pssm_api_result,                                                               \
      (pssm_api_dptr dst, const void *src, size_t bytes, pssm_api_stream stream),               \
      "cuMemcpyHtoDAsync_v2", NULL, 1)                                                          \
    X(copy_dtoh, pssm_api_result,                                                               \
      (void *dst, pssm_api_dptr src, size_t bytes, pssm_api_stream stream),                     \
      "cuMemcpyDtoHAsync_v2", NULL, 1)                                                          \
    X(copy_dtod, pssm_api_result,                                                               \
      (pssm_api_dptr dst, pssm_api_dptr src, size_t bytes, pssm_api_stream stream),             \
      "cuMemcpyDtoDAsync_v2", NULL, 1)                                                          \
    X(memset8, pssm_api_result,                                                                 \
      (pssm_api_dptr dst, unsigned char value, size_t bytes, pssm_api_stream stream),           \
      "cuMemsetD8Async", NULL, 1)                                                               \
    X(stream_sync, pssm_api_result, (pssm_api_stream stream), "cuStreamSynchronize", NULL, 1)   \
    /* graph capture status of a stream (0: none); absent in old drivers, then never */       \
    X(stream_capturing, pssm_api_result, (pssm_api_stream stream, int *status),            \
      "cuStreamIsCapturing", NULL, 0)                                                        \
    X(event_create, pssm_api_result, (pssm_api_event * ev, unsigned flags), "cuEventCreate",    \
      NULL, 1)                                                                                  \
    X(event_destroy, pssm_api_result, (pssm_api_event ev), "cuEventDestroy_v2", NULL, 1)        \
    X(event_record, pssm_api_result, (pssm_api_event ev, pssm_api_stream stream),               \
      "cuEventRecord", NULL, 1)                                                                 \
    X(event_sync, pssm_api_result, (pssm_api_event ev), "cuEventSynchronize", NULL, 1)          \
    /* _v2 (CUDA 12.8) reports events recorded on different contexts; older drivers: v1 */      \
    X(event_elapsed, pssm_api_result, (float *ms, pssm_api_event start, pssm_api_event end),    \
      "cuEventElapsedTime_v2", "cuEventElapsedTime", 1)                                         \
    X(error_name, pssm_api_result, (pssm_api_result r, const char **name), "cuGetErrorName",    \
      NULL, 1)

#include "../gpu/device_api.h"

/* ---------------------------------------------------------------- where CUDA differs */

static inline pssm_api_dptr pssm_api_dptr_of(void *p) { return (pssm_api_dptr)(uintptr_t)p; }
static inline void *pssm_api_ptr_of(pssm_api_dptr p) { return (void *)(uintptr_t)p; }

static inline const char *pssm_api_error_name(pssm_api_result r)
{
    const char *name = NULL;
    if (pssm_api.error_name == NULL || pssm_api.error_name(r, &name) != PSSM_API_SUCCESS ||
        name == NULL)
        return "CUDA_ERROR_(unknown)";
    return name;
}

/* 13000 -> "13.0" */
static inline void pssm_api_version_string(int v, char *buf, size_t n)
{
    snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
}

/* Work on a device happens in its primary context: the one the CUDA runtime API uses, so that
 * memory, streams and events are shared with a caller who uses the runtime API. */
static inline pssm_api_result pssm_api_activate(pssm_api_device dev, pssm_api_ctx *ctx)
{
    return pssm_api.primary_ctx_retain(ctx, dev);
}

/* Makes the device current on the calling thread for one call, and puts back what was current:
 * the caller's own context state is never changed. */
static inline pssm_api_result pssm_api_enter(pssm_api_device dev, pssm_api_ctx ctx, int *saved)
{
    (void)dev;
    *saved = 0;
    return pssm_api.ctx_push(ctx);
}

static inline void pssm_api_leave(pssm_api_device dev, int saved)
{
    pssm_api_ctx popped;
    (void)dev;
    (void)saved;
    pssm_api.ctx_pop(&popped);
}

/* "sm_90" from the compute capability. */
static inline pssm_api_result pssm_api_arch(pssm_api_device dev, char *buf, size_t n)
{
    int major = 0, minor = 0;
    pssm_api_result r = pssm_api.device_attribute(&major, PSSM_API_ATTR_CC_MAJOR, dev);
    if (r == PSSM_API_SUCCESS)
        r = pssm_api.device_attribute(&minor, PSSM_API_ATTR_CC_MINOR, dev);
    if (r == PSSM_API_SUCCESS)
        snprintf(buf, n, "sm_%d%d", major, minor);
    return r;
}

/* Are the dialect's copies to shared memory asynchronous on this device (`arch` as
 * pssm_api_arch writes it)?  cp.async: sm_80 and newer (its kernels are built for the device's
 * architecture; a PTX image of an older one copies at once, which stays correct). */
static inline int pssm_api_async_copies(const char *arch)
{
    return strncmp(arch, "sm_", 3) == 0 && atoi(arch + 3) >= 80;
}

/* Does `stream` belong to this device's primary context?  *known = 0 when it cannot be told. */
static inline pssm_api_result pssm_api_stream_on_device(pssm_api_stream stream,
                                                        pssm_api_device dev, pssm_api_ctx ctx,
                                                        int *known, int *same)
{
    pssm_api_ctx owner = NULL;
    pssm_api_result r;
    (void)dev;
    *known = 0;
    *same = 1;
    if (pssm_api.stream_ctx == NULL)
        return PSSM_API_SUCCESS;
    r = pssm_api.stream_ctx(stream, &owner);
    if (r == PSSM_API_SUCCESS) {
        *known = 1;
        *same = owner == ctx;
    }
    return r;
}

#endif /* PSSM_CUDA_API_H */
