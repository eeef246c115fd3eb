/*
 * vendor_stream.h - a caller's own GPU stream, made the way an application would make it: for
 * test_api's stream tests on the cuda and hip labels, and for `portssm_bench --graph` (CUDA
 * graph capture of the ops, the way the reference timings were taken).
 *
 * Neither links a vendor runtime (the library must not need one), so the few driver entry points
 * are opened with dlopen: libcuda.so.1 (driver API) or libamdhip64 (HIP).  The stream lives in
 * the device's primary context, the one the CUDA runtime (and so torch) uses.  A gate is a host
 * callback that blocks the stream until released: work queued behind it must not have run.
 */
#ifndef PSSM_TEST_VENDOR_STREAM_H
#define PSSM_TEST_VENDOR_STREAM_H

#include <stddef.h>

#include "portssm.h"

typedef struct vs_vendor vs_vendor;

/* Opens the driver of `backend` (CUDA or HIP) for `device`; NULL with a reason in why. */
vs_vendor *vs_open(portssm_backend backend, int device, char *why, size_t n);
void vs_close(vs_vendor *v);

/* A non-blocking stream of the device's primary context; NULL on failure (reason in why). */
void *vs_stream_create(vs_vendor *v, char *why, size_t n);
void vs_stream_destroy(vs_vendor *v, void *stream);
/* 1: all work queued on the stream has finished, 0: not yet, -1: error. */
int vs_stream_done(vs_vendor *v, void *stream);

/* A stream of a second context on the same device (CUDA only; NULL where there is none). */
void *vs_foreign_stream_create(vs_vendor *v);
void vs_foreign_stream_destroy(vs_vendor *v, void *stream);

/* Queues a host callback that holds the stream until vs_gate_open (or 20 s pass); 0 on success. */
int vs_gate_close(vs_vendor *v, void *stream);
void vs_gate_open(vs_vendor *v);

/* A synchronous device-to-host copy on the legacy default stream, which does not wait for a
 * non-blocking stream: it sees device memory as it is now.  0 on success. */
int vs_peek(vs_vendor *v, void *dst, const void *device_src, size_t bytes);

/* The device that owns a device pointer (CUDA: its ordinal); -1 on error, -2 where the driver
 * cannot say (HIP here). */
int vs_pointer_device(vs_vendor *v, const void *device_ptr);

/* CUDA graphs (NULL / non-zero where unsupported): capture what is queued on `stream` between
 * begin and end into an executable graph, launch it on the stream, destroy it. */
int vs_has_graphs(const vs_vendor *v);
int vs_capture_begin(vs_vendor *v, void *stream);
void *vs_capture_end(vs_vendor *v, void *stream);
int vs_graph_launch(vs_vendor *v, void *graph, void *stream);
void vs_graph_destroy(vs_vendor *v, void *graph);

#endif
