/*
 * core.h - what the core's own files share: the context, this thread's error message, the
 * backend registry and the selection of a backend.  Backends never see this header.
 */
#ifndef PSSM_CORE_H
#define PSSM_CORE_H

#include "backend.h"

#include <stdatomic.h>

#define PSSM_REPORT_CAPACITY 2048

struct portssm_context {
    /* The thread inside a public call on this context (pssm_thread_token), or NULL: a second
     * thread arriving meanwhile is refused (PSSM_ENTER) instead of silently clearing or
     * overwriting the first one's message. */
    _Atomic(const void *) caller;
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

/* An address unique to the calling thread. */
const void *pssm_thread_token(void);

/* Marks a context as in a call by this thread until the enclosing function returns. */
typedef struct pssm_call_guard {
    portssm_context *ctx; /* NULL: nothing to release (not entered, or a nested call) */
} pssm_call_guard;

static inline void pssm_call_leave(pssm_call_guard *g)
{
    if (g->ctx)
        atomic_store_explicit(&g->ctx->caller, NULL, memory_order_release);
}

/* 1 when this thread may go on with ctx (marking it, unless already inside a call on it);
 * 0 when another thread is inside a call on ctx. */
static inline int pssm_call_enter(portssm_context *ctx, pssm_call_guard *g)
{
    const void *me = pssm_thread_token(), *prev = NULL;
    if (atomic_compare_exchange_strong_explicit(&ctx->caller, &prev, me, memory_order_acquire,
                                                memory_order_relaxed)) {
        g->ctx = ctx;
        return 1;
    }
    return prev == me;
}

/* Entry of a public call on a context, at the top of the function: a NULL ctx fails on this
 * thread; so does a context another thread is inside a call on (portssm.h: a context is used by
 * one thread at a time; that call's message is left alone); otherwise the context's message is
 * cleared, since a message only lives until the next call on its context. */
#define PSSM_ENTER(ctx, fn)                                                                     \
    if (!(ctx))                                                                                 \
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT, "%s: 'ctx' is NULL", (fn));       \
    pssm_call_guard pssm_call_guard_ __attribute__((cleanup(pssm_call_leave))) = {NULL};       \
    if (!pssm_call_enter((ctx), &pssm_call_guard_))                                             \
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,                                   \
                                "%s: 'ctx' is in a call on another thread right now (a context "  \
                                "is used by one thread at a time: give each thread its own)",    \
                                (fn));                                                          \
    (ctx)->b.error[0] = '\0'

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
