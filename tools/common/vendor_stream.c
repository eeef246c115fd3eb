/*
 * vendor_stream.c - see vendor_stream.h.  The CUDA driver API and HIP have the same shapes for
 * everything used here except contexts, so one table of entry points serves both; the values
 * (stream flags, "not ready") are the ones both APIs define and never renumber.
 */
#define _POSIX_C_SOURCE 200809L
#include "vendor_stream.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { VS_STREAM_NON_BLOCKING = 1, VS_NOT_READY = 600 }; /* same value in CUDA and HIP */

typedef void (*vs_callback)(void *stream, int status, void *user);

struct vs_vendor {
    void *lib;
    int is_cuda;
    int device;
    void *primary; /* CUDA: the device's primary context */
    int (*init)(unsigned);
    int (*device_get)(int *, int);             /* CUDA */
    int (*primary_retain)(void **, int);       /* CUDA */
    int (*primary_release)(int);               /* CUDA */
    int (*ctx_push)(void *);                   /* CUDA */
    int (*ctx_pop)(void **);                   /* CUDA */
    int (*ctx_create)(void **, unsigned, int); /* CUDA, optional */
    int (*ctx_destroy)(void *);                /* CUDA, optional */
    int (*set_device)(int);                    /* HIP */
    int (*stream_create)(void **, unsigned);
    int (*stream_destroy)(void *);
    int (*stream_query)(void *);
    int (*stream_callback)(void *, vs_callback, void *, unsigned);
    int (*copy_dtoh)(void *, unsigned long long, size_t);
    int (*copy_dtoh_hip)(void *, void *, size_t);
    int (*pointer_attribute)(void *, int, unsigned long long); /* CUDA, optional */
    /* CUDA graphs, optional */
    int (*capture_begin)(void *, int);
    int (*capture_end)(void *, void **);
    int (*graph_instantiate)(void **, void *, unsigned long long);
    int (*graph_launch)(void *, void *);
    int (*graph_exec_destroy)(void *);
    int (*graph_destroy)(void *);
};

static atomic_int vs_gate_is_open;

static void *sym(vs_vendor *v, const char *name, int required, char *why, size_t n)
{
    void *p = dlsym(v->lib, name);
    if (!p && required && why && why[0] == '\0')
        snprintf(why, n, "%s has no %s", v->is_cuda ? "libcuda.so.1" : "libamdhip64", name);
    return p;
}

/* Makes the device current on this thread for the calls that follow (CUDA: push the primary
 * context, undone by leave; HIP: the thread's current device). */
static int enter(vs_vendor *v)
{
    return v->is_cuda ? v->ctx_push(v->primary) : v->set_device(v->device);
}
static void leave(vs_vendor *v)
{
    void *popped;
    if (v->is_cuda)
        v->ctx_pop(&popped);
}

vs_vendor *vs_open(portssm_backend backend, int device, char *why, size_t n)
{
    why[0] = '\0';
    vs_vendor *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    v->is_cuda = backend == PORTSSM_BACKEND_CUDA;
    v->device = device;
    const char *libs_cuda[] = {"libcuda.so.1", NULL};
    const char *libs_hip[] = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                              "libamdhip64.so.5", NULL};
    for (const char **l = v->is_cuda ? libs_cuda : libs_hip; *l && !v->lib; l++)
        v->lib = dlopen(*l, RTLD_NOW | RTLD_LOCAL);
    if (!v->lib) {
        snprintf(why, n, "cannot open the %s driver: %s", v->is_cuda ? "CUDA" : "HIP", dlerror());
        free(v);
        return NULL;
    }
    if (v->is_cuda) {
        *(void **)&v->init = sym(v, "cuInit", 1, why, n);
        *(void **)&v->device_get = sym(v, "cuDeviceGet", 1, why, n);
        *(void **)&v->primary_retain = sym(v, "cuDevicePrimaryCtxRetain", 1, why, n);
        *(void **)&v->primary_release = sym(v, "cuDevicePrimaryCtxRelease_v2", 1, why, n);
        *(void **)&v->ctx_push = sym(v, "cuCtxPushCurrent_v2", 1, why, n);
        *(void **)&v->ctx_pop = sym(v, "cuCtxPopCurrent_v2", 1, why, n);
        *(void **)&v->ctx_create = sym(v, "cuCtxCreate_v2", 0, why, n);
        *(void **)&v->ctx_destroy = sym(v, "cuCtxDestroy_v2", 0, why, n);
        *(void **)&v->stream_create = sym(v, "cuStreamCreate", 1, why, n);
        *(void **)&v->stream_destroy = sym(v, "cuStreamDestroy_v2", 1, why, n);
        *(void **)&v->pointer_attribute = sym(v, "cuPointerGetAttribute", 0, why, n);
        *(void **)&v->stream_query = sym(v, "cuStreamQuery", 1, why, n);
        *(void **)&v->stream_callback = sym(v, "cuStreamAddCallback", 1, why, n);
        *(void **)&v->copy_dtoh = sym(v, "cuMemcpyDtoH_v2", 1, why, n);
        *(void **)&v->capture_begin = sym(v, "cuStreamBeginCapture_v2", 0, why, n);
        *(void **)&v->capture_end = sym(v, "cuStreamEndCapture", 0, why, n);
        *(void **)&v->graph_instantiate = sym(v, "cuGraphInstantiateWithFlags", 0, why, n);
        *(void **)&v->graph_launch = sym(v, "cuGraphLaunch", 0, why, n);
        *(void **)&v->graph_exec_destroy = sym(v, "cuGraphExecDestroy", 0, why, n);
        *(void **)&v->graph_destroy = sym(v, "cuGraphDestroy", 0, why, n);
    } else {
        *(void **)&v->init = sym(v, "hipInit", 1, why, n);
        *(void **)&v->set_device = sym(v, "hipSetDevice", 1, why, n);
        *(void **)&v->stream_create = sym(v, "hipStreamCreateWithFlags", 1, why, n);
        *(void **)&v->stream_destroy = sym(v, "hipStreamDestroy", 1, why, n);
        *(void **)&v->stream_query = sym(v, "hipStreamQuery", 1, why, n);
        *(void **)&v->stream_callback = sym(v, "hipStreamAddCallback", 1, why, n);
        *(void **)&v->copy_dtoh_hip = sym(v, "hipMemcpyDtoH", 1, why, n);
    }
    int r = why[0] ? -1 : v->init(0);
    if (r == 0 && v->is_cuda) {
        int dev = -1;
        r = v->device_get(&dev, device);
        if (r == 0)
            r = v->primary_retain(&v->primary, dev);
        v->device = dev;
    }
    if (r != 0) {
        if (!why[0])
            snprintf(why, n, "driver initialisation failed (error %d)", r);
        dlclose(v->lib);
        free(v);
        return NULL;
    }
    return v;
}

void vs_close(vs_vendor *v)
{
    if (!v)
        return;
    if (v->is_cuda && v->primary)
        v->primary_release(v->device);
    dlclose(v->lib);
    free(v);
}

void *vs_stream_create(vs_vendor *v, char *why, size_t n)
{
    void *s = NULL;
    int r = enter(v);
    if (r == 0) {
        r = v->stream_create(&s, VS_STREAM_NON_BLOCKING);
        leave(v);
    }
    if (r != 0) {
        snprintf(why, n, "stream creation failed (error %d)", r);
        return NULL;
    }
    return s;
}

void vs_stream_destroy(vs_vendor *v, void *stream)
{
    if (stream && enter(v) == 0) {
        v->stream_destroy(stream);
        leave(v);
    }
}

int vs_stream_done(vs_vendor *v, void *stream)
{
    if (enter(v) != 0)
        return -1;
    int r = v->stream_query(stream);
    leave(v);
    return r == 0 ? 1 : r == VS_NOT_READY ? 0 : -1;
}

void *vs_foreign_stream_create(vs_vendor *v)
{
    void *ctx = NULL, *s = NULL, *popped;
    if (!v->is_cuda || !v->ctx_create || !v->ctx_destroy)
        return NULL;
    if (v->ctx_create(&ctx, 0, v->device) != 0) /* made current on this thread */
        return NULL;
    if (v->stream_create(&s, VS_STREAM_NON_BLOCKING) != 0) {
        v->ctx_pop(&popped);
        v->ctx_destroy(ctx);
        return NULL;
    }
    v->ctx_pop(&popped);
    return s;
}

void vs_foreign_stream_destroy(vs_vendor *v, void *stream)
{
    if (!stream)
        return;
    /* cuStreamGetCtx would tell the context, but it is optional in old drivers: the context
     * made by vs_foreign_stream_create is the one current while its stream is destroyed. */
    int (*get_ctx)(void *, void **) = (int (*)(void *, void **))dlsym(v->lib, "cuStreamGetCtx");
    void *ctx = NULL, *popped;
    if (get_ctx && get_ctx(stream, &ctx) == 0 && ctx) {
        v->ctx_push(ctx);
        v->stream_destroy(stream);
        v->ctx_pop(&popped);
        v->ctx_destroy(ctx);
    }
}

/* Runs on the driver's callback thread and holds the stream: it may not call the driver. */
static void gate(void *stream, int status, void *user)
{
    (void)stream, (void)status, (void)user;
    struct timespec tick = {0, 1000000};
    for (int i = 0; i < 20000 && !atomic_load(&vs_gate_is_open); i++)
        nanosleep(&tick, NULL);
}

int vs_gate_close(vs_vendor *v, void *stream)
{
    atomic_store(&vs_gate_is_open, 0);
    int r = enter(v);
    if (r == 0) {
        r = v->stream_callback(stream, gate, NULL, 0);
        leave(v);
    }
    return r;
}

void vs_gate_open(vs_vendor *v)
{
    (void)v;
    atomic_store(&vs_gate_is_open, 1);
}

int vs_peek(vs_vendor *v, void *dst, const void *device_src, size_t bytes)
{
    int r = enter(v);
    if (r != 0)
        return r;
    if (v->is_cuda)
        r = v->copy_dtoh(dst, (unsigned long long)(uintptr_t)device_src, bytes);
    else
        r = v->copy_dtoh_hip(dst, (void *)device_src, bytes);
    leave(v);
    return r;
}

int vs_pointer_device(vs_vendor *v, const void *device_ptr)
{
    enum { CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9 };
    if (!v->is_cuda || !v->pointer_attribute)
        return -2;
    int ordinal = -1;
    if (enter(v) != 0)
        return -1;
    const int r = v->pointer_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                       (unsigned long long)(uintptr_t)device_ptr);
    leave(v);
    return r == 0 ? ordinal : -1;
}

int vs_has_graphs(const vs_vendor *v)
{
    return v && v->is_cuda && v->capture_begin && v->capture_end && v->graph_instantiate &&
           v->graph_launch && v->graph_exec_destroy && v->graph_destroy;
}

int vs_capture_begin(vs_vendor *v, void *stream)
{
    if (!vs_has_graphs(v))
        return -1;
    int r = enter(v);
    if (r == 0) {
        r = v->capture_begin(stream, 1 /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */);
        leave(v);
    }
    return r;
}

void *vs_capture_end(vs_vendor *v, void *stream)
{
    void *graph = NULL, *exec = NULL;
    if (!vs_has_graphs(v) || enter(v) != 0)
        return NULL;
    if (v->capture_end(stream, &graph) == 0 && graph) {
        if (v->graph_instantiate(&exec, graph, 0) != 0)
            exec = NULL;
        v->graph_destroy(graph); /* the executable graph is independent of it */
    }
    leave(v);
    return exec;
}

int vs_graph_launch(vs_vendor *v, void *graph, void *stream)
{
    if (!vs_has_graphs(v) || !graph)
        return -1;
    int r = enter(v);
    if (r == 0) {
        r = v->graph_launch(graph, stream);
        leave(v);
    }
    return r;
}

void vs_graph_destroy(vs_vendor *v, void *graph)
{
    if (vs_has_graphs(v) && graph && enter(v) == 0) {
        v->graph_exec_destroy(graph);
        leave(v);
    }
}
