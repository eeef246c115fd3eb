/*
 * core.h - what the core's own files share: the context, this thread's error message, the
 * backend registry and the selection of a backend.  Backends never see this header.
 */
#ifndef PSSM_CORE_H
#define PSSM_CORE_H

#include "backend.h"

#define PSSM_REPORT_CAPACITY 2048

struct portssm_context {
    pssm_bctx b;                       /* the backend's view; b.error is portssm_last_error */
    const pssm_backend *be;
    portssm_backend kind;
    char report[PSSM_REPORT_CAPACITY]; /* how the backend was chosen                      */
    void *workspace;                   /* the context's own scratch (device memory), or NULL */
    size_t workspace_bytes;
};

/* The context's own workspace of at least `bytes` for op `fn`, grown when needed (after waiting
 * for the stream; refused while the stream is being captured). */
portssm_status pssm_context_workspace(portssm_context *ctx, const char *fn, size_t bytes,
                                      portssm_workspace *ws);
/* Frees the context's own workspace (after waiting for the stream). */
void pssm_context_workspace_release(portssm_context *ctx);

/* ---- errors without a context (failed portssm_create, NULL ctx): one message per thread */

const char *pssm_thread_error(void);
void pssm_thread_clear(void);
portssm_status pssm_thread_fail(portssm_status status, const char *fmt, ...) PSSM_PRINTF(2, 3);

/* Entry of a public call on a context: a NULL ctx fails on this thread; otherwise the context's
 * message is cleared, since a message only lives until the next call on its context. */
#define PSSM_ENTER(ctx, fn)                                                                     \
    do {                                                                                        \
        if (!(ctx))                                                                             \
            return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT, "%s: 'ctx' is NULL", (fn));   \
        (ctx)->b.error[0] = '\0';                                                               \
    } while (0)

/* What a public call returns after calling into the backend: on success the context's message
 * is cleared; a failure the backend did not explain gets a generic message naming `fn`. */
portssm_status pssm_backend_result(portssm_context *ctx, const char *fn, portssm_status status);

/* ---- registry (registry.c) */

typedef struct pssm_probe {
    const pssm_backend *table; /* NULL unless status is OK                    */
    portssm_status status;
    int32_t num_devices;
    const char *reason;        /* lives as long as the process              */
} pssm_probe;

/* A concrete backend: CPU, CUDA, HIP or SIM (not AUTO). */
int pssm_backend_is_concrete(portssm_backend b);
/* Probes b once per process, thread-safe.  b must be concrete. */
const pssm_probe *pssm_registry_probe(portssm_backend b);

/* ---- backend strings (backend_parse.c) */

/* What a backend string may be, for messages. */
extern const char pssm_backend_values[];
/* 1 with *kind and *device (-1: none named) on success; 0 with the problem written to `why`,
 * outputs unwritten. */
int pssm_parse_backend(const char *text, portssm_backend *kind, int32_t *device, char *why,
                       size_t why_size);

/* ---- selection (select.c) */

typedef struct pssm_selection {
    portssm_backend kind;
    int32_t device;
    const pssm_backend *table;
    char report[PSSM_REPORT_CAPACITY];
} pssm_selection;

/* Resolves (backend, device) as portssm_create documents it; failures set this thread's error. */
portssm_status pssm_select(portssm_backend backend, int32_t device, pssm_selection *sel);

#endif /* PSSM_CORE_H */
