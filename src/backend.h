/*
 * backend.h - the contract between the core (src/) and every backend.
 *
 * A backend is a static const table of function pointers plus a probe.  cpu and sim are linked
 * into libportssm; cuda and hip are shared modules (libportssm_cuda.so, libportssm_hip.so) that
 * the core loads at run time from its own directory and asks for their table through the one
 * symbol they export, PSSM_MODULE_ENTRY.  Modules see only this header and portssm.h.
 *
 * The core validates every argument before calling an op, so ops may assume: shapes agree,
 * dtypes are as documented, required tensors are present, every dim is >= 1 (a call with an
 * empty tensor never reaches a backend), outputs do not overlap anything, and
 * the call's logical work (pssm_bctx.work: its largest product of sizes, see PSSM_WORK_MAX) is
 * at most 2^48, so that any product of its sizes times a factor below 2^14 (bytes, chunk
 * lengths, vector widths) fits in int64.  An op that cannot handle a valid case returns
 * PORTSSM_ERR_UNSUPPORTED with a message; a NULL op means the whole op is unsupported.
 */
#ifndef PSSM_BACKEND_H
#define PSSM_BACKEND_H

#include "portssm.h"
#include "size_math.h"

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever this header or an args struct of portssm.h changes layout, or the core starts
 * passing a backend arguments that an older backend would misread (7: selective_state_update's
 * state may be f16 or bf16, which a module built for 6 would take for f32). */
#define PSSM_BACKEND_ABI 7

/* selective_scan_fwd's checkpoints hold the states every this many steps (portssm.h): one
 * interval for every backend, so that any backend's backward reads any backend's forward. */
#define PSSM_SCAN_CHECKPOINT_INTERVAL 128
/* Checkpoints of a row of length L: after steps T-1, 2T-1, ... before the last chunk. */
static inline int64_t pssm_scan_checkpoints(int64_t L)
{
    return (L - 1) / PSSM_SCAN_CHECKPOINT_INTERVAL;
}

/* ssd_chunk_scan's chunk for chunk_size and the activations' dtype (portssm.h): the chunk the
 * GPU backends compute by, and on every backend the interval of the forward's checkpoints, so
 * that any backend's backward reads any backend's forward.  (kernels/ssd_params.h's
 * PSSM_SSD_CHUNK_MAX is the same limit.) */
#define PSSM_SSD_CHUNK_LIMIT 256
static inline int64_t pssm_ssd_chunk(int32_t chunk_size, portssm_dtype act)
{
    const int64_t tile = act == PORTSSM_F32 ? 32 : 64;
    const int64_t q = chunk_size > 0 ? (int64_t)chunk_size : PSSM_SSD_CHUNK_LIMIT;
    const int64_t rounded = (q + tile - 1) / tile * tile;
    return rounded < PSSM_SSD_CHUNK_LIMIT ? rounded : PSSM_SSD_CHUNK_LIMIT;
}

/* The SSD's checkpoints of a row of length L at chunk T: the state entering every chunk, none
 * for L = 0. */
static inline int64_t pssm_ssd_checkpoints(int64_t L, int64_t T)
{
    return L > 0 ? (L - 1) / T + 1 : 0;
}

#define PSSM_ERROR_CAPACITY 1024

/* The most logical work one call may take, in elements of its largest product of sizes (state
 * updates of a scan, multiply-adds of a conv; pssm_bctx.work).  2^48 (2.8e14) is past what a
 * GPU's memory can feed one call (a Mamba-1 scan of 2^23 tokens at D 8192, N 256 is 2^44; an SSD
 * of a million tokens at H 128, P 64, N 128 is 2^40), and leaves 2^14 of headroom in int64 for
 * the byte sizes and chunk factors the backends multiply it by.  Broadcast inputs (stride 0)
 * make any logical size free in memory, which is why this bound is a rule of validation. */
#define PSSM_WORK_MAX ((int64_t)1 << 48)

/*
 * The part of a context a backend sees.  The core owns it; the backend keeps its per-context
 * state in `state` (set by open, released by close).
 */
typedef struct pssm_bctx {
    char error[PSSM_ERROR_CAPACITY]; /* message of the last failed call                 */
    int32_t device;                  /* device index inside the backend                 */
    void *stream;                    /* the caller's stream (GPU backends), else NULL    */
    void *state;                     /* backend-private                                 */
    int64_t work;                    /* logical work of the op being called (validation: at
                                        most PSSM_WORK_MAX) ...                             */
    const char *work_formula;        /* ... and how it is counted, e.g. "B*D*L*N"         */
    int32_t empty;                   /* validation: some tensor of the call has no element
                                        (L = 0, B = 0, ...), which the core answers itself
                                        (src/empty_call.c): backends never see such a call */
} pssm_bctx;

#if defined(__GNUC__)
#define PSSM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PSSM_PRINTF(f, a)
#endif

/* Formats a message into c->error and returns `status` (so: return pssm_fail(c, ...)). */
static inline portssm_status pssm_fail(pssm_bctx *c, portssm_status status, const char *fmt, ...)
    PSSM_PRINTF(3, 4);
static inline portssm_status pssm_fail(pssm_bctx *c, portssm_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    return status;
}

typedef struct pssm_backend {
    const char *name; /* "cpu", "sim", "cuda", "hip" */
    int32_t abi;      /* PSSM_BACKEND_ABI of the build that made the table */
    /* Nonzero for a backend that computes on this machine's CPU (cpu, sim): its ops honour
     * PORTSSM_CPU_WORK_LIMIT (the core refuses a call whose work is over it). */
    int32_t runs_on_host;

    /* Can it run here?  OK with the device count, or a status and a static reason. */
    portssm_status (*probe)(int32_t *num_devices, const char **reason);
    portssm_status (*device_info)(int32_t device, portssm_device_info *info);

    /* Per-context lifetime.  open fills c->state; close releases it (after synchronizing). */
    portssm_status (*open)(pssm_bctx *c, int32_t device);
    void (*close)(pssm_bctx *c);

    portssm_status (*set_stream)(pssm_bctx *c, void *stream); /* validated; may store it */
    portssm_status (*synchronize)(pssm_bctx *c);
    /* Is the context's stream being captured into a graph?  NULL: it never is. */
    portssm_status (*stream_capturing)(pssm_bctx *c, int *capturing);

    portssm_status (*mem_alloc)(pssm_bctx *c, void **ptr, size_t bytes);
    portssm_status (*mem_free)(pssm_bctx *c, void *ptr);
    portssm_status (*mem_copy)(pssm_bctx *c, void *dst, const void *src, size_t bytes,
                               portssm_memcpy_kind kind);
    portssm_status (*mem_set)(pssm_bctx *c, void *ptr, int value, size_t bytes);

    /* Events: the backend allocates an opaque handle. */
    portssm_status (*event_create)(pssm_bctx *c, void **ev);
    void (*event_destroy)(pssm_bctx *c, void *ev);
    portssm_status (*event_record)(pssm_bctx *c, void *ev);
    portssm_status (*event_elapsed_ms)(pssm_bctx *c, void *start, void *end, float *ms);

    /* Ops; NULL = unsupported by this backend. */
    portssm_status (*causal_conv1d_fwd)(pssm_bctx *c, const portssm_causal_conv1d_fwd_args *a);
    portssm_status (*causal_conv1d_bwd)(pssm_bctx *c, const portssm_causal_conv1d_bwd_args *a);
    portssm_status (*causal_conv1d_update)(pssm_bctx *c,
                                           const portssm_causal_conv1d_update_args *a);
    portssm_status (*selective_scan_fwd)(pssm_bctx *c, const portssm_selective_scan_fwd_args *a);
    portssm_status (*selective_scan_bwd)(pssm_bctx *c, const portssm_selective_scan_bwd_args *a);
    portssm_status (*selective_state_update)(pssm_bctx *c,
                                             const portssm_selective_state_update_args *a);
    portssm_status (*ssd_chunk_scan_fwd)(pssm_bctx *c, const portssm_ssd_chunk_scan_fwd_args *a);
    portssm_status (*ssd_chunk_scan_bwd)(pssm_bctx *c, const portssm_ssd_chunk_scan_bwd_args *a);
    portssm_status (*norm_fwd)(pssm_bctx *c, const portssm_norm_fwd_args *a);
    portssm_status (*norm_bwd)(pssm_bctx *c, const portssm_norm_bwd_args *a);

    /* Workspace bytes an op needs for (validated) args; NULL: none.  The op itself then gets
     * args whose workspace holds at least that many bytes (the caller's or the context's). */
    portssm_status (*causal_conv1d_bwd_workspace)(pssm_bctx *c,
                                                  const portssm_causal_conv1d_bwd_args *a,
                                                  size_t *bytes);
    portssm_status (*selective_scan_bwd_workspace)(pssm_bctx *c,
                                                   const portssm_selective_scan_bwd_args *a,
                                                   size_t *bytes);
    portssm_status (*ssd_chunk_scan_fwd_workspace)(pssm_bctx *c,
                                                   const portssm_ssd_chunk_scan_fwd_args *a,
                                                   size_t *bytes);
    portssm_status (*ssd_chunk_scan_bwd_workspace)(pssm_bctx *c,
                                                   const portssm_ssd_chunk_scan_bwd_args *a,
                                                   size_t *bytes);
    portssm_status (*norm_bwd_workspace)(pssm_bctx *c, const portssm_norm_bwd_args *a,
                                         size_t *bytes);

    /* Dialect self-check on the device (kernels/selftest.h).  mode 0 runs every positive check
     * (shuffles, reductions, barriers, shared memory, 16-bit conversions, math) and returns OK
     * or PORTSSM_ERR_DEVICE with what differed; modes >= 1 are deliberate misuses that the sim
     * target must report as errors (other backends return UNSUPPORTED for them).  NULL: the
     * backend runs no kernels. */
    portssm_status (*selftest)(pssm_bctx *c, int32_t mode);
} pssm_backend;

/* The backends linked into libportssm. */
extern const pssm_backend pssm_cpu_backend;
extern const pssm_backend pssm_sim_backend;

/* A GPU module exports exactly this function; the core passes its PSSM_BACKEND_ABI and gets the
 * table, or NULL with *reason set when the module was built for another ABI. */
#define PSSM_MODULE_ENTRY_NAME "portssm_module_backend"
typedef const pssm_backend *(*pssm_module_entry_fn)(int32_t abi, const char **reason);

#ifdef __cplusplus
}
#endif

#endif /* PSSM_BACKEND_H */
