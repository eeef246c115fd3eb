/*
 * portssm.h - the whole public API of libportssm.
 *
 * libportssm runs the kernels of Mamba-style state-space models (causal depthwise conv1d,
 * selective scan, their one-token decode steps and backward passes, the blocks' fused norms) on
 * NVIDIA GPUs, AMD GPUs, a SIMT simulator, or a scalar CPU oracle, chosen at run time.  Plain C11; no GPU header is
 * needed to use it, and the ABI does not depend on any framework.
 *
 * Conventions
 *  - Every call returns a portssm_status.  On failure the context keeps a message naming the
 *    argument, the expected and the actual value: portssm_last_error(ctx).
 *  - Every op validates all of its arguments before touching memory: on a bad argument it
 *    returns PORTSSM_ERR_INVALID_ARGUMENT and writes nothing.
 *  - A call's logical work (its largest product of sizes: B*D*L*N state updates of a scan,
 *    B*D*L*W multiply-adds of a conv; each op's formula is in its message) is at most 2^48,
 *    whatever its memory: a broadcast input (stride 0) may have any shape at no memory cost, so
 *    validation bounds the work, and with it every product of sizes the library forms.  The
 *    environment variable PORTSSM_CPU_WORK_LIMIT (elements, e.g. 1e9) sets a lower bound for
 *    the backends that compute on this machine's CPU (cpu, sim): a call past it returns
 *    PORTSSM_ERR_UNSUPPORTED with its figure and writes nothing.
 *  - Ops that need device scratch memory take it from a workspace (portssm_workspace below):
 *    the caller's, sized by the op's *_workspace_size query, or else the context's own.
 *  - Tensor data lives on the context's device (use portssm_malloc / portssm_memcpy); for the
 *    cpu and sim backends that is ordinary host memory.
 *  - Ops are asynchronous on the context's stream (GPU backends); cpu and sim are synchronous.
 *  - Gradients are written, never accumulated into.
 *  - A context is used by one thread at a time; distinct contexts are independent.  A call on a
 *    context while another thread is inside a call on it fails with
 *    PORTSSM_ERR_INVALID_ARGUMENT, its message on the calling thread (portssm_last_error(NULL)),
 *    and leaves the other call and its message alone.
 */
#ifndef PORTSSM_H
#define PORTSSM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- export, version */

#if defined(_WIN32)
#  if defined(PORTSSM_BUILDING)
#    define PORTSSM_API __declspec(dllexport)
#  else
#    define PORTSSM_API __declspec(dllimport)
#  endif
#else
#  define PORTSSM_API __attribute__((visibility("default")))
#endif

#define PORTSSM_VERSION_MAJOR 0
#define PORTSSM_VERSION_MINOR 1
#define PORTSSM_VERSION_PATCH 0
#define PORTSSM_VERSION_STRING "0.1.0"
/* Single number for comparisons: 10000 * major + 100 * minor + patch. */
#define PORTSSM_VERSION (PORTSSM_VERSION_MAJOR * 10000 + PORTSSM_VERSION_MINOR * 100 + PORTSSM_VERSION_PATCH)

/* The version of the library actually loaded, e.g. "0.1.0". */
PORTSSM_API const char *portssm_version_string(void);
/* Same encoding as PORTSSM_VERSION. */
PORTSSM_API int32_t portssm_version(void);

/* ---------------------------------------------------------------- status */

/* Values are pinned: they never change meaning between releases. */
typedef enum portssm_status {
    PORTSSM_OK = 0,
    PORTSSM_ERR_INVALID_ARGUMENT = 1, /* a bad shape, stride, dtype, pointer, overlap...   */
    PORTSSM_ERR_UNSUPPORTED = 2,      /* valid, but this backend lacks the op or the case   */
    PORTSSM_ERR_NO_BACKEND = 3,       /* the backend is not built or cannot load here       */
    PORTSSM_ERR_NO_DEVICE = 4,        /* backend present, but no (such) device              */
    PORTSSM_ERR_NO_KERNEL_IMAGE = 5,  /* device found, but no kernel image runs on it       */
    PORTSSM_ERR_OUT_OF_MEMORY = 6,
    PORTSSM_ERR_DEVICE = 7,           /* the device or its driver reported an error         */
    PORTSSM_ERR_INTERNAL = 8          /* a bug in portssm: please report it                 */
} portssm_status;

/* "PORTSSM_ERR_INVALID_ARGUMENT"; "PORTSSM_UNKNOWN_STATUS" for a value not listed above. */
PORTSSM_API const char *portssm_status_name(portssm_status s);
/* A short English description: "invalid argument". */
PORTSSM_API const char *portssm_status_string(portssm_status s);

/* ---------------------------------------------------------------- what a failed call leaves
 *
 * Every failing status, not only INVALID_ARGUMENT, means the call wrote nothing: no output
 * tensor, state updated in place, workspace contents the caller can see, or out-parameter was
 * changed.  The only out-parameters a failure writes are handles and counts, so that cleanup
 * code need not track which call failed: portssm_create sets *ctx = NULL, portssm_malloc
 * *ptr = NULL, portssm_event_create *ev = NULL, and portssm_backend_probe *num_devices = 0
 * (its *reason is set in every case).  Every query (device info, workspace sizes, checkpoint
 * shapes, elapsed times, struct layouts, backend_parse) leaves its outputs as they were.
 *
 * Ops check every argument and every limit of the backend (UNSUPPORTED), get their
 * scratch memory (OUT_OF_MEMORY) and launch before anything is written; NO_BACKEND, NO_DEVICE
 * and NO_KERNEL_IMAGE come only from creating a context or probing.  The one exception is
 * PORTSSM_ERR_DEVICE reported for a fault that happened asynchronously, inside a kernel queued
 * earlier: the outputs of the ops queued since the last successful wait are then undefined.
 */

/* ---------------------------------------------------------------- backends, devices */

typedef enum portssm_backend {
    PORTSSM_BACKEND_AUTO = 0, /* PORTSSM_BACKEND from the environment, else best GPU, else CPU */
    PORTSSM_BACKEND_CPU = 1,  /* scalar oracle, double accumulation, always available          */
    PORTSSM_BACKEND_CUDA = 2, /* NVIDIA, module libportssm_cuda.so beside the library          */
    PORTSSM_BACKEND_HIP = 3,  /* AMD, module libportssm_hip.so beside the library              */
    PORTSSM_BACKEND_SIM = 4   /* the GPU kernels run on the CPU with SIMT semantics:
                                 device 0 has warp width 32, device 1 warp width 64            */
} portssm_backend;

/* "auto", "cpu", "cuda", "hip", "sim"; NULL for an unknown value. */
PORTSSM_API const char *portssm_backend_name(portssm_backend b);

typedef struct portssm_device_info {
    char name[256];          /* "NVIDIA H200", "sim (warp 64)", the CPU model...            */
    char arch[64];           /* "sm_90", "gfx90a", "x86_64"                                */
    int32_t warp_size;       /* threads per warp/wavefront; 1 for the cpu backend           */
    int32_t multiprocessors; /* SMs / CUs; CPU cores for cpu; host threads used for sim     */
    uint64_t total_memory;   /* bytes of device memory (host RAM for cpu/sim)               */
} portssm_device_info;

/*
 * Is backend b usable here?  Returns PORTSSM_OK and the device count, or the status that
 * explains why not (NO_BACKEND, NO_DEVICE, NO_KERNEL_IMAGE, ...).  *reason (optional) receives
 * a static, human-readable explanation in both cases.  The probe runs once per process.
 */
PORTSSM_API portssm_status portssm_backend_probe(portssm_backend b, int32_t *num_devices,
                                                 const char **reason);
PORTSSM_API portssm_status portssm_device_get_info(portssm_backend b, int32_t device,
                                                   portssm_device_info *info);

/* ---------------------------------------------------------------- context */

typedef struct portssm_context portssm_context;

/*
 * Create a context on `device` (0-based) of `backend`.  With PORTSSM_BACKEND_AUTO the
 * environment variable PORTSSM_BACKEND ("cpu", "cuda", "hip", "sim", "sim32", "sim64",
 * optionally ":N" for the device) decides if set; else the first usable of cuda, hip, cpu.
 * On failure *ctx is NULL and portssm_last_error(NULL) explains, for this thread.
 */
PORTSSM_API portssm_status portssm_create(portssm_context **ctx, portssm_backend backend,
                                          int32_t device);
/* Accepts NULL.  Synchronizes outstanding work first. */
PORTSSM_API void portssm_destroy(portssm_context *ctx);

PORTSSM_API portssm_backend portssm_get_backend(const portssm_context *ctx);
PORTSSM_API int32_t portssm_get_device(const portssm_context *ctx);
/* The same as portssm_device_get_info(portssm_get_backend(ctx), portssm_get_device(ctx), info),
 * the one device-info call; kept for existing callers. */
PORTSSM_API portssm_status portssm_get_device_info(const portssm_context *ctx,
                                                   portssm_device_info *info);
/* How the backend was chosen: for AUTO, why each GPU backend was skipped.  Never NULL. */
PORTSSM_API const char *portssm_selection_report(const portssm_context *ctx);

/* The message of the last failed call on ctx ("" if none); ctx NULL: this thread's last failed
 * call without a usable context (portssm_create, a NULL ctx, a ctx in use by another thread).
 * Valid until the next call on the same context. */
PORTSSM_API const char *portssm_last_error(const portssm_context *ctx);

/* The caller's cudaStream_t / hipStream_t (NULL = the default stream): ops, copies, memsets and
 * events of ctx are queued on it, behind the caller's own work there.  On CUDA it must belong to
 * the device's primary context, the CUDA runtime's (torch.cuda streams do); a stream of another
 * context or device is refused with INVALID_ARGUMENT and the old stream kept.  The stream must
 * stay alive while it is the context's: portssm_destroy and portssm_set_stream wait on it, so
 * set NULL (or destroy the context) before destroying the stream.  cpu and sim run
 * synchronously and accept only NULL. */
PORTSSM_API portssm_status portssm_set_stream(portssm_context *ctx, void *stream);
PORTSSM_API void *portssm_get_stream(const portssm_context *ctx);
/* Waits for all work queued on the context's stream; reports asynchronous device errors. */
PORTSSM_API portssm_status portssm_synchronize(portssm_context *ctx);

/* Runs the kernel dialect's self-checks on the context's device (warp shuffles and reductions at
 * the device's warp width, barriers, shared memory, 16-bit float conversions, fast math) and
 * compares with host results.  OK, PORTSSM_ERR_DEVICE naming the first check that differed, or
 * PORTSSM_ERR_UNSUPPORTED for the cpu backend, which runs no kernels. */
PORTSSM_API portssm_status portssm_device_selftest(portssm_context *ctx);

/* ---------------------------------------------------------------- memory */

typedef enum portssm_memcpy_kind {
    PORTSSM_HOST_TO_DEVICE = 0,
    PORTSSM_DEVICE_TO_HOST = 1,
    PORTSSM_DEVICE_TO_DEVICE = 2
} portssm_memcpy_kind;

/* Device memory, aligned to at least 256 bytes.  bytes == 0 gives *ptr == NULL and OK. */
PORTSSM_API portssm_status portssm_malloc(portssm_context *ctx, void **ptr, size_t bytes);
/* Accepts NULL. */
PORTSSM_API portssm_status portssm_free(portssm_context *ctx, void *ptr);
/* Ordered on the context's stream; returns once the copy is complete. */
PORTSSM_API portssm_status portssm_memcpy(portssm_context *ctx, void *dst, const void *src,
                                          size_t bytes, portssm_memcpy_kind kind);
/* Sets `bytes` bytes of device memory to the byte `value`; asynchronous on the stream. */
PORTSSM_API portssm_status portssm_memset(portssm_context *ctx, void *ptr, int value,
                                          size_t bytes);

/* Timing on the context's stream (device events on GPUs, the host clock on cpu/sim). */
typedef struct portssm_event portssm_event;
PORTSSM_API portssm_status portssm_event_create(portssm_context *ctx, portssm_event **ev);
PORTSSM_API void portssm_event_destroy(portssm_context *ctx, portssm_event *ev);
PORTSSM_API portssm_status portssm_event_record(portssm_context *ctx, portssm_event *ev);
/* Waits for `end`, then gives the milliseconds between the two records. */
PORTSSM_API portssm_status portssm_event_elapsed_ms(portssm_context *ctx, portssm_event *start,
                                                    portssm_event *end, float *ms);

/* ---------------------------------------------------------------- tensors */

typedef enum portssm_dtype {
    PORTSSM_F32 = 0,
    PORTSSM_F16 = 1,
    PORTSSM_BF16 = 2,
    PORTSSM_I32 = 3
} portssm_dtype;

#define PORTSSM_MAX_DIMS 4

/*
 * A strided view of device memory.  Strides count elements, not bytes, and may be zero (a
 * broadcast input) or negative; outputs must not overlap themselves or any other tensor of the
 * call.  data == NULL marks an optional tensor as absent; a zero-initialised tensor is absent.
 *
 * Empty tensors: the batch B, channels D, length L, heads H, head dim P, new tokens T and the
 * norms' rows may be 0 (every other size, W, N, G, S, the state pool's rows, the norms' hidden
 * size, stays >= 1).  A tensor with a 0 in its shape has no element: its data may be NULL (it is
 * then present, not absent), and its alignment and strides are not checked; its shape, dtype and
 * every other argument are validated as usual.  Such a call succeeds without running the
 * backend's kernel (the op must still be one the backend implements), and writes only the
 * outputs that still have elements, with what the math gives for no step or no term:
 *   - L = 0: final_states / final_state = initial_states / initial_state (0 where absent), and
 *     a backward's dinitial_states / dinitial_state = dfinal_states / dfinal_state (0 where
 *     absent); ssd_chunk_scan_fwd's varlen_states get each (empty) sequence's start state;
 *   - gradients that sum over an empty size (dweight, dbias, dA, dB, dC, dD, ddelta_bias, ddt,
 *     ddt_bias) are 0;
 *   - in/out states (decode: T = 0, or no row) are left as they are.
 * On a GPU the copies of the first rule wait for the stream, so such a call (L = 0 with
 * initial states or their gradients) is refused (PORTSSM_ERR_UNSUPPORTED) while the stream is
 * being captured into a graph.  cu_seqlens with L = 0 must be all 0 (its values are not read).
 */
typedef struct portssm_tensor {
    void *data;
    portssm_dtype dtype;
    int32_t ndim;
    int64_t shape[PORTSSM_MAX_DIMS];
    int64_t stride[PORTSSM_MAX_DIMS];
} portssm_tensor;

/* A contiguous (row-major) tensor; ndim outside 1..4 gives a tensor that every op rejects. */
PORTSSM_API portssm_tensor portssm_tensor_contiguous(void *data, portssm_dtype dtype,
                                                     int32_t ndim, const int64_t *shape);
/* Bytes per element: 4, 2, 2, 4; 0 for an unknown dtype. */
PORTSSM_API size_t portssm_dtype_size(portssm_dtype dtype);
/* "f32", "f16", "bf16", "i32"; NULL for an unknown dtype. */
PORTSSM_API const char *portssm_dtype_name(portssm_dtype dtype);

/* ---------------------------------------------------------------- scratch memory
 *
 * Some ops need device scratch memory (the backward passes: partial sums of their reductions,
 * recomputed scan states).  They take it from one mechanism:
 *  - portssm_<op>_workspace_size(ctx, &args, &bytes) gives the bytes the op needs on this
 *    context for exactly these arguments (0: none); it validates args as the op does;
 *  - args.workspace = {data, bytes} hands the op that much device memory of the context's device
 *    (aligned to 256 bytes, e.g. from portssm_malloc or a framework's caching allocator; it may
 *    not overlap any tensor of the call).  The op reads and writes it in stream order, and it is
 *    free again once the op's work on the stream is done.  Too small: INVALID_ARGUMENT;
 *  - args.workspace left zero: the context uses a buffer of its own, which it grows when an op
 *    needs more (allocating, after waiting for the stream) and frees in portssm_destroy.
 * After the first call of a shape, no op allocates or waits for the host: a sequence of calls
 * can be captured into a CUDA/HIP graph.  An op that would have to grow the context's buffer
 * while the stream is being captured returns PORTSSM_ERR_UNSUPPORTED instead, saying so: run it
 * once before the capture, or pass a workspace.  The context's buffer is ordered on the
 * context's stream; portssm_set_stream to another stream waits for the old stream first when
 * the context holds such a buffer.
 */
typedef struct portssm_workspace {
    void *data;   /* NULL: the context's own buffer                */
    size_t bytes; /* size of data (0 with data NULL)               */
} portssm_workspace;

/* ---------------------------------------------------------------- ops
 *
 * Letters: B batch, D channels, L sequence length, W conv width, N state size, G groups of a
 * variable B/C, H heads, P head dimension.  "act" is the activation dtype of the call (F32, F16
 * or BF16), shared by x/u/delta/z/variable B,C/out and their gradients.  All arithmetic is in
 * F32 or wider; results are rounded once, at the store.  Optional tensors are marked (opt).
 */

typedef enum portssm_activation {
    PORTSSM_ACTIVATION_NONE = 0,
    PORTSSM_ACTIVATION_SILU = 1 /* silu(v) = v / (1 + exp(-v)) */
} portssm_activation;

/*
 * out[b,d,t] = act(bias[d] + sum_{w<W} weight[d,w] * xp[b,d,t-(W-1)+w]), where xp is x with
 * initial_states (or zeros) in front.  final_states = the last W-1 columns of [initial_states|x].
 * With seq_idx, a tap whose token has a different seq_idx than token t contributes 0; the W-1
 * positions before t = 0 (initial_states or zeros) belong to the sequence of token 0.
 * Channel-last is x with stride[1] == 1; every layout works with every option.
 */
typedef struct portssm_causal_conv1d_fwd_args {
    portssm_tensor x;              /* (B,D,L) act                                   */
    portssm_tensor weight;         /* (D,W) F32 or act, 1 <= W                      */
    portssm_tensor bias;           /* (D) same dtype as weight (opt)                */
    portssm_tensor seq_idx;        /* (B,L) I32 (opt)                               */
    portssm_tensor initial_states; /* (B,D,W-1) act (opt); needs W >= 2             */
    portssm_tensor final_states;   /* out (B,D,W-1) act (opt); needs W >= 2         */
    portssm_tensor out;            /* out (B,D,L) act                               */
    portssm_activation activation;
} portssm_causal_conv1d_fwd_args;

/*
 * Gradients of causal_conv1d_fwd.  dweight and dbias have the dtype of weight; dfinal_states
 * is the incoming gradient of final_states.  dbias needs bias; dinitial_states is allowed
 * without initial_states (the gradient at a zero initial state).  Deterministic.
 */
typedef struct portssm_causal_conv1d_bwd_args {
    portssm_tensor x;               /* (B,D,L) act                         */
    portssm_tensor weight;          /* (D,W) F32 or act                    */
    portssm_tensor bias;            /* (D) (opt)                           */
    portssm_tensor seq_idx;         /* (B,L) I32 (opt)                     */
    portssm_tensor initial_states;  /* (B,D,W-1) act (opt)                 */
    portssm_tensor dout;            /* (B,D,L) act                         */
    portssm_tensor dfinal_states;   /* (B,D,W-1) act (opt)                 */
    portssm_tensor dx;              /* out (B,D,L) act                     */
    portssm_tensor dweight;         /* out (D,W), weight's dtype           */
    portssm_tensor dbias;           /* out (D), weight's dtype (opt)       */
    portssm_tensor dinitial_states; /* out (B,D,W-1) act (opt)             */
    portssm_activation activation;
    portssm_workspace workspace;    /* scratch (see "scratch memory")      */
} portssm_causal_conv1d_bwd_args;

/*
 * Decode: T new tokens per sequence (T = 0: nothing changes) against a state of S >= W-1 past
 * inputs.
 * Without cache_seqlens the state is a shift register: the conv reads its last W-1 columns and
 * it becomes the last S columns of [state | x].  With cache_seqlens it is a ring buffer: the conv
 * reads the W-1 entries ending (exclusive) at cache_seqlens[b] mod S, and x[..., i] is written at
 * (cache_seqlens[b] + i) mod S (mod is Euclidean; a later token wins on wrap-around).
 * conv_state_indices picks row b' of a state pool for sequence b; an index outside [0, B')
 * gives a zero output for that sequence and leaves the pool untouched.  Two sequences must not
 * pick the same row (GPU backends update rows concurrently; the result is then undefined).
 */
typedef struct portssm_causal_conv1d_update_args {
    portssm_tensor x;                  /* (B,D) or (B,D,T) act                        */
    portssm_tensor conv_state;         /* in/out (B',D,S) act; B' = B without indices */
    portssm_tensor weight;             /* (D,W) F32 or act                            */
    portssm_tensor bias;               /* (D) same dtype as weight (opt)              */
    portssm_tensor cache_seqlens;      /* (B) I32 (opt)                               */
    portssm_tensor conv_state_indices; /* (B) I32 (opt)                               */
    portssm_tensor out;                /* out, x's shape, act                         */
    portssm_activation activation;
} portssm_causal_conv1d_update_args;

/*
 * Mamba-1 selective scan.
 *   dt = delta + delta_bias;  if delta_softplus: dt = dt <= 20 ? log1p(exp(dt)) : dt
 *   x_t[n] = exp(dt*A[d,n]) * x_{t-1}[n] + dt * B_t[n] * u_t      (x_{-1} = initial_state or 0)
 *   y_t = sum_n C_t[n] * x_t[n] + D[d] * u_t;   out = z ? y * silu(z) : y
 * B and C are each either constant, (D,N) F32, or variable, (B,G,N,L) act with D % G == 0;
 * channel d uses group d / (D/G).  final_state receives x_{L-1}.
 *
 * checkpoints (opt) receives the states every T steps for selective_scan_bwd, which then reads
 * them instead of recomputing them: checkpoints[b,d,k,n] = x_t[n] of row (b,d) at
 * t = (k+1)*T - 1, k < K = ceil(L/T) - 1, with T an interval fixed by this library version (the
 * same on every backend).  Its shape comes from portssm_selective_scan_checkpoint_shape(), not
 * from a formula of your own; when that gives K = 0 (L <= T, L = 0 included) the tensor must be
 * absent (not merely empty).
 */
typedef struct portssm_selective_scan_fwd_args {
    portssm_tensor u;             /* (B,D,L) act              */
    portssm_tensor delta;         /* (B,D,L) act              */
    portssm_tensor A;             /* (D,N) F32                */
    portssm_tensor B;             /* (D,N) F32 or (B,G,N,L) act */
    portssm_tensor C;             /* (D,N) F32 or (B,G,N,L) act */
    portssm_tensor D;             /* (D) F32 (opt)            */
    portssm_tensor z;             /* (B,D,L) act (opt)        */
    portssm_tensor delta_bias;    /* (D) F32 (opt)            */
    portssm_tensor initial_state; /* (B,D,N) F32 (opt)        */
    portssm_tensor final_state;   /* out (B,D,N) F32 (opt)    */
    portssm_tensor out;           /* out (B,D,L) act          */
    int32_t delta_softplus;       /* non-zero: apply softplus */
    portssm_tensor checkpoints;   /* out (B,D,K,N) F32 (opt)  */
} portssm_selective_scan_fwd_args;

/*
 * Gradients of selective_scan_fwd.  dB/dC have the shape and dtype of B/C.  dD, dz and
 * ddelta_bias need D, z and delta_bias; dinitial_state is allowed without initial_state.
 * dfinal_state is the incoming gradient of final_state.  checkpoints (opt) is what
 * selective_scan_fwd wrote there for the same inputs (any backend; the results do not depend on
 * whether it is given, beyond rounding).  Deterministic.
 */
typedef struct portssm_selective_scan_bwd_args {
    portssm_tensor u, delta, A, B, C, D, z, delta_bias, initial_state; /* as in the fwd   */
    portssm_tensor dout;           /* (B,D,L) act            */
    portssm_tensor dfinal_state;   /* (B,D,N) F32 (opt)      */
    portssm_tensor du;             /* out (B,D,L) act        */
    portssm_tensor ddelta;         /* out (B,D,L) act        */
    portssm_tensor dA;             /* out (D,N) F32          */
    portssm_tensor dB;             /* out, B's shape/dtype   */
    portssm_tensor dC;             /* out, C's shape/dtype   */
    portssm_tensor dD;             /* out (D) F32 (opt)      */
    portssm_tensor dz;             /* out (B,D,L) act (opt)  */
    portssm_tensor ddelta_bias;    /* out (D) F32 (opt)      */
    portssm_tensor dinitial_state; /* out (B,D,N) F32 (opt)  */
    int32_t delta_softplus;
    portssm_tensor checkpoints;    /* (B,D,K,N) F32 (opt)    */
    portssm_workspace workspace;   /* scratch                */
} portssm_selective_scan_bwd_args;

/*
 * Decode step of the scan, one token, state updated in place.  Two forms:
 *   Mamba-1: state (B',D,N); x, dt, z, out (B,D); A (D,N); B, C (B,N); D, dt_bias (D).
 *   Heads (Mamba-2): state (B',H,P,N); x, dt, z, out (B,H,P); A (H,P,N); B, C (B,G,N) with
 *     H % G == 0 (head h uses group h / (H/G)); D, dt_bias (H,P).  Mamba-2 ties A and dt over
 *     P and N by giving them stride 0.
 *   dt = dt + dt_bias; if dt_softplus: softplus(dt)
 *   state = exp(A*dt) * state + B * dt * x;   out = sum_n state*C + D*x;   out *= silu(z) if z
 * state_batch_indices picks the state row for each sequence; an index outside [0, B') gives a
 * zero output and leaves that state untouched.  Two sequences must not pick the same row (the
 * result is then undefined: GPU backends update rows concurrently).
 * The state's dtype is F32, F16 or BF16, whatever the activation dtype (serving engines keep a
 * 16-bit state pool to halve its memory and traffic); any other dtype is INVALID_ARGUMENT naming
 * 'state', nothing written.  The update is computed in F32 (the cpu backend: double) from the
 * stored values read exactly, and each new state element is rounded once, to nearest even, when
 * it is stored; out is computed from the unrounded new state.  Over many steps a 16-bit state
 * thus carries one rounding per step (relative 2^-11 for F16, 2^-8 for BF16) on top of the F32
 * recurrence, decayed by the steps that follow.
 */
typedef struct portssm_selective_state_update_args {
    portssm_tensor state;               /* in/out F32, F16 or BF16         */
    portssm_tensor x;                   /* act                             */
    portssm_tensor dt;                  /* act                             */
    portssm_tensor A;                   /* F32                             */
    portssm_tensor B;                   /* act                             */
    portssm_tensor C;                   /* act                             */
    portssm_tensor D;                   /* F32 (opt)                       */
    portssm_tensor z;                   /* act (opt)                       */
    portssm_tensor dt_bias;             /* F32 (opt)                       */
    portssm_tensor state_batch_indices; /* (B) I32 (opt)                   */
    portssm_tensor out;                 /* out, x's shape, act             */
    int32_t dt_softplus;
} portssm_selective_state_update_args;

/*
 * Mamba-2 SSD, the semantics of mamba-ssm's mamba_chunk_scan_combined.  Per batch row b and head
 * h (group g = h / (H/G)), with dt_t = dt[b,t,h] + dt_bias[h], then softplus if dt_softplus,
 * then clamped to [dt_min, dt_max] if dt_limit:
 *   s_t[p,n] = exp(dt_t * A[h]) * s_{t-1}[p,n] + dt_t * B[b,t,g,n] * x[b,t,h,p]
 *   y[b,t,h,p] = sum_n C[b,t,g,n] * s_t[p,n] + D[h(,p)] * x[b,t,h,p];  out = z ? y*silu(z) : y
 * s_{-1} = initial_states (or 0).  With seq_idx the state restarts from 0 at every token whose
 * seq_idx differs from the previous token's (initial_states apply to the row's first sequence
 * only).  Packed variable-length input is B = 1 with cu_seqlens, the n_seq + 1 offsets of the
 * sequences (cu_seqlens[0] = 0, cu_seqlens[n_seq] = L, non-decreasing): the state restarts at
 * each offset, and varlen_states receives the state at the end of every sequence (an empty
 * sequence: its start state).  final_states = s_{L-1} of every row.  chunk_size is a
 * performance choice (0: the backend's); results do not depend on it beyond rounding.  The GPU
 * backends compute by chunks (the cpu backend by the recurrence, in double): the chunk is
 * chunk_size rounded up to a multiple of 64 (32 for f32 activations), at most 256, 256 for 0;
 * with 16-bit activations the chunk products take 16-bit operands (as mamba-ssm's do), so
 * final_states carry about 16-bit relative error there.
 * y, with z, receives y itself (out before the gate: y = out / silu(z) where silu(z) != 0), for
 * a backward that follows: given to ssd_chunk_scan_bwd, it spares that call computing y again.
 * checkpoints (opt) receives the state entering every chunk, for a backward that follows (which
 * then need not compute them again): checkpoints[b,h,k,p*N+n] = s_t[p,n] of row b, head h at
 * t = k*T - 1 (k = 0: initial_states or 0), k < K = ceil(L/T), T the chunk above (the same on
 * every backend); in x's dtype, contiguous, its data 16-byte aligned.  Its shape comes from
 * portssm_ssd_chunk_scan_checkpoint_shape() (K = 0 for L = 0: the tensor then has no element).
 * The state dtype: initial_states, final_states and varlen_states are F32, F16 or BF16, the
 * same for all three, whatever the activations' (serving engines keep 16-bit state pools): a
 * 16-bit state is read into F32, and each is rounded once where stored.
 */
typedef struct portssm_ssd_chunk_scan_fwd_args {
    portssm_tensor x;              /* (B,L,H,P) act                                     */
    portssm_tensor dt;             /* (B,L,H) act                                       */
    portssm_tensor A;              /* (H) F32                                           */
    portssm_tensor B;              /* (B,L,G,N) act, H % G == 0                         */
    portssm_tensor C;              /* (B,L,G,N) act                                     */
    portssm_tensor D;              /* (H,P) or (H) F32 (opt)                            */
    portssm_tensor z;              /* (B,L,H,P) act (opt)                               */
    portssm_tensor dt_bias;        /* (H) F32 (opt)                                     */
    portssm_tensor initial_states; /* (B,H,P,N) state dtype (opt)                       */
    portssm_tensor seq_idx;        /* (B,L) I32 (opt)                                   */
    portssm_tensor cu_seqlens;     /* (n_seq+1) I32 (opt), needs B = 1                  */
    portssm_tensor out;            /* out (B,L,H,P) act                                 */
    portssm_tensor final_states;   /* out (B,H,P,N) state dtype (opt)                   */
    portssm_tensor varlen_states;  /* out (n_seq,H,P,N) state dtype (opt), needs cu_seqlens */
    portssm_tensor y;              /* out (B,L,H,P) act (opt), needs z: y before the gate */
    portssm_tensor checkpoints;    /* out (B,H,K,P*N) act (opt), contiguous              */
    int32_t dt_softplus;           /* non-zero: softplus                                */
    int32_t dt_limit;              /* non-zero: clamp dt to [dt_min, dt_max]            */
    float dt_min, dt_max;
    int32_t chunk_size;            /* >= 0                                              */
    portssm_workspace workspace;   /* scratch (see "scratch memory")                    */
} portssm_ssd_chunk_scan_fwd_args;

/*
 * Gradients of ssd_chunk_scan_fwd (dfinal_states: the incoming gradient of final_states).  dD,
 * dz and ddt_bias need D, z and dt_bias; dD has D's shape; dinitial_states is allowed without
 * initial_states (the gradient at zero).  The gradient of dt is taken through the clamp (zero
 * where it clamps) and the softplus.  Deterministic.  y (optional, with z) is the y that
 * ssd_chunk_scan_fwd wrote for these same inputs: a backend may read it for dz instead of
 * computing y again (the GPU backends do where their fast path runs; the cpu backend, the
 * oracle, recomputes), so a y from other inputs gives an undefined dz.  checkpoints (optional)
 * likewise is what ssd_chunk_scan_fwd wrote there for these same inputs and chunk_size: the GPU
 * backends then read the states entering the chunks instead of computing them again (the
 * results do not depend on it beyond rounding: 16-bit checkpoints are the states the 16-bit
 * products take anyway); the cpu backend recomputes.  initial_states, dfinal_states and
 * dinitial_states share one state dtype, F32, F16 or BF16 (as the forward's states).
 */
typedef struct portssm_ssd_chunk_scan_bwd_args {
    portssm_tensor x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens; /* fwd's */
    portssm_tensor dout;            /* (B,L,H,P) act                                    */
    portssm_tensor dfinal_states;   /* (B,H,P,N) state dtype (opt)                      */
    portssm_tensor y;               /* (B,L,H,P) act (opt), needs z: the forward's y    */
    portssm_tensor checkpoints;     /* (B,H,K,P*N) act (opt): the forward's             */
    portssm_tensor dx;              /* out (B,L,H,P) act                                */
    portssm_tensor ddt;             /* out (B,L,H) act                                  */
    portssm_tensor dA;              /* out (H) F32                                      */
    portssm_tensor dB, dC;          /* out (B,L,G,N) act                                */
    portssm_tensor dD;              /* out, D's shape, F32 (opt)                        */
    portssm_tensor dz;              /* out (B,L,H,P) act (opt)                          */
    portssm_tensor ddt_bias;        /* out (H) F32 (opt)                                */
    portssm_tensor dinitial_states; /* out (B,H,P,N) state dtype (opt)                  */
    int32_t dt_softplus, dt_limit;
    float dt_min, dt_max;
    int32_t chunk_size;
    portssm_workspace workspace;
} portssm_ssd_chunk_scan_bwd_args;

/*
 * Row norms over the last dim of (R,H) tensors (R rows, H hidden channels), the fused norms of
 * the Mamba blocks: mamba-ssm's layer_norm_fn / rms_norm_fn (residual add, prenorm,
 * residual_in_fp32) and its gated RMSNorm / LayerNorm (layernorm_gated: z, group_size,
 * norm_before_gate), one op.  Per row, in F32 or wider:
 *   s = x + residual (x without one);   residual_out = s, rounded once to its dtype
 *   v = z && !norm_before_gate ? s * silu(z) : s
 *   per group of group_size channels (0: one group of H; G = H / group_size groups):
 *     LayerNorm: mean = sum(v)/n,  rstd = 1/sqrt(sum((v-mean)^2)/n + eps),  vhat = (v-mean)*rstd
 *     RMSNorm:                     rstd = 1/sqrt(sum(v^2)/n + eps),         vhat = v*rstd
 *   y = vhat * weight + bias;   out = z && norm_before_gate ? y * silu(z) : y
 * The norm takes s unrounded (the residual_out actually stored is s rounded to its dtype).
 * mean (LayerNorm only) and rstd receive the per-group statistics, rounded to F32, for the
 * backward.  residual and residual_out are each F32 or act: residual_in_fp32 is residual_out in
 * F32 (a residual input may then be F32 while x is 16-bit).  residual_out may be given without
 * residual (it is then x in its dtype).  norm_before_gate matters only with z.
 */
typedef enum portssm_norm_kind {
    PORTSSM_NORM_LAYER = 0, /* LayerNorm */
    PORTSSM_NORM_RMS = 1    /* RMSNorm   */
} portssm_norm_kind;

typedef struct portssm_norm_fwd_args {
    portssm_tensor x;            /* (R,H) act                                              */
    portssm_tensor residual;     /* (R,H) F32 or act (opt)                                 */
    portssm_tensor z;            /* (R,H) act (opt): the gate                              */
    portssm_tensor weight;       /* (H) F32 or act                                         */
    portssm_tensor bias;         /* (H) weight's dtype (opt)                               */
    portssm_tensor out;          /* out (R,H) act                                          */
    portssm_tensor residual_out; /* out (R,H) F32 or act (opt)                             */
    portssm_tensor mean;         /* out (R,G) F32 (opt), LayerNorm only                    */
    portssm_tensor rstd;         /* out (R,G) F32 (opt)                                    */
    portssm_norm_kind kind;
    int32_t norm_before_gate;    /* with z: non-zero y*silu(z), zero norm(x*silu(z))        */
    int64_t group_size;          /* 0 (one group of H) or a divisor of H                   */
    float eps;                   /* finite, >= 0                                           */
} portssm_norm_fwd_args;

/*
 * Gradients of norm_fwd.  x is the s the forward normalised, as saved: its residual_out when it
 * wrote one, else its x (F32 or act); mean (LayerNorm) and rstd are the forward's.  dout is the
 * gradient of out; dresidual_out (opt) the gradient of residual_out (prenorm), added to the
 * gradient of s.  dx receives the gradient of s (of x and of residual alike), dresidual (opt)
 * the same values in its own dtype (F32 or act: the gradient of an F32 residual without a
 * second rounding through act).  dz needs z; dbias needs bias; dweight and dbias have weight's
 * dtype and are summed over the rows.  out (opt) receives the forward's out again, from x, z,
 * weight, bias and the given statistics (what the forward wrote, where mean and rstd are its):
 * the input of a layer after the norm, whose weight gradient needs it, without a second
 * forward pass.  Deterministic.
 */
typedef struct portssm_norm_bwd_args {
    portssm_tensor x;             /* (R,H) F32 or act                                      */
    portssm_tensor z;             /* (R,H) act (opt)                                       */
    portssm_tensor weight;        /* (H) F32 or act                                        */
    portssm_tensor bias;          /* (H) weight's dtype (opt)                              */
    portssm_tensor mean;          /* (R,G) F32, LayerNorm (RMSNorm: absent)                */
    portssm_tensor rstd;          /* (R,G) F32                                             */
    portssm_tensor dout;          /* (R,H) act                                             */
    portssm_tensor dresidual_out; /* (R,H) F32 or act (opt)                                */
    portssm_tensor dx;            /* out (R,H) act                                         */
    portssm_tensor dresidual;     /* out (R,H) F32 or act (opt)                            */
    portssm_tensor dz;            /* out (R,H) act (opt)                                   */
    portssm_tensor dweight;       /* out (H) weight's dtype (opt)                          */
    portssm_tensor dbias;         /* out (H) weight's dtype (opt)                          */
    portssm_tensor out;           /* out (R,H) act (opt): the forward's out, again         */
    portssm_norm_kind kind;
    int32_t norm_before_gate;
    int64_t group_size;
    portssm_workspace workspace;  /* scratch (see "scratch memory")                        */
} portssm_norm_bwd_args;

PORTSSM_API portssm_status portssm_causal_conv1d_fwd(portssm_context *ctx,
                                                     const portssm_causal_conv1d_fwd_args *args);
PORTSSM_API portssm_status portssm_causal_conv1d_bwd(portssm_context *ctx,
                                                     const portssm_causal_conv1d_bwd_args *args);
PORTSSM_API portssm_status portssm_causal_conv1d_update(
    portssm_context *ctx, const portssm_causal_conv1d_update_args *args);
PORTSSM_API portssm_status portssm_selective_scan_fwd(portssm_context *ctx,
                                                      const portssm_selective_scan_fwd_args *args);
PORTSSM_API portssm_status portssm_selective_scan_bwd(portssm_context *ctx,
                                                      const portssm_selective_scan_bwd_args *args);
PORTSSM_API portssm_status portssm_selective_state_update(
    portssm_context *ctx, const portssm_selective_state_update_args *args);
PORTSSM_API portssm_status portssm_ssd_chunk_scan_fwd(portssm_context *ctx,
                                                      const portssm_ssd_chunk_scan_fwd_args *args);
PORTSSM_API portssm_status portssm_ssd_chunk_scan_bwd(portssm_context *ctx,
                                                      const portssm_ssd_chunk_scan_bwd_args *args);
PORTSSM_API portssm_status portssm_norm_fwd(portssm_context *ctx, const portssm_norm_fwd_args *args);
PORTSSM_API portssm_status portssm_norm_bwd(portssm_context *ctx, const portssm_norm_bwd_args *args);

/* Workspace bytes the op needs on ctx for these args (validated as by the op; args->workspace
 * itself is ignored).  0 when it needs none. */
PORTSSM_API portssm_status portssm_causal_conv1d_bwd_workspace_size(
    portssm_context *ctx, const portssm_causal_conv1d_bwd_args *args, size_t *bytes);
PORTSSM_API portssm_status portssm_selective_scan_bwd_workspace_size(
    portssm_context *ctx, const portssm_selective_scan_bwd_args *args, size_t *bytes);
PORTSSM_API portssm_status portssm_ssd_chunk_scan_fwd_workspace_size(
    portssm_context *ctx, const portssm_ssd_chunk_scan_fwd_args *args, size_t *bytes);
PORTSSM_API portssm_status portssm_ssd_chunk_scan_bwd_workspace_size(
    portssm_context *ctx, const portssm_ssd_chunk_scan_bwd_args *args, size_t *bytes);
PORTSSM_API portssm_status portssm_norm_bwd_workspace_size(portssm_context *ctx,
                                                           const portssm_norm_bwd_args *args,
                                                           size_t *bytes);

/* The shape (B, D, K, N) of selective_scan_fwd's optional 'checkpoints' output for these args
 * (validated as by the op; args->checkpoints itself is ignored).  shape[2] == 0: L is too short
 * for checkpoints, leave the tensor absent. */
PORTSSM_API portssm_status portssm_selective_scan_checkpoint_shape(
    portssm_context *ctx, const portssm_selective_scan_fwd_args *args, int64_t shape[4]);

/* The shape (B, H, K, P*N) of ssd_chunk_scan_fwd's optional 'checkpoints' output for these
 * args (validated as by the op; args->checkpoints itself is ignored). */
PORTSSM_API portssm_status portssm_ssd_chunk_scan_checkpoint_shape(
    portssm_context *ctx, const portssm_ssd_chunk_scan_fwd_args *args, int64_t shape[4]);

/* ---------------------------------------------------------------- for bindings (issue #8)
 *
 * What a binding from another language (Python's ctypes or cffi, Rust, Julia...) needs beyond
 * the ops: backend strings as users write them, strided tensors in one call, which ops a backend
 * implements, and the layout of every public struct so that a binding's own declaration of
 * them can be checked at load time instead of corrupting memory after a header change.
 * Functions without a context report failures on this thread: portssm_last_error(NULL).
 */

/* Parses a backend string as PORTSSM_BACKEND takes it: "auto", "cpu", "cuda", "hip", "sim",
 * "sim32", "sim64" (case-insensitive), optionally followed by ":N" (device N; not after auto,
 * sim32 or sim64).  *device receives N, the fixed device of sim32 (0) / sim64 (1), or -1 when
 * the string names no device ("cuda").  On failure (INVALID_ARGUMENT, message naming what was
 * expected) neither output is written. */
PORTSSM_API portssm_status portssm_backend_parse(const char *text, portssm_backend *backend,
                                                 int32_t *device);

/* A tensor with explicit strides (in elements, any sign, zero for broadcast inputs).  ndim
 * outside 1..4, or shape / stride NULL, gives a tensor with ndim 0, which every op rejects. */
PORTSSM_API portssm_tensor portssm_tensor_strided(void *data, portssm_dtype dtype, int32_t ndim,
                                                  const int64_t *shape, const int64_t *stride);

/* Example, the tied parameters of a Mamba-2 decode step (portssm_selective_state_update, heads
 * form), H heads of dimension P, state size N: the model keeps one A and one dt per head, and
 * stride 0 repeats them over P (and N) without a copy.
 *
 *     float *A_h;   (H) F32, one value per head        bf16 *dt_h;  (B,H) act, one per head
 *     const int64_t a_shape[3] = {H, P, N}, a_stride[3] = {1, 0, 0};
 *     const int64_t dt_shape[3] = {B, H, P}, dt_stride[3] = {H, 1, 0};
 *     args.A  = portssm_tensor_strided(A_h, PORTSSM_F32, 3, a_shape, a_stride);
 *     args.dt = portssm_tensor_strided(dt_h, PORTSSM_BF16, 3, dt_shape, dt_stride);
 *
 * D and dt_bias, (H) per head, are given the same way: shape {H, P}, stride {1, 0}.  (This is
 * what transformers' Mamba-2 passes with torch's expand().) */

/* The ops, for capability queries.  Values are pinned like the status codes. */
typedef enum portssm_op {
    PORTSSM_OP_CAUSAL_CONV1D_FWD = 0,
    PORTSSM_OP_CAUSAL_CONV1D_BWD = 1,
    PORTSSM_OP_CAUSAL_CONV1D_UPDATE = 2,
    PORTSSM_OP_SELECTIVE_SCAN_FWD = 3,
    PORTSSM_OP_SELECTIVE_SCAN_BWD = 4,
    PORTSSM_OP_SELECTIVE_STATE_UPDATE = 5,
    PORTSSM_OP_SSD_CHUNK_SCAN_FWD = 6,
    PORTSSM_OP_SSD_CHUNK_SCAN_BWD = 7,
    PORTSSM_OP_NORM_FWD = 8,
    PORTSSM_OP_NORM_BWD = 9
} portssm_op;
#define PORTSSM_OP_COUNT 10

/* "causal_conv1d_fwd", ...; NULL for a value not listed above. */
PORTSSM_API const char *portssm_op_name(portssm_op op);

/* Does the context's backend implement op?  OK, or PORTSSM_ERR_UNSUPPORTED with a message naming
 * the op and the backend (the status the op itself would return), INVALID_ARGUMENT for a NULL
 * ctx or an unknown op.  A backend that implements an op accepts every option of its args
 * struct (every flag, optional tensor and layout); what it may still refuse, as UNSUPPORTED from
 * the op, are sizes past its limits (such as N above the states a GPU kernel holds), named in
 * the op's message. */
PORTSSM_API portssm_status portssm_op_supported(portssm_context *ctx, portssm_op op);

/* The layout of a public struct, by its C name ("portssm_tensor", "portssm_workspace",
 * "portssm_device_info" and each "portssm_<op>_args"): its sizeof and number of fields, and
 * field `index` (0-based, in declaration order): name, offset and size in bytes.  Unknown struct
 * or index: INVALID_ARGUMENT, outputs unwritten.  A binding compares its declarations with these
 * when it loads the library. */
PORTSSM_API portssm_status portssm_struct_layout(const char *struct_name, size_t *size,
                                                 int32_t *num_fields);
PORTSSM_API portssm_status portssm_struct_field(const char *struct_name, int32_t index,
                                                const char **field_name, size_t *offset,
                                                size_t *size);

#ifdef __cplusplus
}
#endif

#endif /* PORTSSM_H */
